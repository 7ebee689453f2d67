#include "store/storage/index_keys.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "bson/compare.h"
#include "bson/doc.h"
#include "random_values.h"
#include "store/storage/key_string.h"

namespace halo::store {
namespace {

using bson::Doc;
using testing::RandomValues;
using testing::valueOf;

IndexKeyPattern pattern(std::string_view json) {
    Doc d = Doc::fromJsonOrDie(json);
    auto sw = parseKeyPattern(d.get());
    EXPECT_TRUE(sw.isOK()) << sw.getStatus().toString();
    return sw.isOK() ? sw.getValue() : IndexKeyPattern{};
}

struct Generated {
    Status status;
    std::vector<std::string> keys;
    bool multikey = false;
};

Generated gen(std::string_view patternJson, std::string_view docJson, bool sparse = false) {
    Generated g;
    Doc doc = Doc::fromJsonOrDie(docJson);
    KeyGenOptions o;
    o.sparse = sparse;
    g.status = generateKeys(doc.get(), pattern(patternJson), o, &g.keys, &g.multikey);
    return g;
}

/// Encodes expected keys, each given as a JSON array of its components.
std::vector<std::string> expected(std::string_view patternJson,
                                  std::vector<std::string_view> tuples) {
    IndexKeyPattern p = pattern(patternJson);
    std::vector<std::string> keys;
    for (auto t : tuples) {
        Doc d = Doc::fromJsonOrDie(std::string(R"({"k": )") + std::string(t) + "}");
        bson_iter_t it, arr;
        EXPECT_TRUE(bson_iter_init_find(&it, d.get(), "k") && bson_iter_recurse(&it, &arr));
        std::vector<bson_value_t> values;
        while (bson_iter_next(&arr)) values.push_back(*bson_iter_value(&arr));
        keys.push_back(encodeKey(p, values));
    }
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    return keys;
}

std::vector<std::string> debug(std::string_view patternJson, const std::vector<std::string>& keys) {
    std::vector<std::string> out;
    auto dirs = pattern(patternJson).directions();
    for (const auto& k : keys) out.push_back(keystring::toDebugString(k, dirs));
    return out;
}

#define EXPECT_KEYS(pat, doc, ...)                                       \
    do {                                                                 \
        Generated g_ = gen(pat, doc);                                    \
        ASSERT_TRUE(g_.status.isOK()) << g_.status.toString();           \
        auto e_ = expected(pat, {__VA_ARGS__});                          \
        EXPECT_EQ(debug(pat, g_.keys), debug(pat, e_)) << "doc " << doc; \
        EXPECT_EQ(g_.keys, e_) << "doc " << doc;                         \
    } while (0)

TEST(IndexKeysTest, ScalarsDottedAndMissing) {
    EXPECT_KEYS(R"({"a": 1})", R"({"b": 4, "a": 5})", "[5]");
    EXPECT_KEYS(R"({"a.b": 1})", R"({"a": {"b": 4}, "c": "foo"})", "[4]");
    EXPECT_KEYS(R"({"a": 1})", R"({"b": 1})", "[null]");
    EXPECT_KEYS(R"({"a.b": 1})", R"({"a": 3})", "[null]");
    EXPECT_KEYS(R"({"x": 1, "y": -1})", R"({"x": "a"})", R"(["a", null])");
    EXPECT_KEYS(R"({"a": 1})", R"({"a": {"b": [1, 2]}})", R"([{"b": [1, 2]}])");
    Generated g = gen(R"({"a": 1})", R"({"a": 5})");
    EXPECT_FALSE(g.multikey);
}

TEST(IndexKeysTest, ArraysExpandToOneKeyPerElement) {
    Generated g = gen(R"({"a": 1})", R"({"a": [1, 2, 3]})");
    EXPECT_TRUE(g.multikey);
    EXPECT_KEYS(R"({"a": 1})", R"({"a": [1, 2, 3]})", "[1]", "[2]", "[3]");
    EXPECT_KEYS(R"({"a": 1})", R"({"a": [0, {"$numberInt": "0"}, {"$numberLong": "0"}, 0.0]})",
                "[0]");
    EXPECT_KEYS(R"({"a": 1, "b": 1})", R"({"a": [1, 2], "b": 2})", "[1, 2]", "[2, 2]");
    EXPECT_KEYS(R"({"a.b": 1})", R"({"a": {"b": [1, 2]}})", "[1]", "[2]");
    EXPECT_KEYS(R"({"a.b": 1, "d": 1})", R"({"a": [{"b": 1}, {"b": 2}], "d": 9})", "[1, 9]",
                "[2, 9]");
    EXPECT_KEYS(R"({"a.b": 1})", R"({"a": [{"foo": 41}, {"b": 1}, {"b": 2}]})", "[null]", "[1]",
                "[2]");
    EXPECT_KEYS(R"({"a.b": 1})", R"({"a": [1, 2]})", "[null]");
    EXPECT_KEYS(R"({"a.b": 1})", R"({"a": [{"b": 1}, {"b": [1, 2, 3]}]})", "[1]", "[2]", "[3]");
    EXPECT_KEYS(R"({"a.b.c": 1})", R"({"a": [1, 2, {"b": {"c": [3, 4]}}]})", "[null]", "[3]",
                "[4]");
    // The same array may be traversed by several fields: values come from one element.
    EXPECT_KEYS(R"({"a.b": 1, "a.c": 1})", R"({"a": [{"b": 1}, {"c": 2}]})", "[1, null]",
                "[null, 2]");
    EXPECT_KEYS(R"({"a": 1, "a": 1})", R"({"a": [1, 2]})", "[1, 1]", "[2, 2]");
    EXPECT_KEYS(R"({"a": 1, "a.b": 1})", R"({"a": [1, {"b": [2, 3]}]})", "[1, null]",
                R"([{"b": [2, 3]}, 2])", R"([{"b": [2, 3]}, 3])");
}

TEST(IndexKeysTest, EmptyAndNestedArrays) {
    EXPECT_KEYS(R"({"a": 1})", R"({"a": []})", R"([{"$undefined": true}])");
    EXPECT_KEYS(R"({"a": 1, "b": 1})", R"({"a": 1, "b": []})", R"([1, {"$undefined": true}])");
    EXPECT_KEYS(R"({"a.b": 1})", R"({"a": []})", "[null]");
    EXPECT_KEYS(R"({"a": 1, "a.b": 1})", R"({"a": []})", R"([{"$undefined": true}, null])");
    EXPECT_KEYS(R"({"a": 1, "a.b": 1})", R"({"a": [{"b": []}]})",
                R"([{"b": []}, {"$undefined": true}])");
    // Nested arrays are indexed whole and not traversed by a field path.
    EXPECT_KEYS(R"({"a": 1})", R"({"a": [[2]]})", "[[2]]");
    EXPECT_KEYS(R"({"a": 1})", R"({"a": [[2], 3]})", "[[2]]", "[3]");
    EXPECT_KEYS(R"({"a.b": 1})", R"({"a": [[{"b": 1}]]})", "[null]");
}

TEST(IndexKeysTest, ParallelArraysAreRejected) {
    for (auto [pat, doc, msg] : std::vector<std::tuple<const char*, const char*, const char*>>{
             {R"({"a": 1, "b": 1})", R"({"a": [1, 2], "b": [1, 2]})",
              "cannot index parallel arrays [b] [a]"},
             {R"({"a": 1, "b": 1})", R"({"a": [], "b": []})",
              "cannot index parallel arrays [b] [a]"},
             {R"({"a.b": 1, "a.c": 1})", R"({"a": [{"b": [1], "c": [2]}]})",
              "cannot index parallel arrays [c] [b]"},
             {R"({"x.a": 1, "y.a": 1})", R"({"x": {"a": [1]}, "y": {"a": [1]}})",
              "cannot index parallel arrays [a] [a]"},
             {R"({"a": 1, "b.0": 1})", R"({"a": [1], "b": [2]})",
              "cannot index parallel arrays [b] [a]"}}) {
        Generated g = gen(pat, doc);
        EXPECT_EQ(g.status.code(), ErrorCode::CannotIndexParallelArrays) << doc;
        EXPECT_EQ(g.status.codeNumber(), 171);
        EXPECT_EQ(g.status.reason(), msg);
    }
    // One array per document is fine, whichever field holds it.
    EXPECT_KEYS(R"({"a": 1, "b": 1})", R"({"a": [1, 2], "b": {"c": 1}})", R"([1, {"c": 1}])",
                R"([2, {"c": 1}])");
}

TEST(IndexKeysTest, PositionalPathComponents) {
    EXPECT_KEYS(R"({"a.0": 1})", R"({"a": [1]})", "[1]");
    EXPECT_KEYS(R"({"a.1": 1})", R"({"a": [1, 2, 3]})", "[2]");
    EXPECT_FALSE(gen(R"({"a.1": 1})", R"({"a": [1, 2, 3]})").multikey);
    EXPECT_KEYS(R"({"a.0": 1})", R"({"a": [[1]]})", "[[1]]");
    EXPECT_KEYS(R"({"a.0": 1})", R"({"a": [[]]})", R"([{"$undefined": true}])");
    EXPECT_KEYS(R"({"a.0": 1})", R"({"a": {"0": 1}})", "[1]");
    EXPECT_KEYS(R"({"a.0.0": 1})", R"({"a": [[1]]})", "[1]");
    EXPECT_KEYS(R"({"a.0.0": 1})", R"({"a": [[]]})", "[null]");
    EXPECT_KEYS(R"({"a.0.0": 1})", R"({"a": []})", "[null]");
    EXPECT_KEYS(R"({"a.0.b": 1})", R"({"a": [{"b": 1}]})", "[1]");
    EXPECT_KEYS(R"({"a.0.b": 1})", R"({"a": [{"b": [1, 2]}, {"b": 3}]})", "[1]", "[2]");
    EXPECT_KEYS(R"({"a.0.b": 1})", R"({"a": [[{"b": 1}]]})", "[1]");
    EXPECT_KEYS(R"({"a.b.1": 1})", R"({"a": [{"b": [1, 2]}]})", "[2]");
    // No such index: the component names a field of the elements.
    EXPECT_KEYS(R"({"a.2": 1})", R"({"a": [{"2": 5}]})", "[5]");
    EXPECT_KEYS(R"({"a.2": 1})", R"({"a": [[1, 2, 5], {"2": 6}]})", "[null]", "[6]");
    EXPECT_KEYS(R"({"a.2": 1})", R"({"a": [[1, 2, 5], [3, 4, 6], [0, 1, 2]]})", "[[0, 1, 2]]");
    // Both an index and an element's field: ambiguous.
    for (const char* doc : {R"({"a": [{"0": 1}]})", R"({"a": [1, {"0": 2}]})"}) {
        Generated g = gen(R"({"a.0": 1})", doc);
        EXPECT_EQ(g.status.codeNumber(), 16746) << doc;
    }
}

TEST(IndexKeysTest, PositionalAndPlainPathsOverTheSameArray) {
    const char* pat = R"({"a": 1, "a.b": 1, "a.0.b": 1, "a.b.0": 1, "a.0.b.0": 1})";
    EXPECT_KEYS(pat, R"({"a": [{"b": [1, 2]}, {"b": 3}]})", R"([{"b": 3}, 3, 1, null, 1])",
                R"([{"b": 3}, 3, 2, null, 1])", R"([{"b": [1, 2]}, 1, 1, 1, 1])",
                R"([{"b": [1, 2]}, 2, 2, 1, 1])");
}

TEST(IndexKeysTest, ComplexNestedArrays) {
    const char* pat = R"({"a.b.c.d": 1, "a.g": 1, "a.b.f": 1, "a.b.c": 1, "a.b.e": 1})";
    EXPECT_KEYS(pat, R"({"a": [1, {"b": [2, {"c": [3, {"d": 1}], "e": 4}, 5, {"f": 6}], "g": 7}]})",
                "[null, null, null, null, null]", "[null, 7, null, null, null]",
                "[null, 7, null, 3, 4]", "[null, 7, 6, null, null]",
                R"([1, 7, null, {"d": 1}, 4])");
}

TEST(IndexKeysTest, Sparse) {
    auto sparseKeys = [](const char* pat, const char* doc) {
        Generated g = gen(pat, doc, /*sparse=*/true);
        EXPECT_TRUE(g.status.isOK());
        return g.keys;
    };
    EXPECT_TRUE(sparseKeys(R"({"a.b": 1})", R"({"a": 1})").empty());
    EXPECT_TRUE(sparseKeys(R"({"a.b": 1})", R"({"a": []})").empty());
    EXPECT_TRUE(sparseKeys(R"({"a.b": 1})", R"({"a": [{"c": 1}]})").empty());
    EXPECT_TRUE(sparseKeys(R"({"z": 1, "a.b": 1})", R"({"a": [1]})").empty());
    EXPECT_EQ(sparseKeys(R"({"a.b": 1})", R"({"a": [1, {"b": 1}]})"),
              expected(R"({"a.b": 1})", {"[1]"}));
    // Present null and undefined-from-[] values are indexed.
    EXPECT_EQ(sparseKeys(R"({"a": 1})", R"({"a": null})"), expected(R"({"a": 1})", {"[null]"}));
    EXPECT_EQ(sparseKeys(R"({"a.b": 1, "a": 1})", R"({"a": []})"),
              expected(R"({"a.b": 1, "a": 1})", {R"([null, {"$undefined": true}])"}));
    EXPECT_EQ(sparseKeys(R"({"x": 1, "y": 1})", R"({"y": 2})"),
              expected(R"({"x": 1, "y": 1})", {"[null, 2]"}));
}

TEST(IndexKeysTest, DescendingComponents) {
    EXPECT_KEYS(R"({"a": -1, "b": 1})", R"({"a": [1, 2], "b": "x"})", R"([1, "x"])", R"([2, "x"])");
    Generated g = gen(R"({"a": -1})", R"({"a": [1, 2]})");
    ASSERT_EQ(g.keys.size(), 2u);
    // In byte order the larger value comes first.
    EXPECT_EQ(g.keys[0], expected(R"({"a": -1})", {"[2]"})[0]);
}

TEST(IndexKeysTest, ParseKeyPattern) {
    IndexKeyPattern p =
        pattern(R"({"a": 1, "b.c": -1, "d": 2.5, "e": {"$numberLong": "-3"}, "f.$id": 1})");
    ASSERT_EQ(p.fields.size(), 5u);
    EXPECT_EQ(p.fields[1].first, "b.c");
    EXPECT_FALSE(p.fields[0].second);
    EXPECT_TRUE(p.fields[1].second);
    EXPECT_FALSE(p.fields[2].second);
    EXPECT_TRUE(p.fields[3].second);
    EXPECT_EQ(p.directions(), (std::vector<bool>{false, true, false, true, false}));

    for (const char* bad :
         {R"({})", R"({"a": "text"})", R"({"a": "2d"})", R"({"a": "2dsphere"})",
          R"({"a": "hashed"})", R"({"a": "nosuchplugin"})", R"({"a": 0})", R"({"a": true})",
          R"({"a": {"$numberDouble": "NaN"}})", R"({"$**": 1})", R"({"a.$**": 1})",
          R"({"a..b": 1})", R"({"": 1})", R"({"$a": 1})", R"({"a": 1, "b": {}})"}) {
        Doc d = Doc::fromJsonOrDie(bad);
        auto sw = parseKeyPattern(d.get());
        EXPECT_FALSE(sw.isOK()) << bad;
        EXPECT_EQ(sw.getStatus().codeNumber(), 67) << bad;
    }
    Doc plugin = Doc::fromJsonOrDie(R"({"a": "nosuchplugin"})");
    EXPECT_EQ(parseKeyPattern(plugin.get()).getStatus().reason(),
              "Unknown index plugin 'nosuchplugin'");
}

TEST(IndexKeysTest, EncodeKeyMatchesGeneratedKeys) {
    IndexKeyPattern p = pattern(R"({"a": 1, "b": -1})");
    Doc doc = Doc::fromJsonOrDie(R"({"a": "x", "b": 7})");
    std::vector<std::string> keys;
    ASSERT_TRUE(generateKeys(doc.get(), p, {}, &keys, nullptr).isOK());
    bson_iter_t a, b;
    ASSERT_TRUE(bson_iter_init_find(&a, doc.get(), "a"));
    ASSERT_TRUE(bson_iter_init_find(&b, doc.get(), "b"));
    std::vector<bson_value_t> values = {*bson_iter_value(&a), *bson_iter_value(&b)};
    ASSERT_EQ(keys.size(), 1u);
    EXPECT_EQ(keys[0], encodeKey(p, values));
    EXPECT_EQ(keys[0].substr(0, encodeKey(p, std::span(values).first(1)).size()),
              encodeKey(p, std::span(values).first(1)));
}

// ---- planner helpers ---------------------------------------------------------

bool inInterval(const bson_value_t& x, const ValueInterval& iv) {
    int lo = bson::compareValues(x, iv.lo), hi = bson::compareValues(x, iv.hi);
    return (lo > 0 || (lo == 0 && iv.loInclusive)) && (hi < 0 || (hi == 0 && iv.hiInclusive));
}

bool isNaN(const bson_value_t& v) {
    return bson::isNumber(v.value_type) && std::isnan(static_cast<double>(bson::toDouble(v)));
}

TEST(IndexKeysTest, TypeBracketsContainExactlyTheirType) {
    RandomValues rnd(5);
    std::vector<Doc> docs;
    for (int i = 0; i < 2000; ++i) docs.push_back(rnd.next(2));
    for (const auto& d : docs) {
        bson_value_t x = valueOf(d);
        ValueInterval b = typeBracket(x.value_type);
        EXPECT_TRUE(inInterval(x, b)) << d.toJson();
        for (const auto& e : docs) {
            bson_value_t y = valueOf(e);
            bool sameRank = bson::canonicalRank(x.value_type) == bson::canonicalRank(y.value_type);
            ASSERT_EQ(inInterval(y, b), sameRank) << d.toJson() << " " << e.toJson();
        }
    }
    EXPECT_TRUE(inInterval(valueOf(Doc::fromJsonOrDie(R"({"v": 1})")), allValues()));
}

TEST(IndexKeysTest, ComparisonIntervalsAreTypeBracketed) {
    RandomValues rnd(77);
    std::vector<Doc> docs;
    for (int i = 0; i < 600; ++i) docs.push_back(rnd.next(2));
    for (const auto& d : docs) {
        bson_value_t x = valueOf(d);
        if (x.value_type == BSON_TYPE_MINKEY || x.value_type == BSON_TYPE_MAXKEY) continue;
        for (auto op :
             {ComparisonOp::kGt, ComparisonOp::kGte, ComparisonOp::kLt, ComparisonOp::kLte}) {
            ValueInterval iv = comparisonInterval(op, x);
            for (const auto& e : docs) {
                bson_value_t y = valueOf(e);
                int c = bson::compareValues(y, x);
                bool sameRank =
                    bson::canonicalRank(x.value_type) == bson::canonicalRank(y.value_type);
                bool nanMismatch = isNaN(y) != isNaN(x);
                bool want = sameRank && !nanMismatch &&
                            (op == ComparisonOp::kGt    ? c > 0
                             : op == ComparisonOp::kGte ? c >= 0
                             : op == ComparisonOp::kLt  ? c < 0
                                                        : c <= 0);
                ASSERT_EQ(inInterval(y, iv), want)
                    << d.toJson() << " op " << static_cast<int>(op) << " candidate " << e.toJson();
            }
        }
    }
    bson_value_t maxKey = valueOf(Doc::fromJsonOrDie(R"({"v": {"$maxKey": 1}})"));
    ValueInterval lt = comparisonInterval(ComparisonOp::kLt, maxKey);
    EXPECT_TRUE(inInterval(valueOf(Doc::fromJsonOrDie(R"({"v": "s"})")), lt));
    EXPECT_FALSE(inInterval(maxKey, lt));
}

// keyRange over real stored keys (components + record id) selects exactly the
// entries whose component values satisfy the equality prefix and the interval.
TEST(IndexKeysTest, KeyRangeSelectsExactlyTheInterval) {
    RandomValues rnd(2024);
    std::vector<Doc> pool;
    for (int i = 0; i < 60; ++i) pool.push_back(rnd.next(1));
    for (const char* pat : {R"({"a": 1, "b": 1})", R"({"a": 1, "b": -1})", R"({"a": -1, "b": -1})",
                            R"({"a": -1, "b": 1})"}) {
        IndexKeyPattern p = pattern(pat);
        struct Entry {
            const Doc* a;
            const Doc* b;
            std::string key;
        };
        std::vector<Entry> entries;
        for (int rid = 0; rid < 800; ++rid) {
            Entry e{&pool[rnd.pick(60)], &pool[rnd.pick(60)], {}};
            bson_value_t vals[2] = {valueOf(*e.a), valueOf(*e.b)};
            e.key = encodeKey(p, vals);
            keystring::appendRecordId(e.key, rid - 400);
            entries.push_back(std::move(e));
        }
        for (int n = 0; n < 300; ++n) {
            const Doc& x = pool[rnd.pick(60)];
            auto op = static_cast<ComparisonOp>(rnd.pick(4));
            ValueInterval iv = rnd.pick(5) == 0 ? typeBracket(valueOf(x).value_type)
                                                : comparisonInterval(op, valueOf(x));
            // Single-component range on "a".
            KeyRange r1 = keyRange(p, {}, iv);
            // Equality on "a", range on "b".
            bson_value_t eq = valueOf(pool[rnd.pick(60)]);
            KeyRange r2 = keyRange(p, std::span(&eq, 1), iv);
            KeyRange r3 = keyRangeForPrefix(p, std::span(&eq, 1));
            for (const auto& e : entries) {
                bson_value_t a = valueOf(*e.a), b = valueOf(*e.b);
                ASSERT_EQ(r1.contains(e.key), inInterval(a, iv)) << pat << " " << x.toJson();
                bool aEq = bson::compareValues(a, eq) == 0;
                ASSERT_EQ(r2.contains(e.key), aEq && inInterval(b, iv)) << pat << " " << x.toJson();
                ASSERT_EQ(r3.contains(e.key), aEq);
            }
        }
    }
}

}  // namespace
}  // namespace halo::store
