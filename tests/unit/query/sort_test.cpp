#include "store/query/sort.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "test_util.h"

namespace halo::query {
namespace {

/// Sorts `docs` by `spec` and returns the _id values in order, comma-separated.
std::string sortIds(const char* spec, const std::vector<const char*>& docs) {
    auto s = bson::Doc::fromJsonOrDie(spec);
    auto sp = uassertStatusOK(SortPattern::parse(s.get()));
    std::vector<std::pair<SortKey, bson::Doc>> rows;
    for (const char* d : docs) {
        auto doc = bson::Doc::fromJsonOrDie(d);
        rows.emplace_back(sp.sortKey(doc.get()), std::move(doc));
    }
    std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
        return sp.compareKeys(a.first, b.first) < 0;
    });
    std::string out;
    for (const auto& [k, d] : rows) {
        bson_iter_t it;
        bson::find(d.get(), "_id", &it);
        if (!out.empty()) out += ",";
        out += std::to_string(bson_iter_as_int64(&it));
    }
    return out;
}

TEST(SortTest, Orders) {
    struct Case {
        const char* spec;
        std::vector<const char*> docs;
        const char* expected;
    };
    std::vector<Case> cases = {
        {R"({"a": 1})",
         {R"({"_id": 1, "a": 3})", R"({"_id": 2, "a": 1})", R"({"_id": 3, "a": 2})"},
         "2,3,1"},
        {R"({"a": -1})",
         {R"({"_id": 1, "a": 3})", R"({"_id": 2, "a": 1})", R"({"_id": 3, "a": 2})"},
         "1,3,2"},
        // Cross-type: null/missing < numbers < strings < objects < arrays... < bool.
        {R"({"a": 1})",
         {R"({"_id": 1, "a": "x"})", R"({"_id": 2, "a": true})", R"({"_id": 3})",
          R"({"_id": 4, "a": 5})", R"({"_id": 5, "a": {"b": 1}})", R"({"_id": 6, "a": null})"},
         "3,6,4,1,5,2"},
        // Arrays: ascending uses the minimum, descending the maximum element.
        {R"({"a": 1})",
         {R"({"_id": 1, "a": [5, 0]})", R"({"_id": 2, "a": 2})", R"({"_id": 3, "a": [3, 9]})"},
         "1,2,3"},
        {R"({"a": -1})",
         {R"({"_id": 1, "a": [5, 0]})", R"({"_id": 2, "a": 2})", R"({"_id": 3, "a": [3, 9]})"},
         "3,1,2"},
        // Empty array sorts before null/missing.
        {R"({"a": 1})",
         {R"({"_id": 1, "a": null})", R"({"_id": 2, "a": []})", R"({"_id": 3, "a": 0})"},
         "2,1,3"},
        {R"({"a.b": 1})",
         {R"({"_id": 1, "a": [{"b": 7}, {"b": 2}]})", R"({"_id": 2, "a": {"b": 4}})",
          R"({"_id": 3, "a": 1})"},
         "3,1,2"},
        {R"({"a": 1, "b": -1})",
         {R"({"_id": 1, "a": 1, "b": 1})", R"({"_id": 2, "a": 1, "b": 2})",
          R"({"_id": 3, "a": 0, "b": 0})"},
         "3,2,1"},
        {R"({"a": 1.0})", {R"({"_id": 1, "a": 2})", R"({"_id": 2, "a": 1.5})"}, "2,1"},
        {R"({"a": {"$numberLong": "-1"}})",
         {R"({"_id": 1, "a": 2})", R"({"_id": 2, "a": 1.5})"},
         "1,2"},
        // Stable for equal keys.
        {R"({"a": 1})",
         {R"({"_id": 1, "a": 1})", R"({"_id": 2, "a": 1.0})", R"({"_id": 3})"},
         "3,1,2"},
    };
    for (const auto& c : cases) EXPECT_EQ(sortIds(c.spec, c.docs), c.expected) << c.spec;
}

TEST(SortTest, CompareAndKeyDoc) {
    auto s = bson::Doc::fromJsonOrDie(R"({"a": -1})");
    auto sp = uassertStatusOK(SortPattern::parse(s.get()));
    auto x = bson::Doc::fromJsonOrDie(R"({"a": [1, 9]})");
    auto y = bson::Doc::fromJsonOrDie(R"({"a": 5})");
    EXPECT_LT(sp.compare(x.get(), y.get()), 0);
    EXPECT_EQ(test::canonical(sp.sortKeyDoc(x.get()).get()), test::canonical(R"({"": 9})"));
}

TEST(SortTest, ParseErrors) {
    struct Case {
        const char* spec;
        int code;
    };
    std::vector<Case> cases = {
        {R"({"a": 2})", 15975},
        {R"({"a": 0})", 15975},
        {R"({"a": "asc"})", 15974},
        {R"({"a": {"b": 1}})", 17312},
        {R"({"a": {"$meta": "textScore"}})", 2},
        {R"({"$a": 1})", 16410},
        {R"({"a..b": 1})", 15998},
    };
    for (const auto& c : cases) {
        auto s = bson::Doc::fromJsonOrDie(c.spec);
        auto sw = SortPattern::parse(s.get());
        ASSERT_FALSE(sw.isOK()) << c.spec;
        EXPECT_EQ(sw.getStatus().codeNumber(), c.code) << c.spec;
    }
    auto s = bson::Doc::fromJsonOrDie(R"({"a": 3})");
    EXPECT_EQ(SortPattern::parse(s.get()).getStatus().reason(),
              "$sort key ordering must be 1 (for ascending) or -1 (for descending)");
}

}  // namespace
}  // namespace halo::query
