// $project, $addFields/$set, $unset, $replaceRoot/$replaceWith: stages that
// reshape each document independently (streaming, no buffering).
#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "store/aggregate/document_ops.h"
#include "store/aggregate/stage.h"
#include "store/query/path.h"

namespace halo::aggregate {
namespace {

using query::Expression;
using query::Value;

/// One level of a projection / $addFields tree, children in specification order.
struct ProjNode {
    enum class Kind { kInclude, kExclude, kExpr, kSub };
    struct Child {
        std::string name;
        Kind kind;
        std::unique_ptr<Expression> expr;
        std::unique_ptr<ProjNode> sub;
    };
    std::vector<Child> children;

    Child* find(std::string_view name) {
        for (auto& c : children)
            if (c.name == name) return &c;
        return nullptr;
    }
    const Child* find(std::string_view name) const {
        return const_cast<ProjNode*>(this)->find(name);
    }
    bool hasExpr() const {
        for (const auto& c : children)
            if (c.kind == Kind::kExpr || (c.kind == Kind::kSub && c.sub->hasExpr())) return true;
        return false;
    }
};

void checkFieldName(std::string_view name) {
    if (name.empty())
        uasserted(ErrorCode::Location40352, "FieldPath cannot be constructed with empty string");
    if (name.front() == '$')
        uasserted(ErrorCode::Location16410,
                  fmt::format("FieldPath field names may not start with '$'. Consider using "
                              "$getField or $setField."));
}

/// Finds or creates the node for the parent of the last component of `dotted`,
/// returning the leaf name. Path collisions (a and a.b) are 31250.
ProjNode* walkToParent(ProjNode* root, std::string_view dotted, std::string* leaf) {
    auto parts = query::splitPath(dotted);
    if (parts.empty()) checkFieldName("");
    ProjNode* node = root;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
        checkFieldName(parts[i]);
        ProjNode::Child* c = node->find(parts[i]);
        if (!c) {
            node->children.push_back(
                {parts[i], ProjNode::Kind::kSub, nullptr, std::make_unique<ProjNode>()});
            c = &node->children.back();
        } else if (c->kind != ProjNode::Kind::kSub) {
            uasserted(ErrorCode::Location31250, fmt::format("Path collision at {}", dotted));
        }
        node = c->sub.get();
    }
    checkFieldName(parts.back());
    if (node->find(parts.back()))
        uasserted(ErrorCode::Location31250, fmt::format("Path collision at {}", dotted));
    *leaf = parts.back();
    return node;
}

bool isOperatorObject(const bson_iter_t& it) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&it)) return false;
    bson_iter_t sub;
    if (!bson_iter_recurse(&it, &sub) || !bson_iter_next(&sub)) return false;
    return bson_iter_key(&sub)[0] == '$';
}

bool isEmptyObject(const bson_iter_t& it) {
    bson_iter_t sub;
    return BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &sub) && !bson_iter_next(&sub);
}

// ---------------------------------------------------------------- $project

enum class ProjMode { kUnknown, kInclusion, kExclusion };

struct ProjectionParser {
    const query::ExpressionParseOptions& opts;
    ProjMode mode = ProjMode::kUnknown;
    bool idExcluded = false;
    bool idSpecified = false;

    void parseObject(ProjNode* node, const bson_t* spec, const std::string& prefix) {
        bson_iter_t it;
        bson_iter_init(&it, spec);
        while (bson_iter_next(&it)) {
            std::string key = bson_iter_key(&it);
            std::string full = prefix.empty() ? key : prefix + "." + key;
            std::string leaf;
            ProjNode* parent = walkToParent(node, key, &leaf);
            bson_type_t t = bson_iter_type(&it);
            if (t == BSON_TYPE_BOOL || bson::isNumber(t)) {
                bool include = bson::isTruthy(*bson_iter_value(&it));
                bool isId = full == "_id";
                if (isId) {
                    idSpecified = true;
                    idExcluded = !include;
                } else if (include) {
                    if (mode == ProjMode::kExclusion)
                        uasserted(ErrorCode::Location31254,
                                  fmt::format("Invalid $project :: caused by :: Cannot do "
                                              "inclusion on field {} in exclusion projection",
                                              full));
                    mode = ProjMode::kInclusion;
                } else {
                    if (mode == ProjMode::kInclusion)
                        uasserted(ErrorCode::Location31253,
                                  fmt::format("Invalid $project :: caused by :: Cannot do "
                                              "exclusion on field {} in inclusion projection",
                                              full));
                    mode = ProjMode::kExclusion;
                }
                parent->children.push_back(
                    {leaf, include ? ProjNode::Kind::kInclude : ProjNode::Kind::kExclude, nullptr,
                     nullptr});
            } else if (t == BSON_TYPE_DOCUMENT && !isOperatorObject(it)) {
                if (isEmptyObject(it))
                    uasserted(
                        ErrorCode::Location51270,
                        fmt::format("Invalid $project :: caused by :: An empty sub-projection is "
                                    "not a valid value. Found empty object at path {}",
                                    full));
                parent->children.push_back(
                    {leaf, ProjNode::Kind::kSub, nullptr, std::make_unique<ProjNode>()});
                ProjNode* sub = parent->children.back().sub.get();
                uint32_t len;
                const uint8_t* data;
                bson_iter_document(&it, &len, &data);
                bson_t subSpec;
                bson_init_static(&subSpec, data, len);
                parseObject(sub, &subSpec, full);
            } else {
                if (mode == ProjMode::kExclusion)
                    uasserted(ErrorCode::Location31252,
                              "Invalid $project :: caused by :: Cannot use expression other than "
                              "$meta in exclusion projection");
                mode = ProjMode::kInclusion;
                parent->children.push_back({leaf, ProjNode::Kind::kExpr,
                                            Expression::parse(*bson_iter_value(&it), opts),
                                            nullptr});
            }
        }
    }
};

Value evalIn(const Expression& e, const bson_t* root, const ContextPtr& ctx) {
    return e.evaluate(root, &ctx->variables());
}

void applyInclusion(const ProjNode& node, const bson_t* doc, const bson_t* root,
                    const ContextPtr& ctx, bson_t* out);

void applyInclusionArray(const ProjNode& node, const bson_iter_t& arrIt, const bson_t* root,
                         const ContextPtr& ctx, bson_t* out) {
    bson_iter_t e;
    bson_iter_recurse(&arrIt, &e);
    ArrayKey key;
    size_t n = 0;
    while (bson_iter_next(&e)) {
        if (BSON_ITER_HOLDS_DOCUMENT(&e)) {
            bson_t sub, child;
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&e, &len, &data);
            bson_init_static(&sub, data, len);
            bson_append_document_begin(out, key(n++), -1, &child);
            applyInclusion(node, &sub, root, ctx, &child);
            bson_append_document_end(out, &child);
        } else if (BSON_ITER_HOLDS_ARRAY(&e)) {
            bson_t child;
            bson_append_array_begin(out, key(n++), -1, &child);
            applyInclusionArray(node, e, root, ctx, &child);
            bson_append_array_end(out, &child);
        }
    }
}

void applyInclusion(const ProjNode& node, const bson_t* doc, const bson_t* root,
                    const ContextPtr& ctx, bson_t* out) {
    std::vector<const ProjNode::Child*> seenSubs;
    bson_iter_t it;
    if (doc && bson_iter_init(&it, doc)) {
        while (bson_iter_next(&it)) {
            const ProjNode::Child* c = node.find(bson_iter_key(&it));
            if (!c) continue;
            if (c->kind == ProjNode::Kind::kInclude) {
                bson_append_iter(out, nullptr, 0, &it);
            } else if (c->kind == ProjNode::Kind::kSub) {
                if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
                    bson_t sub, child;
                    uint32_t len;
                    const uint8_t* data;
                    bson_iter_document(&it, &len, &data);
                    bson_init_static(&sub, data, len);
                    bson_append_document_begin(out, c->name.c_str(), -1, &child);
                    applyInclusion(*c->sub, &sub, root, ctx, &child);
                    bson_append_document_end(out, &child);
                    seenSubs.push_back(c);
                } else if (BSON_ITER_HOLDS_ARRAY(&it)) {
                    bson_t child;
                    bson_append_array_begin(out, c->name.c_str(), -1, &child);
                    applyInclusionArray(*c->sub, it, root, ctx, &child);
                    bson_append_array_end(out, &child);
                    seenSubs.push_back(c);
                }
            }
        }
    }
    // Computed fields, in specification order.
    for (const auto& c : node.children) {
        if (c.kind == ProjNode::Kind::kExpr) {
            appendValue(out, c.name, evalIn(*c.expr, root, ctx));
        } else if (c.kind == ProjNode::Kind::kSub && c.sub->hasExpr() &&
                   std::find(seenSubs.begin(), seenSubs.end(), &c) == seenSubs.end()) {
            bson_t child;
            bson_append_document_begin(out, c.name.c_str(), -1, &child);
            applyInclusion(*c.sub, nullptr, root, ctx, &child);
            bson_append_document_end(out, &child);
        }
    }
}

void applyExclusion(const ProjNode& node, const bson_t* doc, bson_t* out);

void applyExclusionArray(const ProjNode& node, const bson_iter_t& arrIt, bson_t* out) {
    bson_iter_t e;
    bson_iter_recurse(&arrIt, &e);
    ArrayKey key;
    size_t n = 0;
    while (bson_iter_next(&e)) {
        if (BSON_ITER_HOLDS_DOCUMENT(&e)) {
            bson_t sub, child;
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&e, &len, &data);
            bson_init_static(&sub, data, len);
            bson_append_document_begin(out, key(n++), -1, &child);
            applyExclusion(node, &sub, &child);
            bson_append_document_end(out, &child);
        } else if (BSON_ITER_HOLDS_ARRAY(&e)) {
            bson_t child;
            bson_append_array_begin(out, key(n++), -1, &child);
            applyExclusionArray(node, e, &child);
            bson_append_array_end(out, &child);
        } else {
            bson_append_iter(out, key(n++), -1, &e);
        }
    }
}

void applyExclusion(const ProjNode& node, const bson_t* doc, bson_t* out) {
    bson_iter_t it;
    if (!bson_iter_init(&it, doc)) return;
    while (bson_iter_next(&it)) {
        const ProjNode::Child* c = node.find(bson_iter_key(&it));
        if (!c || c->kind == ProjNode::Kind::kInclude) {
            bson_append_iter(out, nullptr, 0, &it);
        } else if (c->kind == ProjNode::Kind::kSub) {
            if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
                bson_t sub, child;
                uint32_t len;
                const uint8_t* data;
                bson_iter_document(&it, &len, &data);
                bson_init_static(&sub, data, len);
                bson_append_document_begin(out, c->name.c_str(), -1, &child);
                applyExclusion(*c->sub, &sub, &child);
                bson_append_document_end(out, &child);
            } else if (BSON_ITER_HOLDS_ARRAY(&it)) {
                bson_t child;
                bson_append_array_begin(out, c->name.c_str(), -1, &child);
                applyExclusionArray(*c->sub, it, &child);
                bson_append_array_end(out, &child);
            } else {
                bson_append_iter(out, nullptr, 0, &it);
            }
        }
    }
}

// ---------------------------------------------------------------- $addFields

void parseAddFields(ProjNode* node, const bson_t* spec, const query::ExpressionParseOptions& opts) {
    bson_iter_t it;
    bson_iter_init(&it, spec);
    while (bson_iter_next(&it)) {
        std::string leaf;
        ProjNode* parent = walkToParent(node, bson_iter_key(&it), &leaf);
        if (BSON_ITER_HOLDS_DOCUMENT(&it) && !isOperatorObject(it) && !isEmptyObject(it)) {
            parent->children.push_back(
                {leaf, ProjNode::Kind::kSub, nullptr, std::make_unique<ProjNode>()});
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&it, &len, &data);
            bson_t subSpec;
            bson_init_static(&subSpec, data, len);
            parseAddFields(parent->children.back().sub.get(), &subSpec, opts);
        } else {
            parent->children.push_back({leaf, ProjNode::Kind::kExpr,
                                        Expression::parse(*bson_iter_value(&it), opts), nullptr});
        }
    }
}

void applyAddFields(const ProjNode& node, const bson_t* doc, const bson_t* root,
                    const ContextPtr& ctx, bson_t* out);

void applyAddFieldsArray(const ProjNode& node, const bson_iter_t& arrIt, const bson_t* root,
                         const ContextPtr& ctx, bson_t* out) {
    bson_iter_t e;
    bson_iter_recurse(&arrIt, &e);
    ArrayKey key;
    size_t n = 0;
    while (bson_iter_next(&e)) {
        if (BSON_ITER_HOLDS_ARRAY(&e)) {
            bson_t child;
            bson_append_array_begin(out, key(n++), -1, &child);
            applyAddFieldsArray(node, e, root, ctx, &child);
            bson_append_array_end(out, &child);
            continue;
        }
        bson_t sub, child;
        const bson_t* subp = nullptr;
        if (BSON_ITER_HOLDS_DOCUMENT(&e)) {
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&e, &len, &data);
            bson_init_static(&sub, data, len);
            subp = &sub;
        }
        bson_append_document_begin(out, key(n++), -1, &child);
        applyAddFields(node, subp, root, ctx, &child);
        bson_append_document_end(out, &child);
    }
}

void applyChild(const ProjNode::Child& c, const bson_iter_t* existing, const bson_t* root,
                const ContextPtr& ctx, bson_t* out) {
    if (c.kind == ProjNode::Kind::kExpr) {
        appendValue(out, c.name, evalIn(*c.expr, root, ctx));
        return;
    }
    if (existing && BSON_ITER_HOLDS_ARRAY(existing)) {
        bson_t child;
        bson_append_array_begin(out, c.name.c_str(), -1, &child);
        applyAddFieldsArray(*c.sub, *existing, root, ctx, &child);
        bson_append_array_end(out, &child);
        return;
    }
    bson_t sub, child;
    const bson_t* subp = nullptr;
    if (existing && BSON_ITER_HOLDS_DOCUMENT(existing)) {
        uint32_t len;
        const uint8_t* data;
        bson_iter_document(existing, &len, &data);
        bson_init_static(&sub, data, len);
        subp = &sub;
    }
    bson_append_document_begin(out, c.name.c_str(), -1, &child);
    applyAddFields(*c.sub, subp, root, ctx, &child);
    bson_append_document_end(out, &child);
}

void applyAddFields(const ProjNode& node, const bson_t* doc, const bson_t* root,
                    const ContextPtr& ctx, bson_t* out) {
    std::vector<bool> done(node.children.size(), false);
    bson_iter_t it;
    if (doc && bson_iter_init(&it, doc)) {
        while (bson_iter_next(&it)) {
            const ProjNode::Child* c = node.find(bson_iter_key(&it));
            if (!c) {
                bson_append_iter(out, nullptr, 0, &it);
                continue;
            }
            size_t idx = static_cast<size_t>(c - node.children.data());
            if (done[idx]) continue;  // duplicate field in the input
            done[idx] = true;
            applyChild(*c, &it, root, ctx, out);
        }
    }
    for (size_t i = 0; i < node.children.size(); ++i)
        if (!done[i]) applyChild(node.children[i], nullptr, root, ctx, out);
}

// ---------------------------------------------------------------- stages

/// Applies `fn(doc) -> Doc` to every input document.
class MapStage : public Stage {
  public:
    using Fn = std::function<bson::Doc(const bson_t*)>;
    MapStage(StreamPtr in, Fn fn) : Stage(std::move(in)), fn_(std::move(fn)) {}
    std::optional<bson::Doc> next(store::Session& s) override {
        auto d = input_->next(s);
        if (!d) return std::nullopt;
        return fn_(d->get());
    }

  private:
    Fn fn_;
};

}  // namespace

StreamPtr makeProject(StreamPtr in, const StageSpec& s, const ContextPtr& ctx) {
    if (!s.isDocument())
        uasserted(ErrorCode::Location15969, "$project specification must be an object");
    bson_t spec = s.doc();
    if (bson_count_keys(&spec) == 0)
        uasserted(ErrorCode::Location51272,
                  "Invalid $project :: caused by :: projection specification must have at least "
                  "one field");
    auto root = std::make_shared<ProjNode>();
    ProjectionParser p{ctx->parseOptions()};
    p.parseObject(root.get(), &spec, "");
    if (p.mode != ProjMode::kExclusion && !(p.mode == ProjMode::kUnknown && p.idExcluded)) {
        // Inclusion: _id is kept unless excluded explicitly or computed.
        bool idNamed = std::any_of(root->children.begin(), root->children.end(),
                                   [](const ProjNode::Child& c) { return c.name == "_id"; });
        if (!p.idSpecified && !idNamed)
            root->children.insert(root->children.begin(),
                                  {"_id", ProjNode::Kind::kInclude, nullptr, nullptr});
        std::erase_if(root->children,
                      [](const ProjNode::Child& c) { return c.kind == ProjNode::Kind::kExclude; });
        return std::make_unique<MapStage>(std::move(in), [root, ctx](const bson_t* d) {
            bson::Doc out;
            applyInclusion(*root, d, d, ctx, out.mut());
            return out;
        });
    }
    return std::make_unique<MapStage>(std::move(in), [root](const bson_t* d) {
        bson::Doc out;
        applyExclusion(*root, d, out.mut());
        return out;
    });
}

StreamPtr makeAddFields(StreamPtr in, const StageSpec& s, const ContextPtr& ctx) {
    if (!s.isDocument())
        uasserted(ErrorCode::Location40272,
                  fmt::format("{} specification stage must be an object, got {}", s.name,
                              bson::typeName(s.value().value_type)));
    bson_t spec = s.doc();
    auto root = std::make_shared<ProjNode>();
    parseAddFields(root.get(), &spec, ctx->parseOptions());
    if (root->children.empty())
        uasserted(
            ErrorCode::Location40177,
            fmt::format("Invalid {} :: caused by :: specification must have at least one field",
                        s.name));
    return std::make_unique<MapStage>(std::move(in), [root, ctx](const bson_t* d) {
        bson::Doc out;
        applyAddFields(*root, d, d, ctx, out.mut());
        return out;
    });
}

StreamPtr makeUnset(StreamPtr in, const StageSpec& s, const ContextPtr& ctx) {
    auto root = std::make_shared<ProjNode>();
    auto add = [&](std::string_view path) {
        std::string leaf;
        ProjNode* parent = walkToParent(root.get(), path, &leaf);
        parent->children.push_back({leaf, ProjNode::Kind::kExclude, nullptr, nullptr});
    };
    const bson_value_t& v = s.value();
    if (v.value_type == BSON_TYPE_UTF8) {
        add(std::string_view(v.value.v_utf8.str, v.value.v_utf8.len));
    } else if (v.value_type == BSON_TYPE_ARRAY) {
        bson_t arr = s.doc();
        bson_iter_t it;
        bson_iter_init(&it, &arr);
        while (bson_iter_next(&it)) {
            if (!BSON_ITER_HOLDS_UTF8(&it))
                uasserted(ErrorCode::Location31120,
                          "$unset specification must be a string or an array containing only "
                          "string values");
            uint32_t len;
            const char* str = bson_iter_utf8(&it, &len);
            add(std::string_view(str, len));
        }
        if (root->children.empty())
            uasserted(ErrorCode::Location31119,
                      "$unset specification must be a string or an array with at least one field");
    } else {
        uasserted(ErrorCode::Location31002, "$unset specification must be a string or an array");
    }
    return std::make_unique<MapStage>(std::move(in), [root](const bson_t* d) {
        bson::Doc out;
        applyExclusion(*root, d, out.mut());
        return out;
    });
}

StreamPtr makeReplaceRoot(StreamPtr in, const StageSpec& s, const ContextPtr& ctx) {
    std::shared_ptr<Expression> expr;
    if (s.name == "$replaceWith") {
        expr = Expression::parse(s.value(), ctx->parseOptions());
    } else {
        if (!s.isDocument())
            uasserted(
                ErrorCode::Location40229,
                fmt::format("expected an object as specification for $replaceRoot stage, got {}",
                            bson::typeName(s.value().value_type)));
        bson_t spec = s.doc();
        bson_iter_t it;
        bson_iter_init(&it, &spec);
        while (bson_iter_next(&it)) {
            std::string_view key = bson_iter_key(&it);
            if (key != "newRoot")
                uasserted(ErrorCode::Location40415,
                          fmt::format("BSON field '$replaceRoot.{}' is an unknown field.", key));
            expr = Expression::parse(*bson_iter_value(&it), ctx->parseOptions());
        }
        if (!expr)
            uasserted(ErrorCode::Location40414,
                      "BSON field '$replaceRoot.newRoot' is missing but a required field");
    }
    return std::make_unique<MapStage>(std::move(in), [expr, ctx](const bson_t* d) {
        Value v = expr->evaluate(d, &ctx->variables());
        if (!v.isDocument())
            uasserted(
                ErrorCode::Location40228,
                fmt::format(
                    "'newRoot' expression must evaluate to an object, but resulting value was: {}. "
                    "Type of resulting value: '{}'. Input document: {}",
                    v.isMissing() ? "MISSING" : v.toString(),
                    v.isMissing() ? "missing" : bson::typeName(v.type()), bson::toJson(d)));
        return toDoc(v);
    });
}

}  // namespace halo::aggregate
