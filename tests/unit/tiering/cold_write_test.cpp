// Which write statements may run in the archive (docs/CONSISTENCY.md, Cold
// writes): one document named by _id equality, no upsert, the simple
// collation, and an update that leaves the age field's top-level field alone.
#include "tiering/cold_write.h"

#include <gtest/gtest.h>

namespace halo::tiering {
namespace {

bson::Doc json(const std::string& s) {
    return bson::Doc::fromJsonOrDie(s);
}

CollectionPolicy policy(const std::string& ageField) {
    CollectionPolicy p;
    p.ns = "shop.orders";
    p.ageField = ageField;
    p.horizon = Millis(30LL * 86'400'000);
    return p;
}

bool cold(std::string_view kind, const std::string& stmt, const std::string& age = "date") {
    return coldTarget(kind, json(stmt).get(), policy(age)).has_value();
}

TEST(ColdTarget, OneIdByEqualityWithOperatorsThatLeaveTheAgeAlone) {
    EXPECT_TRUE(cold("update", R"({"q": {"_id": 1}, "u": {"$set": {"n": 1}}})"));
    EXPECT_TRUE(cold("update", R"({"q": {"_id": {"$eq": "a"}}, "u": {"$inc": {"n": 1}}})"));
    EXPECT_TRUE(cold("update", R"({"q": {"_id": 1, "n": 2}, "u": {"$unset": {"x": 1}}})"));
    EXPECT_TRUE(cold("update", R"({"q": {"_id": 1}, "u": {"$set": {"dates": 1}}})"));
    EXPECT_TRUE(cold("delete", R"({"q": {"_id": 1}, "limit": 1})"));
    EXPECT_TRUE(cold("findAndModify", R"({"findAndModify": "orders", "query": {"_id": 1},
                                          "remove": true})"));
    EXPECT_TRUE(cold("findAndModify", R"({"findAndModify": "orders", "query": {"_id": 1},
                                          "update": {"$set": {"n": 1}}, "new": true})"));
    EXPECT_TRUE(cold("update", R"({"q": {"_id": 1}, "u": {"$set": {"n": 1}},
                                   "collation": {"locale": "simple"}})"));
}

TEST(ColdTarget, AnythingThatCouldMoveTheAgeOrTouchMoreDocumentsPromotes) {
    // The age field, a path under it, a $rename into or out of it, $currentDate.
    EXPECT_FALSE(cold("update", R"({"q": {"_id": 1}, "u": {"$set": {"date": 1}}})"));
    EXPECT_FALSE(cold("update", R"({"q": {"_id": 1}, "u": {"$set": {"meta.at": 1}}})", "meta.at"));
    EXPECT_FALSE(cold("update", R"({"q": {"_id": 1}, "u": {"$set": {"meta.x": 1}}})", "meta.at"));
    EXPECT_FALSE(cold("update", R"({"q": {"_id": 1}, "u": {"$rename": {"old": "date"}}})"));
    EXPECT_FALSE(cold("update", R"({"q": {"_id": 1}, "u": {"$rename": {"date": "old"}}})"));
    EXPECT_FALSE(cold("update", R"({"q": {"_id": 1}, "u": {"$currentDate": {"date": true}}})"));
    // Replacements and pipelines could write anything; upserts create documents.
    EXPECT_FALSE(cold("update", R"({"q": {"_id": 1}, "u": {"n": 1}})"));
    EXPECT_FALSE(cold("update", R"({"q": {"_id": 1}, "u": [{"$set": {"n": 1}}]})"));
    EXPECT_FALSE(cold("update", R"({"q": {"_id": 1}, "u": {"$set": {"n": 1}}, "upsert": true})"));
    EXPECT_FALSE(cold("findAndModify", R"({"findAndModify": "orders", "query": {"_id": 1},
                                           "update": {"n": 1}})"));
    // More than one document, or none named.
    EXPECT_FALSE(cold("update", R"({"q": {"_id": {"$in": [1, 2]}}, "u": {"$set": {"n": 1}}})"));
    EXPECT_FALSE(cold("update", R"({"q": {"n": 1}, "u": {"$set": {"n": 2}}})"));
    EXPECT_FALSE(cold("delete", R"({"q": {"_id": {"$gt": 1}}, "limit": 0})"));
    // A collation could match other _ids than the one named.
    EXPECT_FALSE(cold("delete", R"({"q": {"_id": "a"}, "limit": 1,
                                   "collation": {"locale": "en", "strength": 2}})"));
}

}  // namespace
}  // namespace halo::tiering
