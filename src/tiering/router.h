#pragma once
// Where a command on a tiered collection may run (docs/CONSISTENCY.md, Reads).
// Pure decisions over the command document and the shared progress; no I/O.
#include <chrono>
#include <optional>
#include <string>

#include "bson/doc.h"
#include "tiering/config.h"
#include "tiering/protocol.h"
#include "tiering/state.h"

namespace halo::tiering {

enum class Route {
    Fast,             // the fast tier holds the whole answer (a proof)
    Archive,          // the archive, after the feeder reached the client's writes
    FastThenArchive,  // an exact _id lookup: fast tier first, archive when it lacks the id
    Refuse,           // a clear error instead of a possibly wrong answer
};

std::string_view routeName(Route r);

struct Decision {
    Route route = Route::Archive;
    std::string reason;
    Status refusal = Status::OK();
    std::optional<Id> lookupId;  // FastThenArchive
};

/// A lower bound on the age field found in a filter: documents matching it
/// have age >= ms (or > ms when strict).
struct AgeBound {
    int64_t ms;
    bool strict;
};
std::optional<AgeBound> ageLowerBound(const bson_t* filter, const CollectionPolicy& p);

/// The filter of a read (`find`'s filter, `count`'s and `distinct`'s query,
/// an `aggregate`'s leading $match), as a view into `cmd`. False when it has
/// none, i.e. it may read every document.
bool readFilter(std::string_view cmdName, const bson_t* cmd, bson_t* filter);

/// The first stage of an aggregate's pipeline that reads or writes another
/// collection ($lookup, $graphLookup, $unionWith, $out, $merge); empty if none.
std::string otherCollectionStage(const bson_t* cmd);

/// The collection ("db.coll") an aggregate's $out or $merge stage writes
/// (`db`: the command's database); empty when the pipeline writes none.
std::string writeStageTarget(const bson_t* cmd, const std::string& db);

/// An exact top-level `_id` equality in a filter (not an operator document).
std::optional<Id> exactId(const bson_t* filter);

int64_t nowMillis();
/// Milliseconds since the epoch as ISO 8601 UTC ("2026-12-03T08:10:38.123Z").
std::string isoDate(int64_t ms);

class Router {
  public:
    Router(const ProxyConfig& cfg, SharedState& state) : cfg_(cfg), state_(state) {}

    /// The age above which the fast tier provably holds every document:
    /// max(warm progress, now - horizon + guard). INT64_MAX when nothing is proven.
    int64_t fastLowMs(const CollectionPolicy& p) const;

    /// Routing for a read (`find`, `count`, `distinct`, `aggregate`) on `p`'s
    /// collection.
    Decision routeRead(const CollectionPolicy& p, std::string_view cmdName,
                       const bson_t* cmd) const;

  private:
    const ProxyConfig& cfg_;
    SharedState& state_;
};

}  // namespace halo::tiering
