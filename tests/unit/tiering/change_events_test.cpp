#include "tiering/change_events.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace halo::tiering {
namespace {

bson::Doc json(std::string_view j) {
    return bson::Doc::fromJsonOrDie(j);
}

OpTime ot(uint32_t secs, uint32_t inc) {
    return (static_cast<OpTime>(secs) << 32) | inc;
}

TEST(ResumeTokenTimeTest, DecodesOurStoreTokens) {
    // The store writes "82" + 16 hex digits of the timestamp + index + kind.
    auto t = resumeTokenTime(json(R"({"_data": "8265a1b2c3000000070000000300"})").get());
    ASSERT_TRUE(t);
    EXPECT_EQ(*t, ot(0x65a1b2c3, 7));
}

TEST(ResumeTokenTimeTest, DecodesMongodShapedTokens) {
    // mongod's _data is a hex KeyString: 0x82 (Timestamp) then 8 bytes big-endian,
    // then version, token type, txnOpIndex, UUID and document key.
    auto t = resumeTokenTime(
        json(
            R"({"_data": "8263515EE5000000012B022C0100296E5A1004A4F3B2C1D0E0F1A2B3C4D5E6F708091A46645F6964006463515EE54C1FE8BD29E1F2070004"})")
            .get());
    ASSERT_TRUE(t);
    EXPECT_EQ(opTimeSeconds(*t), 0x63515EE5u);
    EXPECT_EQ(opTimeIncrement(*t), 1u);
}

TEST(ResumeTokenTimeTest, RefusesOtherShapes) {
    EXPECT_FALSE(resumeTokenTime(json(R"({})").get()));
    EXPECT_FALSE(resumeTokenTime(json(R"({"_data": 5})").get()));
    EXPECT_FALSE(resumeTokenTime(json(R"({"_data": "8263515EE5"})").get()));
    EXPECT_FALSE(resumeTokenTime(json(R"({"_data": "8163515EE500000001"})").get()));
    EXPECT_FALSE(resumeTokenTime(json(R"({"_data": "8263515EE5000000zz"})").get()));
}

TEST(AppliedTimeTest, ABatchEndingOnAnEventClaimsOnlyTheTimeBefore) {
    EXPECT_EQ(appliedTimeOfBatch(ot(10, 3), false), ot(10, 3));
    EXPECT_EQ(appliedTimeOfBatch(ot(10, 3), true), ot(10, 2));
    // Increment 0: the largest time of the previous second.
    EXPECT_EQ(appliedTimeOfBatch(ot(10, 0), true), ot(9, 0xffffffffu));
    EXPECT_EQ(appliedTimeOfBatch(0, true), 0u);
}

/// A change event as the feeder's $project leaves it.
bson::Doc event(const char* op, const std::string& ns, const std::string& key, uint32_t t,
                const std::string& fullDocument = "") {
    auto dot = ns.find('.');
    std::string j = fmt::format(
        R"({{"_id": {{"_data": "82"}}, "operationType": "{}", "clusterTime": {{"$timestamp": {{"t": {}, "i": 1}}}}, "wallTime": {{"$date": {}}}, "ns": {{"db": "{}", "coll": "{}"}}, "documentKey": {{"_id": {}}}{}}})",
        op, t, static_cast<int64_t>(t) * 1000, ns.substr(0, dot), ns.substr(dot + 1), key,
        fullDocument.empty() ? "" : ", \"fullDocument\": " + fullDocument);
    return json(j);
}

std::string tomb(const std::string& ns, const std::string& id) {
    return fmt::format(R"({{"ns": "{}", "id": {}}})", ns, id);
}

std::vector<std::string> idsOf(const TouchedIds& t, const std::string& ns) {
    std::vector<std::string> out;
    auto it = t.byNs.find(ns);
    if (it == t.byNs.end()) return out;
    for (const auto& id : it->second) out.push_back(id.toJson());
    return out;
}

class ClassifierTest : public ::testing::Test {
  protected:
    ChangeBatchClassifier c{{"app.orders", "app.events"}, Metadata{}};
};

TEST_F(ClassifierTest, CollectsDistinctIdsPerTieredCollection) {
    std::vector<bson::Doc> b;
    b.push_back(event("insert", "app.orders", "1", 100, R"({})"));
    b.push_back(event("update", "app.orders", "1", 101));
    b.push_back(event("delete", "app.orders", "2", 102));
    b.push_back(event("replace", "app.events", R"("x")", 103, R"({})"));
    b.push_back(event("insert", "app.other", "9", 104, R"({})"));
    TouchedIds t = c.classify(b);
    EXPECT_EQ(t.events, 5);
    EXPECT_EQ(idsOf(t, "app.orders"),
              (std::vector<std::string>{R"({ "v" : 1 })", R"({ "v" : 2 })"}));
    EXPECT_EQ(idsOf(t, "app.events"), (std::vector<std::string>{R"({ "v" : "x" })"}));
    EXPECT_EQ(t.byNs.count("app.other"), 0u);
    EXPECT_EQ(t.lastTime, ot(104, 1));
    EXPECT_EQ(t.lastWallMs, 104000);
}

TEST_F(ClassifierTest, ATombstoneWriteTouchesTheDocumentItNames) {
    std::vector<bson::Doc> b;
    b.push_back(event("insert", "halocline.tombstones", tomb("app.orders", "7"), 100, R"({})"));
    b.push_back(event("replace", "halocline.tombstones", tomb("app.events", "8"), 101, R"({})"));
    b.push_back(event("insert", "halocline.tombstones", tomb("app.other", "9"), 102, R"({})"));
    TouchedIds t = c.classify(b);
    EXPECT_EQ(idsOf(t, "app.orders"), (std::vector<std::string>{R"({ "v" : 7 })"}));
    EXPECT_EQ(idsOf(t, "app.events"), (std::vector<std::string>{R"({ "v" : 8 })"}));
    EXPECT_EQ(t.byNs.count("app.other"), 0u);
}

TEST_F(ClassifierTest, RemovingATombstoneOrOtherEventsTouchNothing) {
    // The feeder sees every event of the fast tier: its own tombstone cleanup,
    // pins, state documents, and non-CRUD events of tiered collections.
    std::vector<bson::Doc> b;
    b.push_back(event("delete", "halocline.tombstones", tomb("app.orders", "7"), 100));
    b.push_back(event("insert", "halocline.pins", R"("p1")", 101, R"({})"));
    b.push_back(event("update", "halocline.state", R"("lease")", 102));
    b.push_back(event("drop", "app.orders", "1", 103));
    TouchedIds t = c.classify(b);
    EXPECT_EQ(t.events, 4);
    EXPECT_TRUE(t.byNs.empty());
    EXPECT_FALSE(t.demanded);
    EXPECT_EQ(t.lastTime, ot(103, 1));
}

TEST_F(ClassifierTest, AProxysDemandIsNoticedAndTouchesNothing) {
    // A lazy feeder writes what it gathered when a proxy updates this state document.
    std::vector<bson::Doc> b;
    b.push_back(event("insert", "app.orders", "1", 100, R"({})"));
    b.push_back(event("update", "halocline.state", R"("feederDemand")", 101));
    TouchedIds t = c.classify(b);
    EXPECT_TRUE(t.demanded);
    EXPECT_EQ(idsOf(t, "app.orders"), (std::vector<std::string>{R"({ "v" : 1 })"}));
    b.clear();
    b.push_back(event("update", "other.state", R"("feederDemand")", 102));
    EXPECT_FALSE(c.classify(b).demanded);
}

TEST_F(ClassifierTest, SkipsTheInsertOfAPromotion) {
    std::vector<bson::Doc> b;
    // One promotion transaction: guard insert, document insert (same cluster time).
    b.push_back(event("insert", "halocline.tombstones", tomb("app.orders", "1"), 100,
                      R"({"promote": true})"));
    b.push_back(event("insert", "app.orders", "1", 100, R"({})"));
    // A later insert of the same id is an application write.
    b.push_back(event("insert", "app.orders", "2", 100, R"({})"));
    TouchedIds t = c.classify(b);
    EXPECT_EQ(t.promotionsSkipped, 1);
    EXPECT_EQ(idsOf(t, "app.orders"), (std::vector<std::string>{R"({ "v" : 2 })"}));
}

TEST_F(ClassifierTest, AGuardOnlyCoversItsOwnTransaction) {
    std::vector<bson::Doc> b;
    b.push_back(event("insert", "halocline.tombstones", tomb("app.orders", "1"), 100,
                      R"({"promote": true})"));
    b.push_back(event("insert", "app.orders", "1", 101, R"({})"));
    TouchedIds t = c.classify(b);
    EXPECT_EQ(t.promotionsSkipped, 0);
    EXPECT_EQ(idsOf(t, "app.orders"), (std::vector<std::string>{R"({ "v" : 1 })"}));
}

TEST_F(ClassifierTest, AGuardCarriesAcrossABatchBoundary) {
    std::vector<bson::Doc> b1, b2;
    b1.push_back(event("insert", "halocline.tombstones", tomb("app.orders", "1"), 100,
                       R"({"promote": true})"));
    b2.push_back(event("insert", "app.orders", "1", 100, R"({})"));
    EXPECT_TRUE(c.classify(b1).byNs.empty());
    TouchedIds t = c.classify(b2);
    EXPECT_EQ(t.promotionsSkipped, 1);
    EXPECT_TRUE(t.byNs.empty());
}

TEST_F(ClassifierTest, AnUpdateInThePromotingTransactionStillCounts) {
    std::vector<bson::Doc> b;
    b.push_back(event("insert", "halocline.tombstones", tomb("app.orders", "1"), 100,
                      R"({"promote": true})"));
    b.push_back(event("insert", "app.orders", "1", 100, R"({})"));
    b.push_back(event("update", "app.orders", "1", 100));
    TouchedIds t = c.classify(b);
    EXPECT_EQ(idsOf(t, "app.orders"), (std::vector<std::string>{R"({ "v" : 1 })"}));
}

TEST(AgeTest, AgesOfDatesAndObjectIds) {
    auto d = json(
        R"({"a": {"$date": 1700000000123}, "b": {"$oid": "6553f100aaaaaaaaaaaaaaaa"}, "c": 5})");
    bson_iter_t it;
    ASSERT_TRUE(bson_iter_init_find(&it, d.get(), "a"));
    EXPECT_EQ(ageMillis(*bson_iter_value(&it)), 1700000000123);
    ASSERT_TRUE(bson_iter_init_find(&it, d.get(), "b"));
    EXPECT_EQ(ageMillis(*bson_iter_value(&it)), int64_t{0x6553f100} * 1000);
    ASSERT_TRUE(bson_iter_init_find(&it, d.get(), "c"));
    EXPECT_FALSE(ageMillis(*bson_iter_value(&it)));
}

TEST(AgeTest, ObjectIdBoundsStartTheirSecond) {
    bson::Doc d;
    appendAgeBound(d.mut(), "x", true, int64_t{0x6553f100} * 1000 + 999);
    appendAgeBound(d.mut(), "y", false, 1234);
    EXPECT_EQ(
        d.toJson(),
        R"({ "x" : { "$oid" : "6553f1000000000000000000" }, "y" : { "$date" : "1970-01-01T00:00:01.234Z" } })");
}

}  // namespace
}  // namespace halo::tiering
