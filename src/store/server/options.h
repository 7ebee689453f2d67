#pragma once
// Start-up options of the embedded store, from flags and/or a mongod-style
// YAML config file (storage.dbPath, net.port, net.bindIp, ...).
#include <cstdint>
#include <string>

#include "net/tls_options.h"

namespace halo::store {

/// Command threads when --threads is 0. Commands block on disk reads and log
/// syncs, so more threads than cores keep the disk busy and let concurrent
/// commits share a sync (as mongod's thread per connection does).
constexpr int kDefaultThreads = 8;

struct StoreOptions {
    std::string dbPath = "./data/db";
    std::string bindIp = "127.0.0.1";
    uint16_t port = 27017;
    double cacheSizeGB = 0.25;
    std::string blockCompressor = "snappy";  // snappy | zlib | none
    bool directIO = false;
    // --wiredTigerEngineConfigString / storage.wiredTiger.engineConfig.configString,
    // as mongod: appended to wiredtiger_open's configuration, so it overrides ours.
    std::string wtEngineConfigString;
    std::string logPath;  // empty: stdout
    bool verbose = false;
    std::string replSet;  // empty: standalone
    // setParameter minSnapshotHistoryWindowInSeconds (mongod 7.0's default): how far
    // back snapshot reads at a cluster time may go.
    int minSnapshotHistoryWindowInSeconds = 300;
    int64_t oplogSizeMB = 1024;
    int cursorTimeoutMillis = 10 * 60 * 1000;
    int threads = 0;               // 0: kDefaultThreads
    int ttlMonitorSleepSecs = 60;  // setParameter ttlMonitorSleepSecs, as mongod
    net::TlsServerOptions tls;     // net.tls.* / --tls*
    bool auth = false;             // --auth / security.authorization: enabled
    // --maxConns / net.maxIncomingConnections: connections beyond it are closed at once.
    int64_t maxConns = 1'000'000;
    // --slowms / operationProfiling.slowOpThresholdMs, --slowOpSampleRate /
    // operationProfiling.slowOpSampleRate: the slow query log line's and the
    // profiler's threshold and sampling (the profile command changes them later).
    int slowMs = 100;
    double slowOpSampleRate = 1.0;
    // setParameter enableTestCommands (mongod's name): test-only commands such
    // as configureFailPoint exist only with it.
    bool enableTestCommands = false;
};

}  // namespace halo::store
