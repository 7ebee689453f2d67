#include "tiering/config.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

namespace halo::tiering {

const CollectionPolicy* ProxyConfig::policyFor(std::string_view ns) const {
    for (const auto& c : collections)
        if (c.ns == ns) return &c;
    return nullptr;
}

StatusWith<Millis> parseDuration(std::string_view text) {
    size_t i = 0;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
        ++i;
    if (i == 0) return Status(ErrorCode::BadValue, "not a duration: '" + std::string(text) + "'");
    double n;
    try {
        n = std::stod(std::string(text.substr(0, i)));
    } catch (...) {
        return Status(ErrorCode::BadValue, "not a duration: '" + std::string(text) + "'");
    }
    std::string_view unit = text.substr(i);
    double ms;
    if (unit.empty() || unit == "s")
        ms = n * 1000;
    else if (unit == "ms")
        ms = n;
    else if (unit == "m")
        ms = n * 60'000;
    else if (unit == "h")
        ms = n * 3'600'000;
    else if (unit == "d")
        ms = n * 86'400'000;
    else
        return Status(ErrorCode::BadValue,
                      "unknown duration unit '" + std::string(unit) + "' (use ms, s, m, h or d)");
    // Bounded before the conversion: a double beyond int64 does not convert (UB).
    if (!(ms <= static_cast<double>(kMaxDuration.count())))
        return Status(ErrorCode::BadValue,
                      "duration too long: '" + std::string(text) + "' (at most 36500d)");
    return Millis(static_cast<int64_t>(ms));
}

namespace {

struct Checker {
    std::string err;
    bool fail(const std::string& key, const std::string& what) {
        if (err.empty()) err = key + ": " + what;
        return false;
    }
    void unknownKeys(const YAML::Node& n, const std::string& prefix,
                     std::initializer_list<const char*> allowed) {
        if (!n.IsMap()) {
            fail(prefix, "must be a mapping");
            return;
        }
        std::set<std::string> ok(allowed.begin(), allowed.end());
        for (auto it = n.begin(); it != n.end(); ++it) {
            auto k = it->first.as<std::string>();
            if (!ok.count(k)) fail(prefix.empty() ? k : prefix + "." + k, "unknown setting");
        }
    }
    template <typename T>
    void get(const YAML::Node& n, const char* k, const std::string& path, T* out) {
        if (!n[k]) return;
        try {
            *out = n[k].as<T>();
        } catch (const std::exception&) {
            fail(path + "." + k, "has the wrong type");
        }
    }
    void duration(const YAML::Node& n, const char* k, const std::string& path, Millis* out,
                  bool positive = true) {
        if (!n[k]) return;
        auto d = parseDuration(n[k].as<std::string>());
        if (!d.isOK()) {
            fail(path + "." + k, d.getStatus().reason());
            return;
        }
        if (positive && d.getValue().count() <= 0) {
            fail(path + "." + k, "must be a positive duration such as 30d");
            return;
        }
        *out = d.getValue();
    }
    void positiveInt(const YAML::Node& n, const char* k, const std::string& path, int* out) {
        get(n, k, path, out);
        if (n[k] && *out <= 0) fail(path + "." + k, "must be a positive integer");
    }
};

StatusWith<ProxyConfig> parseRoot(const YAML::Node& root) {
    ProxyConfig c;
    Checker ck;
    if (!root.IsMap()) return Status(ErrorCode::BadValue, "the configuration must be a mapping");
    ck.unknownKeys(root, "",
                   {"net", "tiers", "tiering", "workers", "security", "systemLog", "setParameter"});
    if (auto net = root["net"]) {
        ck.unknownKeys(net, "net", {"bindIp", "port", "tls", "maxIncomingConnections"});
        ck.get(net, "bindIp", "net", &c.bindIp);
        ck.get(net, "maxIncomingConnections", "net", &c.maxIncomingConnections);
        if (c.maxIncomingConnections < 1 || c.maxIncomingConnections > 1'000'000)
            ck.fail("net.maxIncomingConnections", "must be between 1 and 1000000");
        ck.get(net, "port", "net", &c.port);
        if (c.port < 0 || c.port > 65535) ck.fail("net.port", "must be between 0 and 65535");
        if (auto tls = net["tls"]; tls && tls.IsMap()) {
            // mongod's names; the files are read (and checked) when the proxy starts.
            ck.unknownKeys(tls, "net.tls",
                           {"mode", "certificateKeyFile", "certificateKeyFilePassword", "CAFile",
                            "allowConnectionsWithoutCertificates"});
            std::string mode;
            ck.get(tls, "mode", "net.tls", &mode);
            if (!mode.empty()) {
                if (auto m = halo::net::parseTlsMode(mode))
                    c.tls.mode = *m;
                else
                    ck.fail("net.tls.mode", "must be disabled, allowTLS, preferTLS or requireTLS");
            }
            ck.get(tls, "certificateKeyFile", "net.tls", &c.tls.certificateKeyFile);
            ck.get(tls, "certificateKeyFilePassword", "net.tls", &c.tls.certificateKeyFilePassword);
            ck.get(tls, "CAFile", "net.tls", &c.tls.caFile);
            ck.get(tls, "allowConnectionsWithoutCertificates", "net.tls",
                   &c.tls.allowConnectionsWithoutCertificates);
            if (c.tls.enabled() && c.tls.certificateKeyFile.empty())
                ck.fail("net.tls.certificateKeyFile", "is required when net.tls.mode is " + mode);
        } else if (tls) {
            ck.fail("net.tls", "must be a mapping");
        }
    }
    auto tiers = root["tiers"];
    if (!tiers) {
        ck.fail("tiers", "is required (tiers.fast.uri and tiers.archive.uri)");
    } else {
        ck.unknownKeys(tiers, "tiers", {"fast", "archive"});
        for (const char* t : {"fast", "archive"}) {
            std::string path = std::string("tiers.") + t;
            auto n = tiers[t];
            if (!n) {
                ck.fail(path, "is required");
                continue;
            }
            ck.unknownKeys(n, path, {"uri"});
            std::string uri;
            ck.get(n, "uri", path, &uri);
            if (uri.rfind("mongodb://", 0) != 0 && uri.rfind("mongodb+srv://", 0) != 0)
                ck.fail(path + ".uri", "must be a MongoDB connection string (mongodb://...)");
            (std::string_view(t) == "fast" ? c.fastUri : c.archiveUri) = uri;
        }
    }
    if (auto t = root["tiering"]) {
        ck.unknownKeys(t, "tiering",
                       {"metadataDatabase", "clockSkewGuard", "causalWaitTimeout", "causalReads",
                        "mergedReadLimit", "coldWrites", "transactionPromotionLimit",
                        "cursorTimeout", "maxCursors", "collections"});
        ck.get(t, "metadataDatabase", "tiering", &c.metadataDb);
        ck.duration(t, "clockSkewGuard", "tiering", &c.clockSkewGuard);
        ck.duration(t, "causalWaitTimeout", "tiering", &c.causalWaitTimeout);
        ck.duration(t, "cursorTimeout", "tiering", &c.cursorTimeout);
        ck.get(t, "causalReads", "tiering", &c.causalReads);
        ck.get(t, "mergedReadLimit", "tiering", &c.mergedReadLimit);
        if (c.mergedReadLimit < 0) ck.fail("tiering.mergedReadLimit", "must be 0 or more");
        ck.get(t, "coldWrites", "tiering", &c.coldWrites);
        ck.get(t, "transactionPromotionLimit", "tiering", &c.transactionPromotionLimit);
        if (c.transactionPromotionLimit < 1)
            ck.fail("tiering.transactionPromotionLimit", "must be 1 or more");
        ck.get(t, "maxCursors", "tiering", &c.maxCursors);
        if (auto cols = t["collections"]) {
            if (!cols.IsSequence())
                ck.fail("tiering.collections", "must be a list");
            else
                for (size_t i = 0; i < cols.size(); ++i) {
                    std::string path = "tiering.collections[" + std::to_string(i) + "]";
                    auto n = cols[i];
                    ck.unknownKeys(
                        n, path,
                        {"namespace", "ageField", "horizon", "promoteOnRead", "changeStreams"});
                    CollectionPolicy p;
                    ck.get(n, "namespace", path, &p.ns);
                    auto dot = p.ns.find('.');
                    if (dot == std::string::npos || dot == 0 || dot + 1 == p.ns.size())
                        ck.fail(path + ".namespace", "must be 'database.collection'");
                    ck.get(n, "ageField", path, &p.ageField);
                    if (p.ageField.empty() || p.ageField[0] == '$')
                        ck.fail(path + ".ageField", "must name a date field, or _id");
                    if (!n["horizon"]) ck.fail(path + ".horizon", "is required (e.g. 30d)");
                    ck.duration(n, "horizon", path, &p.horizon);
                    ck.get(n, "promoteOnRead", path, &p.promoteOnRead);
                    ck.get(n, "changeStreams", path, &p.changeStreams);
                    if (c.policyFor(p.ns)) ck.fail(path + ".namespace", "appears twice");
                    c.collections.push_back(std::move(p));
                }
        }
    }
    if (auto w = root["workers"]) {
        ck.unknownKeys(w, "workers", {"enabled", "lease", "feeder", "evictor", "warmer"});
        ck.get(w, "enabled", "workers", &c.workersEnabled);
        ck.duration(w, "lease", "workers", &c.lease);
        if (auto f = w["feeder"]) {
            ck.unknownKeys(f, "workers.feeder", {"batchSize", "mode", "lazyDelay"});
            ck.positiveInt(f, "batchSize", "workers.feeder", &c.feederBatchSize);
            if (f["mode"]) {
                std::string mode;
                ck.get(f, "mode", "workers.feeder", &mode);
                if (mode == "eager" || mode == "lazy")
                    c.feederLazy = mode == "lazy";
                else
                    ck.fail("workers.feeder.mode", "must be eager or lazy");
            }
            ck.duration(f, "lazyDelay", "workers.feeder", &c.feederLazyDelay);
        }
        if (auto e = w["evictor"]) {
            ck.unknownKeys(e, "workers.evictor", {"interval", "maxDocsPerSecond"});
            ck.duration(e, "interval", "workers.evictor", &c.evictorInterval);
            ck.positiveInt(e, "maxDocsPerSecond", "workers.evictor", &c.evictorMaxDocsPerSecond);
        }
        if (auto m = w["warmer"]) {
            ck.unknownKeys(m, "workers.warmer", {"batchSize", "maxDocsPerSecond", "interval"});
            ck.positiveInt(m, "batchSize", "workers.warmer", &c.warmerBatchSize);
            ck.positiveInt(m, "maxDocsPerSecond", "workers.warmer", &c.warmerMaxDocsPerSecond);
            ck.duration(m, "interval", "workers.warmer", &c.warmerInterval);
        }
    }
    // security: client authentication is on by default whenever the proxy itself
    // holds credentials for a tier (anyone reaching it would otherwise act as them).
    c.authorization = hasCredentials(c.fastUri) || hasCredentials(c.archiveUri);
    if (auto sec = root["security"]) {
        ck.unknownKeys(sec, "security", {"authorization", "userCacheInvalidationIntervalSecs"});
        if (sec["authorization"]) {
            std::string a;
            ck.get(sec, "authorization", "security", &a);
            if (a == "enabled" || a == "disabled") {
                c.authorization = a == "enabled";
                c.authorizationExplicit = true;
            } else {
                ck.fail("security.authorization", "must be enabled or disabled");
            }
        }
        if (sec["userCacheInvalidationIntervalSecs"]) {
            int secs = 0;
            ck.positiveInt(sec, "userCacheInvalidationIntervalSecs", "security", &secs);
            if (secs > 86'400)
                ck.fail("security.userCacheInvalidationIntervalSecs", "must be at most 86400");
            c.userCacheInvalidation = Millis(int64_t{secs} * 1000);
        }
    }
    if (auto l = root["systemLog"]) {
        ck.unknownKeys(l, "systemLog", {"destination", "path", "verbosity"});
        std::string dest;
        ck.get(l, "destination", "systemLog", &dest);
        if (dest == "file") {
            ck.get(l, "path", "systemLog", &c.logPath);
            if (c.logPath.empty())
                ck.fail("systemLog.path", "is required when destination is file");
        } else if (!dest.empty() && dest != "stdout") {
            ck.fail("systemLog.destination", "must be file or stdout");
        }
        int v = 0;
        ck.get(l, "verbosity", "systemLog", &v);
        c.verbose = v > 0;
    }
    if (auto sp = root["setParameter"]) {
        // Test commands (configureFailPoint), as mongod and mongos take them.
        ck.unknownKeys(sp, "setParameter", {"enableTestCommands"});
        ck.get(sp, "enableTestCommands", "setParameter", &c.enableTestCommands);
    }
    if (!ck.err.empty()) return Status(ErrorCode::BadValue, ck.err);
    return c;
}

}  // namespace

bool hasCredentials(std::string_view uri) {
    auto scheme = uri.find("://");
    if (scheme == std::string_view::npos) return false;
    std::string_view rest = uri.substr(scheme + 3);
    auto end = rest.find_first_of("/?");
    std::string_view authority = end == std::string_view::npos ? rest : rest.substr(0, end);
    return authority.find('@') != std::string_view::npos;
}

StatusWith<ProxyConfig> parseProxyConfig(const std::string& yamlText) {
    try {
        return parseRoot(YAML::Load(yamlText));
    } catch (const std::exception& e) {
        return Status(ErrorCode::FailedToParse, std::string("invalid YAML: ") + e.what());
    }
}

StatusWith<ProxyConfig> loadProxyConfig(const std::string& path) {
    std::ifstream in(path);
    if (!in) return Status(ErrorCode::BadValue, "cannot read config file " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    return parseProxyConfig(ss.str());
}

}  // namespace halo::tiering
