#pragma once
// KeyString: an order-preserving, self-delimiting binary encoding of BSON values,
// used as WiredTiger index keys (compared with memcmp / std::string order).
//
// Contract: for any two values a and b,
//     sign(enc(a).compare(enc(b))) == sign(halo::bson::compareValues(a, b))
// and for descending components the sign is inverted. Every encoding is
// prefix-free (no value's encoding is a proper prefix of another's), so a
// compound key is the plain concatenation of its components' encodings and
// compares component by component; a record id suffix may follow.
//
// Layout of one component: a type tag byte (one per canonical rank, so types
// order as MinKey < undefined < null < numbers < strings < objects < arrays <
// binData < ObjectId < bool < date < timestamp < regex < dbPointer < code <
// codeWScope < MaxKey) followed by a type-specific body:
//   numbers     all numeric types share one body, so numerically equal int32,
//               int64, double and decimal128 values encode identically. The body
//               is a class byte (NaN < -Inf < negative < zero < positive < +Inf;
//               -0.0 is zero) and, for finite non-zero values, the binary exponent
//               and 64-bit mantissa of the value as an x87 long double (exact for
//               every int64 and double), inverted for negatives. Decimal128 values
//               are converted to long double exactly as bson::compareValues does,
//               so they are approximated (64-bit mantissa, long double range):
//               decimals that differ only beyond that precision encode equal.
//   string/symbol  bytes with 0x00 escaped as 0x00 0xFF, terminated by 0x00 0x00.
//   object      per element: tag, field name, 0x00, body; then an end byte below
//               every tag (shorter documents sort first).
//   array       like object without field names (arrays are compared by position;
//               for well-formed arrays this equals compareValues' order).
//   binData     4-byte big-endian length, subtype, bytes.
//   ObjectId    12 bytes. bool: one byte. date: int64 big-endian, sign flipped.
//   timestamp   seconds then increment, 4 bytes each, big-endian.
//   regex       pattern, 0x00, options, 0x00.  dbPointer: 4-byte length,
//               namespace bytes, ObjectId.  code: as string.  codeWScope: code as
//               string, then the scope as an object body.
//   MinKey, MaxKey, null, undefined: tag only (undefined < null, as compareValues).
// A descending component is the bitwise complement of its ascending encoding.
//
// The format is persistent (it is stored in index tables): changing it requires
// rebuilding indexes.
//
// Thread-safety: all functions are pure and thread-safe. No function throws.
#include <bson/bson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bson/compare.h"
#include "bson/doc.h"
#include "common/status.h"

namespace halo::store::keystring {

/// Appends the encoding of `v` (descending: complemented) to `out`. With a
/// collation `coll`, strings and symbols (also inside documents and arrays)
/// are encoded as their comparison keys (ICU sort keys), so the encoding
/// orders as compareValues(a, b, coll) does; such keys do not decode back to
/// the original strings.
void appendValue(std::string& out, const bson_value_t& v, bool descending,
                 const bson::StringComparator* coll = nullptr);

/// Convenience: the ascending encoding of one value.
std::string encodeValue(const bson_value_t& v, bool descending = false,
                        const bson::StringComparator* coll = nullptr);

/// Number of bytes of a record id suffix.
inline constexpr size_t kRecordIdSize = 8;

/// Appends an 8-byte record id suffix: big-endian with the sign bit flipped, so
/// it orders like int64.
void appendRecordId(std::string& out, int64_t rid);

/// Reads the record id from the last 8 bytes of `key` (or of an 8-byte value).
/// Precondition: key.size() >= 8.
int64_t readRecordIdSuffix(std::string_view key);

/// A suffix that, appended to a concatenation P of whole component encodings,
/// yields a string greater than every index key that starts with P (whatever
/// components or record id follow) and, like P, less than every key that does
/// not start with P but is greater than P. Nine 0xFF bytes: no tag (ascending or
/// complemented) is 0xFF, and a record id suffix is only 8 bytes.
inline constexpr std::string_view kAfterPrefix = "\xff\xff\xff\xff\xff\xff\xff\xff\xff";

/// P + kAfterPrefix: the exclusive upper end of "all keys starting with P".
/// P itself is below every key that starts with P (a key always has more bytes).
std::string afterPrefix(std::string_view prefix);

/// Decodes the components of `key` (which may carry trailing bytes, e.g. a record
/// id, after the last component) into a document {"": v0, "": v1, ...}, one
/// element per entry of `descending`. Numbers come back as int32 when they fit,
/// else int64 when integral and in range, else double (the original numeric type
/// is not stored; decimals are lossy). Undefined decodes as undefined. Used for
/// explain, debugging and covered reads; returns InvalidBSON on malformed input.
StatusWith<bson::Doc> decodeKey(std::string_view key, const std::vector<bool>& descending);

/// Human-readable rendering of an encoded key, e.g. "{ "": 1, "": "x" }", or its
/// hex bytes when it does not decode.
std::string toDebugString(std::string_view key, const std::vector<bool>& descending);

}  // namespace halo::store::keystring
