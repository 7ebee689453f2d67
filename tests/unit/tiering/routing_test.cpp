// The routing proofs of docs/CONSISTENCY.md (Reads): which filters bound the
// age field from below, which are exact _id lookups, and where each read goes
// given the warm progress and the horizon.
#include <gtest/gtest.h>

#include <limits>

#include "tiering/router.h"

namespace halo::tiering {
namespace {

bson::Doc json(const std::string& s) {
    return bson::Doc::fromJsonOrDie(s);
}

CollectionPolicy datePolicy() {
    CollectionPolicy p;
    p.ns = "shop.orders";
    p.ageField = "date";
    p.horizon = Millis(30LL * 86'400'000);
    return p;
}

std::string date(int64_t ms) {
    return "{\"$date\": {\"$numberLong\": \"" + std::to_string(ms) + "\"}}";
}

TEST(AgeLowerBound, ReadsGtGteEqInAndAnd) {
    auto p = datePolicy();
    auto b = ageLowerBound(json("{\"date\": {\"$gte\": " + date(1000) + "}}").get(), p);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->ms, 1000);
    EXPECT_FALSE(b->strict);
    b = ageLowerBound(
        json("{\"date\": {\"$gt\": " + date(1000) + ", \"$lt\": " + date(5000) + "}}").get(), p);
    ASSERT_TRUE(b);
    EXPECT_TRUE(b->strict);
    b = ageLowerBound(json("{\"date\": " + date(7) + "}").get(), p);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->ms, 7);
    b = ageLowerBound(json("{\"date\": {\"$in\": [" + date(9) + ", " + date(4) + "]}}").get(), p);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->ms, 4);
    b = ageLowerBound(json("{\"$and\": [{\"x\": 1}, {\"date\": {\"$gte\": " + date(3) +
                           "}}], \"date\": {\"$gte\": " + date(2) + "}}")
                          .get(),
                      p);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->ms, 3) << "the tightest bound of the conjunction";
}

TEST(AgeLowerBound, IgnoresWhatDoesNotBoundFromBelow) {
    auto p = datePolicy();
    EXPECT_FALSE(ageLowerBound(json("{\"date\": {\"$lt\": " + date(1000) + "}}").get(), p));
    EXPECT_FALSE(ageLowerBound(
        json("{\"$or\": [{\"date\": {\"$gte\": " + date(1) + "}}, {\"x\": 1}]}").get(), p));
    EXPECT_FALSE(ageLowerBound(json("{\"date\": {\"$gte\": 5}}").get(), p))
        << "a number is not a date";
    EXPECT_FALSE(ageLowerBound(json("{\"date\": {\"$in\": [" + date(9) + ", null]}}").get(), p));
    EXPECT_FALSE(ageLowerBound(json("{\"other\": {\"$gte\": " + date(9) + "}}").get(), p));
}

TEST(AgeLowerBound, ObjectIdAgeField) {
    CollectionPolicy p = datePolicy();
    p.ageField = "_id";
    // 0x5f5e1000 seconds = 1600000000.
    auto b = ageLowerBound(
        json("{\"_id\": {\"$gte\": {\"$oid\": \"5f5e10000000000000000000\"}}}").get(), p);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->ms, 1'600'000'000'000LL);
}

TEST(ExactId, EqualityOnlyNotOperatorsOrRegex) {
    EXPECT_TRUE(exactId(json("{\"_id\": 5, \"x\": 1}").get()));
    EXPECT_TRUE(exactId(json("{\"_id\": {\"$eq\": 5}}").get()));
    EXPECT_TRUE(exactId(json("{\"_id\": {\"a\": 1}}").get())) << "an embedded document _id";
    EXPECT_FALSE(exactId(json("{\"_id\": {\"$gt\": 5}}").get()));
    EXPECT_FALSE(exactId(json("{\"_id\": {\"$regex\": \"a\"}}").get()));
    EXPECT_FALSE(exactId(json("{\"x\": 5}").get()));
}

TEST(Router, RoutesToFastOnlyAboveWhatTheFastTierProvablyHolds) {
    ProxyConfig cfg;
    cfg.collections.push_back(datePolicy());
    cfg.clockSkewGuard = Millis(60'000);
    SharedState state(cfg);
    Router r(cfg, state);
    const auto& p = cfg.collections[0];
    int64_t now = nowMillis();
    auto recent =
        json("{\"find\": \"orders\", \"filter\": {\"date\": {\"$gte\": " + date(now - 3'600'000) +
             "}}}");
    // Nothing warmed yet: nothing is proven.
    EXPECT_EQ(r.routeRead(p, "find", recent.get()).route, Route::Archive);
    // Warmed down to 2 hours ago: the last hour is provably in the fast tier.
    state.progress(p.ns)->warmLowMs = now - 2 * 3'600'000;
    EXPECT_EQ(r.routeRead(p, "find", recent.get()).route, Route::Fast);
    EXPECT_EQ(r.routeRead(p, "count",
                          json("{\"count\": \"orders\", \"query\": {\"date\": {\"$gte\": " +
                               date(now - 3'600'000) + "}}}")
                              .get())
                  .route,
              Route::Fast);
    // Older than the warm progress: the archive.
    auto old = json("{\"find\": \"orders\", \"filter\": {\"date\": {\"$gte\": " +
                    date(now - 5 * 3'600'000) + "}}}");
    EXPECT_EQ(r.routeRead(p, "find", old.get()).route, Route::Archive);
    // Fully warmed long ago: the horizon (plus the guard) is the limit.
    state.progress(p.ns)->warmLowMs = 0;
    auto nearHorizon = json("{\"find\": \"orders\", \"filter\": {\"date\": {\"$gte\": " +
                            date(now - p.horizon.count() + 1000) + "}}}");
    EXPECT_EQ(r.routeRead(p, "find", nearHorizon.get()).route, Route::Archive)
        << "within the guard";
    auto insideGuard = json("{\"find\": \"orders\", \"filter\": {\"date\": {\"$gte\": " +
                            date(now - p.horizon.count() + 120'000) + "}}}");
    EXPECT_EQ(r.routeRead(p, "find", insideGuard.get()).route, Route::Fast);
    // Exact _id lookups try the fast tier first.
    auto d = r.routeRead(p, "find", json("{\"find\": \"orders\", \"filter\": {\"_id\": 3}}").get());
    EXPECT_EQ(d.route, Route::FastThenArchive);
    // Aggregations: a leading $match proves; a $lookup sends it to the archive.
    auto agg =
        json("{\"aggregate\": \"orders\", \"pipeline\": [{\"$match\": {\"date\": {\"$gte\": " +
             date(now - 3'600'000) + "}}}, {\"$group\": {\"_id\": null}}]}");
    EXPECT_EQ(r.routeRead(p, "aggregate", agg.get()).route, Route::Fast);
    auto lookup =
        json("{\"aggregate\": \"orders\", \"pipeline\": [{\"$match\": {\"date\": {\"$gte\": " +
             date(now - 3'600'000) +
             "}}}, {\"$lookup\": {\"from\": \"x\", \"as\": \"y\", \"localField\": \"a\", "
             "\"foreignField\": \"b\"}}]}");
    EXPECT_EQ(r.routeRead(p, "aggregate", lookup.get()).route, Route::Archive);
    auto cs = json("{\"aggregate\": \"orders\", \"pipeline\": [{\"$changeStream\": {}}]}");
    auto csd = r.routeRead(p, "aggregate", cs.get());
    EXPECT_EQ(csd.route, Route::Refuse);
    EXPECT_EQ(csd.refusal.code(), ErrorCode::CommandNotSupported);
    // No age bound at all: the archive.
    EXPECT_EQ(
        r.routeRead(p, "find", json("{\"find\": \"orders\", \"filter\": {\"x\": 1}}").get()).route,
        Route::Archive);
}

}  // namespace
}  // namespace halo::tiering
