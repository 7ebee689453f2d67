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

/// A count's skip and limit, applied to the number of matches.
struct CountWindow {
    int64_t skip = 0;
    int64_t limit = 0;  // 0: none
    int64_t apply(int64_t matches) const {
        int64_t n = std::max<int64_t>(0, matches - skip);
        return limit > 0 ? std::min(n, limit) : n;
    }
};

/// How a read command is answered from a merged find: `find` as it is (given
/// a limit of maxDocs + 1 when it has none, unless it asks for a single batch); a
/// `count`, a `distinct` and an `aggregate` of a leading `$match` followed by
/// stages a find has (`$sort`, `$skip`, `$limit`, `$project`) or ending in a
/// count (`$count`, or the drivers' `countDocuments` `$group`) as a rewritten find.
struct MergedShape {
    enum class Answer { Documents, Count, Distinct };
    Answer answer = Answer::Documents;
    /// The find to merge when it is not the command itself (a rewrite).
    std::optional<bson::Doc> find;
    /// When positive, the find's own limit, added because the command has none:
    /// a find that returns this many documents does not hold the whole answer,
    /// which needs more than a merged read takes (the feeder wait instead).
    int64_t bound = 0;
    /// The answer is an aggregate's cursor (of documents, or of one count document).
    bool cursor = false;
    CountWindow window;  // Count
    /// Distinct: the key. Count in a cursor: the output field.
    std::string field;
    /// Count in a cursor from a $group: its constant `_id` ({_id: value}); none for $count.
    std::optional<bson::Doc> groupId;

    bool documents() const { return answer == Answer::Documents; }
    /// The command's reply body (without ok and the clock) from the merged documents:
    /// a cursor of them, `n`, `values`, or a cursor of the count document.
    void appendReply(bson_t* out, const std::string& ns, const std::vector<bson::Doc>& docs) const;
};

/// The shape of `name` as a merged read, with its rewritten find;
/// nullopt when the command has an option or a stage a merged read cannot honour
/// (collation, let, a transaction, explain, a distinct key with a numeric
/// component or `$`, ...). planMergedFind then decides the find itself.
std::optional<MergedShape> mergedShape(std::string_view name, const bson_t* cmd, int64_t maxDocs);

/// Why runMergedFind gave up without an error of a tier: the caller falls back
/// to the feeder wait (documents kept moving, or the answer is too large).
inline constexpr const char* kMergedFallback = "halocline: merged read falls back";

/// Runs the merged read. The documents come back sorted, skipped, limited and
/// projected, ready for the reply. A Status with kMergedFallback as its reason
/// means: answer this find the other way.
asio::awaitable<StatusWith<std::vector<bson::Doc>>> runMergedFind(Tiers& t, const MergedFind& q);

}  // namespace halo::tiering
