// Fuzz target for the YAML configuration parsers: the proxy's
// (tiering::parseProxyConfig, `halocline proxy --config`) and the store's
// mongod-style file (store::applyConfigText, `halocline store --config`), once
// with no flag given and once with every flag given on the command line, and
// the duration syntax beneath them. A file is operator input rather than
// network input, but neither parser may crash, hang or let an out-of-range
// value through to a running process: what parseProxyConfig accepts is
// checked against the limits it documents. Built as a libFuzzer target under
// clang (-DHALO_LIBFUZZER=ON, scripts/fuzz.sh); otherwise linked with
// config_fuzz_driver.cpp, which replays the corpus and seeded mutations.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "store/server/config_file.h"
#include "tiering/config.h"

namespace {

/// A broken property is a bug as much as a crash: report it the same way
/// (on stdout: scripts/fuzz.sh closes the target's stderr, see there).
void require(bool ok, const char* what) {
    if (ok) return;
    std::fprintf(stdout, "config_fuzz: property violated: %s\n", what);
    std::fflush(stdout);
    std::abort();
}

void checkProxyConfig(const halo::tiering::ProxyConfig& c) {
    using halo::tiering::Millis;
    require(c.port >= 0 && c.port <= 65535, "net.port in range");
    require(c.maxIncomingConnections >= 1 && c.maxIncomingConnections <= 1'000'000,
            "net.maxIncomingConnections in range");
    require(c.fastUri.rfind("mongodb", 0) == 0 && c.archiveUri.rfind("mongodb", 0) == 0,
            "tier URIs are connection strings");
    require(c.mergedReadLimit >= 0 && c.transactionPromotionLimit >= 1, "tiering limits");
    for (Millis d : {c.clockSkewGuard, c.causalWaitTimeout, c.cursorTimeout, c.lease,
                     c.evictorInterval, c.warmerInterval, c.feederLazyDelay})
        require(d.count() > 0 && d <= halo::tiering::kMaxDuration, "durations are in range");
    require(c.feederBatchSize > 0 && c.evictorMaxDocsPerSecond > 0 && c.warmerBatchSize > 0 &&
                c.warmerMaxDocsPerSecond > 0,
            "worker rates are positive");
    require(c.userCacheInvalidation.count() > 0 && c.userCacheInvalidation.count() <= 86'400'000,
            "userCacheInvalidationIntervalSecs in range");
    for (const auto& p : c.collections) {
        require(p.horizon.count() > 0 && p.horizon <= halo::tiering::kMaxDuration,
                "horizons are in range");
        auto dot = p.ns.find('.');
        require(dot != std::string::npos && dot > 0 && dot + 1 < p.ns.size(),
                "namespaces are db.coll");
        require(!p.ageField.empty() && p.ageField[0] != '$', "age fields are field names");
        require(c.policyFor(p.ns) == &p, "namespaces are unique");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    auto proxy = halo::tiering::parseProxyConfig(text);
    if (proxy.isOK()) checkProxyConfig(proxy.getValue());

    for (bool allFlags : {false, true}) {
        halo::store::StoreOptions o;
        std::string err;
        (void)halo::store::applyConfigText(
            text, o, [&](std::string_view) { return allFlags; }, &err);
    }

    // The duration syntax on its own (also used for command-line values).
    std::string_view firstLine(text);
    firstLine = firstLine.substr(0, firstLine.find('\n'));
    auto d = halo::tiering::parseDuration(firstLine);
    if (d.isOK())
        require(d.getValue().count() >= 0 && d.getValue() <= halo::tiering::kMaxDuration,
                "a parsed duration is in range");
    (void)halo::tiering::hasCredentials(firstLine);
    return 0;
}
