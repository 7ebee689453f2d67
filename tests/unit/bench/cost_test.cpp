#include "bench/cost.h"

#include <bson/bson.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>

#include "bench/probe.h"

namespace halo::bench {
namespace {

// A real /proc/<pid>/stat line (52 fields); utime (14) = 1234, stime (15) = 567.
constexpr const char* kStat =
    "4242 (halocline) S 1 4242 4242 0 -1 4194560 12345 0 0 0 1234 567 0 0 20 0 66 0 "
    "987654 2147483648 12345 18446744073709551615 1 1 0 0 0 0 0 4096 17638 0 0 0 17 1 0 0 0 "
    "0 0 0 0 0 0 0 0 0 0\n";

TEST(CostTest, ProcStatCpuIsUtimePlusStime) {
    EXPECT_EQ(parseProcStatCpuTicks(kStat), 1234 + 567);
    // The command may hold spaces and parentheses: fields count from the last ')'.
    EXPECT_EQ(parseProcStatCpuTicks("7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 10 20 0 0 20 0 1 0"), 30);
    EXPECT_EQ(parseProcStatCpuTicks(""), -1);
    EXPECT_EQ(parseProcStatCpuTicks("4242 (halocline) S 1 2 3"), -1);  // cut short
    EXPECT_EQ(parseProcStatCpuTicks("7 (x) R 1 7 7 0 -1 0 0 0 0 0 1x 20 0"), -1);
    EXPECT_EQ(parseProcStatCpuTicks("7 (x) R 1 7 7 0 -1 0 0 0 0 0 -5 20 0"), -1);
}

TEST(CostTest, ThisProcessHasReadableCpuAndAMissingOneHasNone) {
    int64_t a = processCpuTicks(::getpid());
    ASSERT_GE(a, 0);
    EXPECT_GE(processCpuTicks(::getpid()), a);  // cumulative
    EXPECT_EQ(processCpuTicks(0), -1);          // /proc/0 does not exist
    EXPECT_GT(clockTicksPerSecond(), 0);
}

TEST(CostTest, PerOperationArithmetic) {
    EXPECT_DOUBLE_EQ(perOp(100, 400, 150), 2.0);
    EXPECT_DOUBLE_EQ(perOp(5, 5, 10), 0.0);
    EXPECT_TRUE(std::isnan(perOp(-1, 400, 150)));   // a sample is missing
    EXPECT_TRUE(std::isnan(perOp(400, 100, 150)));  // went backwards: a restarted process
    EXPECT_TRUE(std::isnan(perOp(100, 400, 0)));    // nothing completed
    // 250 ticks at 100 per second = 2.5 s of CPU over 10,000 operations = 250 us each.
    EXPECT_DOUBLE_EQ(cpuMicrosPerOp(1000, 1250, 10'000, 100), 250.0);
    EXPECT_DOUBLE_EQ(cpuMicrosPerOp(0, 3, 1, 1000), 3000.0);
    EXPECT_TRUE(std::isnan(cpuMicrosPerOp(0, 3, 1, 0)));
}

TEST(CostTest, CostBetweenTwoSamples) {
    CostSample before, after;
    before.cpuTicks = {100, 50, 20, -1};
    after.cpuTicks = {300, 150, 30, -1};  // no archive process sampled
    before.fastRoundTrips = 1000;
    after.fastRoundTrips = 3000;
    before.archiveRoundTrips = 10;
    after.archiveRoundTrips = 510;
    OpCost c = costBetween(before, after, 2000, true, 100);
    EXPECT_EQ(c.ops, 2000);
    EXPECT_DOUBLE_EQ(c.cpuUsPerOp[0], 1000.0);  // 2 s / 2,000 ops
    EXPECT_DOUBLE_EQ(c.cpuUsPerOp[1], 500.0);
    EXPECT_DOUBLE_EQ(c.cpuUsPerOp[2], 50.0);
    EXPECT_TRUE(std::isnan(c.cpuUsPerOp[3]));
    EXPECT_DOUBLE_EQ(c.roundTripsPerOp[0], 1.0);
    EXPECT_DOUBLE_EQ(c.roundTripsPerOp[1], 0.25);
    EXPECT_DOUBLE_EQ(totalCpuUsPerOp(c), 1550.0);
    EXPECT_EQ(cpuText(c), "1000|500|50|-");
    EXPECT_EQ(roundTripsText(c), "1.00|0.25");
    EXPECT_EQ(
        costJsonFields(c),
        R"("measured_ops":2000,"cpu_us_per_op":{"client":1000.000,"proxy":500.000,"fast":50.000,"archive":null},"round_trips_per_op":{"fast":1.000,"archive":0.250})");

    // A proxy without the counter: n/a, never a guess.
    after.archiveRoundTrips.reset();
    OpCost na = costBetween(before, after, 2000, true, 100);
    EXPECT_EQ(roundTripsText(na), "1.00|n/a");
    EXPECT_NE(costJsonFields(na).find(R"("round_trips_per_op":{"fast":1.000,"archive":null})"),
              std::string::npos);
    // No proxy at all (archive alone): round trips do not apply.
    OpCost alone = costBetween(before, after, 2000, false, 100);
    EXPECT_EQ(roundTripsText(alone), "-|-");
    EXPECT_NE(costJsonFields(alone).find(R"("round_trips_per_op":null)"), std::string::npos);
    EXPECT_TRUE(std::isnan(totalCpuUsPerOp(OpCost{})));
    EXPECT_EQ(joinPerOp({1.234, OpCost::kNaN}, 1, "n/a"), "1.2|n/a");
}

/// BSON bytes of `json` (owned by the returned document).
bson_t* fromJson(const char* json) {
    bson_error_t err;
    bson_t* b = bson_new_from_json(reinterpret_cast<const uint8_t*>(json), -1, &err);
    EXPECT_NE(b, nullptr) << err.message;
    return b;
}

TEST(CostTest, ProxyStatusReadsRoundTripsWhenPresent) {
    bson_t* with = fromJson(
        R"({"tiers":{"fast":{"reachable":true,"primary":"h:1","roundTrips":{"$numberLong":"123456789012"}},)"
        R"("archive":{"reachable":true,"primary":"h:2","roundTrips":{"$numberLong":"42"}}},)"
        R"("routing":{"fast":{"$numberLong":"7"},"archive":{"$numberLong":"3"}},"ok":1})");
    auto s = parseProxyStatus(bson_get_data(with), with->len);
    ASSERT_TRUE(s.isOK());
    ASSERT_TRUE(s.getValue().fastRoundTrips.has_value());
    EXPECT_EQ(*s.getValue().fastRoundTrips, 123456789012);
    EXPECT_EQ(*s.getValue().archiveRoundTrips, 42);
    ASSERT_TRUE(s.getValue().routing.has_value());
    EXPECT_EQ(s.getValue().routing->fast, 7);
    EXPECT_EQ(s.getValue().routing->archive, 3);
    bson_destroy(with);

    // Today's proxy: tiers without the counter. Round trips absent, routing still read.
    bson_t* without = fromJson(
        R"({"tiers":{"fast":{"reachable":true,"primary":"h:1"},"archive":{"reachable":true}},)"
        R"("routing":{"fast":1,"archive":2},"ok":1})");
    auto t = parseProxyStatus(bson_get_data(without), without->len);
    ASSERT_TRUE(t.isOK());
    EXPECT_FALSE(t.getValue().fastRoundTrips.has_value());
    EXPECT_FALSE(t.getValue().archiveRoundTrips.has_value());
    EXPECT_EQ(t.getValue().routing->archive, 2);
    bson_destroy(without);

    // A counter of the wrong type is not a number of round trips; no routing, no tiers.
    bson_t* odd = fromJson(R"({"tiers":{"fast":{"roundTrips":"many"}},"ok":1})");
    auto u = parseProxyStatus(bson_get_data(odd), odd->len);
    ASSERT_TRUE(u.isOK());
    EXPECT_FALSE(u.getValue().fastRoundTrips.has_value());
    EXPECT_FALSE(u.getValue().routing.has_value());
    bson_destroy(odd);

    const uint8_t garbage[] = {1, 2, 3};
    EXPECT_FALSE(parseProxyStatus(garbage, sizeof garbage).isOK());
}

}  // namespace
}  // namespace halo::bench
