#include "bson/doc.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace halo::bson {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes bytesOf(const Doc& d) {
    return Bytes(d.data(), d.data() + d.size());
}

Status validateBytes(const Bytes& b) {
    return validate(b.data(), b.size());
}

void putI32(Bytes& b, size_t at, int32_t v) {
    std::memcpy(b.data() + at, &v, 4);
}

/// {"": {"": ... {} ...}} nested `depth` levels below the top document.
Bytes nested(size_t depth) {
    Bytes out;
    for (size_t i = depth; i > 0; --i) {
        Bytes head(6);
        putI32(head, 0, static_cast<int32_t>(5 + 7 * i));
        head[4] = 0x03;  // embedded document
        head[5] = 0x00;  // empty key
        out.insert(out.end(), head.begin(), head.end());
    }
    Bytes innermost{5, 0, 0, 0, 0};
    out.insert(out.end(), innermost.begin(), innermost.end());
    out.insert(out.end(), depth, 0x00);
    return out;
}

TEST(ValidateTest, AcceptsWellFormedDocuments) {
    Doc d = Doc::fromJsonOrDie(
        R"({"a": 1, "b": {"c": [1, "x", {"d": null}], "e": {"$binary": {"base64": "AAE=",
            "subType": "00"}}}, "f": {"$regularExpression": {"pattern": "^a", "options": "i"}},
            "g": {"$code": "x", "$scope": {"y": 1}}, "h": {}, "i": []})");
    EXPECT_TRUE(validateBytes(bytesOf(d)).isOK());
    Doc empty;
    EXPECT_TRUE(validateBytes(bytesOf(empty)).isOK());
}

TEST(ValidateTest, KeysNeedNotBeUtf8) {
    // {"\xff": 1}: mongod does not check key encoding either.
    Bytes b{12, 0, 0, 0, 0x10, 0xFF, 0x00, 1, 0, 0, 0, 0};
    EXPECT_TRUE(validateBytes(b).isOK());
}

TEST(ValidateTest, RejectsMalformedElements) {
    Doc d = Doc::fromJsonOrDie(R"({"a": "xy", "b": {"c": 1}})");
    const Bytes good = bytesOf(d);
    ASSERT_TRUE(validateBytes(good).isOK());
    // Offsets: 0 len | 4 02 'a' 00, 7 len, 11 'x' 'y' 00 | 14 03 'b' 00, 17 len, 21 10 'c' 00,
    // 24 int32, 28 00 | 29 00
    {
        Bytes b = good;  // string without its terminating NUL
        b[13] = 'z';
        EXPECT_EQ(validateBytes(b).code(), ErrorCode::InvalidBSON);
    }
    {
        Bytes b = good;  // string length past the document
        putI32(b, 7, 100);
        EXPECT_EQ(validateBytes(b).code(), ErrorCode::InvalidBSON);
    }
    {
        Bytes b = good;  // unknown element type
        b[4] = 0x42;
        EXPECT_EQ(validateBytes(b).code(), ErrorCode::InvalidBSON);
    }
    {
        Bytes b = good;  // embedded document shorter than its elements
        putI32(b, 17, 9);
        EXPECT_EQ(validateBytes(b).code(), ErrorCode::InvalidBSON);
    }
    {
        Bytes b = good;  // embedded document not terminated by NUL
        b[b.size() - 2] = 1;
        EXPECT_EQ(validateBytes(b).code(), ErrorCode::InvalidBSON);
    }
    {
        Bytes b = good;  // a terminator in the middle of the top document
        b[14] = 0x00;
        EXPECT_EQ(validateBytes(b).code(), ErrorCode::InvalidBSON);
    }
    {
        Bytes b = good;  // declared length differs from the bytes
        putI32(b, 0, static_cast<int32_t>(b.size() + 1));
        EXPECT_EQ(validateBytes(b).code(), ErrorCode::InvalidBSON);
    }
}

TEST(ValidateTest, NestingIsBoundedWithoutRecursion) {
    EXPECT_TRUE(validateBytes(nested(200)).isOK());
    EXPECT_EQ(validateBytes(nested(201)).code(), ErrorCode::Overflow);
    // Deep enough to overflow the stack of a recursive validator.
    EXPECT_EQ(validateBytes(nested(1'000'000)).code(), ErrorCode::Overflow);
}

TEST(CopyWithout, DropsTheNamedTopLevelFieldsAndKeepsTheRestInOrder) {
    Doc src = Doc::fromJsonOrDie(
        R"({"find": "c", "$clusterTime": {"t": 1}, "filter": {"$clusterTime": 2},)"
        R"( "lsid": {"id": 3}, "recoveryToken": 4})");
    std::vector<std::string> seen;
    Doc out = copyWithout(src.get(), {"$clusterTime", "recoveryToken"},
                          [&](const bson_iter_t& it) { seen.emplace_back(bson_iter_key(&it)); });
    EXPECT_EQ(out.toJson(), Doc::fromJsonOrDie(R"({"find": "c", "filter": {"$clusterTime": 2},)"
                                               R"( "lsid": {"id": 3}})")
                                .toJson());
    EXPECT_EQ(seen, (std::vector<std::string>{"$clusterTime", "recoveryToken"}));
    EXPECT_TRUE(validate(out.data(), out.size()).isOK());
    EXPECT_TRUE(copyWithout(src.get(), {"find", "filter", "$clusterTime", "lsid", "recoveryToken"})
                    .empty());
    Doc empty;
    EXPECT_TRUE(copyWithout(empty.get(), {"x"}).empty());
}

TEST(PatchInt64, OverwritesAnInt64InPlaceAndRefusesOtherTypes) {
    Doc d = Doc::fromJsonOrDie(
        R"({"cursor": {"id": {"$numberLong": "77"}, "ns": "d.c"}, "n": 1, "ok": 1})");
    ASSERT_TRUE(patchInt64(d, "cursor.id", -5));
    EXPECT_EQ(d.toJson(), Doc::fromJsonOrDie(R"({"cursor": {"id": {"$numberLong": "-5"},)"
                                             R"( "ns": "d.c"}, "n": 1, "ok": 1})")
                              .toJson());
    EXPECT_FALSE(patchInt64(d, "n", 9));  // an int32
    EXPECT_FALSE(patchInt64(d, "cursor.missing", 9));
}

}  // namespace
}  // namespace halo::bson

TEST(PrintableUtf8, KeepsValidTextAndEscapesInvalidBytes) {
    EXPECT_EQ(halo::bson::printableUtf8("no such command: 'find'"), "no such command: 'find'");
    EXPECT_EQ(halo::bson::printableUtf8("caf\xc3\xa9"), "caf\xc3\xa9");
    EXPECT_EQ(halo::bson::printableUtf8("d\xc4s\xc0inct"), "d\\xc4s\\xc0inct");
    std::string withNul("a\0b", 3);
    EXPECT_EQ(halo::bson::printableUtf8(withNul), "a\\x00b");
    bson_t b = BSON_INITIALIZER;
    halo::bson::appendMessage(&b, "errmsg", "bad \xff name");
    EXPECT_EQ(halo::bson::stringField(&b, "errmsg"), "bad \\xff name");
    bson_destroy(&b);
}

TEST(CommandTargetUtf8, RefusesACollectionNameThatIsNotUtf8) {
    bson_t ok = BSON_INITIALIZER, bad = BSON_INITIALIZER, num = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&ok, "find", "orders");
    bson_append_utf8(&bad, "find", 4, "order\xf7", 6);
    BSON_APPEND_INT32(&num, "ping", 1);
    EXPECT_TRUE(halo::bson::commandTargetUtf8(&ok, "shop").isOK());
    EXPECT_TRUE(halo::bson::commandTargetUtf8(&num, "shop").isOK());
    auto s = halo::bson::commandTargetUtf8(&bad, "shop");
    EXPECT_EQ(s.code(), halo::ErrorCode::InvalidNamespace);
    EXPECT_EQ(s.reason(),
              "Invalid namespace specified 'shop.order\\xf7': names must be valid UTF-8");
    bson_destroy(&ok);
    bson_destroy(&bad);
    bson_destroy(&num);
}
