#include "store/storage/key_string.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "bson/compare.h"
#include "bson/doc.h"
#include "random_values.h"

namespace halo::store::keystring {
namespace {

using bson::Doc;
using testing::RandomValues;
using testing::valueOf;

int sign(int c) {
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

Doc v(std::string_view json) {
    return Doc::fromJsonOrDie(std::string(R"({"v": )") + std::string(json) + "}");
}

std::string enc(const Doc& d, bool desc = false) {
    return encodeValue(valueOf(d), desc);
}

TEST(KeyStringTest, NumericallyEqualNumbersEncodeIdentically) {
    std::vector<Doc> ones;
    ones.push_back(v("1"));
    ones.push_back(v(R"({"$numberLong": "1"})"));
    ones.push_back(v("1.0"));
    ones.push_back(v(R"({"$numberDecimal": "1.0"})"));
    ones.push_back(v(R"({"$numberDecimal": "1"})"));
    ones.push_back(v(R"({"$numberDecimal": "1.000000"})"));
    for (const auto& d : ones) EXPECT_EQ(enc(d), enc(ones[0])) << d.toJson();

    std::vector<Doc> zeros;
    zeros.push_back(v("0"));
    zeros.push_back(v(R"({"$numberDouble": "-0.0"})"));
    zeros.push_back(v(R"({"$numberLong": "0"})"));
    zeros.push_back(v(R"({"$numberDecimal": "-0"})"));
    zeros.push_back(v(R"({"$numberDecimal": "0E+10"})"));
    for (const auto& d : zeros) EXPECT_EQ(enc(d), enc(zeros[0])) << d.toJson();

    EXPECT_EQ(enc(v(R"({"$numberDouble": "NaN"})")), enc(v(R"({"$numberDecimal": "NaN"})")));
    EXPECT_EQ(enc(v(R"({"$numberDouble": "-Infinity"})")),
              enc(v(R"({"$numberDecimal": "-Infinity"})")));
    EXPECT_EQ(enc(v("-2.5")), enc(v(R"({"$numberDecimal": "-2.50"})")));
}

TEST(KeyStringTest, LargeInt64AgainstDoublesIsExact) {
    // 2^53 + 1 is not a double: it must sort strictly between 2^53 and 2^53 + 2.
    Doc i = v(R"({"$numberLong": "9007199254740993"})");
    Doc dLo = v("9007199254740992.0"), dHi = v("9007199254740994.0");
    EXPECT_LT(enc(dLo), enc(i));
    EXPECT_LT(enc(i), enc(dHi));
    EXPECT_EQ(enc(v(R"({"$numberLong": "9007199254740992"})")), enc(dLo));

    Doc max = v(R"({"$numberLong": "9223372036854775807"})");
    Doc two63 = v("9223372036854775808.0");
    EXPECT_LT(enc(max), enc(two63));
    EXPECT_LT(enc(v(R"({"$numberLong": "9223372036854775806"})")), enc(max));
    EXPECT_EQ(enc(v(R"({"$numberLong": "-9223372036854775808"})")),
              enc(v("-9223372036854775808.0")));
}

TEST(KeyStringTest, NumberOrder) {
    std::vector<Doc> ordered;
    for (const char* j : {R"({"$numberDouble": "NaN"})", R"({"$numberDouble": "-Infinity"})",
                          "-1e300", R"({"$numberLong": "-9223372036854775808"})", "-2", "-1.5",
                          "-1e-310", "0", "1e-310", "0.1", "1", "1.5", "2", "1e300",
                          R"({"$numberDecimal": "1E+400"})", R"({"$numberDouble": "Infinity"})"}) {
        ordered.push_back(v(j));
    }
    for (size_t i = 0; i + 1 < ordered.size(); ++i) {
        EXPECT_LT(enc(ordered[i]), enc(ordered[i + 1])) << ordered[i].toJson();
        EXPECT_GT(enc(ordered[i], true), enc(ordered[i + 1], true)) << ordered[i].toJson();
    }
}

TEST(KeyStringTest, StringsAreBytewiseWithEscapedNul) {
    auto s = [](std::string str) {
        Doc d;
        bson_append_utf8(d.mut(), "v", -1, str.data(), static_cast<int>(str.size()));
        return d;
    };
    std::vector<Doc> ordered;
    ordered.push_back(s(""));
    ordered.push_back(s(std::string("\0", 1)));
    ordered.push_back(s("a"));
    ordered.push_back(s(std::string("a\0", 2)));
    ordered.push_back(s(std::string("a\0\0", 3)));
    ordered.push_back(s(std::string("a\0b", 3)));
    ordered.push_back(s("a\x01"));
    ordered.push_back(s("ab"));
    ordered.push_back(s("b"));
    ordered.push_back(s("\xff"));
    for (size_t i = 0; i + 1 < ordered.size(); ++i) {
        EXPECT_LT(enc(ordered[i]), enc(ordered[i + 1])) << i;
        EXPECT_GT(enc(ordered[i], true), enc(ordered[i + 1], true)) << i;
    }
    Doc sym;
    BSON_APPEND_SYMBOL(sym.mut(), "v", "ab");
    EXPECT_EQ(enc(sym), enc(s("ab")));
}

TEST(KeyStringTest, TypeOrder) {
    std::vector<Doc> ordered;
    for (const char* j :
         {R"({"$minKey": 1})", R"({"$undefined": true})", "null", "5", R"("")", "{}", "[]",
          R"({"$binary": {"base64": "", "subType": "00"}})",
          R"({"$oid": "000000000000000000000000"})", "false", R"({"$date": {"$numberLong": "-5"}})",
          R"({"$timestamp": {"t": 0, "i": 0}})",
          R"({"$regularExpression": {"pattern": "", "options": ""}})",
          R"({"$dbPointer": {"$ref": "", "$id": {"$oid": "000000000000000000000000"}}})",
          R"({"$code": ""})", R"({"$code": "", "$scope": {}})", R"({"$maxKey": 1})"}) {
        ordered.push_back(v(j));
    }
    for (size_t i = 0; i + 1 < ordered.size(); ++i) {
        EXPECT_LT(enc(ordered[i]), enc(ordered[i + 1])) << ordered[i].toJson();
    }
}

TEST(KeyStringTest, RecordIdSuffix) {
    std::vector<int64_t> rids = {INT64_MIN, -5, -1, 0, 1, 2, 255, 256, INT64_MAX};
    std::string prev;
    for (int64_t rid : rids) {
        std::string k = "prefix";
        appendRecordId(k, rid);
        EXPECT_EQ(k.size(), 6 + kRecordIdSize);
        EXPECT_EQ(readRecordIdSuffix(k), rid);
        if (!prev.empty()) {
            EXPECT_LT(prev, k);
        }
        prev = k;
    }
}

// The central property: byte order of encodings equals compareValues order, both
// directions, for random values of all types.
TEST(KeyStringTest, PropertyMemcmpOrderMatchesCompareValues) {
    RandomValues gen(20240601);
    std::vector<Doc> docs;
    std::vector<std::string> asc, desc;
    for (int i = 0; i < 1200; ++i) {
        docs.push_back(gen.next(3));
        asc.push_back(enc(docs.back()));
        desc.push_back(enc(docs.back(), true));
    }
    int failures = 0;
    for (size_t i = 0; i < docs.size() && failures < 10; ++i) {
        bson_value_t a = valueOf(docs[i]);
        for (size_t j = 0; j < docs.size(); ++j) {
            bson_value_t b = valueOf(docs[j]);
            int expected = sign(bson::compareValues(a, b));
            int got = sign(asc[i].compare(asc[j]));
            int gotDesc = sign(desc[i].compare(desc[j]));
            if (got != expected || gotDesc != -expected) {
                ADD_FAILURE() << docs[i].toJson() << " vs " << docs[j].toJson() << ": expected "
                              << expected << ", asc " << got << ", desc " << gotDesc;
                if (++failures >= 10) break;
            }
        }
    }
}

TEST(KeyStringTest, PropertyCompoundKeysCompareComponentwise) {
    RandomValues gen(7);
    std::vector<Doc> docs;
    for (int i = 0; i < 400; ++i) docs.push_back(gen.next(2));
    for (int n = 0; n < 20000; ++n) {
        // Two 3-component keys with random directions and a record id suffix.
        bool dirs[3] = {gen.pick(2) == 1, gen.pick(2) == 1, gen.pick(2) == 1};
        const Doc* a[3];
        const Doc* b[3];
        for (int c = 0; c < 3; ++c) {
            a[c] = &docs[gen.pick(400)];
            // Bias towards equal components so later components matter.
            b[c] = gen.pick(2) ? a[c] : &docs[gen.pick(400)];
        }
        int64_t ra = gen.pick(5) - 2, rb = gen.pick(5) - 2;
        std::string ka, kb;
        int expected = 0;
        for (int c = 0; c < 3; ++c) {
            appendValue(ka, valueOf(*a[c]), dirs[c]);
            appendValue(kb, valueOf(*b[c]), dirs[c]);
            if (expected == 0) {
                expected = sign(bson::compareValues(valueOf(*a[c]), valueOf(*b[c])));
                if (dirs[c]) expected = -expected;
            }
        }
        if (expected == 0) expected = ra < rb ? -1 : (ra > rb ? 1 : 0);
        appendRecordId(ka, ra);
        appendRecordId(kb, rb);
        ASSERT_EQ(sign(ka.compare(kb)), expected)
            << a[0]->toJson() << a[1]->toJson() << a[2]->toJson() << " vs " << b[0]->toJson()
            << b[1]->toJson() << b[2]->toJson();
    }
}

TEST(KeyStringTest, PropertyAfterPrefixBoundsExactlyThePrefix) {
    RandomValues gen(99);
    std::vector<Doc> docs;
    for (int i = 0; i < 300; ++i) docs.push_back(gen.next(2));
    for (int n = 0; n < 5000; ++n) {
        bool d0 = gen.pick(2), d1 = gen.pick(2);
        const Doc& p = docs[gen.pick(300)];
        const Doc& q = gen.pick(2) ? p : docs[gen.pick(300)];
        std::string prefix = encodeValue(valueOf(p), d0);
        std::string key = encodeValue(valueOf(q), d0);
        appendValue(key, valueOf(docs[gen.pick(300)]), d1);
        if (gen.pick(2)) appendRecordId(key, gen.pick(2) ? INT64_MAX : INT64_MIN);
        bool startsWith = key.compare(0, prefix.size(), prefix) == 0;
        bool inside = key >= prefix && key < afterPrefix(prefix);
        ASSERT_EQ(startsWith, inside) << p.toJson() << " " << q.toJson();
    }
}

TEST(KeyStringTest, DecodeRoundTrip) {
    RandomValues gen(12345, /*lossless=*/true);
    for (int n = 0; n < 2000; ++n) {
        Doc a = gen.next(3), b = gen.next(2);
        bool da = gen.pick(2), db = gen.pick(2);
        std::string key;
        appendValue(key, valueOf(a), da);
        appendValue(key, valueOf(b), db);
        appendRecordId(key, 42);
        auto sw = decodeKey(key, {da, db});
        ASSERT_TRUE(sw.isOK()) << a.toJson();
        bson_iter_t it;
        ASSERT_TRUE(bson_iter_init(&it, sw.getValue().get()));
        ASSERT_TRUE(bson_iter_next(&it));
        EXPECT_EQ(bson::compareValues(*bson_iter_value(&it), valueOf(a)), 0) << a.toJson();
        EXPECT_EQ(encodeValue(*bson_iter_value(&it), da), encodeValue(valueOf(a), da));
        ASSERT_TRUE(bson_iter_next(&it));
        EXPECT_EQ(encodeValue(*bson_iter_value(&it), db), encodeValue(valueOf(b), db));
    }
}

TEST(KeyStringTest, DecodeNumbersAndDebugString) {
    std::string key;
    appendValue(key, valueOf(v(R"({"$numberLong": "5"})")), false);
    appendValue(key, valueOf(v("2.5")), true);
    appendValue(key, valueOf(v(R"({"$numberLong": "9007199254740993"})")), false);
    auto sw = decodeKey(key, {false, true, false});
    ASSERT_TRUE(sw.isOK());
    EXPECT_EQ(sw.getValue().toJson(), R"({ "" : 5, "" : 2.5, "" : 9007199254740993 })");
    EXPECT_FALSE(decodeKey("\x1e", {false}).isOK());
    EXPECT_EQ(toDebugString("\x1e", {false}), "1e");
}

}  // namespace
}  // namespace halo::store::keystring
