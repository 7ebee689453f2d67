#pragma once
// Internal: $group accumulators ($sum, $avg, $min, $max, $first, $last, $push,
// $addToSet, $count, $stdDevPop, $stdDevSamp, $mergeObjects) with mongod's
// result types: $sum keeps int32/int64 while exact and widens to double (or
// decimal when a decimal was seen); $avg and $stdDev* are doubles (null when
// no numeric input); $min/$max ignore null and missing; $push/$addToSet skip
// missing values.
#include <bson/bson.h>

#include <memory>
#include <string>

#include "store/query/expression.h"
#include "store/query/value.h"

namespace halo::aggregate {

/// The running state of one accumulator for one group. Not thread-safe.
class Accumulator {
  public:
    virtual ~Accumulator() = default;
    /// Folds one evaluated argument (possibly missing) into the state.
    virtual void process(const query::Value& v) = 0;
    virtual query::Value result() const = 0;
    /// Approximate heap bytes held (for the blocking-stage memory limit).
    virtual size_t memoryBytes() const { return 0; }
};

/// One output field of a $group: {field: {$op: <expression>}}.
struct AccumulatorSpec {
    std::string field;
    std::string op;  // "$sum", ...
    std::unique_ptr<query::Expression> arg;
    /// The collation $min/$max/$addToSet compare strings with (null: binary).
    std::shared_ptr<const bson::StringComparator> collator;
    std::unique_ptr<Accumulator> make() const;
};

/// Parses {$op: <expression>} for output field `field` (15952 unknown operator,
/// 40234 not an accumulator object, 40238 more than one operator, 40237 array argument,
/// 40235/40236 bad field names).
AccumulatorSpec parseAccumulator(const std::string& field, const bson_iter_t& it,
                                 const query::ExpressionParseOptions& opts);

}  // namespace halo::aggregate
