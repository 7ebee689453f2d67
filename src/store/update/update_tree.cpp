#include "store/update/update_tree.h"

#include <fmt/format.h>

#include <set>

#include "bson/doc.h"
#include "common/status.h"
#include "store/update/format.h"

namespace halo::update {

bool ComponentLess::operator()(std::string_view a, std::string_view b) const {
    auto allDigits = [](std::string_view s) {
        if (s.empty()) return false;
        for (char c : s) {
            if (c < '0' || c > '9') return false;
        }
        return true;
    };
    if (allDigits(a) && allDigits(b)) {
        auto strip = [](std::string_view s) {
            while (s.size() > 1 && s.front() == '0') s.remove_prefix(1);
            return s;
        };
        a = strip(a);
        b = strip(b);
        if (a.size() != b.size()) return a.size() < b.size();
    }
    return a < b;
}

struct UpdateTree::Node {
    enum class Kind { kObject, kArray, kLeaf };
    Kind kind = Kind::kObject;
    // Object: field names; array: identifier ("" for "$[]").
    std::map<std::string, std::unique_ptr<Node>, ComponentLess> children;
    std::unique_ptr<Node> positional;  // "$" child of an object node
    std::unique_ptr<Modifier> mod;     // leaf only

    bool fresh() const { return children.empty() && !positional; }
};

namespace {

using Node = UpdateTree::Node;
using NodeList = std::vector<const Node*>;

std::string joinPath(const std::vector<std::string>& parts, size_t n) {
    std::string out;
    for (size_t i = 0; i < n && i < parts.size(); ++i) {
        if (i) out.push_back('.');
        out += parts[i];
    }
    return out;
}

std::string join(const std::string& base, std::string_view part) {
    if (base.empty()) return std::string(part);
    return fmt::format("{}.{}", base, part);
}

bool isArrayFilterPart(std::string_view p) {
    return p.size() >= 3 && p.substr(0, 2) == "$[" && p.back() == ']';
}

bool isDynamicPart(std::string_view p) {
    return p == "$" || isArrayFilterPart(p);
}

bool isValidIdentifier(std::string_view id) {
    if (id.empty() || id[0] < 'a' || id[0] > 'z') return false;
    for (char c : id) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!ok) return false;
    }
    return true;
}

/// Collects the top-level field-name prefixes of one array filter (through $and/$or/$nor).
void collectIdentifiers(const bson_t* filter, std::vector<std::string>* out) {
    bson_iter_t it;
    if (!bson_iter_init(&it, filter)) return;
    while (bson_iter_next(&it)) {
        std::string_view key = bson_iter_key(&it);
        if (!key.empty() && key[0] == '$') {
            if ((key == "$and" || key == "$or" || key == "$nor") && BSON_ITER_HOLDS_ARRAY(&it)) {
                bson_iter_t sub;
                bson_iter_recurse(&it, &sub);
                while (bson_iter_next(&sub)) {
                    if (!BSON_ITER_HOLDS_DOCUMENT(&sub)) continue;
                    uint32_t len;
                    const uint8_t* data;
                    bson_iter_document(&sub, &len, &data);
                    bson_t child;
                    if (bson_init_static(&child, data, len)) collectIdentifiers(&child, out);
                }
            }
            continue;
        }
        auto dot = key.find('.');
        out->emplace_back(key.substr(0, dot));
    }
}

[[noreturn]] void conflict(std::string_view path, std::string_view at) {
    uasserted(ErrorCode::ConflictingUpdateOperators,
              fmt::format("Updating the path '{}' would create a conflict at '{}'", path, at));
}

[[noreturn]] void mergeConflict(std::string_view path) {
    uasserted(ErrorCode::ConflictingUpdateOperators,
              fmt::format("Update created a conflict at '{}'", path));
}

/// Inserts `mod` at `parts` into the tree rooted at `root`.
void mergePath(Node* root, const std::vector<std::string>& parts, const std::string& path,
               std::unique_ptr<Modifier> mod) {
    Node* node = root;
    for (size_t i = 0; i < parts.size(); ++i) {
        const std::string& part = parts[i];
        if (node->kind == Node::Kind::kLeaf) conflict(path, joinPath(parts, i));
        bool arrayPart = isArrayFilterPart(part);
        Node::Kind want = arrayPart ? Node::Kind::kArray : Node::Kind::kObject;
        if (node->fresh())
            node->kind = want;
        else if (node->kind != want)
            conflict(path, joinPath(parts, i));

        std::unique_ptr<Node>* slot;
        if (part == "$") {
            slot = &node->positional;
        } else {
            std::string key = arrayPart ? part.substr(2, part.size() - 3) : part;
            slot = &node->children[key];
        }
        bool last = i + 1 == parts.size();
        if (*slot) {
            if (last) conflict(path, path);
            node = slot->get();
            continue;
        }
        *slot = std::make_unique<Node>();
        node = slot->get();
        if (last) {
            node->kind = Node::Kind::kLeaf;
            node->mod = std::move(mod);
        }
    }
}

std::unique_ptr<Modifier> makeModifier(ModifierType t, const std::string& path,
                                       const bson_value_t& v, const Collation& coll) {
    switch (t) {
        case ModifierType::kSet:
            return makeSetModifier(v, false);
        case ModifierType::kSetOnInsert:
            return makeSetModifier(v, true);
        case ModifierType::kUnset:
            return makeUnsetModifier();
        case ModifierType::kInc:
        case ModifierType::kMul:
            return makeArithmeticModifier(t, path, v);
        case ModifierType::kMin:
        case ModifierType::kMax:
            return makeCompareModifier(t, v, coll);
        case ModifierType::kCurrentDate:
            return makeCurrentDateModifier(path, v);
        case ModifierType::kPush:
            return makePushModifier(v, coll);
        case ModifierType::kAddToSet:
            return makeAddToSetModifier(v, coll);
        case ModifierType::kPull:
            return makePullModifier(v, coll);
        case ModifierType::kPullAll:
            return makePullAllModifier(v, coll);
        case ModifierType::kPop:
            return makePopModifier(path, v);
        case ModifierType::kBit:
            return makeBitModifier(path, v);
        case ModifierType::kRename:
            break;  // handled by the caller
    }
    HALO_INVARIANT(false);
    return nullptr;
}

bool isComponentPrefix(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    if (a.size() > b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i] != b[i]) return false;
    }
    return true;
}

/// Applies a tree to one document.
class Applier {
  public:
    Applier(ApplyContext& ctx, const ArrayFilterMap& filters,
            const std::optional<std::string>& positionalIndex)
        : ctx_(ctx), filters_(filters), positionalIndex_(positionalIndex) {}

    void applyExisting(const NodeList& nodes, Element& e, const std::string& path) {
        switch (kindOf(nodes, path)) {
            case Node::Kind::kLeaf:
                applyLeafExisting(*nodes[0]->mod, e, path);
                return;
            case Node::Kind::kObject: {
                for (auto& [name, list] : gatherObjectChildren(nodes)) {
                    Element* c = e.findChild(name);
                    if (c)
                        applyExisting(list, *c, join(path, name));
                    else
                        applyMissing(list, &e, {name}, path);
                }
                return;
            }
            case Node::Kind::kArray:
                applyArray(nodes, e, path);
                return;
        }
    }

    void applyMissing(const NodeList& nodes, Element* base, std::vector<std::string> pending,
                      std::string basePath) {
        // Earlier siblings may have created part of the path.
        while (!pending.empty()) {
            Element* c = base->findChild(pending.front());
            if (!c) break;
            base = c;
            basePath = join(basePath, pending.front());
            pending.erase(pending.begin());
        }
        if (pending.empty()) {
            applyExisting(nodes, *base, basePath);
            return;
        }
        std::string fullPath = basePath;
        for (auto& p : pending) fullPath = join(fullPath, p);
        switch (kindOf(nodes, fullPath)) {
            case Node::Kind::kLeaf:
                applyLeafMissing(*nodes[0]->mod, base, pending, basePath, fullPath);
                return;
            case Node::Kind::kArray:
                uasserted(ErrorCode::BadValue,
                          fmt::format("The path '{}' must exist in the document in order to apply "
                                      "array updates.",
                                      fullPath));
            case Node::Kind::kObject:
                for (auto& [name, list] : gatherObjectChildren(nodes)) {
                    auto next = pending;
                    next.push_back(name);
                    applyMissing(list, base, std::move(next), basePath);
                }
                return;
        }
    }

  private:
    Node::Kind kindOf(const NodeList& nodes, const std::string& path) const {
        Node::Kind k = nodes.front()->kind;
        for (const Node* n : nodes) {
            if (n->kind != k) mergeConflict(path);
        }
        if (k == Node::Kind::kLeaf && nodes.size() > 1) mergeConflict(path);
        return k;
    }

    std::map<std::string, NodeList, ComponentLess> gatherObjectChildren(const NodeList& nodes) {
        std::map<std::string, NodeList, ComponentLess> out;
        for (const Node* n : nodes) {
            for (auto& [name, child] : n->children) out[name].push_back(child.get());
            if (n->positional) {
                if (!positionalIndex_ || positionalIndex_->empty()) {
                    uasserted(ErrorCode::BadValue,
                              "The positional operator did not find the match needed from the "
                              "query.");
                }
                out[*positionalIndex_].push_back(n->positional.get());
            }
        }
        return out;
    }

    bool filterMatches(const std::string& id, const Element& elem) {
        auto it = filters_.find(id);
        HALO_INVARIANT(it != filters_.end());
        bson::Doc wrapped;
        elem.appendTo(wrapped.mut(), id);
        return it->second->matches(wrapped.get());
    }

    void applyArray(const NodeList& nodes, Element& e, const std::string& path) {
        if (!e.isArray()) {
            uasserted(ErrorCode::BadValue,
                      fmt::format("Cannot apply array updates to non-array element {}",
                                  formatElement(e)));
        }
        // Decide which elements each filter selects before changing any of them.
        std::vector<NodeList> perElement(e.size());
        for (size_t i = 0; i < e.size(); ++i) {
            for (const Node* n : nodes) {
                for (auto& [id, child] : n->children) {
                    if (id.empty() || filterMatches(id, *e.child(i))) {
                        perElement[i].push_back(child.get());
                    }
                }
            }
        }
        for (size_t i = 0; i < perElement.size() && i < e.size(); ++i) {
            if (!perElement[i].empty())
                applyExisting(perElement[i], *e.child(i), join(path, std::to_string(i)));
        }
    }

    void checkImmutable(const std::string& path) const {
        if (!ctx_.checkIdImmutable) return;
        if (path == "_id" || path.rfind("_id.", 0) == 0) {
            uasserted(ErrorCode::ImmutableField,
                      fmt::format("Performing an update on the path '{}' would modify the "
                                  "immutable field '_id'",
                                  path));
        }
    }

    void applyLeafExisting(const Modifier& mod, Element& e, const std::string& path) {
        if (mod.insertOnly() && !ctx_.isInsert) return;
        if (mod.applyExisting(e, path, ctx_)) checkImmutable(path);  // e may be gone now
    }

    void applyLeafMissing(const Modifier& mod, Element* base,
                          const std::vector<std::string>& pending, const std::string& basePath,
                          const std::string& fullPath) {
        if (mod.insertOnly() && !ctx_.isInsert) return;
        if (!mod.createsMissing()) return;
        bool viable = base->isObject() || (base->isArray() && parseArrayIndex(pending.front()));
        if (!viable) {
            if (mod.noopOnNonViablePath(ctx_)) return;
            uasserted(ErrorCode::PathNotViable,
                      fmt::format("Cannot create field '{}' in element {{{}}}", pending.front(),
                                  formatElement(*base)));
        }
        auto value = mod.valueForMissing(fullPath, ctx_);
        if (!value) return;
        checkImmutable(fullPath);
        std::unique_ptr<Element> node = std::move(value);
        for (size_t k = pending.size(); k-- > 1;) {
            node->setName(pending[k]);
            auto obj = Element::makeObject(pending[k - 1]);
            obj->appendChild(std::move(node));
            node = std::move(obj);
        }
        std::string createdPath = join(basePath, pending.front());
        if (base->isObject()) {
            node->setName(pending.front());
            base->appendChild(std::move(node));
        } else {
            size_t idx = *parseArrayIndex(pending.front());
            while (base->size() < idx) {
                base->appendChild(Element::makeNull(""));
                ctx_.logUpdated(join(basePath, std::to_string(base->size() - 1)));
            }
            base->appendChild(std::move(node));
        }
        ctx_.logUpdated(createdPath);
    }

    ApplyContext& ctx_;
    const ArrayFilterMap& filters_;
    const std::optional<std::string>& positionalIndex_;
};

}  // namespace

std::vector<std::string> parseUpdatePath(std::string_view path) {
    if (path.empty()) uasserted(ErrorCode::EmptyFieldName, "An empty update path is not valid.");
    std::vector<std::string> parts;
    size_t start = 0;
    while (true) {
        auto dot = path.find('.', start);
        parts.emplace_back(path.substr(start, dot == std::string_view::npos ? dot : dot - start));
        if (parts.back().empty()) {
            uasserted(ErrorCode::EmptyFieldName,
                      fmt::format("The update path '{}' contains an empty field name, which is not "
                                  "allowed.",
                                  path));
        }
        if (dot == std::string_view::npos) break;
        start = dot + 1;
    }
    return parts;
}

ArrayFilterMap parseArrayFilters(const bson_t* arrayFilters, const Collation& coll) {
    ArrayFilterMap out;
    if (!arrayFilters) return out;
    bson_iter_t it;
    if (!bson_iter_init(&it, arrayFilters)) return out;
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
            uasserted(ErrorCode::TypeMismatch,
                      fmt::format("BSON field 'arrayFilters.{}' is the wrong type '{}', expected "
                                  "type 'object'",
                                  bson_iter_key(&it), bson::typeName(bson_iter_type(&it))));
        }
        uint32_t len;
        const uint8_t* data;
        bson_iter_document(&it, &len, &data);
        bson_t filter;
        bson_init_static(&filter, data, len);

        std::vector<std::string> ids;
        collectIdentifiers(&filter, &ids);
        if (ids.empty()) {
            uasserted(ErrorCode::FailedToParse,
                      "Cannot use an expression without a top-level field name in arrayFilters");
        }
        for (auto& id : ids) {
            if (id != ids.front()) {
                uasserted(
                    ErrorCode::FailedToParse,
                    fmt::format("Error parsing array filter :: caused by :: Expected a single "
                                "top-level field name, found '{}' and '{}'",
                                ids.front(), id));
            }
        }
        const std::string& id = ids.front();
        if (!isValidIdentifier(id)) {
            uasserted(ErrorCode::BadValue,
                      fmt::format("Error parsing array filter :: caused by :: The top-level field "
                                  "name must be an alphanumeric string beginning with a lowercase "
                                  "letter, found '{}'",
                                  id));
        }
        if (out.count(id)) {
            uasserted(ErrorCode::FailedToParse,
                      fmt::format("Found multiple array filters with the same top-level field "
                                  "name {}",
                                  id));
        }
        query::MatcherParseOptions mo;
        mo.collator = coll;
        out.emplace(id, uassertStatusOK(query::Matcher::parse(&filter, mo)));
    }
    return out;
}

UpdateTree::UpdateTree() : root_(std::make_unique<Node>()) {}
UpdateTree::~UpdateTree() = default;

std::unique_ptr<UpdateTree> UpdateTree::parse(const bson_t* update, ArrayFilterMap arrayFilters,
                                              const Collation& coll) {
    auto tree = std::make_unique<UpdateTree>();
    tree->filters_ = std::move(arrayFilters);
    std::set<std::string, std::less<>> usedIds;

    // Validates positional and array-filter components of an update path.
    auto checkDynamicParts = [&](const std::vector<std::string>& parts, const std::string& path) {
        size_t positionalCount = 0;
        for (size_t i = 0; i < parts.size(); ++i) {
            const std::string& p = parts[i];
            if (p == "$") {
                if (i == 0) {
                    uasserted(ErrorCode::BadValue,
                              fmt::format("Cannot have positional (i.e. '$') element in the first "
                                          "position in path '{}'",
                                          path));
                }
                if (++positionalCount > 1) {
                    uasserted(ErrorCode::BadValue,
                              fmt::format("Too many positional (i.e. '$') elements found in path "
                                          "'{}'",
                                          path));
                }
                tree->positional_ = true;
            } else if (isArrayFilterPart(p)) {
                if (i == 0) {
                    uasserted(ErrorCode::BadValue,
                              fmt::format("Cannot have array filter identifier (i.e. '$[<id>]') "
                                          "element in the first position in path '{}'",
                                          path));
                }
                std::string id = p.substr(2, p.size() - 3);
                if (id.empty()) continue;  // "$[]"
                if (!tree->filters_.count(id)) {
                    uasserted(ErrorCode::BadValue,
                              fmt::format("No array filter found for identifier '{}' in path '{}'",
                                          id, path));
                }
                usedIds.insert(id);
            }
        }
    };

    bson_iter_t op;
    if (!bson_iter_init(&op, update))
        uasserted(ErrorCode::FailedToParse, "invalid update document");
    while (bson_iter_next(&op)) {
        std::string_view opName = bson_iter_key(&op);
        auto type = modifierTypeFor(opName);
        if (!type) {
            uasserted(ErrorCode::FailedToParse,
                      fmt::format("Unknown modifier: {}. Expected a valid update modifier or "
                                  "pipeline-style update specified as an array",
                                  opName));
        }
        if (!BSON_ITER_HOLDS_DOCUMENT(&op)) {
            uasserted(ErrorCode::FailedToParse,
                      fmt::format("Modifiers operate on fields but we found type {} instead. For "
                                  "example: {{$mod: {{<field>: ...}}}} not {{{}}}",
                                  bson::typeName(bson_iter_type(&op)),
                                  formatElement(opName, *bson_iter_value(&op))));
        }
        bson_iter_t field;
        bson_iter_recurse(&op, &field);
        while (bson_iter_next(&field)) {
            std::string path = bson_iter_key(&field);
            const bson_value_t& value = *bson_iter_value(&field);
            auto parts = parseUpdatePath(path);
            if (*type != ModifierType::kRename) {
                checkDynamicParts(parts, path);
                mergePath(tree->root_.get(), parts, path, makeModifier(*type, path, value, coll));
                continue;
            }
            // $rename {from: "to"}: a placeholder at `from`, the move at `to`.
            std::string elem = formatElement(path, value);
            if (value.value_type != BSON_TYPE_UTF8) {
                uasserted(ErrorCode::BadValue,
                          fmt::format("The 'to' field for $rename must be a string: {}", elem));
            }
            std::string to(value.value.v_utf8.str, value.value.v_utf8.len);
            auto toParts = parseUpdatePath(to);
            if (path == to) {
                uasserted(
                    ErrorCode::BadValue,
                    fmt::format("The source and target field for $rename must differ: {}", elem));
            }
            if (isComponentPrefix(parts, toParts) || isComponentPrefix(toParts, parts)) {
                uasserted(ErrorCode::BadValue,
                          fmt::format("The source and target field for $rename must not be on the "
                                      "same path: {}",
                                      elem));
            }
            for (auto& p : parts) {
                if (isDynamicPart(p)) {
                    uasserted(
                        ErrorCode::BadValue,
                        fmt::format("The source field for $rename may not be dynamic: {}", path));
                }
            }
            for (auto& p : toParts) {
                if (isDynamicPart(p)) {
                    uasserted(ErrorCode::BadValue,
                              fmt::format("The destination field for $rename may not be dynamic: "
                                          "{}",
                                          to));
                }
            }
            mergePath(tree->root_.get(), parts, path, makePlaceholderModifier());
            mergePath(tree->root_.get(), toParts, to, makeRenameModifier(parts, path, toParts));
        }
    }

    for (auto& [id, matcher] : tree->filters_) {
        if (!usedIds.count(id)) {
            uasserted(ErrorCode::FailedToParse,
                      fmt::format("The array filter for identifier '{}' was not used in the "
                                  "update {}",
                                  id, formatDoc(update)));
        }
    }
    return tree;
}

void UpdateTree::apply(Element* root, ApplyContext& ctx,
                       const std::optional<std::string>& positionalIndex) const {
    if (root_->fresh()) return;
    Applier applier(ctx, filters_, positionalIndex);
    applier.applyExisting({root_.get()}, *root, "");
}

}  // namespace halo::update
