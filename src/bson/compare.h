#pragma once
// MongoDB's canonical ordering of BSON values across types (MinKey < null <
// numbers < strings < objects < arrays < binData < ObjectId < bool < date <
// timestamp < regex < ... < MaxKey), used by the matcher, sort and index keys.
#include <bson/bson.h>

#include <string>
#include <string_view>

namespace halo::bson {

/// How strings compare under a collation (implemented with ICU by
/// query::Collator). Everywhere a `const StringComparator*` is taken, null
/// means simple binary comparison, which is also the fast path. Implementations
/// are immutable and thread-safe.
class StringComparator {
  public:
    virtual ~StringComparator() = default;
    /// Three-way comparison (<0, 0, >0) of two UTF-8 strings.
    virtual int compare(std::string_view a, std::string_view b) const = 0;
    /// Bytes whose bytewise order is compare()'s order and which are equal
    /// exactly when compare() returns 0 (the ICU sort key without its trailing
    /// NUL: it never contains a 0x00 byte).
    virtual std::string comparisonKey(std::string_view s) const = 0;
};

/// The canonical rank of a type: values of different ranks compare by rank.
/// All numeric types share one rank, as do string and symbol.
int canonicalRank(bson_type_t t);

/// A numeric value (int32/int64/double/decimal128) as long double, the one
/// conversion every numeric comparison and the index key encoding use (decimal128
/// goes through its string form; other types give 0).
long double toLongDouble(const bson_value_t& v);

/// Three-way comparison (<0, 0, >0) of two values in MongoDB order. Numbers
/// compare by value across int32/int64/double/decimal128; NaN is below all other
/// numbers and equal to itself. Strings and symbols compare bytewise, or with
/// `strings` when given (also inside documents and arrays; field names always
/// compare bytewise, as in mongod).
int compareValues(const bson_value_t& a, const bson_value_t& b,
                  const StringComparator* strings = nullptr);

/// Compares two documents element by element (rank, field name, value), as
/// BSONObj::woCompare does; a prefix is less than the longer document.
int compareDocs(const bson_t* a, const bson_t* b, const StringComparator* strings = nullptr);

/// compareDocs on raw document bytes (embedded documents/arrays).
int compareDocBytes(const uint8_t* a, uint32_t alen, const uint8_t* b, uint32_t blen,
                    const StringComparator* strings = nullptr);

inline bool valuesEqual(const bson_value_t& a, const bson_value_t& b,
                        const StringComparator* strings = nullptr) {
    return compareValues(a, b, strings) == 0;
}

}  // namespace halo::bson
