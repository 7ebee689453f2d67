#pragma once
// Index key generation (what mongod's BtreeKeyGenerator does) and the helpers
// the query planner uses to turn predicates into ranges of encoded index keys.
//
// An index entry's key is keystring::appendValue() of each component under the
// pattern's direction, concatenated, followed (for non-unique indexes) by the
// record id suffix (keystring::appendRecordId).
//
// ---------------------------------------------------------------------------
// Bound-building recipe for the planner (value space -> byte space)
// ---------------------------------------------------------------------------
// 1. For each indexed field, turn its predicates into a ValueInterval (or a
//    sorted union of them), type-bracketed like mongod:
//      {f: v}                 pointInterval(v). If v is an array, ALSO scan
//                             pointInterval(v[0]) (undefined for []), since an
//                             array is indexed by its elements; always filter.
//      {f: null}              pointInterval(null): missing fields are indexed as
//                             null, so this range finds null and missing (a
//                             fetch + filter must follow; it cannot be covered).
//                             Empty arrays are indexed as undefined, not null.
//      {f: {$gt|$gte|$lt|$lte: v}}
//                             comparisonInterval(op, v): bounded by v's type
//                             bracket ({$gt: 5} is (5, +Inf], {$lt: "b"} is
//                             ["", "b"), NaN is excluded from numeric ranges).
//                             A MinKey/MaxKey operand spans all types. For an
//                             array operand, scan allValues() and filter.
//      {f: {$in: [...]}}      the union of the members' intervals (points, plus
//                             the extra element point for array members; regex
//                             members need their own bracket, e.g. the whole
//                             string bracket typeBracket(BSON_TYPE_UTF8)), sorted
//                             and merged by value (compareValues on lo).
//      anything else          allValues() = [MinKey, MaxKey].
//    On a multikey index, two range predicates on the same field must NOT be
//    intersected (different array elements may satisfy each): use just one.
//    Interval ends are bson_value_t views: typeBracket* values point to static
//    storage; others point into the query document, which must outlive them.
// 2. Turn intervals into byte ranges with keyRange(pattern, eqPrefix, iv): the
//    leading components fixed to equality values, component eqPrefix.size()
//    restricted to iv, the remaining components unbounded. It handles
//    descending components (value order reversed in byte order) and the record
//    id suffix. The result is the half-open range start <= key < end over the
//    full stored keys (with or without record id); keyRange().empty() when
//    nothing can match. For several intervals, emit one KeyRange per
//    (equality tuple x interval) in ascending byte order (sort by start).
// 3. Scan each range forward (cursor at search_near(start), stop at end), or
//    backward for a reversed sort. Since index bounds are a superset for null,
//    arrays and multikey indexes, always re-apply the full filter to fetched
//    documents.
// ---------------------------------------------------------------------------
//
// Thread-safety: all functions are pure and thread-safe; none throws.
#include <bson/bson.h>

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bson/compare.h"
#include "common/status.h"

namespace halo::store {

/// A parsed index key pattern: dotted paths with their direction.
struct IndexKeyPattern {
    std::vector<std::pair<std::string /*dotted path*/, bool /*descending*/>> fields;

    std::vector<bool> directions() const;
};

/// Parses an index key pattern such as {a: 1, "b.c": -1}. Each value must be a
/// non-zero number (positive: ascending, negative: descending). Special index
/// types ("text", "2d", "2dsphere", "hashed", "$**", ...) are not supported and
/// fail with CannotCreateIndex(67); so do an empty pattern, empty path components,
/// '$'-prefixed components (except $id/$ref/$db after the first), zero/NaN and
/// non-numeric values.
StatusWith<IndexKeyPattern> parseKeyPattern(const bson_t* key);

struct KeyGenOptions {
    /// Drop keys whose components all come from missing fields.
    bool sparse = false;
    /// The index's collation: strings are keyed by their comparison keys
    /// (see keystring::appendValue). Null: binary.
    const bson::StringComparator* collator = nullptr;
};

/// Computes the encoded keys (without record id) that `doc` produces for `p`,
/// sorted and de-duplicated, as mongod's BtreeKeyGenerator does:
///  - a missing field (or a path through a scalar) indexes as null; with
///    o.sparse, keys whose components are all missing are omitted;
///  - an array on the path is expanded: one key per element (a trailing array
///    yields its elements; nested arrays are indexed whole; an empty trailing
///    array indexes as undefined, an empty array with more path as missing);
///    elements that are not documents contribute missing for a remaining path;
///  - a numeric path component over an array ("a.0") selects that element when
///    it exists (an array element reached this way is indexed whole, [] as
///    undefined), else matches a field of that name in the elements; a numeric
///    field that is both an index and a field of an element object fails with
///    Location16746 (ambiguous);
///  - fields of a compound pattern may traverse the same array together (their
///    values are taken from the same element); two different arrays at the same
///    level fail with CannotIndexParallelArrays(171), "cannot index parallel
///    arrays [b] [a]".
/// Sets *multikey (when not null) to whether any array was expanded. This is
/// conservative: mongod does not flag single-element arrays. On error `keys` is
/// unspecified.
Status generateKeys(const bson_t* doc, const IndexKeyPattern& p, const KeyGenOptions& o,
                    std::vector<std::string>* keys, bool* multikey);

/// Encodes an explicit tuple of values (a prefix of the pattern's fields, at
/// most p.fields.size()) under the pattern's directions, without record id;
/// strings under the collation `coll` (null: binary).
std::string encodeKey(const IndexKeyPattern& p, std::span<const bson_value_t> values,
                      const bson::StringComparator* coll = nullptr);

// ---- planner helpers (see the recipe above) --------------------------------

/// An interval of values of one index component, in value (compareValues)
/// order. lo/hi are views (see recipe).
struct ValueInterval {
    bson_value_t lo{};
    bool loInclusive = true;
    bson_value_t hi{};
    bool hiInclusive = true;

    /// True when no value lies inside.
    bool empty() const;
};

/// The smallest and largest values of `t`'s canonical type (its "bracket"):
///   MinKey/MaxKey/null/undefined   the single value, inclusive
///   numbers                        [NaN, +Infinity]
///   string/symbol                  ["", {})     object  [{}, [])
///   array                          [[], BinData(0, ""))
///   binData                        [BinData(0, ""), ObjectId(00..00))
///   ObjectId                       [ObjectId(00..00), ObjectId(ff..ff)]
///   bool                           [false, true]
///   date                           [Date(INT64_MIN), Date(INT64_MAX)]
///   timestamp                      [Timestamp(0, 0), Timestamp(2^32-1, 2^32-1)]
///   regex                          [//, DBPointer("", 0))
///   dbPointer                      [DBPointer("", 0), Code(""))
///   code                           [Code(""), CodeWScope("", {}))
///   codeWScope                     [CodeWScope("", {}), MaxKey)
/// The values point to static storage.
ValueInterval typeBracket(bson_type_t t);

/// [MinKey, MaxKey]: every key.
ValueInterval allValues();

/// [v, v].
ValueInterval pointInterval(const bson_value_t& v);

enum class ComparisonOp { kGt, kGte, kLt, kLte };

/// The type-bracketed interval of {$op: v} (see recipe). NaN: $gte/$lte give
/// [NaN, NaN], $gt/$lt an empty interval; other numbers exclude NaN.
ValueInterval comparisonInterval(ComparisonOp op, const bson_value_t& v);

/// A half-open range of stored index keys: start <= key < end.
struct KeyRange {
    std::string start;
    std::string end;

    bool empty() const { return start >= end; }
    bool contains(std::string_view key) const { return key >= start && key < end; }
};

/// The byte range of keys whose first eqPrefix.size() components equal
/// eqPrefix (value equality) and whose next component lies in `iv`; later
/// components are unbounded. Precondition: eqPrefix.size() < p.fields.size().
KeyRange keyRange(const IndexKeyPattern& p, std::span<const bson_value_t> eqPrefix,
                  const ValueInterval& iv);

/// The byte range of keys whose components equal `values` (a prefix of the
/// pattern's fields, possibly all of them).
KeyRange keyRangeForPrefix(const IndexKeyPattern& p, std::span<const bson_value_t> values);

}  // namespace halo::store
