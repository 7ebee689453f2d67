#pragma once
// One-shot administrative queries over libmongoc for `bench reproduce`: counts,
// sizes, waiting for a condition. Each call opens its own client (these run a few
// times per scenario, never on the measured path). Thread-safe: no shared state.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"

namespace halo::bench {

/// `count` of documents matching `filterJson` (canonical JSON, "{}" for all).
StatusWith<int64_t> countDocuments(const std::string& uri, const std::string& db,
                                   const std::string& coll, const std::string& filterJson);

struct CollectionSize {
    int64_t count = 0;
    int64_t dataBytes = 0;
};
/// collStats count and size (bytes of BSON documents).
StatusWith<CollectionSize> collectionSize(const std::string& uri, const std::string& db,
                                          const std::string& coll);

/// Reads the proxy has routed so far (`haloclineStatus` routing totals).
struct ProxyRouting {
    int64_t fast = 0;
    int64_t archive = 0;
};

/// What `bench reproduce` reads from the proxy's `haloclineStatus`, cumulative since it
/// started. Each part is absent when the reply lacks it (a proxy without tiered
/// collections has no routing; one older than the counter has no roundTrips).
struct ProxyStatus {
    std::optional<ProxyRouting> routing;  // `routing.fast`, `routing.archive`
    // `tiers.fast.roundTrips`, `tiers.archive.roundTrips`: requests the proxy sent to each
    // tier (its workers' included).
    std::optional<int64_t> fastRoundTrips, archiveRoundTrips;
};
/// Parses a haloclineStatus reply (BSON bytes). BadValue if they are not a document;
/// absent or non-numeric fields are left empty, never guessed.
StatusWith<ProxyStatus> parseProxyStatus(const uint8_t* bson, size_t len);
StatusWith<ProxyStatus> proxyStatus(const std::string& proxyUri);

/// haloclinePauseFeeder: pauses the proxy's feeder for `millis` (0: resumes it).
Status pauseFeeder(const std::string& proxyUri, int64_t millis);
/// haloclineFlushFeeder: waits (at most `maxTimeMs`) until a lazy feeder has
/// written every document it gathered.
Status flushFeeder(const std::string& proxyUri, int64_t maxTimeMs);

}  // namespace halo::bench
