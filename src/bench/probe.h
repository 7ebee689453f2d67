#pragma once
// One-shot administrative queries over libmongoc for `bench reproduce`: counts,
// sizes, waiting for a condition. Each call opens its own client (these run a few
// times per scenario, never on the measured path). Thread-safe: no shared state.
#include <cstdint>
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
StatusWith<ProxyRouting> proxyRouting(const std::string& proxyUri);

}  // namespace halo::bench
