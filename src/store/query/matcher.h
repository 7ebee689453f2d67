#pragma once
// Matcher: a parsed MongoDB query filter ({a: 5, b: {$gt: 1}, $or: [...]})
// evaluated against documents with mongod 6.0/7.0 semantics:
//  - comparisons only within one canonical type bracket ({$gt: 5} never matches
//    a string), MinKey/MaxKey operands compare across brackets;
//  - null equality matches null and missing fields (not undefined);
//  - dotted paths traverse embedded documents and arrays (see path.h); arrays
//    match element-wise and as whole values; $ne/$nin/$not/$nor negate the
//    whole path predicate;
//  - $regex uses PCRE2; $expr uses the aggregation Expression evaluator;
//  - $jsonSchema (json_schema.h) at the top level and inside $and/$or/$nor.
//
// Parse errors carry mongod's codes and messages (BadValue "unknown operator:
// $foo", 51091 bad regex, ...). A parsed Matcher is immutable; matches() is
// const, never throws for well-formed BSON except from $expr evaluation errors
// (DBException), and may be called concurrently.
#include <bson/bson.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bson/doc.h"
#include "common/status.h"
#include "store/query/value.h"

namespace halo::query {

struct MatchDetails {
    // For the positional $ update/projection operator: the array index (as string key) of the
    // first array element that made the match succeed on the queried array path, if any.
    std::optional<std::string> elemMatchKey;
};

/// One index-usable predicate on a top-level path, ANDed with the rest of the
/// filter (directly or through $and). The filter is always re-applied to the
/// documents an index scan returns, so these describe a superset of matches.
///  - kEquality: path == values[0]. values[0] is never an array or a regex;
///    null means "null or missing".
///  - kIn: path is one of `values` (sorted ascending in MongoDB order, without
///    duplicates; never arrays or regexes).
///  - kRange: one-sided or two-sided range. An absent bound means "to the end
///    of the other bound's canonical type bracket" (mongod's type bracketing:
///    {$gt: 5} only matches numbers). Range bounds are never MinKey/MaxKey or
///    NaN (such predicates are omitted).
/// Values reached through arrays (multikey) also satisfy these predicates.
struct PathPredicate {
    enum class Kind { kEquality, kIn, kRange };
    std::string path;
    Kind kind = Kind::kEquality;
    std::vector<Value> values;
    std::optional<Value> lower;
    bool lowerInclusive = false;
    std::optional<Value> upper;
    bool upperInclusive = false;
};

class MatchExpr;  // internal node type (match_expression.h)
class Collator;   // collator.h

struct MatcherParseOptions {
    /// Records on every node what a document validation error reports about it
    /// (validation_error.h).
    bool annotate = false;
    /// A collection validator: $where, $text and geo operators are refused
    /// with mongod's "not allowed in this context" errors.
    bool forValidator = false;
    /// The query's collation: string comparisons ($eq, $ne, $lt.., $in, $nin,
    /// $all, $expr, also inside embedded documents and arrays) use it. Null:
    /// binary comparison. $regex, $type and $jsonSchema ignore it, as in mongod.
    std::shared_ptr<const Collator> collator;
};

class Matcher {
  public:
    ~Matcher();
    Matcher(Matcher&&) noexcept;
    Matcher& operator=(Matcher&&) noexcept;

    /// Parses a filter document. Never throws; errors are returned.
    static StatusWith<std::unique_ptr<Matcher>> parse(const bson_t* filter,
                                                      const MatcherParseOptions& options = {});

    /// True when `doc` satisfies the filter. When `details` is given and the
    /// match went through an array on the queried path, details->elemMatchKey
    /// is set to that array index.
    bool matches(const bson_t* doc, MatchDetails* details = nullptr) const;

    /// Top-level equality constraints: {a: 5, "b.c": "x"} for
    /// {a: 5, "b.c": "x", d: {$gt: 1}}. Includes $eq, single-element $in and
    /// equalities inside top-level $and; excludes regexes and anything under
    /// $or/$nor/$not/$elemMatch. When a path is constrained twice, the first wins.
    bson::Doc equalityFields() const;

    /// Like equalityFields() but as mongod's upsert seeding: fails with
    /// NotSingleValueField(54) "cannot infer query fields to set, path 'a' is
    /// matched twice" when one path has two equalities.
    StatusWith<bson::Doc> upsertSeedFields() const;

    /// Index-usable predicates ANDed at the top level (see PathPredicate).
    std::vector<PathPredicate> indexablePredicates() const;

    /// The collation the filter was parsed with (null: simple).
    const Collator* collator() const { return collator_.get(); }

    /// True when the filter contains $expr (evaluation may throw).
    bool hasExpr() const { return hasExpr_; }

    /// The root of the parsed tree (for the planner / explain).
    const MatchExpr& root() const { return *root_; }

  private:
    Matcher() = default;
    std::unique_ptr<MatchExpr> root_;
    std::shared_ptr<const Collator> collator_;
    bool hasExpr_ = false;
};

}  // namespace halo::query
