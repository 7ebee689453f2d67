// halocline: one executable, subcommands. `halocline store` runs the embedded
// MongoDB-compatible store.
#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "bench/commands.h"
#include "cli/tiering_cmds.h"
#include "common/log.h"
#include "store/server/store.h"

namespace {

halo::store::Store* g_store = nullptr;

void onSignal(int) {
    if (g_store) g_store->requestShutdown();
}

/// One mongod server parameter (--setParameter name=value, YAML setParameter).
/// Empty when applied, else the error.
std::string setParameter(halo::store::StoreOptions& o, const std::string& name,
                         const std::string& value) {
    if (name == "ttlMonitorSleepSecs") {
        try {
            size_t used = 0;
            int v = std::stoi(value, &used);
            if (used == value.size() && v >= 1) {
                o.ttlMonitorSleepSecs = v;
                return "";
            }
        } catch (const std::exception&) {
        }
        return "setParameter ttlMonitorSleepSecs: expected a whole number of seconds >= 1, got '" +
               value + "'";
    }
    if (name == "minSnapshotHistoryWindowInSeconds") {
        try {
            size_t used = 0;
            int v = std::stoi(value, &used);
            if (used == value.size() && v >= 0) {
                o.minSnapshotHistoryWindowInSeconds = v;
                return "";
            }
        } catch (const std::exception&) {
        }
        return "setParameter minSnapshotHistoryWindowInSeconds: expected a whole number of "
               "seconds >= 0, got '" +
               value + "'";
    }
    if (name == "enableTestCommands") {
        // A boolean server parameter, spelled as mongod accepts it.
        if (value == "1" || value == "true") {
            o.enableTestCommands = true;
            return "";
        }
        if (value == "0" || value == "false") {
            o.enableTestCommands = false;
            return "";
        }
        return "setParameter enableTestCommands: expected true, false, 1 or 0, got '" + value + "'";
    }
    return "Unknown --setParameter '" + name +
           "' (this store knows ttlMonitorSleepSecs, minSnapshotHistoryWindowInSeconds, "
           "enableTestCommands)";
}

/// Applies a mongod-style YAML config (storage.dbPath, net.port, net.bindIp,
/// storage.wiredTiger.engineConfig.cacheSizeGB, ...). Flags given on the command
/// line win over the file.
bool applyConfig(const std::string& path, halo::store::StoreOptions& o, const CLI::App& app,
                 std::string* err) {
    try {
        YAML::Node root = YAML::LoadFile(path);
        auto set = [&](const char* flag, auto& field, YAML::Node n) {
            if (n && app.count(flag) == 0) field = n.as<std::remove_reference_t<decltype(field)>>();
        };
        if (auto storage = root["storage"]) {
            set("--dbpath", o.dbPath, storage["dbPath"]);
            if (auto wt = storage["wiredTiger"]) {
                if (auto ec = wt["engineConfig"]) {
                    set("--wiredTigerCacheSizeGB", o.cacheSizeGB, ec["cacheSizeGB"]);
                    set("--directIO", o.directIO, ec["directIO"]);
                }
                if (auto cc = wt["collectionConfig"])
                    set("--wiredTigerCollectionBlockCompressor", o.blockCompressor,
                        cc["blockCompressor"]);
            }
        }
        if (auto net = root["net"]) {
            set("--port", o.port, net["port"]);
            set("--bind_ip", o.bindIp, net["bindIp"]);
            set("--maxConns", o.maxConns, net["maxIncomingConnections"]);
            if (auto tls = net["tls"]) {
                if (tls["mode"] && app.count("--tlsMode") == 0) {
                    auto mode = halo::net::parseTlsMode(tls["mode"].as<std::string>());
                    if (!mode) {
                        *err = "net.tls.mode: must be disabled, allowTLS, preferTLS or requireTLS";
                        return false;
                    }
                    o.tls.mode = *mode;
                }
                set("--tlsCertificateKeyFile", o.tls.certificateKeyFile, tls["certificateKeyFile"]);
                set("--tlsCertificateKeyFilePassword", o.tls.certificateKeyFilePassword,
                    tls["certificateKeyFilePassword"]);
                set("--tlsCAFile", o.tls.caFile, tls["CAFile"]);
                set("--tlsAllowConnectionsWithoutCertificates",
                    o.tls.allowConnectionsWithoutCertificates,
                    tls["allowConnectionsWithoutCertificates"]);
            }
        }
        if (auto sl = root["systemLog"]) {
            if (sl["destination"] && sl["destination"].as<std::string>() == "file")
                set("--logpath", o.logPath, sl["path"]);
            if (sl["verbosity"] && app.count("--verbose") == 0)
                o.verbose = sl["verbosity"].as<int>() > 0;
        }
        if (auto repl = root["replication"]) {
            set("--replSet", o.replSet, repl["replSetName"]);
            set("--oplogSize", o.oplogSizeMB, repl["oplogSizeMB"]);
        }
        if (auto sp = root["setParameter"]) {
            for (auto it = sp.begin(); it != sp.end(); ++it) {
                std::string name = it->first.as<std::string>();
                std::string e = setParameter(o, name, it->second.as<std::string>());
                if (!e.empty()) {
                    *err = e;
                    return false;
                }
            }
        }
        if (auto sec = root["security"]) {
            for (auto it = sec.begin(); it != sec.end(); ++it) {
                std::string k = it->first.as<std::string>();
                if (k != "authorization") {
                    *err = "unsupported option 'security." + k + "'";
                    return false;
                }
            }
            if (auto a = sec["authorization"]; a && app.count("--auth") == 0) {
                std::string v = a.as<std::string>();
                if (v != "enabled" && v != "disabled") {
                    *err =
                        "security.authorization must be 'enabled' or 'disabled', not '" + v + "'";
                    return false;
                }
                o.auth = v == "enabled";
            }
        }
        for (auto it = root.begin(); it != root.end(); ++it) {
            std::string k = it->first.as<std::string>();
            if (k != "storage" && k != "net" && k != "systemLog" && k != "replication" &&
                k != "processManagement" && k != "setParameter" && k != "security") {
                *err = "unrecognized config section '" + k + "'";
                return false;
            }
        }
    } catch (const std::exception& e) {
        *err = e.what();
        return false;
    }
    return true;
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
    store->add_option("--wiredTigerCacheSizeGB", so.cacheSizeGB, "WiredTiger cache size in GB")
        ->capture_default_str();
    store
        ->add_option("--wiredTigerCollectionBlockCompressor", so.blockCompressor,
                     "Block compressor: snappy, zlib or none")
        ->check(CLI::IsMember({"snappy", "zlib", "none"}))
        ->capture_default_str();
    store->add_flag("--directIO", so.directIO,
                    "Use direct I/O for data files (bypass the OS page cache)");
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
            if (!applyConfig(config, so, *store, &err)) {
                std::fprintf(stderr, "Error reading config file %s: %s\n", config.c_str(),
                             err.c_str());
                return 2;
            }
        }
        for (const auto& p : parameters) {
            auto eq = p.find('=');
            std::string err = eq == std::string::npos
                                  ? "--setParameter expects NAME=VALUE, got '" + p + "'"
                                  : setParameter(so, p.substr(0, eq), p.substr(eq + 1));
            if (!err.empty()) {
                std::fprintf(stderr, "%s\n", err.c_str());
                return 2;
            }
        }
        return runStore(so);
    }
    return 0;
}
