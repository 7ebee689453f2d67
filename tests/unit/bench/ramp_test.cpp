#include "bench/ramp.h"

#include <gtest/gtest.h>

namespace halo::bench {
namespace {

RunReport reportWith(double opsPerSec, double readP95us, int64_t failed = 0) {
    RunReport r;
    r.opsPerSec = opsPerSec;
    r.failed = failed;
    r.ops["READ"].ok = 100;
    r.ops["READ"].p95us = readP95us;
    r.overall.ok = 110;
    r.overall.p95us = readP95us * 2;
    return r;
}

TEST(RampTest, ScheduleDoublesOrAdds) {
    RampOptions o;
    o.startThreads = 1;
    o.maxThreads = 20;
    EXPECT_EQ(rampSchedule(o), (std::vector<int>{1, 2, 4, 8, 16}));
    o.addThreads = 8;
    o.startThreads = 4;
    EXPECT_EQ(rampSchedule(o), (std::vector<int>{4, 12, 20}));
    o.startThreads = 30;
    EXPECT_TRUE(rampSchedule(o).empty());
}

TEST(RampTest, StopsAtTheFirstStepOverTheThresholdAndReportsTheBestUnderIt) {
    RampOptions o;
    o.maxThreads = 64;
    o.p95Ms = 5;
    // Throughput rises then falls; p95 crosses 5 ms at 16 threads.
    std::map<int, RunReport> fake = {{1, reportWith(1000, 800)},   {2, reportWith(1900, 900)},
                                     {4, reportWith(3500, 2000)},  {8, reportWith(3400, 4900)},
                                     {16, reportWith(5000, 9000)}, {32, reportWith(1, 1)}};
    std::vector<int> visited;
    auto res = runRamp(
        o,
        [&](int t) -> StatusWith<RunReport> {
            visited.push_back(t);
            return fake.at(t);
        },
        nullptr, nullptr);
    ASSERT_TRUE(res.isOK());
    EXPECT_EQ(visited, (std::vector<int>{1, 2, 4, 8, 16}));
    const RampResult& r = res.getValue();
    ASSERT_EQ(r.steps.size(), 5u);
    EXPECT_FALSE(r.steps.back().under);
    ASSERT_EQ(r.best, 2);  // 3,500 ops/s at 4 threads: the best step under 5 ms
    EXPECT_EQ(r.steps[2].threads, 4);
    EXPECT_NE(r.stopReason.find("exceeded"), std::string::npos);
    EXPECT_NE(rampSummary(r, o).find("3500 ops/s at 4 threads"), std::string::npos);
}

TEST(RampTest, AllOperationsOrOneOperation) {
    RunReport r = reportWith(100, 3000);
    EXPECT_EQ(rampP95us(r, "READ"), 3000);
    EXPECT_EQ(rampP95us(r, "ALL"), 6000);
    EXPECT_EQ(rampP95us(r, "UPDATE"), 6000);  // no updates: falls back to every operation
    RampOptions o;
    o.p95Of = "ALL";
    o.p95Ms = 5;
    o.maxThreads = 1;
    auto res = runRamp(
        o, [&](int) -> StatusWith<RunReport> { return r; }, nullptr, nullptr);
    ASSERT_TRUE(res.isOK());
    EXPECT_FALSE(res.getValue().steps[0].under);  // 6 ms over all operations
    EXPECT_EQ(res.getValue().best, -1);
}

TEST(RampTest, FailedOperationsStopTheRampAndNeverCountAsUnder) {
    RampOptions o;
    o.maxThreads = 8;
    auto res = runRamp(
        o, [&](int t) -> StatusWith<RunReport> { return reportWith(100 * t, 100, t == 2 ? 5 : 0); },
        nullptr, nullptr);
    ASSERT_TRUE(res.isOK());
    ASSERT_EQ(res.getValue().steps.size(), 2u);
    EXPECT_FALSE(res.getValue().steps[1].under);
    EXPECT_EQ(res.getValue().best, 0);
    EXPECT_NE(res.getValue().stopReason.find("failed"), std::string::npos);
    EXPECT_EQ(rampExitStatus(res.getValue(), o), kExitFailedOperations);
}

TEST(RampTest, NotFoundStopsTheRampUnlessMissesAreExpected) {
    RampOptions o;
    o.maxThreads = 8;
    auto withMisses = [](int t) -> StatusWith<RunReport> {
        RunReport r = reportWith(100 * t, 100);
        if (t == 2) {
            r.notFound = 7;
            r.ops["READ"].notFound = 7;
        }
        return r;
    };
    auto res = runRamp(o, withMisses, nullptr, nullptr);
    ASSERT_TRUE(res.isOK());
    const RampResult& r = res.getValue();
    ASSERT_EQ(r.steps.size(), 2u);
    EXPECT_FALSE(r.steps[1].under);  // fast because it read nothing: never the best step
    EXPECT_EQ(r.best, 0);
    EXPECT_NE(r.stopReason.find("NOT_FOUND: READ 7"), std::string::npos);
    EXPECT_NE(rampStepLine(r.steps[1], o).find("(7 NOT_FOUND)"), std::string::npos);
    EXPECT_EQ(rampExitStatus(r, o), kExitNotFound);
    EXPECT_NE(rampToJson(r, o, WorkloadSpec::preset("shop").getValue()).find(R"("not_found":7)"),
              std::string::npos);

    o.expectMisses = true;
    auto expected = runRamp(o, withMisses, nullptr, nullptr);
    ASSERT_TRUE(expected.isOK());
    EXPECT_EQ(expected.getValue().steps.size(), 4u);  // 1, 2, 4, 8
    EXPECT_TRUE(expected.getValue().steps[1].under);
    EXPECT_NE(rampStepLine(expected.getValue().steps[1], o).find("(7 NOT_FOUND, expected)"),
              std::string::npos);
    EXPECT_EQ(rampExitStatus(expected.getValue(), o), 0);
}

TEST(RampTest, ExitStatusSaysFailedBeforeNotFound) {
    RampOptions o;
    RampResult r;
    r.steps.resize(2);
    r.steps[0].report.notFound = 1;
    EXPECT_EQ(rampExitStatus(r, o), kExitNotFound);
    r.steps[1].report.failed = 1;
    EXPECT_EQ(rampExitStatus(r, o), kExitFailedOperations);
    r.steps[1].report.failed = 0;
    r.steps[0].report.notFound = 0;
    EXPECT_EQ(rampExitStatus(r, o), 0);
}

TEST(RampTest, StepErrorsPropagateAndJsonListsEveryStep) {
    RampOptions o;
    auto bad = runRamp(
        o, [](int) -> StatusWith<RunReport> { return Status(ErrorCode::BadValue, "no server"); },
        nullptr, nullptr);
    EXPECT_FALSE(bad.isOK());
    o.maxThreads = 2;
    auto res = runRamp(
        o, [](int) -> StatusWith<RunReport> { return reportWith(10, 10); }, nullptr,
        [](const RunReport&, int t) { return "{\"threads\":" + std::to_string(t) + "}"; });
    ASSERT_TRUE(res.isOK());
    std::string j = rampToJson(res.getValue(), o, WorkloadSpec::preset("shop").getValue());
    EXPECT_NE(j.find(R"("mode":"ramp")"), std::string::npos);
    EXPECT_NE(j.find(R"("run":{"threads":2})"), std::string::npos);
    EXPECT_NE(j.find(R"("best":{"threads":1)"), std::string::npos);  // equal ops/s: the first
}

}  // namespace
}  // namespace halo::bench
