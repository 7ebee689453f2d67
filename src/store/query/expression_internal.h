#pragma once
// Internal to halo_query: the pieces of the expression evaluator shared by
// expression.cpp (parsing, variables, control flow, arrays, objects, sets) and
// expression_scalar.cpp (arithmetic, strings, conversions, dates).
#include <bson/bson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/query/expression.h"
#include "store/query/value.h"

namespace halo::query {

struct EvalContext {
    bson_value_t root;         // $$ROOT / $$CURRENT (a document value)
    const Variables* vars;     // may be null
    std::vector<Value> slots;  // $let/$map/$filter/$reduce bindings
    int64_t now;               // $$NOW, milliseconds since the epoch
};

namespace expr_detail {

/// An operator evaluated on its already-evaluated arguments.
using ScalarFn = Value (*)(const std::vector<Value>& args, std::string_view name);
using Coll = bson::StringComparator;
/// An operator that compares values: strings compare under the expression's
/// collation (`coll`, null for binary), as in mongod.
using CollatedFn = Value (*)(const std::vector<Value>& args, std::string_view name,
                             const Coll* coll);

struct ScalarOp {
    std::string_view name;
    ScalarFn fn;  // null when `collated` is set
    int minArgs;
    int maxArgs;  // -1: unbounded
    CollatedFn collated = nullptr;
};

/// The table of scalar operators (arithmetic, string, type, date, set, array helpers).
const ScalarOp* findScalarOp(std::string_view name);

/// mongod type name of a value ("missing" for missing).
std::string_view typeNameOf(const Value& v);

/// Target types of $convert; returns false for an unknown target.
bool parseConvertTarget(const Value& to, bson_type_t* out);
/// Converts for $convert; throws ConversionFailure(241) on failure.
Value convertValue(const Value& input, bson_type_t to);

/// Parses a timezone ("UTC", "Z", "+hh:mm", "-hhmm", "+hh"); throws 40485 otherwise.
int64_t parseTimezoneOffsetMillis(const Value& tz);
/// Milliseconds since the epoch of a date-like value (date, timestamp,
/// ObjectId); throws 16006 "can't convert from BSON type X to Date" otherwise.
int64_t toDateMillis(const Value& v);
/// $dateToString formatting; throws 18535/18536 for bad formats.
std::string formatDate(int64_t millis, std::string_view format, int64_t tzOffsetMillis);

/// Number rendering as $toString does (shortest round-trip for doubles).
std::string numberToString(const bson_value_t& v);

/// $trim/$ltrim/$rtrim: removes code points in `chars` (default: whitespace).
std::string trimString(std::string_view in, const std::optional<std::string>& chars, bool left,
                       bool right);

/// Arithmetic helpers used by $sum/$avg.
Value addNumbers(const Value& a, const Value& b);
Value divideNumbers(const Value& a, double divisor);

}  // namespace expr_detail
}  // namespace halo::query
