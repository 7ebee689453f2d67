// halocline: one executable, subcommands. `halocline store` runs the embedded
// MongoDB-compatible store.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "bench/commands.h"
#include "cli/tiering_cmds.h"
#include "common/log.h"
#include "store/server/config_file.h"
#include "store/server/store.h"

namespace {

halo::store::Store* g_store = nullptr;

void onSignal(int) {
    if (g_store) g_store->requestShutdown();
}

int runStore(halo::store::StoreOptions opts) {
    halo::log::init(opts.logPath, opts.verbose);
    halo::store::Store store(opts);
    g_store = &store;
    std::signal(SIGINT, onSignal);
    std::signal(SIGTERM, onSignal);
    std::signal(SIGPIPE, SIG_IGN);
    halo::Status s = store.start();
    if (!s.isOK()) {
        halo::log::error("control", 20568, "Error during startup",
                         "{\"error\":" + halo::log::quote(s.toString()) + "}");
        store.stop();
        return 1;
    }
    store.waitForShutdown();
    store.stop();
    g_store = nullptr;
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Halocline: storage tiering for MongoDB"};
    app.require_subcommand(1);

    halo::store::StoreOptions so;
    std::string config;
    auto* store =
        app.add_subcommand("store", "Run the embedded MongoDB-compatible store (WiredTiger)");
    store->add_option("--config,-f", config, "mongod-style YAML configuration file");
    store->add_option("--port", so.port, "TCP port to listen on (0 picks a free port)")
        ->capture_default_str();
    store->add_option("--bind_ip", so.bindIp, "Comma-separated addresses to listen on")
        ->capture_default_str();
    store->add_option("--dbpath", so.dbPath, "Directory for data files")->capture_default_str();
    store
        ->add_option("--maxConns", so.maxConns,
                     "Most simultaneous connections; more are closed at once (as mongod)")
        ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}))
        ->capture_default_str();
    store
        ->add_option("--slowms", so.slowMs,
                     "Operations slower than this many ms are logged (\"Slow query\") and "
                     "profiled at level 1")
        ->capture_default_str();
    store
        ->add_option("--slowOpSampleRate", so.slowOpSampleRate,
                     "Fraction of slow operations logged and profiled")
        ->check(CLI::Range(0.0, 1.0))
        ->capture_default_str();
    store->add_option("--wiredTigerCacheSizeGB", so.cacheSizeGB, "WiredTiger cache size in GB")
        ->capture_default_str();
    store
        ->add_option("--wiredTigerCollectionBlockCompressor", so.blockCompressor,
                     "Block compressor: snappy, zlib or none")
        ->check(CLI::IsMember({"snappy", "zlib", "none"}))
        ->capture_default_str();
    store->add_flag("--directIO", so.directIO,
                    "Use direct I/O for data files (bypass the OS page cache)");
    store->add_option("--wiredTigerEngineConfigString", so.wtEngineConfigString,
                      "WiredTiger configuration appended to the store's own (as mongod), "
                      "e.g. eviction_dirty_target=30,eviction_dirty_trigger=60");
    store->add_option("--logpath", so.logPath, "Log file (default: stdout)");
    store->add_flag("--verbose,-v", so.verbose, "Debug logging");
    store->add_option("--replSet", so.replSet, "Replica set name (single-member replica set)");
    store->add_option("--oplogSize", so.oplogSizeMB, "Oplog size in MB")->capture_default_str();
    store->add_option("--cursorTimeoutMillis", so.cursorTimeoutMillis, "Idle cursor timeout")
        ->capture_default_str();
    store
        ->add_option("--threads", so.threads,
                     "Command threads (0: 8; commands block on disk reads and log syncs)")
        ->capture_default_str();
    std::string tlsMode = "disabled";
    store
        ->add_option("--tlsMode", tlsMode,
                     "TLS for client connections: disabled, allowTLS, preferTLS (both accept "
                     "TLS and plain clients) or requireTLS")
        ->check(CLI::IsMember({"disabled", "allowTLS", "preferTLS", "requireTLS"}))
        ->capture_default_str();
    store->add_option("--tlsCertificateKeyFile", so.tls.certificateKeyFile,
                      "PEM file with the server certificate and its private key");
    store->add_option("--tlsCertificateKeyFilePassword", so.tls.certificateKeyFilePassword,
                      "Password of an encrypted key in --tlsCertificateKeyFile");
    store->add_option("--tlsCAFile", so.tls.caFile,
                      "PEM file of the CA(s) that client certificates must come from; clients "
                      "must present one unless --tlsAllowConnectionsWithoutCertificates");
    store->add_flag("--tlsAllowConnectionsWithoutCertificates",
                    so.tls.allowConnectionsWithoutCertificates,
                    "With --tlsCAFile: verify client certificates when presented, but accept "
                    "clients without one");
    so.tls.flagNames = true;

    std::vector<std::string> parameters;
    store->add_option("--setParameter", parameters,
                      "Server parameter NAME=VALUE (ttlMonitorSleepSecs: TTL monitor period; "
                      "minSnapshotHistoryWindowInSeconds; enableTestCommands=1: test commands "
                      "such as configureFailPoint)");
    store->add_flag("--auth", so.auth,
                    "Require authentication (SCRAM-SHA-256/SCRAM-SHA-1) and enforce roles; "
                    "with no user yet, a localhost connection may create the first one");

    // halocline bench load|run|ramp|report|reproduce (src/bench/).
    auto bench = halo::bench::BenchCommand::add(app);

    halo::cli::TieringCommands tiering;
    halo::cli::addTieringCommands(app, tiering);

    CLI11_PARSE(app, argc, argv);

    if (int rc = halo::cli::runTieringCommands(tiering, argv[0]); rc >= 0) return rc;

    if (bench->parsed()) return bench->run();

    if (store->parsed()) {
        if (store->count("--tlsMode")) so.tls.mode = *halo::net::parseTlsMode(tlsMode);
        if (!config.empty()) {
            std::string err;
            auto given = [&](std::string_view flag) { return store->count(std::string(flag)) > 0; };
            if (!halo::store::applyConfigFile(config, so, given, &err)) {
                std::fprintf(stderr, "Error reading config file %s: %s\n", config.c_str(),
                             err.c_str());
                return 2;
            }
        }
        for (const auto& p : parameters) {
            auto eq = p.find('=');
            std::string err =
                eq == std::string::npos
                    ? "--setParameter expects NAME=VALUE, got '" + p + "'"
                    : halo::store::setParameter(so, p.substr(0, eq), p.substr(eq + 1));
            if (!err.empty()) {
                std::fprintf(stderr, "%s\n", err.c_str());
                return 2;
            }
        }
        return runStore(so);
    }
    return 0;
}
