#include "store/query/matcher.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <string_view>

#include "bson/compare.h"
#include "store/query/collator.h"
#include "store/query/json_schema.h"
#include "store/query/match_expression.h"

namespace halo::query {
namespace {

using Op = ElemPredicate::Op;
using ExprPtr = std::unique_ptr<MatchExpr>;

/// Parse errors travel as DBException inside this file and become a Status in
/// Matcher::parse.
[[noreturn]] void fail(ErrorCode c, std::string msg) {
    uasserted(c, std::move(msg));
}

std::string_view keyOf(const bson_iter_t& it) {
    return {bson_iter_key(&it), bson_iter_key_len(&it)};
}

bool isDbRefField(std::string_view k) {
    return k == "$ref" || k == "$id" || k == "$db";
}

/// An operator object: {$gt: 1, ...}. DBRef-shaped objects are values.
bool isOperatorObject(const bson_value_t& v) {
    bson_t doc;
    if (v.value_type != BSON_TYPE_DOCUMENT || !viewOf(v, &doc)) return false;
    bson_iter_t it;
    if (!bson_iter_init(&it, &doc) || !bson_iter_next(&it)) return false;
    std::string_view k = keyOf(it);
    return !k.empty() && k[0] == '$' && !isDbRefField(k);
}

/// {path: value} or {path: {op: value}}: what a validation error shows as specifiedAs.
bson::Doc specOf(std::string_view path, std::string_view op, const bson_value_t& v) {
    bson::Doc d;
    if (op.empty()) {
        bson::appendValue(d.mut(), path, v);
        return d;
    }
    bson_t inner;
    bson_append_document_begin(d.mut(), path.data(), static_cast<int>(path.size()), &inner);
    bson::appendValue(&inner, op, v);
    bson_append_document_end(d.mut(), &inner);
    return d;
}

struct Parser {
    MatcherParseOptions options;
    bool hasExpr = false;

    const Collator* collator() const { return options.collator.get(); }
    ExpressionParseOptions exprOptions() const {
        ExpressionParseOptions o;
        o.collator = options.collator;
        return o;
    }

    ExprPtr path(std::string_view p, std::unique_ptr<ElemPredicate> pred) {
        return std::make_unique<PathExpr>(std::string(p), std::move(pred));
    }
    ExprPtr negate(ExprPtr e) { return std::make_unique<NotExpr>(std::move(e)); }

    /// Annotates `e` (when annotating) and returns it.
    ExprPtr annotate(ExprPtr e, std::string_view op, bson::Doc spec = bson::Doc()) {
        if (options.annotate && e)
            e->setAnnotation(std::make_unique<ErrorAnnotation>(
                ErrorAnnotation{std::string(op), std::move(spec)}));
        return e;
    }

    /// `subDocument`: the filter of an object $elemMatch, where $expr, $where
    /// and $text may not appear (mongod's kUserSubDocument level).
    ExprPtr parseTopLevel(const bson_t* doc, int depth, bool subDocument = false) {
        if (depth > 100) fail(ErrorCode::BadValue, "exceeded maximum query tree depth of 100");
        auto all = std::make_unique<LogicalExpr>(MatchExpr::Kind::kAnd);
        bson_iter_t it;
        if (!bson_iter_init(&it, doc)) fail(ErrorCode::InvalidBSON, "invalid filter document");
        while (bson_iter_next(&it)) {
            std::string_view k = keyOf(it);
            const bson_value_t& v = *bson_iter_value(&it);
            if (!k.empty() && k[0] == '$') {
                if (auto e = parseTopLevelOperator(k, v, depth, subDocument))
                    all->children.push_back(std::move(e));
                continue;
            }
            parsePathValue(k, v, all->children, depth);
        }
        if (all->children.size() == 1) return std::move(all->children[0]);
        return annotate(std::move(all), "$and");
    }

    ExprPtr parseTopLevelOperator(std::string_view k, const bson_value_t& v, int depth,
                                  bool subDocument) {
        if (k == "$and" || k == "$or" || k == "$nor") {
            if (v.value_type != BSON_TYPE_ARRAY)
                fail(ErrorCode::BadValue, fmt::format("{} must be an array", k));
            auto kind = k == "$and"  ? MatchExpr::Kind::kAnd
                        : k == "$or" ? MatchExpr::Kind::kOr
                                     : MatchExpr::Kind::kNor;
            auto e = std::make_unique<LogicalExpr>(kind);
            bson_t arr;
            viewOf(v, &arr);
            bson_iter_t ai;
            bson_iter_init(&ai, &arr);
            while (bson_iter_next(&ai)) {
                const bson_value_t& c = *bson_iter_value(&ai);
                bson_t sub;
                if (c.value_type != BSON_TYPE_DOCUMENT || !viewOf(c, &sub))
                    fail(ErrorCode::BadValue, "$or/$and/$nor entries need to be full objects");
                e->children.push_back(parseTopLevel(&sub, depth + 1, subDocument));
            }
            if (e->children.empty())
                fail(ErrorCode::BadValue, "$and/$or/$nor must be a nonempty array");
            return annotate(std::move(e), k);
        }
        if (k == "$expr") {
            if (subDocument)
                fail(ErrorCode::BadValue, "$expr can only be applied to the top-level document");
            hasExpr = true;
            return annotate(std::make_unique<ExprExpr>(Expression::parse(v, exprOptions())), k,
                            specOf(k, "", v));
        }
        if (k == "$comment") return nullptr;
        if (k == "$sampleRate") {
            // mongod's rewrite: {$expr: {$lt: [{$rand: {}}, rate]}}.
            if (!bson::isNumber(v.value_type))
                fail(ErrorCode::BadValue, "argument to $sampleRate must be a numeric type");
            double rate = bson::toDouble(v);
            if (!(rate >= 0.0 && rate <= 1.0))
                fail(ErrorCode::BadValue, "numeric argument to $sampleRate must be in [0, 1]");
            if (subDocument)
                fail(ErrorCode::BadValue,
                     "$sampleRate can only be applied to the top-level document");
            bson::Doc spec;
            bson_t lt, rand;
            BSON_APPEND_ARRAY_BEGIN(spec.mut(), "$lt", &lt);
            BSON_APPEND_DOCUMENT_BEGIN(&lt, "0", &rand);
            bson_t empty;
            BSON_APPEND_DOCUMENT_BEGIN(&rand, "$rand", &empty);
            bson_append_document_end(&rand, &empty);
            bson_append_document_end(&lt, &rand);
            BSON_APPEND_DOUBLE(&lt, "1", rate);
            bson_append_array_end(spec.mut(), &lt);
            bson_value_t sv;
            sv.value_type = BSON_TYPE_DOCUMENT;
            sv.value.v_doc.data = const_cast<uint8_t*>(spec.data());
            sv.value.v_doc.data_len = static_cast<uint32_t>(spec.size());
            hasExpr = true;
            return annotate(std::make_unique<ExprExpr>(Expression::parse(sv)), k, specOf(k, "", v));
        }
        if (k == "$alwaysTrue" || k == "$alwaysFalse") {
            int64_t n;
            if (!bson::toInt64Exact(v, &n) || n != 1)
                fail(ErrorCode::FailedToParse, fmt::format("{} must be an integer value of 1", k));
            return annotate(std::make_unique<ConstantExpr>(k == "$alwaysTrue"), k,
                            specOf(k, "", v));
        }
        if (k == "$jsonSchema") {
            if (v.value_type != BSON_TYPE_DOCUMENT)
                fail(ErrorCode::TypeMismatch, "$jsonSchema must be an object");
            bson_t schema;
            viewOf(v, &schema);
            auto e = std::make_unique<JsonSchemaExpr>(uassertStatusOK(JsonSchema::parse(&schema)));
            return annotate(std::move(e), k, specOf(k, "", v));
        }
        if (k == "$where") {
            if (options.forValidator)
                fail(ErrorCode::BadValue, "$where is not allowed in this context");
            if (subDocument)
                fail(ErrorCode::BadValue, "$where can only be applied to the top-level document");
            fail(ErrorCode::BadValue, "$where is not supported");
        }
        if (k == "$text") {
            if (subDocument)
                fail(ErrorCode::BadValue, "$text can only be applied to the top-level document");
            if (options.forValidator)
                fail(ErrorCode::BadValue, "$text is not allowed in this context");
            fail(ErrorCode::IndexNotFound, "text index required for $text query");
        }
        fail(ErrorCode::BadValue, fmt::format("unknown top level operator: {}", k));
    }

    void parsePathValue(std::string_view p, const bson_value_t& v, std::vector<ExprPtr>& out,
                        int depth) {
        if (v.value_type == BSON_TYPE_REGEX) {
            out.push_back(
                annotate(path(p, regexPredicate(v.value.v_regex.regex, v.value.v_regex.options)),
                         "$regex", specOf(p, "", v)));
            return;
        }
        if (isOperatorObject(v)) {
            bson_t ops;
            viewOf(v, &ops);
            parseOperators(p, &ops, out, depth);
            return;
        }
        out.push_back(annotate(path(p, comparison(Op::kEq, v, "$eq")), "$eq", specOf(p, "", v)));
    }

    std::unique_ptr<ElemPredicate> comparison(Op op, const bson_value_t& v, std::string_view name) {
        if (v.value_type == BSON_TYPE_UNDEFINED)
            fail(ErrorCode::BadValue, "cannot compare to undefined");
        return std::make_unique<ComparisonPredicate>(op, Value(v), collator());
    }

    std::unique_ptr<ElemPredicate> regexPredicate(std::string_view pattern, std::string_view opts) {
        auto sw = Regex::compile(pattern, opts);
        if (!sw.isOK()) throw DBException(sw.getStatus());
        return std::make_unique<RegexPredicate>(std::move(sw.getValue()));
    }

    /// Parses {$op: x, ...} on path `p`, appending one node per operator.
    void parseOperators(std::string_view p, const bson_t* ops, std::vector<ExprPtr>& out,
                        int depth) {
        if (depth > 100) fail(ErrorCode::BadValue, "exceeded maximum query tree depth of 100");
        bson_iter_t it;
        bson_iter_init(&it, ops);
        // Shallow copies: `ops` outlives them (the iterator's value is overwritten).
        bson_value_t regexValue, optionsValue;
        const bson_value_t* regex = nullptr;
        const bson_value_t* options = nullptr;
        while (bson_iter_next(&it)) {
            std::string_view k = keyOf(it);
            const bson_value_t& v = *bson_iter_value(&it);
            if (k == "$regex") {
                regexValue = v;
                regex = &regexValue;
            } else if (k == "$options") {
                optionsValue = v;
                options = &optionsValue;
            } else {
                out.push_back(annotate(parseOperator(p, k, v, depth), k, specOf(p, k, v)));
            }
        }
        if (options && !regex) fail(ErrorCode::BadValue, "$options needs a $regex");
        if (regex) {
            bson::Doc spec;
            if (this->options.annotate) {
                bson_t inner;
                bson_append_document_begin(spec.mut(), p.data(), static_cast<int>(p.size()),
                                           &inner);
                bson::appendValue(&inner, "$regex", *regex);
                if (options) bson::appendValue(&inner, "$options", *options);
                bson_append_document_end(spec.mut(), &inner);
            }
            std::string opts;
            if (options) {
                if (options->value_type != BSON_TYPE_UTF8)
                    fail(ErrorCode::BadValue, "$options has to be a string");
                opts = options->value.v_utf8.str;
            }
            std::unique_ptr<ElemPredicate> pred;
            if (regex->value_type == BSON_TYPE_UTF8) {
                pred = regexPredicate({regex->value.v_utf8.str, regex->value.v_utf8.len}, opts);
            } else if (regex->value_type == BSON_TYPE_REGEX) {
                std::string_view own =
                    regex->value.v_regex.options ? regex->value.v_regex.options : "";
                if (!own.empty() && !opts.empty())
                    fail(ErrorCode::Location51075, "options set in both $regex and $options");
                pred = regexPredicate(regex->value.v_regex.regex, opts.empty() ? own : opts);
            } else {
                fail(ErrorCode::BadValue, "$regex has to be a string");
            }
            out.push_back(annotate(path(p, std::move(pred)), "$regex", std::move(spec)));
        }
    }

    ExprPtr parseOperator(std::string_view p, std::string_view k, const bson_value_t& v,
                          int depth) {
        auto cmp = [&](Op op) {
            if (v.value_type == BSON_TYPE_REGEX && op != Op::kEq)
                fail(ErrorCode::BadValue,
                     fmt::format("Can't have RegEx as arg to predicate over field '{}'.", p));
            return path(p, comparison(op, v, k));
        };
        if (k == "$eq") return cmp(Op::kEq);
        if (k == "$lt") return cmp(Op::kLt);
        if (k == "$lte") return cmp(Op::kLte);
        if (k == "$gt") return cmp(Op::kGt);
        if (k == "$gte") return cmp(Op::kGte);
        if (k == "$ne") {
            if (v.value_type == BSON_TYPE_REGEX)
                fail(ErrorCode::BadValue, "Can't have regex as arg to $ne.");
            return negate(path(p, comparison(Op::kEq, v, k)));
        }
        if (k == "$in") return path(p, inPredicate(v, "$in"));
        if (k == "$nin") return negate(path(p, inPredicate(v, "$nin")));
        if (k == "$exists") {
            auto e = path(p, std::make_unique<ExistsPredicate>());
            return bson::isTruthy(v) ? std::move(e) : negate(std::move(e));
        }
        if (k == "$type") return path(p, typePredicate(v));
        if (k == "$size") return path(p, sizePredicate(v));
        if (k == "$mod") return path(p, modPredicate(v));
        if (k == "$all") return allExpr(p, v, depth);
        if (k == "$elemMatch") return path(p, elemMatch(v, depth));
        if (k == "$not") return notExpr(p, v, depth);
        if (options.forValidator && (k == "$near" || k == "$nearSphere" || k == "$geoNear"))
            fail(ErrorCode::BadValue,
                 "$geoNear, $near, and $nearSphere are not allowed in this context");
        if (k.empty() || k[0] != '$')
            fail(ErrorCode::BadValue, fmt::format("unknown operator: {}", k));
        fail(ErrorCode::BadValue, fmt::format("unknown operator: {}", k));
    }

    std::unique_ptr<ElemPredicate> inPredicate(const bson_value_t& v, std::string_view name) {
        if (v.value_type != BSON_TYPE_ARRAY)
            fail(ErrorCode::BadValue, fmt::format("{} needs an array", name));
        std::vector<Value> values;
        std::vector<Regex> regexes;
        bson_t arr;
        viewOf(v, &arr);
        bson_iter_t it;
        bson_iter_init(&it, &arr);
        while (bson_iter_next(&it)) {
            const bson_value_t& e = *bson_iter_value(&it);
            if (e.value_type == BSON_TYPE_REGEX) {
                auto sw = Regex::compile(e.value.v_regex.regex, e.value.v_regex.options);
                if (!sw.isOK()) throw DBException(sw.getStatus());
                regexes.push_back(std::move(sw.getValue()));
                continue;
            }
            if (isOperatorObject(e)) fail(ErrorCode::BadValue, "cannot nest $ under $in");
            if (e.value_type == BSON_TYPE_UNDEFINED)
                fail(ErrorCode::BadValue, "InMatchExpression equality cannot be undefined");
            values.emplace_back(e);
        }
        return std::make_unique<InPredicate>(std::move(values), std::move(regexes), collator());
    }

    void addType(const bson_value_t& v, std::vector<int>& types, bool& number) {
        if (v.value_type == BSON_TYPE_UTF8) {
            std::string_view s(v.value.v_utf8.str, v.value.v_utf8.len);
            if (s == "number") {
                number = true;
                return;
            }
            int code = bsonTypeCodeForAlias(s);
            if (code == 0) fail(ErrorCode::BadValue, fmt::format("Unknown type name alias: {}", s));
            types.push_back(code);
            return;
        }
        if (bson::isNumber(v.value_type)) {
            int64_t n;
            if (!bson::toInt64Exact(v, &n))
                fail(ErrorCode::BadValue,
                     fmt::format("Invalid numerical type code: {}", bson::valueToString(v)));
            if (!((n >= 1 && n <= 19) || n == -1 || n == 127))
                fail(ErrorCode::BadValue, fmt::format("Invalid numerical type code: {}", n));
            types.push_back(static_cast<int>(n));
            return;
        }
        fail(ErrorCode::TypeMismatch, "type must be represented as a number or a string");
    }

    std::unique_ptr<ElemPredicate> typePredicate(const bson_value_t& v) {
        std::vector<int> types;
        bool number = false;
        if (v.value_type == BSON_TYPE_ARRAY) {
            bson_t arr;
            viewOf(v, &arr);
            bson_iter_t it;
            bson_iter_init(&it, &arr);
            while (bson_iter_next(&it)) addType(*bson_iter_value(&it), types, number);
        } else {
            addType(v, types, number);
        }
        return std::make_unique<TypePredicate>(std::move(types), number);
    }

    std::unique_ptr<ElemPredicate> sizePredicate(const bson_value_t& v) {
        if (!bson::isNumber(v.value_type)) fail(ErrorCode::BadValue, "$size needs a number");
        int64_t n;
        if (!bson::toInt64Exact(v, &n)) fail(ErrorCode::BadValue, "$size must be a whole number");
        if (n < 0) fail(ErrorCode::BadValue, "$size may not be negative");
        return std::make_unique<SizePredicate>(n);
    }

    std::unique_ptr<ElemPredicate> modPredicate(const bson_value_t& v) {
        if (v.value_type != BSON_TYPE_ARRAY)
            fail(ErrorCode::BadValue, "malformed mod, needs to be an array");
        bson_t arr;
        viewOf(v, &arr);
        bson_value_t args[2];
        size_t n = 0;
        bson_iter_t it;
        bson_iter_init(&it, &arr);
        while (bson_iter_next(&it)) {
            if (n < 2) args[n] = *bson_iter_value(&it);  // shallow: arr outlives args
            ++n;
        }
        if (n < 2) fail(ErrorCode::BadValue, "malformed mod, not enough elements");
        if (n > 2) fail(ErrorCode::BadValue, "malformed mod, too many elements");
        if (!bson::isNumber(args[0].value_type))
            fail(ErrorCode::BadValue, "malformed mod, divisor not a number");
        if (!bson::isNumber(args[1].value_type))
            fail(ErrorCode::BadValue, "malformed mod, remainder not a number");
        auto trunc = [](const bson_value_t& x, const char* what) -> int64_t {
            if (x.value_type == BSON_TYPE_INT32) return x.value.v_int32;
            if (x.value_type == BSON_TYPE_INT64) return x.value.v_int64;
            double d = bson::toDouble(x);
            if (!std::isfinite(d) || d < -0x1p63 || d >= 0x1p63)
                fail(ErrorCode::BadValue,
                     fmt::format("malformed mod, {} value is invalid :: caused by :: Unable to "
                                 "coerce NaN/Inf to integral type",
                                 what));
            return static_cast<int64_t>(std::trunc(d));
        };
        int64_t d = trunc(args[0], "divisor");
        int64_t r = trunc(args[1], "remainder");
        if (d == 0) fail(ErrorCode::BadValue, "divisor cannot be 0");
        return std::make_unique<ModPredicate>(d, r);
    }

    ExprPtr allExpr(std::string_view p, const bson_value_t& v, int depth) {
        if (v.value_type != BSON_TYPE_ARRAY) fail(ErrorCode::BadValue, "$all needs an array");
        bson_t arr;
        viewOf(v, &arr);
        bson_iter_t it;
        bson_iter_init(&it, &arr);
        auto all = std::make_unique<LogicalExpr>(MatchExpr::Kind::kAnd);
        bool first = true, elemMatchForm = false;
        while (bson_iter_next(&it)) {
            const bson_value_t& e = *bson_iter_value(&it);
            bool isElemMatch = false;
            if (e.value_type == BSON_TYPE_DOCUMENT) {
                bson_t d;
                viewOf(e, &d);
                bson_iter_t di;
                isElemMatch =
                    bson_iter_init(&di, &d) && bson_iter_next(&di) && keyOf(di) == "$elemMatch";
                if (isElemMatch) {
                    if (!first && !elemMatchForm)
                        fail(ErrorCode::BadValue, "$all/$elemMatch has to be consistent");
                    all->children.push_back(path(p, elemMatch(*bson_iter_value(&di), depth)));
                }
            }
            if (first) elemMatchForm = isElemMatch;
            first = false;
            if (elemMatchForm != isElemMatch)
                fail(ErrorCode::BadValue, "$all/$elemMatch has to be consistent");
            if (isElemMatch) continue;
            if (e.value_type == BSON_TYPE_REGEX) {
                all->children.push_back(
                    path(p, regexPredicate(e.value.v_regex.regex, e.value.v_regex.options)));
            } else if (isOperatorObject(e)) {
                fail(ErrorCode::BadValue, "no $ expressions in $all");
            } else {
                all->children.push_back(path(p, comparison(Op::kEq, e, "$all")));
            }
        }
        if (all->children.empty()) return std::make_unique<ConstantExpr>(false);
        return all;
    }

    std::unique_ptr<ElemPredicate> elemMatch(const bson_value_t& v, int depth) {
        if (v.value_type != BSON_TYPE_DOCUMENT)
            fail(ErrorCode::BadValue, "$elemMatch needs an Object");
        bson_t sub;
        viewOf(v, &sub);
        bson_iter_t it;
        bool valueForm = false;
        if (bson_iter_init(&it, &sub) && bson_iter_next(&it)) {
            std::string_view k = keyOf(it);
            valueForm = !k.empty() && k[0] == '$' && k != "$and" && k != "$or" && k != "$nor" &&
                        k != "$expr" && k != "$where" && k != "$text" && k != "$comment" &&
                        k != "$alwaysTrue" && k != "$alwaysFalse" && !isDbRefField(k);
        }
        if (valueForm) {
            auto all = std::make_unique<LogicalExpr>(MatchExpr::Kind::kAnd);
            parseOperators("", &sub, all->children, depth + 1);
            return std::make_unique<ElemMatchPredicate>(Op::kElemMatchValue, std::move(all));
        }
        return std::make_unique<ElemMatchPredicate>(Op::kElemMatchObject,
                                                    parseTopLevel(&sub, depth + 1, true));
    }

    ExprPtr notExpr(std::string_view p, const bson_value_t& v, int depth) {
        if (v.value_type == BSON_TYPE_REGEX)
            return negate(
                annotate(path(p, regexPredicate(v.value.v_regex.regex, v.value.v_regex.options)),
                         "$regex", specOf(p, "", v)));
        if (v.value_type != BSON_TYPE_DOCUMENT)
            fail(ErrorCode::BadValue, "$not needs a regex or a document");
        bson_t sub;
        viewOf(v, &sub);
        if (bson_count_keys(&sub) == 0) fail(ErrorCode::BadValue, "$not cannot be empty");
        bson_iter_t it;
        bson_iter_init(&it, &sub);
        bson_iter_next(&it);
        std::string_view first = keyOf(it);
        if (first.empty() || first[0] != '$')
            fail(ErrorCode::BadValue, fmt::format("unknown operator: {}", first));
        auto all = std::make_unique<LogicalExpr>(MatchExpr::Kind::kAnd);
        parseOperators(p, &sub, all->children, depth + 1);
        if (all->children.size() == 1) return negate(std::move(all->children[0]));
        return negate(std::move(all));
    }
};

/// Visits the conjuncts of the top level (through nested $and).
template <class F>
void forEachConjunct(const MatchExpr& e, F&& f) {
    if (e.kind() == MatchExpr::Kind::kAnd) {
        for (const auto& c : static_cast<const LogicalExpr&>(e).children) forEachConjunct(*c, f);
        return;
    }
    f(e);
}

/// The equality value of a conjunct, or null when it is not an equality.
const Value* equalityOf(const MatchExpr& e, const PathExpr** pe) {
    if (e.kind() != MatchExpr::Kind::kPath) return nullptr;
    const auto& p = static_cast<const PathExpr&>(e);
    if (p.path().empty()) return nullptr;
    *pe = &p;
    const ElemPredicate& pred = p.predicate();
    if (pred.op() == Op::kEq) {
        const Value& v = static_cast<const ComparisonPredicate&>(pred).rhs();
        if (v.type() == BSON_TYPE_REGEX) return nullptr;
        return &v;
    }
    if (pred.op() == Op::kIn) {
        const auto& in = static_cast<const InPredicate&>(pred);
        if (in.values().size() == 1 && !in.hasRegexes()) return &in.values()[0];
    }
    return nullptr;
}

bool isNaNValue(const Value& v) {
    return (v.type() == BSON_TYPE_DOUBLE || v.type() == BSON_TYPE_DECIMAL128) &&
           std::isnan(bson::toDouble(v.get()));
}

}  // namespace

int bsonTypeCodeForAlias(std::string_view alias) {
    static const std::pair<std::string_view, int> kAliases[] = {
        {"double", 1},      {"string", 2},     {"object", 3},
        {"array", 4},       {"binData", 5},    {"undefined", 6},
        {"objectId", 7},    {"bool", 8},       {"date", 9},
        {"null", 10},       {"regex", 11},     {"dbPointer", 12},
        {"javascript", 13}, {"symbol", 14},    {"javascriptWithScope", 15},
        {"int", 16},        {"timestamp", 17}, {"long", 18},
        {"decimal", 19},    {"minKey", -1},    {"maxKey", 127},
    };
    for (const auto& [name, code] : kAliases)
        if (name == alias) return code;
    return 0;
}

Matcher::~Matcher() = default;
Matcher::Matcher(Matcher&&) noexcept = default;
Matcher& Matcher::operator=(Matcher&&) noexcept = default;

StatusWith<std::unique_ptr<Matcher>> Matcher::parse(const bson_t* filter,
                                                    const MatcherParseOptions& options) {
    try {
        Parser p;
        p.options = options;
        std::unique_ptr<Matcher> m(new Matcher());
        m->root_ = p.parseTopLevel(filter, 0);
        m->hasExpr_ = p.hasExpr;
        m->collator_ = options.collator;
        return m;
    } catch (const DBException& e) {
        return e.status();
    }
}

bool Matcher::matches(const bson_t* doc, MatchDetails* details) const {
    return root_->matches(borrowDocument(doc), details);
}

bson::Doc Matcher::equalityFields() const {
    bson::Doc out;
    forEachConjunct(*root_, [&](const MatchExpr& e) {
        const PathExpr* pe = nullptr;
        const Value* v = equalityOf(e, &pe);
        if (!v) return;
        bson_iter_t it;
        if (bson::find(out.get(), pe->path(), &it)) return;
        bson::appendValue(out.mut(), pe->path(), v->get());
    });
    return out;
}

StatusWith<bson::Doc> Matcher::upsertSeedFields() const {
    bson::Doc out;
    Status st = Status::OK();
    forEachConjunct(*root_, [&](const MatchExpr& e) {
        const PathExpr* pe = nullptr;
        const Value* v = equalityOf(e, &pe);
        if (!v || !st.isOK()) return;
        bson_iter_t it;
        if (bson::find(out.get(), pe->path(), &it)) {
            st = Status(ErrorCode::NotSingleValueField,
                        fmt::format("cannot infer query fields to set, path '{}' is matched twice",
                                    pe->path()));
            return;
        }
        bson::appendValue(out.mut(), pe->path(), v->get());
    });
    if (!st.isOK()) return st;
    return out;
}

std::vector<PathPredicate> Matcher::indexablePredicates() const {
    std::vector<PathPredicate> out;
    forEachConjunct(*root_, [&](const MatchExpr& e) {
        if (e.kind() != MatchExpr::Kind::kPath) return;
        const auto& p = static_cast<const PathExpr&>(e);
        if (p.path().empty()) return;
        const ElemPredicate& pred = p.predicate();
        PathPredicate pp;
        pp.path = p.path();
        switch (pred.op()) {
            case Op::kEq: {
                const Value& v = static_cast<const ComparisonPredicate&>(pred).rhs();
                if (v.isArray() || v.type() == BSON_TYPE_REGEX) return;
                pp.kind = PathPredicate::Kind::kEquality;
                pp.values.push_back(v);
                break;
            }
            case Op::kIn: {
                const auto& in = static_cast<const InPredicate&>(pred);
                if (in.hasRegexes() || in.values().empty()) return;
                for (const auto& v : in.values()) {
                    if (v.isArray() || v.type() == BSON_TYPE_REGEX) return;
                }
                pp.kind = PathPredicate::Kind::kIn;
                pp.values = in.values();
                break;
            }
            case Op::kLt:
            case Op::kLte:
            case Op::kGt:
            case Op::kGte: {
                const Value& v = static_cast<const ComparisonPredicate&>(pred).rhs();
                if (v.isArray() || v.type() == BSON_TYPE_MINKEY || v.type() == BSON_TYPE_MAXKEY ||
                    isNaNValue(v))
                    return;
                pp.kind = PathPredicate::Kind::kRange;
                bool incl = pred.op() == Op::kLte || pred.op() == Op::kGte;
                if (pred.op() == Op::kGt || pred.op() == Op::kGte) {
                    pp.lower = v;
                    pp.lowerInclusive = incl;
                } else {
                    pp.upper = v;
                    pp.upperInclusive = incl;
                }
                break;
            }
            default:
                return;
        }
        out.push_back(std::move(pp));
    });
    return out;
}

}  // namespace halo::query
