#pragma once
// MongoDB's canonical ordering of BSON values across types (MinKey < null <
// numbers < strings < objects < arrays < binData < ObjectId < bool < date <
// timestamp < regex < ... < MaxKey), used by the matcher, sort and index keys.
#include <bson/bson.h>

namespace halo::bson {

/// The canonical rank of a type: values of different ranks compare by rank.
/// All numeric types share one rank, as do string and symbol.
int canonicalRank(bson_type_t t);

/// A numeric value (int32/int64/double/decimal128) as long double, the one
/// conversion every numeric comparison and the index key encoding use (decimal128
/// goes through its string form; other types give 0).
long double toLongDouble(const bson_value_t& v);

/// Three-way comparison (<0, 0, >0) of two values in MongoDB order. Numbers
/// compare by value across int32/int64/double/decimal128; NaN is below all other
/// numbers and equal to itself. Strings compare bytewise (no collation).
int compareValues(const bson_value_t& a, const bson_value_t& b);

/// Compares two documents element by element (rank, field name, value), as
/// BSONObj::woCompare does; a prefix is less than the longer document.
int compareDocs(const bson_t* a, const bson_t* b);

/// compareDocs on raw document bytes (embedded documents/arrays).
int compareDocBytes(const uint8_t* a, uint32_t alen, const uint8_t* b, uint32_t blen);

inline bool valuesEqual(const bson_value_t& a, const bson_value_t& b) {
    return compareValues(a, b) == 0;
}

}  // namespace halo::bson
