#include "bson/compare.h"

#include <gtest/gtest.h>

#include "bson/doc.h"

namespace halo::bson {
namespace {

// Values listed in ascending MongoDB order; equal neighbours are grouped.
int cmpField(const Doc& a, const Doc& b) {
    bson_iter_t ia, ib;
    EXPECT_TRUE(find(a.get(), "v", &ia));
    EXPECT_TRUE(find(b.get(), "v", &ib));
    return compareValues(*bson_iter_value(&ia), *bson_iter_value(&ib));
}

TEST(CompareTest, CanonicalOrderAcrossTypes) {
    std::vector<std::string> ordered = {
        R"({"v": {"$minKey": 1}})",
        R"({"v": null})",
        R"({"v": {"$numberDouble": "NaN"}})",
        R"({"v": {"$numberDouble": "-Infinity"}})",
        R"({"v": -5})",
        R"({"v": 1.5})",
        R"({"v": {"$numberLong": "2"}})",
        R"({"v": {"$numberDecimal": "2.5"}})",
        R"({"v": ""})",
        R"({"v": "a"})",
        R"({"v": "ab"})",
        R"({"v": {}})",
        R"({"v": {"a": 1}})",
        R"({"v": []})",
        R"({"v": [1]})",
        R"({"v": {"$binary": {"base64": "", "subType": "00"}}})",
        R"({"v": {"$oid": "000000000000000000000000"}})",
        R"({"v": {"$oid": "ffffffffffffffffffffffff"}})",
        R"({"v": false})",
        R"({"v": true})",
        R"({"v": {"$date": {"$numberLong": "-1"}}})",
        R"({"v": {"$date": {"$numberLong": "5"}}})",
        R"({"v": {"$timestamp": {"t": 1, "i": 2}}})",
        R"({"v": {"$regularExpression": {"pattern": "a", "options": ""}}})",
        R"({"v": {"$maxKey": 1}})",
    };
    for (size_t i = 0; i + 1 < ordered.size(); ++i) {
        auto a = Doc::fromJsonOrDie(ordered[i]);
        auto b = Doc::fromJsonOrDie(ordered[i + 1]);
        EXPECT_LT(cmpField(a, b), 0) << ordered[i] << " < " << ordered[i + 1];
        EXPECT_GT(cmpField(b, a), 0) << ordered[i + 1] << " > " << ordered[i];
    }
}

TEST(CompareTest, NumbersCompareByValueAcrossTypes) {
    auto i = Doc::fromJsonOrDie(R"({"v": 1})");
    auto l = Doc::fromJsonOrDie(R"({"v": {"$numberLong": "1"}})");
    auto d = Doc::fromJsonOrDie(R"({"v": 1.0})");
    auto dec = Doc::fromJsonOrDie(R"({"v": {"$numberDecimal": "1.0"}})");
    EXPECT_EQ(cmpField(i, l), 0);
    EXPECT_EQ(cmpField(i, d), 0);
    EXPECT_EQ(cmpField(d, dec), 0);
    auto big = Doc::fromJsonOrDie(R"({"v": {"$numberLong": "9007199254740993"}})");
    auto bigd = Doc::fromJsonOrDie(R"({"v": 9007199254740992.0})");
    EXPECT_GT(cmpField(big, bigd), 0);  // exact, not via double
}

TEST(CompareTest, DocumentsCompareFieldByField) {
    auto a = Doc::fromJsonOrDie(R"({"a": 1, "b": 2})");
    auto b = Doc::fromJsonOrDie(R"({"a": 1, "c": 0})");
    EXPECT_LT(compareDocs(a.get(), b.get()), 0);
    auto p = Doc::fromJsonOrDie(R"({"a": 1})");
    EXPECT_LT(compareDocs(p.get(), a.get()), 0);
}

}  // namespace
}  // namespace halo::bson
