#pragma once
// The parsed form of a query filter: a tree of MatchExpr nodes whose leaves
// (PathExpr) apply one ElemPredicate to every value a dotted path reaches.
// Internal to halo_query and to the query planner; built only by Matcher::parse.
#include <bson/bson.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "store/query/expression.h"
#include "store/query/matcher.h"
#include "store/query/regex.h"
#include "store/query/value.h"

namespace halo::query {

/// A test of one value (never an array traversal: PathExpr does that).
class ElemPredicate {
  public:
    enum class Op {
        kEq,
        kLt,
        kLte,
        kGt,
        kGte,
        kIn,
        kRegex,
        kExists,
        kType,
        kSize,
        kMod,
        kElemMatchObject,
        kElemMatchValue
    };
    explicit ElemPredicate(Op op) : op_(op) {}
    virtual ~ElemPredicate() = default;
    Op op() const { return op_; }
    /// `v` is BSON_TYPE_EOD for a missing field. Predicates that look inside an
    /// array ($elemMatch) report the matching element's index through `index`.
    virtual bool matches(const bson_value_t& v, int64_t* index) const = 0;
    /// False for predicates on whole arrays ($size, $elemMatch, $exists).
    virtual bool expandsLeafArrays() const { return true; }

  private:
    Op op_;
};

/// $eq $lt $lte $gt $gte with mongod's type bracketing.
class ComparisonPredicate : public ElemPredicate {
  public:
    ComparisonPredicate(Op op, Value rhs, const bson::StringComparator* coll = nullptr)
        : ElemPredicate(op), rhs_(std::move(rhs)), coll_(coll) {}
    bool matches(const bson_value_t& v, int64_t* index) const override;
    const Value& rhs() const { return rhs_; }

  private:
    Value rhs_;
    const bson::StringComparator* coll_;  // owned by the Matcher; null: binary
};

/// $regex (and regex literals): matches strings/symbols, and equal regex values.
class RegexPredicate : public ElemPredicate {
  public:
    explicit RegexPredicate(Regex re) : ElemPredicate(Op::kRegex), re_(std::move(re)) {}
    bool matches(const bson_value_t& v, int64_t* index) const override;
    const Regex& regex() const { return re_; }

  private:
    Regex re_;
};

/// $in: equality to any of `values` (sorted) or a match of any regex.
class InPredicate : public ElemPredicate {
  public:
    /// `coll` (owned by the Matcher) orders and compares the values; null: binary.
    InPredicate(std::vector<Value> values, std::vector<Regex> regexes,
                const bson::StringComparator* coll = nullptr);
    bool matches(const bson_value_t& v, int64_t* index) const override;
    const std::vector<Value>& values() const { return values_; }
    bool hasRegexes() const { return !regexes_.empty(); }

  private:
    std::vector<Value> values_;
    std::vector<Regex> regexes_;
    const bson::StringComparator* coll_;
    bool hasNull_ = false;
};

class ExistsPredicate : public ElemPredicate {
  public:
    ExistsPredicate() : ElemPredicate(Op::kExists) {}
    bool matches(const bson_value_t& v, int64_t*) const override {
        return v.value_type != BSON_TYPE_EOD;
    }
    bool expandsLeafArrays() const override { return false; }
};

class TypePredicate : public ElemPredicate {
  public:
    TypePredicate(std::vector<int> types, bool number)
        : ElemPredicate(Op::kType), types_(std::move(types)), number_(number) {}
    bool matches(const bson_value_t& v, int64_t* index) const override;

  private:
    std::vector<int> types_;
    bool number_;
};

class SizePredicate : public ElemPredicate {
  public:
    explicit SizePredicate(int64_t n) : ElemPredicate(Op::kSize), n_(n) {}
    bool matches(const bson_value_t& v, int64_t* index) const override;
    bool expandsLeafArrays() const override { return false; }

  private:
    int64_t n_;
};

class ModPredicate : public ElemPredicate {
  public:
    ModPredicate(int64_t divisor, int64_t remainder)
        : ElemPredicate(Op::kMod), divisor_(divisor), remainder_(remainder) {}
    bool matches(const bson_value_t& v, int64_t* index) const override;

  private:
    int64_t divisor_, remainder_;
};

class MatchExpr;

/// $elemMatch: an array with an element that satisfies `sub`. Object form
/// applies `sub` to elements that are documents/arrays; value form applies it
/// to every element (its PathExprs have empty paths).
class ElemMatchPredicate : public ElemPredicate {
  public:
    ElemMatchPredicate(Op op, std::unique_ptr<MatchExpr> sub);
    ~ElemMatchPredicate() override;
    bool matches(const bson_value_t& v, int64_t* index) const override;
    bool expandsLeafArrays() const override { return false; }
    const MatchExpr& sub() const { return *sub_; }

  private:
    std::unique_ptr<MatchExpr> sub_;
};

/// What a document validation error says about a node (mongod's ErrorAnnotation):
/// the operator as the user wrote it and, for leaves, its specification
/// ({a: {$gt: 5}}). Only filters parsed with MatcherParseOptions::annotate have them.
struct ErrorAnnotation {
    std::string operatorName;
    bson::Doc specifiedAs;  // empty: not reported
};

class MatchExpr {
  public:
    enum class Kind { kAnd, kOr, kNor, kNot, kPath, kAlwaysTrue, kAlwaysFalse, kExpr, kJsonSchema };
    explicit MatchExpr(Kind k) : kind_(k) {}
    virtual ~MatchExpr() = default;
    Kind kind() const { return kind_; }
    /// `input` is the document at the top level and in object $elemMatch, and
    /// the array element itself in value $elemMatch.
    virtual bool matches(const bson_value_t& input, MatchDetails* details) const = 0;
    /// Null unless the filter was parsed with annotations.
    const ErrorAnnotation* annotation() const { return annotation_.get(); }
    void setAnnotation(std::unique_ptr<ErrorAnnotation> a) { annotation_ = std::move(a); }

  private:
    Kind kind_;
    std::unique_ptr<ErrorAnnotation> annotation_;
};

/// $and / $or / $nor (an implicit top-level conjunction is an $and).
class LogicalExpr : public MatchExpr {
  public:
    explicit LogicalExpr(Kind k) : MatchExpr(k) {}
    bool matches(const bson_value_t& input, MatchDetails* details) const override;
    std::vector<std::unique_ptr<MatchExpr>> children;
};

class NotExpr : public MatchExpr {
  public:
    explicit NotExpr(std::unique_ptr<MatchExpr> c) : MatchExpr(Kind::kNot), child(std::move(c)) {}
    bool matches(const bson_value_t& input, MatchDetails*) const override {
        return !child->matches(input, nullptr);
    }
    std::unique_ptr<MatchExpr> child;
};

class ConstantExpr : public MatchExpr {
  public:
    explicit ConstantExpr(bool v) : MatchExpr(v ? Kind::kAlwaysTrue : Kind::kAlwaysFalse) {}
    bool matches(const bson_value_t&, MatchDetails*) const override {
        return kind() == Kind::kAlwaysTrue;
    }
};

/// $expr: the aggregation expression's truthiness on the document.
class ExprExpr : public MatchExpr {
  public:
    explicit ExprExpr(std::unique_ptr<Expression> e) : MatchExpr(Kind::kExpr), expr(std::move(e)) {}
    bool matches(const bson_value_t& input, MatchDetails*) const override;
    std::unique_ptr<Expression> expr;
};

class JsonSchema;

/// $jsonSchema: the document satisfies the schema (json_schema.h).
class JsonSchemaExpr : public MatchExpr {
  public:
    explicit JsonSchemaExpr(std::unique_ptr<JsonSchema> s);
    ~JsonSchemaExpr() override;
    bool matches(const bson_value_t& input, MatchDetails*) const override;
    const JsonSchema& schema() const { return *schema_; }

  private:
    std::unique_ptr<JsonSchema> schema_;
};

/// A predicate applied to the values reached by a dotted path (path.h).
class PathExpr : public MatchExpr {
  public:
    PathExpr(std::string path, std::unique_ptr<ElemPredicate> pred);
    bool matches(const bson_value_t& input, MatchDetails* details) const override;
    const std::string& path() const { return path_; }
    const ElemPredicate& predicate() const { return *pred_; }

  private:
    std::string path_;
    std::vector<std::string> parts_;
    std::unique_ptr<ElemPredicate> pred_;
};

/// The type code of a $type / bsonType alias ("double" 1 .. "maxKey" 127,
/// "minKey" -1), 0 when unknown ("number" is not an alias here).
int bsonTypeCodeForAlias(std::string_view alias);

}  // namespace halo::query
