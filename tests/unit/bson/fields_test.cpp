#include "bson/fields.h"

#include <gtest/gtest.h>

#include <string>

#include "bson/doc.h"

namespace halo::bson {
namespace {

TEST(FieldsTest, FindsWhatBsonFindFinds) {
    Doc d = Doc::fromJsonOrDie(
        R"({"find": "c", "filter": {"_id": 1}, "limit": 1, "lsid": {"id": 2}, "$db": "test",
            "empty": [], "dup": 1, "dup": 2})");
    Fields f(d.get());
    ASSERT_EQ(f.size(), 8u);
    EXPECT_EQ(f.key(0), "find");
    EXPECT_EQ(f.key(4), "$db");
    for (const char* key : {"find", "filter", "limit", "lsid", "$db", "empty", "dup", "missing",
                            "fin", "finds", ""}) {
        bson_iter_t a, b;
        bool inDoc = find(d.get(), key, &a);
        ASSERT_EQ(f.find(key, &b), inDoc) << key;
        EXPECT_EQ(f.has(key), inDoc) << key;
        if (inDoc) {
            EXPECT_EQ(bson_iter_type(&a), bson_iter_type(&b)) << key;
            EXPECT_EQ(bson_iter_offset(&a), bson_iter_offset(&b))
                << key;  // the first of duplicates
        }
    }
    bson_t sub;
    ASSERT_TRUE(f.subDocument("filter", &sub));
    EXPECT_EQ(toJson(&sub), R"({ "_id" : 1 })");
    EXPECT_TRUE(f.subDocument("empty", &sub));
    EXPECT_FALSE(f.subDocument("limit", &sub));
    EXPECT_FALSE(f.subDocument("missing", &sub));
}

TEST(FieldsTest, ManyFieldsAndEmptyDocuments) {
    Doc d;
    for (int i = 0; i < 40; ++i) {
        std::string k = "k" + std::to_string(i);
        BSON_APPEND_INT32(d.mut(), k.c_str(), i);
    }
    Fields f(d.get());
    ASSERT_EQ(f.size(), 40u);
    for (int i = 0; i < 40; ++i) {
        bson_iter_t it;
        ASSERT_TRUE(f.find("k" + std::to_string(i), &it));
        EXPECT_EQ(bson_iter_int32(&it), i);
        EXPECT_EQ(f.key(static_cast<size_t>(i)), "k" + std::to_string(i));
    }
    Doc empty;
    Fields none(empty.get());
    EXPECT_EQ(none.size(), 0u);
    EXPECT_FALSE(none.has("k0"));
}

}  // namespace
}  // namespace halo::bson
