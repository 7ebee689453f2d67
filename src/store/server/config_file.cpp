#include "store/server/config_file.h"

#include <yaml-cpp/yaml.h>

#include <exception>
#include <type_traits>

namespace halo::store {

std::string setParameter(StoreOptions& o, const std::string& name, const std::string& value) {
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

namespace {

/// Applies the parsed document; yaml-cpp throws on a value of the wrong type,
/// which the callers turn into the error.
bool applyRoot(YAML::Node root, StoreOptions& o, const FlagGiven& given, std::string* err) {
    auto set = [&](const char* flag, auto& field, YAML::Node n) {
        if (n && !given(flag)) field = n.as<std::remove_reference_t<decltype(field)>>();
    };
    if (auto storage = root["storage"]) {
        set("--dbpath", o.dbPath, storage["dbPath"]);
        if (auto wt = storage["wiredTiger"]) {
            if (auto ec = wt["engineConfig"]) {
                set("--wiredTigerCacheSizeGB", o.cacheSizeGB, ec["cacheSizeGB"]);
                set("--directIO", o.directIO, ec["directIO"]);
                set("--wiredTigerEngineConfigString", o.wtEngineConfigString, ec["configString"]);
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
            if (tls["mode"] && !given("--tlsMode")) {
                auto mode = net::parseTlsMode(tls["mode"].as<std::string>());
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
        if (sl["verbosity"] && !given("--verbose")) o.verbose = sl["verbosity"].as<int>() > 0;
    }
    if (auto prof = root["operationProfiling"]) {
        for (auto it = prof.begin(); it != prof.end(); ++it) {
            std::string k = it->first.as<std::string>();
            if (k != "slowOpThresholdMs" && k != "slowOpSampleRate") {
                // mode (profiling every database from the start) and filter are
                // set per database with the profile command instead.
                *err = "unsupported option 'operationProfiling." + k + "'";
                return false;
            }
        }
        set("--slowms", o.slowMs, prof["slowOpThresholdMs"]);
        set("--slowOpSampleRate", o.slowOpSampleRate, prof["slowOpSampleRate"]);
        if (o.slowOpSampleRate < 0.0 || o.slowOpSampleRate > 1.0) {
            *err = "operationProfiling.slowOpSampleRate: must be between 0 and 1";
            return false;
        }
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
        if (auto a = sec["authorization"]; a && !given("--auth")) {
            std::string v = a.as<std::string>();
            if (v != "enabled" && v != "disabled") {
                *err = "security.authorization must be 'enabled' or 'disabled', not '" + v + "'";
                return false;
            }
            o.auth = v == "enabled";
        }
    }
    for (auto it = root.begin(); it != root.end(); ++it) {
        std::string k = it->first.as<std::string>();
        if (k != "storage" && k != "net" && k != "systemLog" && k != "replication" &&
            k != "processManagement" && k != "setParameter" && k != "security" &&
            k != "operationProfiling") {
            *err = "unrecognized config section '" + k + "'";
            return false;
        }
    }
    return true;
}

}  // namespace

bool applyConfigText(std::string_view yamlText, StoreOptions& o, const FlagGiven& given,
                     std::string* err) {
    try {
        return applyRoot(YAML::Load(std::string(yamlText)), o, given, err);
    } catch (const std::exception& e) {
        *err = e.what();
        return false;
    }
}

bool applyConfigFile(const std::string& path, StoreOptions& o, const FlagGiven& given,
                     std::string* err) {
    try {
        return applyRoot(YAML::LoadFile(path), o, given, err);
    } catch (const std::exception& e) {
        *err = e.what();
        return false;
    }
}

}  // namespace halo::store
