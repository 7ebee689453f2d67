#include "store/query/validation_error.h"

#include <set>
#include <string>
#include <vector>

#include "store/query/json_schema.h"
#include "store/query/match_expression.h"
#include "store/query/matcher.h"
#include "store/query/path.h"

namespace halo::query {
namespace {

using Op = ElemPredicate::Op;

/// The values a path reaches in the document; `missing` when it reaches none.
struct Considered {
    bool missing = true;
    bool truncated = false;  // more values than reported
    std::vector<Value> values;
};

/// mongod's internalQueryMaxDocValidationErrorConsideredValues.
constexpr size_t kMaxConsideredValues = 10;

/// `traverseLeafArrays`: a leaf array contributes its elements (mongod's
/// kTraverseOmitArray); otherwise the array itself (kNoTraversal).
Considered valuesAt(const bson_t* doc, const std::string& path, bool traverseLeafArrays) {
    Considered c;
    const auto parts = splitPath(path);
    const bson_value_t root = borrowDocument(doc);
    PathWalkOptions opt;
    opt.expandLeafArrays = traverseLeafArrays;
    opt.yieldWholeLeafArray = !traverseLeafArrays;
    auto collect = [&](const bson_value_t& v, int64_t) {
        if (v.value_type == BSON_TYPE_EOD) return false;
        if (c.values.size() == kMaxConsideredValues) {
            c.truncated = true;
            return true;
        }
        c.values.emplace_back(v);
        return false;
    };
    walkPath(root, parts, opt, collect);
    // An empty leaf array yields no element, yet the path exists.
    PathWalkOptions whole;
    whole.expandLeafArrays = false;
    auto exists = [](const bson_value_t& v, int64_t) { return v.value_type != BSON_TYPE_EOD; };
    c.missing = c.values.empty() && !walkPath(root, parts, whole, exists);
    return c;
}

void appendValues(bson_t* out, const Considered& c) {
    if (c.missing) return;
    if (c.values.size() == 1) {
        bson::appendValue(out, "consideredValue", c.values[0].get());
        return;
    }
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(out, "consideredValues", &arr);
    for (size_t i = 0; i < c.values.size(); ++i)
        bson::appendValue(&arr, std::to_string(i), c.values[i].get());
    bson_append_array_end(out, &arr);
    if (c.truncated) BSON_APPEND_BOOL(out, "consideredValuesTruncated", true);
}

/// {one: name} for a single type, {many: [names]} (sorted) for several.
void appendTypeNames(bson_t* out, const std::set<std::string>& types, const char* one,
                     const char* many) {
    if (types.empty()) return;
    if (types.size() == 1)
        BSON_APPEND_UTF8(out, one, types.begin()->c_str());
    else
        bson::appendStringArray(out, many, {types.begin(), types.end()});
}

void appendTypes(bson_t* out, const Considered& c, const char* one, const char* many) {
    std::set<std::string> types;
    for (const auto& v : c.values) types.emplace(bson::typeName(v.type()));
    appendTypeNames(out, types, one, many);
}

/// operatorName and specifiedAs from the node's annotation (or `fallback`).
void appendHeader(bson_t* out, const MatchExpr& e, const char* fallback) {
    const ErrorAnnotation* a = e.annotation();
    std::string name = a && !a->operatorName.empty() ? a->operatorName : fallback;
    if (!name.empty()) BSON_APPEND_UTF8(out, "operatorName", name.c_str());
    if (a && !a->specifiedAs.empty())
        BSON_APPEND_DOCUMENT(out, "specifiedAs", a->specifiedAs.get());
}

struct LeafKind {
    const char* normal;
    const char* inverted;
    bool traverse;                      // leaf arrays contribute their elements
    std::vector<bson_type_t> expected;  // empty: any type
    bool values = true;                 // report consideredValue(s)
    bool types = false;                 // and their consideredType(s)
};

LeafKind leafKind(Op op) {
    switch (op) {
        case Op::kEq:
        case Op::kLt:
        case Op::kLte:
        case Op::kGt:
        case Op::kGte:
            return {"comparison failed", "comparison succeeded", true, {}};
        case Op::kIn:
            return {"no matching value found in array", "matching value found in array", true, {}};
        case Op::kRegex:
            return {"regular expression did not match",
                    "regular expression did match",
                    true,
                    {BSON_TYPE_UTF8, BSON_TYPE_SYMBOL, BSON_TYPE_REGEX}};
        case Op::kExists:
            return {"path does not exist", "path does exist", true, {}, false};
        case Op::kType:
            return {"type did not match", "type did match", true, {}, true, true};
        case Op::kSize:
            return {"array length was not equal to given size",
                    "array length was equal to given size",
                    false,
                    {BSON_TYPE_ARRAY}};
        case Op::kMod:
            return {"$mod did not evaluate to expected remainder",
                    "$mod did evaluate to expected remainder",
                    true,
                    {BSON_TYPE_INT32, BSON_TYPE_INT64, BSON_TYPE_DOUBLE, BSON_TYPE_DECIMAL128}};
        case Op::kElemMatchObject:
        case Op::kElemMatchValue:
            return {"array did not satisfy the child predicate",
                    "array did satisfy the child predicate",
                    false,
                    {BSON_TYPE_ARRAY}};
    }
    return {"expression did not match", "expression did match", true, {}};
}

/// A path operator's error. `header` supplies operatorName/specifiedAs (the
/// $not-like parent for $ne/$nin/$exists: false).
bson::Doc leafError(const MatchExpr& header, const std::string& path, const LeafKind& k,
                    const bson_t* doc, bool inverted) {
    bson::Doc out;
    appendHeader(out.mut(), header, "");
    Considered c = valuesAt(doc, path, k.traverse);
    if (k.values && c.missing) {
        BSON_APPEND_UTF8(out.mut(), "reason", "field was missing");
        return out;
    }
    bool typeMismatch = !k.expected.empty() && !c.missing;
    for (const auto& v : c.values)
        for (auto t : k.expected) typeMismatch = typeMismatch && v.type() != t;
    if (typeMismatch && !inverted) {
        BSON_APPEND_UTF8(out.mut(), "reason", "type did not match");
        appendTypes(out.mut(), c, "consideredType", "consideredTypes");
        std::set<std::string> expected;
        for (auto t : k.expected) expected.emplace(bson::typeName(t));
        appendTypeNames(out.mut(), expected, "expectedType", "expectedTypes");
    } else {
        BSON_APPEND_UTF8(out.mut(), "reason", inverted ? k.inverted : k.normal);
    }
    if (k.values) appendValues(out.mut(), c);
    if (k.types) appendTypes(out.mut(), c, "consideredType", "consideredTypes");
    return out;
}

bool matchesDoc(const MatchExpr& e, const bson_t* doc) {
    try {
        return e.matches(borrowDocument(doc), nullptr);
    } catch (const DBException&) {
        return false;  // an $expr that throws fails validation
    }
}

bson::Doc explain(const MatchExpr& e, const bson_t* doc, bool inverted);

/// {operatorName, <listKey>: [{index, details}]} for the children whose
/// outcome is `childMatches`, each explained in `childInverted` sense.
bson::Doc clauses(const LogicalExpr& e, const bson_t* doc, const char* fallbackName,
                  const char* listKey, bool childMatches, bool childInverted) {
    bson::Doc out;
    appendHeader(out.mut(), e, fallbackName);
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(out.mut(), listKey, &arr);
    int n = 0;
    for (size_t i = 0; i < e.children.size(); ++i) {
        if (matchesDoc(*e.children[i], doc) != childMatches) continue;
        bson_t entry;
        std::string key = std::to_string(n++);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, key.c_str(), &entry);
        BSON_APPEND_INT32(&entry, "index", static_cast<int32_t>(i));
        bson::Doc details = explain(*e.children[i], doc, childInverted);
        BSON_APPEND_DOCUMENT(&entry, "details", details.get());
        bson_append_document_end(&arr, &entry);
    }
    bson_append_array_end(out.mut(), &arr);
    return out;
}

bool isLeafNegation(const MatchExpr& e) {
    const ErrorAnnotation* a = e.annotation();
    if (!a) return false;
    return a->operatorName == "$ne" || a->operatorName == "$nin" || a->operatorName == "$exists";
}

bson::Doc explain(const MatchExpr& e, const bson_t* doc, bool inverted) {
    switch (e.kind()) {
        case MatchExpr::Kind::kAnd: {
            const auto& l = static_cast<const LogicalExpr&>(e);
            if (e.annotation() && e.annotation()->operatorName == "$all" && !l.children.empty() &&
                l.children[0]->kind() == MatchExpr::Kind::kPath) {
                const auto& first = static_cast<const PathExpr&>(*l.children[0]);
                LeafKind k{"array did not contain all specified values",
                           "array did contain all specified values",
                           false,
                           {}};
                return leafError(e, first.path(), k, doc, inverted);
            }
            return inverted ? clauses(l, doc, "$and", "clausesSatisfied", true, true)
                            : clauses(l, doc, "$and", "clausesNotSatisfied", false, false);
        }
        case MatchExpr::Kind::kOr: {
            const auto& l = static_cast<const LogicalExpr&>(e);
            return inverted ? clauses(l, doc, "$or", "clausesSatisfied", true, true)
                            : clauses(l, doc, "$or", "clausesNotSatisfied", false, false);
        }
        case MatchExpr::Kind::kNor: {
            const auto& l = static_cast<const LogicalExpr&>(e);
            return inverted ? clauses(l, doc, "$nor", "clausesNotSatisfied", false, false)
                            : clauses(l, doc, "$nor", "clausesSatisfied", true, true);
        }
        case MatchExpr::Kind::kNot: {
            const auto& n = static_cast<const NotExpr&>(e);
            if (isLeafNegation(e) && n.child->kind() == MatchExpr::Kind::kPath) {
                const auto& p = static_cast<const PathExpr&>(*n.child);
                return leafError(e, p.path(), leafKind(p.predicate().op()), doc, !inverted);
            }
            if (!e.annotation()) return explain(*n.child, doc, !inverted);
            bson::Doc out;
            appendHeader(out.mut(), e, "$not");
            bson::Doc details = explain(*n.child, doc, !inverted);
            BSON_APPEND_DOCUMENT(out.mut(), "details", details.get());
            return out;
        }
        case MatchExpr::Kind::kPath: {
            const auto& p = static_cast<const PathExpr&>(e);
            return leafError(e, p.path(), leafKind(p.predicate().op()), doc, inverted);
        }
        case MatchExpr::Kind::kAlwaysTrue:
        case MatchExpr::Kind::kAlwaysFalse: {
            bson::Doc out;
            appendHeader(out.mut(), e, "");
            BSON_APPEND_UTF8(out.mut(), "reason",
                             inverted ? "expression always evaluates to true"
                                      : "expression always evaluates to false");
            return out;
        }
        case MatchExpr::Kind::kExpr: {
            bson::Doc out;
            appendHeader(out.mut(), e, "$expr");
            try {
                Value result = static_cast<const ExprExpr&>(e).expr->evaluate(doc);
                BSON_APPEND_UTF8(out.mut(), "reason",
                                 inverted ? "expression did match" : "expression did not match");
                if (!result.isMissing())
                    bson::appendValue(out.mut(), "expressionResult", result.get());
            } catch (const DBException& ex) {
                BSON_APPEND_UTF8(out.mut(), "reason", "failed to evaluate aggregation expression");
                bson_t details;
                BSON_APPEND_DOCUMENT_BEGIN(out.mut(), "details", &details);
                BSON_APPEND_INT32(&details, "code", ex.status().codeNumber());
                BSON_APPEND_UTF8(&details, "errmsg", ex.status().reason().c_str());
                bson_append_document_end(out.mut(), &details);
            }
            return out;
        }
        case MatchExpr::Kind::kJsonSchema: {
            if (!inverted) return static_cast<const JsonSchemaExpr&>(e).schema().explain(doc);
            bson::Doc out;
            BSON_APPEND_UTF8(out.mut(), "operatorName", "$jsonSchema");
            BSON_APPEND_UTF8(out.mut(), "reason", "schema matched");
            return out;
        }
    }
    return bson::Doc();
}

}  // namespace

bson::Doc validationErrorDetails(const Matcher& validator, const bson_t* doc) {
    return explain(validator.root(), doc, false);
}

}  // namespace halo::query
