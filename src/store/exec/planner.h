#pragma once
// Chooses how to answer a filter (+ optional sort) on one collection: an index
// scan over key intervals derived from equality, range and $in predicates, or
// a collection scan. Index bounds are a superset of the matching keys; the full
// filter is always applied to fetched documents, so a plan never changes the
// answer, only its cost.
#include <memory>
#include <string>
#include <vector>

#include "bson/doc.h"
#include "store/storage/catalog.h"

namespace halo::store {

/// A range of encoded index keys, compared by prefix: a key k is inside when
/// k >= start (k > every key prefixed by start when !startInclusive) and
/// prefix(k) <= end (< when !endInclusive).
struct KeyInterval {
    std::string start;
    bool startInclusive = true;
    std::string end;
    bool endInclusive = true;
};

struct QueryPlan {
    std::shared_ptr<const IndexEntry> index;  // null: collection scan
    std::vector<KeyInterval> intervals;       // ascending key order
    bool reverse = false;                     // walk the intervals backwards
    bool providesSort = false;                // the scan order satisfies the sort
    std::string boundsSummary;                // for explain
    int eqFields = 0;
    bool isIdPoint = false;
    /// Every interval is one whole key of a unique index (equality on all its
    /// fields): each matches at most one entry, found by an exact search.
    bool exactKeys = false;

    std::string stageName() const { return index ? "IXSCAN" : "COLLSCAN"; }
};

/// Picks a plan. `hint` may be empty, an index name (string) or a key pattern;
/// an unknown hint is BadValue(2) "hint provided does not correspond to an existing index".
/// `collator` is the query's collation (null: simple): an index with another
/// collation is used only for bounds without strings and never for a sort, as
/// in mongod; string bounds are encoded in the index's collation.
QueryPlan planQuery(const CollectionEntry& coll, const bson_t* filter, const bson_t* sort,
                    const bson_t* hint, const query::Collator* collator = nullptr);

}  // namespace halo::store
