// The store's mongod-style YAML file (`halocline store --config`): settings
// apply unless their flag was given, unknown sections and bad values are
// refused with a message, and nothing throws.
#include "store/server/config_file.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace halo::store {
namespace {

const FlagGiven kNoFlags = [](std::string_view) { return false; };

TEST(StoreConfig, AppliesAMongodStyleFile) {
    StoreOptions o;
    std::string err;
    ASSERT_TRUE(applyConfigText(R"(
storage:
  dbPath: /data/fast
  wiredTiger:
    engineConfig: {cacheSizeGB: 1.5, directIO: true, configString: "eviction_dirty_target=30"}
    collectionConfig: {blockCompressor: zlib}
net: {port: 27018, bindIp: 0.0.0.0, maxIncomingConnections: 100,
      tls: {mode: requireTLS, certificateKeyFile: s.pem}}
systemLog: {destination: file, path: /var/log/store.log, verbosity: 1}
replication: {replSetName: fast, oplogSizeMB: 64}
processManagement: {fork: false}
setParameter: {ttlMonitorSleepSecs: 5, enableTestCommands: 1}
security: {authorization: enabled}
operationProfiling: {slowOpThresholdMs: 250, slowOpSampleRate: 0.5}
)",
                                o, kNoFlags, &err))
        << err;
    EXPECT_EQ(o.dbPath, "/data/fast");
    EXPECT_EQ(o.cacheSizeGB, 1.5);
    EXPECT_TRUE(o.directIO);
    EXPECT_EQ(o.wtEngineConfigString, "eviction_dirty_target=30");
    EXPECT_EQ(o.blockCompressor, "zlib");
    EXPECT_EQ(o.port, 27018);
    EXPECT_EQ(o.bindIp, "0.0.0.0");
    EXPECT_EQ(o.maxConns, 100);
    EXPECT_EQ(o.tls.mode, net::TlsMode::requireTLS);
    EXPECT_EQ(o.tls.certificateKeyFile, "s.pem");
    EXPECT_EQ(o.logPath, "/var/log/store.log");
    EXPECT_TRUE(o.verbose);
    EXPECT_EQ(o.replSet, "fast");
    EXPECT_EQ(o.oplogSizeMB, 64);
    EXPECT_EQ(o.ttlMonitorSleepSecs, 5);
    EXPECT_TRUE(o.enableTestCommands);
    EXPECT_TRUE(o.auth);
    EXPECT_EQ(o.slowMs, 250);
    EXPECT_EQ(o.slowOpSampleRate, 0.5);
}

TEST(StoreConfig, FlagsWinOverTheFile) {
    StoreOptions o;
    o.port = 1234;
    std::string err;
    std::set<std::string_view> given = {"--port", "--auth"};
    ASSERT_TRUE(applyConfigText(
        "net: {port: 27018, bindIp: 0.0.0.0}\n"
        "security: {authorization: enabled}\n",
        o, [&](std::string_view f) { return given.count(f) > 0; }, &err))
        << err;
    EXPECT_EQ(o.port, 1234);
    EXPECT_EQ(o.bindIp, "0.0.0.0");
    EXPECT_FALSE(o.auth);
}

TEST(StoreConfig, RefusesWhatItDoesNotKnow) {
    auto refused = [](const char* yaml) {
        StoreOptions o;
        std::string err;
        EXPECT_FALSE(applyConfigText(yaml, o, kNoFlags, &err)) << yaml;
        return err;
    };
    EXPECT_EQ(refused("sharding: {clusterRole: shardsvr}\n"),
              "unrecognized config section 'sharding'");
    EXPECT_EQ(refused("security: {keyFile: /k}\n"), "unsupported option 'security.keyFile'");
    EXPECT_EQ(refused("net: {tls: {mode: sometimes}}\n"),
              "net.tls.mode: must be disabled, allowTLS, preferTLS or requireTLS");
    EXPECT_NE(refused("setParameter: {ttlMonitorSleepSecs: 0}\n").find("ttlMonitorSleepSecs"),
              std::string::npos);
    EXPECT_EQ(refused("operationProfiling: {mode: all}\n"),
              "unsupported option 'operationProfiling.mode'");
    EXPECT_EQ(refused("operationProfiling: {slowOpSampleRate: 2}\n"),
              "operationProfiling.slowOpSampleRate: must be between 0 and 1");
    // Wrong types and bad YAML are errors, not exceptions.
    EXPECT_FALSE(refused("net: {port: 70000}\n").empty());
    EXPECT_FALSE(refused("net: [1, 2]\nstorage: {dbPath: [x]}\n").empty());
    EXPECT_FALSE(refused("net: {port: 1\n").empty());
}

TEST(StoreConfig, SetParameter) {
    StoreOptions o;
    EXPECT_EQ(setParameter(o, "minSnapshotHistoryWindowInSeconds", "0"), "");
    EXPECT_EQ(o.minSnapshotHistoryWindowInSeconds, 0);
    EXPECT_NE(setParameter(o, "ttlMonitorSleepSecs", "1x"), "");
    EXPECT_NE(setParameter(o, "enableTestCommands", "yes"), "");
    EXPECT_NE(setParameter(o, "noSuchParameter", "1"), "");
}

}  // namespace
}  // namespace halo::store
