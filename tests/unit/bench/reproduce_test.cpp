#include "bench/reproduce.h"

#include <gtest/gtest.h>

#include "bench/child_process.h"
#include "bench/confinement.h"

namespace halo::bench {
namespace {

TEST(ReproduceTest, MeanTimelineIsAsLongAsTheShortestRun) {
    auto m = meanTimeline({{10, 20, 30}, {20, 40}});
    EXPECT_EQ(m, (std::vector<double>{15, 30}));
    EXPECT_TRUE(meanTimeline({}).empty());
}

TEST(ReproduceTest, PassingSecondIsWhenTieredStaysAhead) {
    std::vector<double> alone(30, 100);
    std::vector<double> tiered(30, 50);
    EXPECT_EQ(passingSecond(alone, tiered, 1, 5), -1);
    for (size_t i = 10; i < 30; ++i) tiered[i] = 200;
    EXPECT_EQ(passingSecond(alone, tiered, 1, 5), 10);
    // A 5-second moving average needs a few seconds to catch up.
    EXPECT_EQ(passingSecond(alone, tiered, 5, 5), 11);  // (3 x 50 + 2 x 200) / 5 > 100
    // A one-second blip ahead does not count as passing.
    tiered[3] = 1000;
    EXPECT_EQ(passingSecond(alone, tiered, 1, 5), 10);
    // Ahead for the rest of a run shorter than `hold` counts.
    EXPECT_EQ(passingSecond({1, 1, 1}, {0, 2, 2}, 1, 10), 1);
}

TEST(ReproduceTest, HorizonUnits) {
    EXPECT_EQ(parseHorizonMillis("30d"), 30LL * 86400000);
    EXPECT_EQ(parseHorizonMillis("12h"), 12LL * 3600000);
    EXPECT_EQ(parseHorizonMillis("90m"), 90LL * 60000);
    EXPECT_EQ(parseHorizonMillis("45s"), 45000);
    EXPECT_EQ(parseHorizonMillis("d"), -1);
    EXPECT_EQ(parseHorizonMillis("3w"), -1);
    EXPECT_EQ(parseHorizonMillis("-3d"), -1);
}

TEST(ReproduceTest, ProxyConfigFollowsTheProxyInterface) {
    std::string tiered = proxyConfigYaml("mongodb://127.0.0.1:1/?replicaSet=fast",
                                         "mongodb://127.0.0.1:2/?replicaSet=archive", "30d", true);
    EXPECT_NE(tiered.find("net: {bindIp: 127.0.0.1, port: 0}"), std::string::npos);
    EXPECT_NE(tiered.find("fast: {uri: \"mongodb://127.0.0.1:1/?replicaSet=fast\"}"),
              std::string::npos);
    EXPECT_NE(tiered.find("archive: {uri: \"mongodb://127.0.0.1:2/?replicaSet=archive\"}"),
              std::string::npos);
    EXPECT_NE(tiered.find("{namespace: ycsb.usertable, ageField: date, horizon: 30d}"),
              std::string::npos);
    EXPECT_NE(tiered.find("workers: {enabled: true}"), std::string::npos);
    EXPECT_NE(tiered.find("coldWrites: true"), std::string::npos);
    EXPECT_NE(proxyConfigYaml("f", "a", "30d", true, false).find("coldWrites: false"),
              std::string::npos);
    EXPECT_NE(proxyConfigYaml("f", "a", "30d", true, true, "lazy", "20s")
                  .find("workers: {enabled: true, feeder: {mode: lazy, lazyDelay: 20s}}"),
              std::string::npos);
    EXPECT_NE(proxyConfigYaml("f", "a", "30d", true, true, "eager")
                  .find("workers: {enabled: true, feeder: {mode: eager}}"),
              std::string::npos);
    EXPECT_NE(proxyConfigYaml("f", "a", "30d", true, true, "", "10s", 50000)
                  .find("workers: {enabled: true, warmer: {maxDocsPerSecond: 50000}}"),
              std::string::npos);
    std::string pass = proxyConfigYaml("f", "a", "30d", false);
    EXPECT_NE(pass.find("collections: []"), std::string::npos);
    EXPECT_NE(pass.find("workers: {enabled: false}"), std::string::npos);
}

TEST(ReproduceTest, DefaultsDependOnTheMode) {
    ReproduceOptions full = resolveDefaults({});
    EXPECT_EQ(full.recordCount, 10'000'000);
    EXPECT_EQ(full.archiveCacheGB, 0.25);
    EXPECT_EQ(full.archiveMemoryMB, 256 + kArchiveStoreOverheadMB);
    ReproduceOptions q;
    q.quick = true;
    q.seconds = 7;
    q = resolveDefaults(q);
    EXPECT_EQ(q.recordCount, 200'000);
    EXPECT_EQ(q.seconds, 7);  // given values win
}

TEST(ReproduceTest, ListeningPortComesOnlyFromTheWaitingLine) {
    EXPECT_EQ(
        parseListeningPort(
            R"({"t":{},"s":"I","c":"network","id":23016,"msg":"Waiting for connections","attr":{"port":38853,"ssl":"off"}})"),
        38853);
    // The start-up line also carries "port" (the requested 0): not the listening port.
    EXPECT_FALSE(
        parseListeningPort(R"({"msg":"Halocline store starting","attr":{"pid":1,"port":0}})")
            .has_value());
    EXPECT_FALSE(
        parseListeningPort(R"({"msg":"Waiting for connections","attr":{"port":0}})").has_value());
    EXPECT_FALSE(parseListeningPort("Waiting for connections").has_value());
    EXPECT_EQ(parseListeningPort(
                  R"({"msg": "Waiting for connections", "attr": {"ssl": "off", "port": 4242}})"),
              4242);
    EXPECT_FALSE(
        parseListeningPort(R"({"msg":"Waiting for connectionsX","attr":{"port":1}})").has_value());
}

TEST(ReproduceTest, CgroupParsers) {
    std::string self = "9:name=systemd:/\n7:blkio:/\n4:memory:/process_api/abc\n2:cpu,cpuacct:/x\n";
    EXPECT_EQ(cgroupPathOf(self, "memory"), "/process_api/abc");
    EXPECT_EQ(cgroupPathOf(self, "blkio"), "/");
    EXPECT_EQ(cgroupPathOf(self, "cpuacct"), "/x");
    EXPECT_EQ(cgroupPathOf(self, "pids"), "/");
    std::string io = "254:0 Read 1234\n254:0 Write 77\n254:0 Sync 1\n8:0 Read 5\nTotal 1317\n";
    EXPECT_EQ(parseIoServiced(io, "254:0", "Read"), 1234);
    EXPECT_EQ(parseIoServiced(io, "8:0", "Read"), 5);
    EXPECT_EQ(parseIoServiced(io, "9:0", "Read"), -1);
    EXPECT_EQ(parseIoServiced("Total 0\n", "254:0", "Read"), -1);
}

TEST(ReproduceTest, DiskDeviceOfAFileIsAWholeDisk) {
    auto dev = diskDeviceOf("/");
    if (!dev.isOK()) GTEST_SKIP() << dev.getStatus().reason();  // e.g. an overlay root
    EXPECT_NE(dev.getValue().find(':'), std::string::npos);
}

}  // namespace
}  // namespace halo::bench
