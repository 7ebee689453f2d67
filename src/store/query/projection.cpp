#include "store/query/projection.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "store/query/collator.h"
#include "store/query/expression.h"
#include "store/query/match_expression.h"
#include "store/query/path.h"

namespace halo::query {

struct Projection::Node {
    enum class Kind { kInterior, kInclude, kExclude, kSlice, kElemMatch, kPositional, kComputed };
    Kind kind = Kind::kInterior;
    std::vector<std::pair<std::string, std::unique_ptr<Node>>> children;  // spec order
    int64_t skip = 0;                                                     // kSlice
    int64_t limit = 0;                   // kSlice; with hasSkip=false a signed count
    bool hasSkip = false;                // kSlice
    std::unique_ptr<Matcher> elemMatch;  // kElemMatch: {field: {$elemMatch: ...}}
    std::unique_ptr<Expression> expr;    // kComputed
    bool hasComputed = false;            // subtree holds a computed field
    bool hasPositional = false;          // subtree holds a positional projection

    const Node* find(std::string_view name) const {
        for (const auto& [k, n] : children) {
            if (k == name) return n.get();
        }
        return nullptr;
    }
};

namespace {

using Node = Projection::Node;
using Kind = Projection::Node::Kind;

[[noreturn]] void fail(ErrorCode c, std::string msg) {
    uasserted(c, std::move(msg));
}

std::string joinPath(const std::vector<std::string>& parts, size_t from = 0) {
    std::string out;
    for (size_t i = from; i < parts.size(); ++i) {
        if (i > from) out += '.';
        out += parts[i];
    }
    return out;
}

enum class Mode { kUnknown, kInclusion, kExclusion };

struct ProjectionParser {
    const Matcher* query;
    Node* root;
    std::shared_ptr<const Collator> collator;  // $elemMatch and expressions compare under it
    Mode mode = Mode::kUnknown;
    bool hasPositional = false;
    bool hasElemMatch = false;

    void noteInclusion(const std::string& path, bool computed) {
        if (mode == Mode::kExclusion) {
            if (computed)
                fail(ErrorCode::Location31252,
                     "Cannot use expression other than $meta in exclusion projection");
            fail(ErrorCode::Location31253,
                 fmt::format("Cannot do inclusion on field {} in exclusion projection", path));
        }
        mode = Mode::kInclusion;
    }
    void noteExclusion(const std::string& path) {
        if (mode == Mode::kInclusion)
            fail(ErrorCode::Location31254,
                 fmt::format("Cannot do exclusion on field {} in inclusion projection", path));
        mode = Mode::kExclusion;
    }

    /// Creates the node for `parts`, failing on path collisions.
    Node* insert(const std::vector<std::string>& parts) {
        Node* cur = root;
        for (size_t i = 0; i < parts.size(); ++i) {
            Node* next = nullptr;
            for (auto& [k, n] : cur->children) {
                if (k == parts[i]) next = n.get();
            }
            const bool last = i + 1 == parts.size();
            if (next && last)
                fail(ErrorCode::Location31250,
                     fmt::format("Path collision at {}", joinPath(parts)));
            if (next && next->kind != Kind::kInterior)
                fail(ErrorCode::Location31249,
                     fmt::format("Path collision at {} remaining portion {}", joinPath(parts),
                                 joinPath(parts, i + 1)));
            if (!next) {
                cur->children.emplace_back(parts[i], std::make_unique<Node>());
                next = cur->children.back().second.get();
            }
            cur = next;
        }
        return cur;
    }

    void markAncestors(const std::vector<std::string>& parts, bool computed, bool positional) {
        Node* cur = root;
        for (const auto& p : parts) {
            if (computed) cur->hasComputed = true;
            if (positional) cur->hasPositional = true;
            Node* next = nullptr;
            for (auto& [k, n] : cur->children) {
                if (k == p) next = n.get();
            }
            if (!next) return;
            cur = next;
        }
    }

    void checkComponents(const std::vector<std::string>& parts, const std::string& path) {
        if (parts.empty())
            fail(ErrorCode::Location40352, "FieldPath cannot be constructed with empty string");
        for (size_t i = 0; i < parts.size(); ++i) {
            const auto& p = parts[i];
            if (p.empty())
                fail(ErrorCode::Location15998, "FieldPath field names may not be empty strings.");
            if (p[0] == '$') {
                if (p == "$" && i + 1 == parts.size() && i > 0) continue;
                if (p == "$")
                    fail(ErrorCode::Location31394,
                         "As of 4.4, it's illegal to specify positional operator in the middle of "
                         "a path."
                         "Positional projection may only be used at the end, for example: a.b.$. "
                         "If the "
                         "query previously used a form like a.b.$.d, remove the parts following "
                         "the '$' "
                         "and the results will be equivalent.");
                fail(ErrorCode::Location16410,
                     fmt::format("FieldPath field names may not start with '$'. Consider using "
                                 "$getField or $setField."));
            }
        }
    }

    void parseObject(const bson_t* spec, const std::vector<std::string>& prefix) {
        bson_iter_t it;
        if (!bson_iter_init(&it, spec)) fail(ErrorCode::InvalidBSON, "invalid projection");
        while (bson_iter_next(&it)) {
            std::string key(bson_iter_key(&it), bson_iter_key_len(&it));
            std::vector<std::string> parts = prefix;
            for (auto& p : splitPath(key)) parts.push_back(std::move(p));
            if (key.empty()) parts.push_back("");
            parseField(parts, *bson_iter_value(&it));
        }
    }

    void parseField(std::vector<std::string> parts, const bson_value_t& v) {
        std::string path = joinPath(parts);
        checkComponents(parts, path);
        const bool positional = parts.back() == "$";
        if (positional) {
            if (!bson::isTruthy(v) ||
                !(v.value_type == BSON_TYPE_BOOL || bson::isNumber(v.value_type)))
                fail(ErrorCode::Location31395,
                     "positional projection cannot be used with exclusion");
            if (hasPositional)
                fail(ErrorCode::Location31276,
                     "Cannot specify more than one positional projection per query.");
            if (hasElemMatch)
                fail(ErrorCode::Location31256,
                     "Cannot specify positional operator and $elemMatch.");
            parts.pop_back();
            checkPositionalInQuery(parts, path);
            noteInclusion(path, false);
            Node* n = insert(parts);
            n->kind = Kind::kPositional;
            hasPositional = true;
            markAncestors(parts, false, true);
            return;
        }
        const bool isId = parts.size() == 1 && parts[0] == "_id";
        if (v.value_type == BSON_TYPE_BOOL || bson::isNumber(v.value_type)) {
            bool include = bson::isTruthy(v);
            if (!isId) include ? noteInclusion(path, false) : noteExclusion(path);
            insert(parts)->kind = include ? Kind::kInclude : Kind::kExclude;
            return;
        }
        if (v.value_type == BSON_TYPE_DOCUMENT) {
            bson_t sub;
            viewOf(v, &sub);
            bson_iter_t si;
            if (!bson_iter_init(&si, &sub) || !bson_iter_next(&si))
                fail(ErrorCode::Location51270, fmt::format("An empty sub-projection is not a valid "
                                                           "value. Found empty object at path {}",
                                                           path));
            std::string_view first(bson_iter_key(&si), bson_iter_key_len(&si));
            if (first.empty() || first[0] != '$') {
                parseObject(&sub, parts);
                return;
            }
            if (first == "$slice" && parseSlice(parts, path, *bson_iter_value(&si))) return;
            if (first == "$elemMatch") {
                parseElemMatch(parts, path, v);
                return;
            }
            if (first == "$meta") fail(ErrorCode::BadValue, "$meta projections are not supported");
        }
        // Anything else is an aggregation expression (including literals).
        noteInclusion(path, true);
        ExpressionParseOptions eo;
        eo.collator = collator;
        std::unique_ptr<Expression> e = Expression::parse(v, eo);
        Node* n = insert(parts);
        n->kind = Kind::kComputed;
        n->expr = std::move(e);
        markAncestors(parts, true, false);
    }

    /// Returns false when the argument is an aggregation $slice expression.
    bool parseSlice(const std::vector<std::string>& parts, const std::string& path,
                    const bson_value_t& arg) {
        Node tmp;
        if (bson::isNumber(arg.value_type)) {
            int64_t n;
            if (!bson::toInt64Exact(arg, &n)) {
                double d = bson::toDouble(arg);
                n = d > 0 ? static_cast<int64_t>(std::min(d, 2147483647.0))
                          : static_cast<int64_t>(std::max(d, -2147483648.0));
            }
            tmp.limit = n;
        } else if (arg.value_type == BSON_TYPE_ARRAY) {
            Value arr(arg);
            auto elems = arr.arrayElements();
            bool numeric = elems.size() == 2 && elems[0].isNumber() && elems[1].isNumber();
            if (!numeric) return false;
            int64_t skip, limit;
            if (!bson::toInt64Exact(elems[0].get(), &skip))
                skip = static_cast<int64_t>(bson::toDouble(elems[0].get()));
            if (!bson::toInt64Exact(elems[1].get(), &limit))
                limit = static_cast<int64_t>(bson::toDouble(elems[1].get()));
            if (limit <= 0)
                fail(ErrorCode::Location28724, "Third argument to $slice must be positive");
            tmp.hasSkip = true;
            tmp.skip = skip;
            tmp.limit = limit;
        } else {
            fail(ErrorCode::Location28667,
                 "Invalid $slice syntax. The given syntax did not match the find() syntax because "
                 ":: "
                 "Location31273: $slice only supports numbers and [skip, limit] arrays");
        }
        // $slice does not decide inclusion vs exclusion.
        Node* n = insert(parts);
        n->kind = Kind::kSlice;
        n->hasSkip = tmp.hasSkip;
        n->skip = tmp.skip;
        n->limit = tmp.limit;
        (void)path;
        return true;
    }

    void parseElemMatch(const std::vector<std::string>& parts, const std::string& path,
                        const bson_value_t& v) {
        if (parts.size() != 1)
            fail(ErrorCode::Location31275, "Cannot use $elemMatch projection on a nested field.");
        if (hasPositional)
            fail(ErrorCode::Location31256, "Cannot specify positional operator and $elemMatch.");
        bson_t sub;
        viewOf(v, &sub);
        bson_iter_t si;
        bson_iter_init(&si, &sub);
        bson_iter_next(&si);
        if (!BSON_ITER_HOLDS_DOCUMENT(&si))
            fail(ErrorCode::Location31274, "elemMatch: Invalid argument, object required.");
        if (bson_count_keys(&sub) != 1)
            fail(ErrorCode::BadValue, "$elemMatch projection must have exactly one field");
        bson::Doc wrapped;
        bson_t inner;
        bson_append_document_begin(wrapped.mut(), path.c_str(), static_cast<int>(path.size()),
                                   &inner);
        bson::appendIter(&inner, "$elemMatch", si);
        bson_append_document_end(wrapped.mut(), &inner);
        MatcherParseOptions mo;
        mo.collator = collator;
        auto sw = Matcher::parse(wrapped.get(), mo);
        if (!sw.isOK()) throw DBException(sw.getStatus());
        Node* n = insert(parts);
        n->kind = Kind::kElemMatch;
        n->elemMatch = std::move(sw.getValue());
        hasElemMatch = true;
    }

    void checkPositionalInQuery(const std::vector<std::string>& parts, const std::string& path) {
        bool found = false;
        if (query) {
            std::vector<const MatchExpr*> stack{&query->root()};
            while (!stack.empty() && !found) {
                const MatchExpr* e = stack.back();
                stack.pop_back();
                if (e->kind() == MatchExpr::Kind::kPath) {
                    auto qp = splitPath(static_cast<const PathExpr*>(e)->path());
                    found = !qp.empty() && qp[0] == parts[0];
                } else if (e->kind() == MatchExpr::Kind::kAnd ||
                           e->kind() == MatchExpr::Kind::kOr ||
                           e->kind() == MatchExpr::Kind::kNor) {
                    for (const auto& c : static_cast<const LogicalExpr*>(e)->children)
                        stack.push_back(c.get());
                } else if (e->kind() == MatchExpr::Kind::kNot) {
                    stack.push_back(static_cast<const NotExpr*>(e)->child.get());
                }
            }
        }
        if (!found)
            fail(
                ErrorCode::Location51050,
                fmt::format("Positional projection '{}' does not match the query document.", path));
    }
};

// ---- apply ----

struct ApplyContext {
    const bson_t* root;
    const MatchDetails* details;
    mutable bool positionalUsed = false;
};

void appendArrayElem(bson_t* arr, uint32_t idx, const bson_value_t& v) {
    char buf[16];
    const char* key;
    size_t len = bson_uint32_to_string(idx, &key, buf, sizeof buf);
    bson_append_value(arr, key, static_cast<int>(len), &v);
}

void appendSlice(bson_t* out, std::string_view key, const Node& n, const bson_value_t& v) {
    if (v.value_type != BSON_TYPE_ARRAY) {
        bson::appendValue(out, key, v);
        return;
    }
    Value arrv(v);
    auto elems = arrv.arrayElements();
    const int64_t len = static_cast<int64_t>(elems.size());
    int64_t start, count;
    if (!n.hasSkip) {
        if (n.limit >= 0) {
            start = 0;
            count = std::min(n.limit, len);
        } else {
            start = std::max<int64_t>(0, len + n.limit);
            count = len - start;
        }
    } else {
        start = n.skip < 0 ? std::max<int64_t>(0, len + n.skip) : std::min(n.skip, len);
        count = std::min(n.limit, len - start);
    }
    bson_t arr;
    bson_append_array_begin(out, key.data(), static_cast<int>(key.size()), &arr);
    for (int64_t i = 0; i < count; ++i)
        appendArrayElem(&arr, static_cast<uint32_t>(i), elems[start + i].get());
    bson_append_array_end(out, &arr);
}

void applyInclusion(const Node& node, const bson_t* in, bson_t* out, const ApplyContext& ctx);

void appendPositional(bson_t* out, std::string_view key, const bson_value_t& v,
                      const ApplyContext& ctx, const Node* interior) {
    if (v.value_type != BSON_TYPE_ARRAY || ctx.positionalUsed) {
        if (interior) {
            // Nothing to select here: continue with the interior projection.
            bson_t sub;
            if (v.value_type == BSON_TYPE_DOCUMENT && viewOf(v, &sub)) {
                bson_t child;
                bson_append_document_begin(out, key.data(), static_cast<int>(key.size()), &child);
                applyInclusion(*interior, &sub, &child, ctx);
                bson_append_document_end(out, &child);
            }
            return;
        }
        bson::appendValue(out, key, v);
        return;
    }
    ctx.positionalUsed = true;
    int64_t idx = -1;
    if (ctx.details && ctx.details->elemMatchKey) idx = std::stoll(*ctx.details->elemMatchKey);
    Value arrv(v);
    auto elems = arrv.arrayElements();
    if (idx < 0 || idx >= static_cast<int64_t>(elems.size()))
        fail(ErrorCode::Location51246,
             "Executor error during find command :: caused by :: positional operator '.$' "
             "couldn't find a matching element in the array");
    bson_t arr;
    bson_append_array_begin(out, key.data(), static_cast<int>(key.size()), &arr);
    const bson_value_t& e = elems[idx].get();
    bson_t sub;
    if (interior && e.value_type == BSON_TYPE_DOCUMENT && viewOf(e, &sub)) {
        bson_t child;
        bson_append_document_begin(&arr, "0", 1, &child);
        applyInclusion(*interior, &sub, &child, ctx);
        bson_append_document_end(&arr, &child);
    } else if (!interior) {
        appendArrayElem(&arr, 0, e);
    }
    bson_append_array_end(out, &arr);
}

/// Inclusion of an interior node over an array: documents recurse, nested arrays
/// recurse, scalars are dropped (or replaced when computed fields exist).
void includeArray(const Node& node, const bson_value_t& v, bson_t* out, const ApplyContext& ctx) {
    bson_iter_t it;
    bson_iter_init_from_data(&it, v.value.v_doc.data, v.value.v_doc.data_len);
    uint32_t idx = 0;
    bson_t empty = BSON_INITIALIZER;
    while (bson_iter_next(&it)) {
        const bson_value_t& e = *bson_iter_value(&it);
        char buf[16];
        const char* key;
        size_t len = bson_uint32_to_string(idx, &key, buf, sizeof buf);
        bson_t sub;
        if (e.value_type == BSON_TYPE_DOCUMENT && viewOf(e, &sub)) {
            bson_t child;
            bson_append_document_begin(out, key, static_cast<int>(len), &child);
            applyInclusion(node, &sub, &child, ctx);
            bson_append_document_end(out, &child);
            ++idx;
        } else if (e.value_type == BSON_TYPE_ARRAY) {
            bson_t child;
            bson_value_t copy = e;
            bson_append_array_begin(out, key, static_cast<int>(len), &child);
            includeArray(node, copy, &child, ctx);
            bson_append_array_end(out, &child);
            ++idx;
        } else if (node.hasComputed) {
            bson_t child;
            bson_append_document_begin(out, key, static_cast<int>(len), &child);
            applyInclusion(node, &empty, &child, ctx);
            bson_append_document_end(out, &child);
            ++idx;
        }
    }
    bson_destroy(&empty);
}

void appendElemMatch(bson_t* out, const std::string& key, const Node& n, const ApplyContext& ctx) {
    MatchDetails d;
    if (!n.elemMatch->matches(ctx.root, &d) || !d.elemMatchKey) return;
    bson_iter_t it;
    if (!bson::find(ctx.root, key, &it) || !BSON_ITER_HOLDS_ARRAY(&it)) return;
    bson_iter_t ai;
    bson_iter_recurse(&it, &ai);
    if (!bson_iter_find(&ai, d.elemMatchKey->c_str())) return;
    bson_t arr;
    bson_append_array_begin(out, key.c_str(), static_cast<int>(key.size()), &arr);
    bson_append_iter(&arr, "0", 1, &ai);
    bson_append_array_end(out, &arr);
}

void applyInclusion(const Node& node, const bson_t* in, bson_t* out, const ApplyContext& ctx) {
    bson_iter_t it;
    bson_iter_init(&it, in);
    while (bson_iter_next(&it)) {
        std::string_view key(bson_iter_key(&it), bson_iter_key_len(&it));
        const Node* child = node.find(key);
        if (!child) continue;
        const bson_value_t& v = *bson_iter_value(&it);
        switch (child->kind) {
            case Kind::kInclude:
                bson::appendValue(out, key, v);
                break;
            case Kind::kSlice:
                appendSlice(out, key, *child, v);
                break;
            case Kind::kPositional:
                appendPositional(out, key, v, ctx, nullptr);
                break;
            case Kind::kExclude:
            case Kind::kComputed:
            case Kind::kElemMatch:
                break;
            case Kind::kInterior: {
                if (child->hasPositional && v.value_type == BSON_TYPE_ARRAY &&
                    !ctx.positionalUsed) {
                    appendPositional(out, key, v, ctx, child);
                    break;
                }
                bson_t sub;
                if (v.value_type == BSON_TYPE_DOCUMENT && viewOf(v, &sub)) {
                    bson_t c;
                    bson_append_document_begin(out, key.data(), static_cast<int>(key.size()), &c);
                    applyInclusion(*child, &sub, &c, ctx);
                    bson_append_document_end(out, &c);
                } else if (v.value_type == BSON_TYPE_ARRAY) {
                    bson_t c;
                    bson_value_t copy = v;
                    bson_append_array_begin(out, key.data(), static_cast<int>(key.size()), &c);
                    includeArray(*child, copy, &c, ctx);
                    bson_append_array_end(out, &c);
                } else if (child->hasComputed) {
                    bson_t empty = BSON_INITIALIZER, c;
                    bson_append_document_begin(out, key.data(), static_cast<int>(key.size()), &c);
                    applyInclusion(*child, &empty, &c, ctx);
                    bson_append_document_end(out, &c);
                    bson_destroy(&empty);
                }
                break;
            }
        }
    }
    // Computed fields follow the input's fields, in specification order.
    for (const auto& [key, child] : node.children) {
        if (child->kind == Kind::kComputed) {
            Value r = child->expr->evaluate(ctx.root);
            if (!r.isMissing()) bson::appendValue(out, key, r.get());
        } else if (child->kind == Kind::kInterior && child->hasComputed) {
            bson_iter_t fi;
            if (bson_iter_init_find_w_len(&fi, in, key.data(), static_cast<int>(key.size())))
                continue;
            bson_t empty = BSON_INITIALIZER, c;
            bson_append_document_begin(out, key.data(), static_cast<int>(key.size()), &c);
            applyInclusion(*child, &empty, &c, ctx);
            bson_append_document_end(out, &c);
            bson_destroy(&empty);
        }
    }
}

void applyExclusion(const Node& node, const bson_t* in, bson_t* out, const ApplyContext& ctx);

void excludeArray(const Node& node, const bson_value_t& v, bson_t* out, const ApplyContext& ctx) {
    bson_iter_t it;
    bson_iter_init_from_data(&it, v.value.v_doc.data, v.value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        std::string_view key(bson_iter_key(&it), bson_iter_key_len(&it));
        const bson_value_t& e = *bson_iter_value(&it);
        bson_t sub;
        if (e.value_type == BSON_TYPE_DOCUMENT && viewOf(e, &sub)) {
            bson_t c;
            bson_append_document_begin(out, key.data(), static_cast<int>(key.size()), &c);
            applyExclusion(node, &sub, &c, ctx);
            bson_append_document_end(out, &c);
        } else if (e.value_type == BSON_TYPE_ARRAY) {
            bson_t c;
            bson_value_t copy = e;
            bson_append_array_begin(out, key.data(), static_cast<int>(key.size()), &c);
            excludeArray(node, copy, &c, ctx);
            bson_append_array_end(out, &c);
        } else {
            bson::appendValue(out, key, e);
        }
    }
}

void applyExclusion(const Node& node, const bson_t* in, bson_t* out, const ApplyContext& ctx) {
    bson_iter_t it;
    bson_iter_init(&it, in);
    while (bson_iter_next(&it)) {
        std::string_view key(bson_iter_key(&it), bson_iter_key_len(&it));
        const bson_value_t& v = *bson_iter_value(&it);
        const Node* child = node.find(key);
        if (!child) {
            bson::appendValue(out, key, v);
            continue;
        }
        switch (child->kind) {
            case Kind::kExclude:
            case Kind::kElemMatch:
                break;
            case Kind::kSlice:
                appendSlice(out, key, *child, v);
                break;
            case Kind::kInterior: {
                bson_t sub;
                if (v.value_type == BSON_TYPE_DOCUMENT && viewOf(v, &sub)) {
                    bson_t c;
                    bson_append_document_begin(out, key.data(), static_cast<int>(key.size()), &c);
                    applyExclusion(*child, &sub, &c, ctx);
                    bson_append_document_end(out, &c);
                } else if (v.value_type == BSON_TYPE_ARRAY) {
                    bson_t c;
                    bson_value_t copy = v;
                    bson_append_array_begin(out, key.data(), static_cast<int>(key.size()), &c);
                    excludeArray(*child, copy, &c, ctx);
                    bson_append_array_end(out, &c);
                } else {
                    bson::appendValue(out, key, v);
                }
                break;
            }
            default:
                bson::appendValue(out, key, v);
                break;
        }
    }
}

}  // namespace

Projection::Projection() : root_(std::make_unique<Node>()) {}
Projection::Projection(Projection&&) noexcept = default;
Projection& Projection::operator=(Projection&&) noexcept = default;
Projection::~Projection() = default;

StatusWith<Projection> Projection::parse(const bson_t* spec, const Matcher* query,
                                         std::shared_ptr<const Collator> collator) {
    try {
        Projection p;
        ProjectionParser parser{query, p.root_.get(), std::move(collator)};
        parser.parseObject(spec, {});
        p.inclusion_ = parser.mode == Mode::kInclusion;
        if (parser.mode == Mode::kUnknown) {
            // Only _id and/or $slice/$elemMatch: {_id: 1} alone is an inclusion.
            const Node* id = p.root_->find("_id");
            bool onlyId = p.root_->children.size() == 1 && id && id->kind == Kind::kInclude;
            p.inclusion_ = onlyId;
        }
        if (p.inclusion_ && !p.root_->find("_id")) {
            auto n = std::make_unique<Node>();
            n->kind = Kind::kInclude;
            p.root_->children.insert(p.root_->children.begin(), {"_id", std::move(n)});
        }
        p.hasPositional_ = parser.hasPositional;
        return p;
    } catch (const DBException& e) {
        return e.status();
    }
}

bson::Doc Projection::apply(const bson_t* doc, const MatchDetails* details) const {
    bson::Doc out;
    ApplyContext ctx{doc, details};
    if (inclusion_) {
        applyInclusion(*root_, doc, out.mut(), ctx);
    } else {
        applyExclusion(*root_, doc, out.mut(), ctx);
    }
    for (const auto& [key, child] : root_->children) {
        if (child->kind == Kind::kElemMatch) appendElemMatch(out.mut(), key, *child, ctx);
    }
    return out;
}

}  // namespace halo::query
