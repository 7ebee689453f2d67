#include "bench/workload.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace halo::bench {
namespace {

double shareInNewest(const WorkloadSpec& spec, double frac, int samples = 200000) {
    KeyChooser keys(spec, 7);
    const int64_t n = 100000;
    int64_t hot = 0;
    for (int i = 0; i < samples; ++i) {
        int64_t k = keys.next(n);
        EXPECT_GE(k, 0);
        EXPECT_LT(k, n);
        if (k >= n - static_cast<int64_t>(static_cast<double>(n) * frac)) ++hot;
    }
    return static_cast<double>(hot) / samples;
}

TEST(WorkloadTest, ConcentratedPutsNinetyNinePercentOnTheNewestNinePercent) {
    auto spec = WorkloadSpec::preset("concentrated").getValue();
    double share = shareInNewest(spec, 0.09);
    EXPECT_NEAR(share, 0.99, 0.005);
}

TEST(WorkloadTest, LatestFavoursTheNewestRecords) {
    auto spec = WorkloadSpec::preset("shop").getValue();
    EXPECT_EQ(spec.requestDistribution, "latest");
    EXPECT_GT(shareInNewest(spec, 0.09), 0.6);
    EXPECT_LT(shareInNewest(spec, 0.09), 0.95);
}

TEST(WorkloadTest, UniformSpreadsEvenly) {
    WorkloadSpec spec;
    ASSERT_TRUE(spec.set("requestdistribution", "uniform").isOK());
    EXPECT_NEAR(shareInNewest(spec, 0.5), 0.5, 0.01);
}

TEST(WorkloadTest, OperationMixFollowsProportions) {
    auto spec = WorkloadSpec::preset("shop").getValue();
    OpChooser ops(spec, 3);
    int counts[5] = {};
    const int n = 100000;
    for (int i = 0; i < n; ++i) counts[static_cast<int>(ops.next())]++;
    EXPECT_NEAR(counts[static_cast<int>(Op::Read)] / double(n), 0.85, 0.01);
    EXPECT_NEAR(counts[static_cast<int>(Op::Update)] / double(n), 0.10, 0.01);
    EXPECT_NEAR(counts[static_cast<int>(Op::Insert)] / double(n), 0.05, 0.01);
}

TEST(WorkloadTest, PropertiesAreValidated) {
    WorkloadSpec spec;
    EXPECT_TRUE(spec.set("recordcount", "123").isOK());
    EXPECT_EQ(spec.recordCount, 123);
    EXPECT_FALSE(spec.set("nosuchproperty", "1").isOK());
    EXPECT_FALSE(spec.set("recordcount", "abc").isOK());
    EXPECT_FALSE(spec.set("requestdistribution", "gaussian").isOK());
    EXPECT_FALSE(WorkloadSpec::preset("nope").isOK());
}

TEST(WorkloadTest, DatesSpreadOverTheSpanNewestLast) {
    const int64_t now = 1'800'000'000'000, span = 365LL * 24 * 3600 * 1000;
    EXPECT_EQ(dateFor(0, 1000, now, span), now - span);
    EXPECT_LT(dateFor(10, 1000, now, span), dateFor(11, 1000, now, span));
    EXPECT_EQ(dateFor(1000, 1000, now, span), now);  // inserted during the run: newest
    EXPECT_LT(keyFor(9), keyFor(10));                // keys sort in record order
}

TEST(WorkloadTest, InsertSequenceAcknowledgesOnlyWhatFinishedBelow) {
    InsertSequence seq(100);
    EXPECT_EQ(seq.acknowledged(), 100);
    int64_t a = seq.claim(), b = seq.claim(), c = seq.claim();
    EXPECT_EQ(a, 100);
    EXPECT_EQ(c, 102);
    EXPECT_EQ(seq.claimed(), 103);
    // 101 and 102 finish first: 100 is still in flight, so nothing above 99 may be read.
    seq.acknowledge(c);
    seq.acknowledge(b);
    EXPECT_EQ(seq.acknowledged(), 100);
    seq.acknowledge(a);  // now 100, 101, 102 are all there
    EXPECT_EQ(seq.acknowledged(), 103);
    seq.acknowledge(a);  // twice is harmless
    EXPECT_EQ(seq.acknowledged(), 103);
}

TEST(WorkloadTest, InsertSequenceUnderConcurrentInserts) {
    InsertSequence seq(0);
    std::vector<std::thread> ts;
    std::atomic<bool> aboveClaimed{false};
    for (int t = 0; t < 8; ++t)
        ts.emplace_back([&] {
            for (int i = 0; i < 2000; ++i) {
                int64_t r = seq.claim();
                if (seq.acknowledged() > seq.claimed()) aboveClaimed = true;
                seq.acknowledge(r);
            }
        });
    for (auto& t : ts) t.join();
    EXPECT_FALSE(aboveClaimed.load());
    EXPECT_EQ(seq.acknowledged(), 16000);
    EXPECT_EQ(seq.claimed(), 16000);
}

}  // namespace
}  // namespace halo::bench
