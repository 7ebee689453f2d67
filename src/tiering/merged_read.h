#pragma once
// Merged reads (docs/CONSISTENCY.md, Merged reads): a find that must look at
// the archive is answered from both tiers at once instead of waiting for the
// feeder. The archive's matches stand for the documents the fast tier neither
// holds nor has tombstoned (invariant A, case 3); the fast tier's own version
// stands for every other; a departure (eviction, tombstone removal) during the
// read moves the collection's epoch, and the read starts again. Sort, skip,
// limit and projection are applied to the merged stream with the store's pure
// query library.
#include <algorithm>
#include <asio.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bson/doc.h"
#include "common/status.h"
#include "store/query/matcher.h"
#include "store/query/projection.h"
#include "store/query/sort.h"
#include "tiering/protocol.h"

namespace halo::tiering {

/// A find command a merged read can answer, parsed.
struct MergedFind {
    std::string db;
    std::string coll;
    bson::Doc filter;
    bson::Doc sortSpec;        // empty: no sort
    bson::Doc projectionSpec;  // applied by the proxy, never sent
    std::unique_ptr<query::Matcher> matcher;
    std::optional<query::SortPattern> sort;
    std::optional<query::Projection> projection;
    int64_t skip = 0;
    int64_t limit = 0;
    bson::Doc passThrough;  // hint, comment, maxTimeMS: sent to both tiers as given
    bson::Doc readConcern;  // the client's, for the fast tier (afterClusterTime kept)
};

/// The find as a merged read, or nullopt when it is not one: no positive limit,
/// skip + limit above `maxDocs`, an option the proxy cannot apply to a merged
/// stream (collation, let, min/max, returnKey, showRecordId, tailable, a
/// $natural sort or hint, snapshot or linearizable read concern, a transaction),
/// or a filter, sort or projection its query library does not parse (the tier
/// then answers with its own error).
std::optional<MergedFind> planMergedFind(const bson_t* cmd, const std::string& db, int64_t maxDocs);

/// A count command's skip and limit, applied to the number of matches.
struct CountWindow {
    int64_t skip = 0;
    int64_t limit = 0;  // 0: none
    int64_t apply(int64_t matches) const {
        int64_t n = std::max<int64_t>(0, matches - skip);
        return limit > 0 ? std::min(n, limit) : n;
    }
};

/// A `count` as the find of its matches' _ids, at most `maxDocs` + 1 of them
/// (more: the caller cannot answer it merged), written to `find`; nullopt when
/// the count has an option a merged read cannot honour (planMergedFind decides
/// the rest).
std::optional<CountWindow> countAsFind(const bson_t* cmd, int64_t maxDocs, bson::Doc* find);

/// Why runMergedFind gave up without an error of a tier: the caller falls back
/// to the feeder wait (documents kept moving, or the answer is too large).
inline constexpr const char* kMergedFallback = "halocline: merged read falls back";

/// Runs the merged read. The documents come back sorted, skipped, limited and
/// projected, ready for the reply. A Status with kMergedFallback as its reason
/// means: answer this find the other way.
asio::awaitable<StatusWith<std::vector<bson::Doc>>> runMergedFind(Tiers& t, const MergedFind& q);

}  // namespace halo::tiering
