// Index keys under a collation: strings are keyed by their ICU comparison keys,
// so byte order equals the collation's order and collation-equal strings share
// one key (what unique indexes with a collation rely on).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bson/compare.h"
#include "bson/doc.h"
#include "random_values.h"
#include "store/query/collator.h"
#include "store/storage/index_keys.h"
#include "store/storage/key_string.h"

namespace halo::store {
namespace {

using bson::Doc;
using testing::RandomValues;
using testing::valueOf;

int sign(int c) {
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

query::CollatorPtr make(const char* json) {
    auto spec = Doc::fromJsonOrDie(json);
    return query::Collator::parse(spec.get()).getValue();
}

Doc v(std::string_view json) {
    return Doc::fromJsonOrDie(std::string(R"({"v": )") + std::string(json) + "}");
}

TEST(CollationKeys, OrderMatchesCollatedCompareValues) {
    auto ci = make(R"({"locale": "en", "strength": 2})");
    auto num = make(R"({"locale": "en", "numericOrdering": true})");
    std::vector<Doc> values;
    for (const char* j : {R"("a")",
                          R"("A")",
                          R"("á")",
                          R"("b")",
                          R"("B")",
                          R"("10")",
                          R"("9")",
                          R"("")",
                          R"({"k": "X"})",
                          R"({"k": "x"})",
                          R"({"k": "y"})",
                          R"(["B", 1])",
                          R"(["b", 2])",
                          R"(["a"])",
                          "1",
                          "2.5",
                          "null",
                          "true",
                          R"({"$symbol": "Sym"})",
                          R"({"$minKey": 1})",
                          R"({"$maxKey": 1})",
                          R"({"$oid": "000000000000000000000001"})"}) {
        values.push_back(v(j));
    }
    RandomValues rnd(7, /*lossless=*/true);
    for (int i = 0; i < 200; ++i) values.push_back(rnd.next());
    for (const auto* c : {ci.get(), num.get()}) {
        for (bool desc : {false, true}) {
            for (const auto& a : values) {
                std::string ka = keystring::encodeValue(valueOf(a), desc, c);
                for (const auto& b : values) {
                    std::string kb = keystring::encodeValue(valueOf(b), desc, c);
                    int want = sign(bson::compareValues(valueOf(a), valueOf(b), c));
                    if (desc) want = -want;
                    ASSERT_EQ(sign(ka.compare(kb)), want)
                        << a.toJson() << " vs " << b.toJson() << (desc ? " desc" : "");
                }
            }
        }
    }
}

TEST(CollationKeys, EqualStringsShareAKeyAndNonStringsAreUnchanged) {
    auto ci = make(R"({"locale": "en", "strength": 2})");
    EXPECT_EQ(keystring::encodeValue(valueOf(v(R"("Hello")")), false, ci.get()),
              keystring::encodeValue(valueOf(v(R"("hELLO")")), false, ci.get()));
    EXPECT_NE(keystring::encodeValue(valueOf(v(R"("Hello")"))),
              keystring::encodeValue(valueOf(v(R"("hELLO")"))));
    for (const char* j : {"1", "null", "true", R"({"n": 5})", R"([1, 2])"})
        EXPECT_EQ(keystring::encodeValue(valueOf(v(j)), false, ci.get()),
                  keystring::encodeValue(valueOf(v(j))))
            << j;
}

TEST(CollationKeys, GenerateKeysUsesTheIndexCollation) {
    auto ci = make(R"({"locale": "en", "strength": 2})");
    auto pattern = Doc::fromJsonOrDie(R"({"a": 1, "b": -1})");
    auto p = parseKeyPattern(pattern.get()).getValue();
    KeyGenOptions o;
    o.collator = ci.get();
    std::vector<std::string> k1, k2, k3;
    bool mk = false;
    ASSERT_TRUE(
        generateKeys(Doc::fromJsonOrDie(R"({"a": "X", "b": ["q", "Q"]})").get(), p, o, &k1, &mk)
            .isOK());
    // "q" and "Q" are one key under strength 2.
    EXPECT_EQ(k1.size(), 1u);
    ASSERT_TRUE(
        generateKeys(Doc::fromJsonOrDie(R"({"a": "x", "b": "q"})").get(), p, o, &k2, &mk).isOK());
    EXPECT_EQ(k1, k2);
    ASSERT_TRUE(
        generateKeys(Doc::fromJsonOrDie(R"({"a": "x", "b": "q"})").get(), p, {}, &k3, &mk).isOK());
    EXPECT_NE(k2, k3);
    bson_value_t vals[2] = {valueOf(v(R"("X")")), valueOf(v(R"("Q")"))};
    EXPECT_EQ(encodeKey(p, vals, ci.get()), k2[0]);
}

}  // namespace
}  // namespace halo::store
