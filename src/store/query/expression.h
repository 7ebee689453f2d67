#pragma once
// Aggregation expressions ($expr, and later $project/$addFields/$group/$match
// stages): a parsed tree evaluated against one document.
//
// Parsing follows mongod: a string "$a.b" is a field path, "$$name" a variable,
// an object with exactly one "$op" key an operator, any other object an object
// literal, an array an array literal, everything else a constant. Field paths
// traverse arrays the way mongod does ("$a.b" over [{b:1},{b:2}] is [1,2]);
// a missing field evaluates to "missing" (Value::isMissing()).
//
// Errors are mongod's (codes and messages) and are thrown as DBException, both
// by parse() and by evaluate(). A parsed Expression is immutable and may be
// evaluated concurrently from many threads.
#include <bson/bson.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bson/compare.h"
#include "common/status.h"
#include "store/query/value.h"

namespace halo::query {

/// User variables visible to an evaluation ($$name), e.g. from $lookup's `let`
/// or a command's `let`. $$NOW defaults to the wall clock at evaluation time
/// unless set here.
class Variables {
  public:
    void set(const std::string& name, Value v) { vars_[name] = std::move(v); }
    /// Null when undefined.
    const Value* get(std::string_view name) const {
        auto it = vars_.find(std::string(name));
        return it == vars_.end() ? nullptr : &it->second;
    }
    void setNow(int64_t millis) { now_ = millis; }
    /// Milliseconds since the epoch, or -1 when not set.
    int64_t now() const { return now_; }

  private:
    std::map<std::string, Value> vars_;
    int64_t now_ = -1;
};

struct EvalContext;  // internal: per-evaluation state (root, bound variables)

/// Options for parse(): names of user variables ($$name) that will be supplied
/// through Variables at evaluation time. Any other unbound name is rejected
/// with 17276 "Use of undefined variable: name".
struct ExpressionParseOptions {
    std::vector<std::string> userVariables;
    /// The collation string comparisons use ($eq/$cmp/$lt.., $in, $indexOfArray,
    /// set operators, $max/$min); null: binary.
    std::shared_ptr<const bson::StringComparator> collator;
};

/// A node of a parsed aggregation expression. Immutable after parse.
class Expression {
  public:
    virtual ~Expression() = default;

    /// Parses an expression specification. Throws DBException on error.
    static std::unique_ptr<Expression> parse(const bson_value_t& spec,
                                             const ExpressionParseOptions& opts = {});
    /// Parses a document as an expression object (e.g. a $project sub-object or
    /// {$add: [...]}). Throws DBException on error.
    static std::unique_ptr<Expression> parseObject(const bson_t* spec,
                                                   const ExpressionParseOptions& opts = {});

    /// Evaluates with $$ROOT = $$CURRENT = `root`. Throws DBException on error.
    Value evaluate(const bson_t* root, const Variables* vars = nullptr) const;

    /// True when the expression is a constant (no field paths or variables).
    virtual bool isConstant() const { return false; }

    /// Internal: evaluation inside an existing context.
    virtual Value eval(EvalContext& ctx) const = 0;

    /// Internal: number of variable slots ($let/$map/...) the tree needs.
    int slotCount() const { return slots_; }
    void setSlotCount(int n) { slots_ = n; }

  private:
    int slots_ = 0;
};

}  // namespace halo::query
