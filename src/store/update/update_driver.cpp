#include "store/update/update_driver.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "bson/compare.h"
#include "store/query/matcher.h"
#include "store/update/element.h"
#include "store/update/format.h"
#include "store/update/modifier.h"
#include "store/update/update_tree.h"

namespace halo::update {
namespace {

constexpr uint32_t kMaxUserSize = 16 * 1024 * 1024;

void moveIdFirst(Element* root) {
    Element* id = root->findField("_id");
    if (!id) return;
    size_t idx = root->indexOf(id);
    if (idx == 0) return;
    root->insertChild(0, root->removeChild(idx));
}

bool sameBytes(const bson_t* a, const bson_t* b) {
    return a->len == b->len && std::memcmp(bson_get_data(a), bson_get_data(b), a->len) == 0;
}

const Element* resolve(const Element* root, const std::string& path) {
    const Element* cur = root;
    size_t start = 0;
    while (cur) {
        auto dot = path.find('.', start);
        std::string_view part(path.data() + start,
                              (dot == std::string::npos ? path.size() : dot) - start);
        cur = cur->findChild(part);
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    return cur;
}

bool hasPrefixIn(const std::string& path, const std::set<std::string>& set) {
    for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', dot + 1)) {
        if (set.count(path.substr(0, dot))) return true;
    }
    return false;
}

UpdateDescription describe(const ChangeLog& log, const Element* root) {
    UpdateDescription d;
    std::set<std::string> updated(log.updated.begin(), log.updated.end());
    std::set<std::string> seen;
    for (auto& p : log.updated) {
        if (seen.count(p) || hasPrefixIn(p, updated)) continue;
        const Element* e = resolve(root, p);
        if (!e) continue;
        seen.insert(p);
        e->appendTo(d.updatedFields.mut(), p);
    }
    std::set<std::string> removedSeen;
    for (auto& p : log.removed) {
        if (removedSeen.count(p) || resolve(root, p)) continue;
        removedSeen.insert(p);
        d.removedFields.push_back(p);
    }
    for (auto& t : log.truncated) {
        if (hasPrefixIn(t.first, updated) || updated.count(t.first)) continue;
        d.truncatedArrays.push_back(t);
    }
    return d;
}

void fillIdStrings(const bson_t* doc, ApplyContext* ctx) {
    bson_iter_t it;
    if (bson::find(doc, "_id", &it)) {
        ctx->idElement = formatElement("_id", *bson_iter_value(&it));
        ctx->idBraced = "{" + ctx->idElement + "}";
    } else {
        ctx->checkIdImmutable = false;
    }
}

}  // namespace

UpdateDriver::~UpdateDriver() = default;

StatusWith<std::unique_ptr<UpdateDriver>> UpdateDriver::parse(
    const bson_t* update, const bson_t* arrayFilters,
    const std::shared_ptr<const query::Collator>& collator) {
    try {
        std::unique_ptr<UpdateDriver> d(new UpdateDriver());
        auto filters = parseArrayFilters(arrayFilters, collator);
        bson_iter_t it;
        bool operatorStyle =
            bson_iter_init(&it, update) && bson_iter_next(&it) && bson_iter_key(&it)[0] == '$';
        if (operatorStyle) {
            d->tree_ = UpdateTree::parse(update, std::move(filters), collator);
        } else {
            d->replacement_ = bson::Doc::copyOf(update);
        }
        return d;
    } catch (const DBException& e) {
        return e.status();
    }
}

bool UpdateDriver::needsPositional() const {
    return tree_ && tree_->positional();
}

namespace {

/// Whether the field at position `index` named `key` (starting with '$') is
/// part of a DBRef: $ref first, then $id, then optionally $db.
bool dbRefField(std::string_view key, size_t index, const std::vector<std::string_view>& before) {
    if (key == "$ref") return index == 0;
    if (key == "$id") return index == 1 && before[0] == "$ref";
    if (key == "$db") return index == 2 && before[0] == "$ref" && before[1] == "$id";
    return false;
}

}  // namespace

std::string firstDollarPrefixedField(const bson_t* doc) {
    bson_iter_t it;
    if (!bson_iter_init(&it, doc)) return {};
    std::vector<std::string_view> keys;
    while (bson_iter_next(&it)) {
        std::string_view key = bson_iter_key(&it);
        if (!key.empty() && key[0] == '$' && !dbRefField(key, keys.size(), keys))
            return std::string(key);
        keys.push_back(key);
        if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_t sub;
            if (!bson::subDocumentAt(it, &sub)) continue;
            std::string inner = firstDollarPrefixedField(&sub);
            if (!inner.empty()) return inner;
        }
    }
    return {};
}

Status validateIdForInsert(const bson_iter_t& id) {
    bson_type_t t = bson_iter_type(&id);
    if (t == BSON_TYPE_ARRAY || t == BSON_TYPE_REGEX || t == BSON_TYPE_UNDEFINED)
        return {ErrorCode::InvalidIdField,
                fmt::format("The '_id' value cannot be of type {}", bson::typeName(t))};
    if (t == BSON_TYPE_DOCUMENT) {
        uint32_t len;
        const uint8_t* data;
        bson_iter_document(&id, &len, &data);
        bson_t sub;
        if (bson_init_static(&sub, data, len)) {
            std::string bad = firstDollarPrefixedField(&sub);
            if (!bad.empty())
                return {ErrorCode::DollarPrefixedFieldName,
                        fmt::format("_id fields may not contain '$'-prefixed fields: {} is not "
                                    "valid for storage.",
                                    bad)};
        }
    }
    return Status::OK();
}

Status validateForStorage(const bson_t* doc, const bson_t* before) {
    if (doc->len > kMaxUserSize) {
        return {ErrorCode::BSONObjectTooLarge,
                fmt::format("Resulting document after update is larger than {}", kMaxUserSize)};
    }
    auto dollarRefused = [](std::string_view key, std::string_view path) -> Status {
        return {ErrorCode::DollarPrefixedFieldName,
                fmt::format("The dollar ($) prefixed field '{}' in '{}' is not allowed in the "
                            "context of an update's replacement document. Consider using an "
                            "aggregation pipeline with $replaceWith.",
                            key, path)};
    };
    bson_iter_t it;
    if (!bson_iter_init(&it, doc)) return {ErrorCode::InvalidBSON, "invalid BSON document"};
    while (bson_iter_next(&it)) {
        std::string_view key = bson_iter_key(&it);
        if (key == "_id") {
            bson_type_t t = bson_iter_type(&it);
            if (t == BSON_TYPE_ARRAY || t == BSON_TYPE_REGEX || t == BSON_TYPE_UNDEFINED) {
                return {ErrorCode::InvalidIdField,
                        fmt::format("The '_id' value cannot be of type {}", bson::typeName(t))};
            }
            if (t == BSON_TYPE_DOCUMENT) {
                // As mongod: the _id document's own fields count as top-level ones.
                bson_iter_t sub;
                bson_iter_recurse(&it, &sub);
                std::vector<std::string_view> keys;
                while (bson_iter_next(&sub)) {
                    std::string_view k = bson_iter_key(&sub);
                    if (!k.empty() && k[0] == '$' && !dbRefField(k, keys.size(), keys))
                        return dollarRefused(k, fmt::format("_id.{}", k));
                    keys.push_back(k);
                }
            }
        } else if (!key.empty() && key[0] == '$') {
            // An operator update validates what it changed, as mongod: a
            // $-prefixed field the document already had stays allowed.
            bson_iter_t had;
            if (before && bson_iter_init_find(&had, before, std::string(key).c_str())) continue;
            return dollarRefused(key, key);
        }
    }
    return Status::OK();
}

UpdateResult UpdateDriver::applyReplacement(const bson_t* oldDoc, const ApplyOptions& opts) const {
    auto root = Element::fromDocument(replacement_->get());
    bson_iter_t oldId;
    if (bson::find(oldDoc, "_id", &oldId)) {
        Element* newId = root->findField("_id");
        if (!newId) {
            root->insertChild(0, Element::fromValue("_id", *bson_iter_value(&oldId)));
        } else {
            ValueView nv(*newId);
            if (bson::compareValues(*bson_iter_value(&oldId), nv.get()) != 0) {
                uasserted(ErrorCode::ImmutableField,
                          fmt::format("After applying the update, the (immutable) field '_id' was "
                                      "found to have been altered to {}",
                                      formatElement("_id", nv.get())));
            }
        }
    }
    moveIdFirst(root.get());
    UpdateResult r;
    r.newDoc = root->toDoc();
    uassertStatusOK(validateForStorage(r.newDoc.get()));
    r.modified = !sameBytes(r.newDoc.get(), oldDoc);
    return r;
}

UpdateResult UpdateDriver::apply(const bson_t* oldDoc, const ApplyOptions& opts) const {
    if (replacement_) return applyReplacement(oldDoc, opts);

    auto root = Element::fromDocument(oldDoc);
    ChangeLog log;
    ApplyContext ctx;
    ctx.root = root.get();
    ctx.isInsert = opts.isUpsertInsert;
    ctx.nowMillis = opts.nowMillis;
    ctx.log = opts.computeDescription ? &log : nullptr;
    fillIdStrings(oldDoc, &ctx);
    tree_->apply(root.get(), ctx, opts.positionalIndex);
    moveIdFirst(root.get());

    UpdateResult r;
    r.newDoc = root->toDoc();
    uassertStatusOK(validateForStorage(r.newDoc.get(), oldDoc));
    r.modified = !sameBytes(r.newDoc.get(), oldDoc);
    if (opts.computeDescription && r.modified) r.description = describe(log, root.get());
    return r;
}

StatusWith<UpdateResult> UpdateDriver::tryApply(const bson_t* oldDoc,
                                                const ApplyOptions& opts) const {
    try {
        return apply(oldDoc, opts);
    } catch (const DBException& e) {
        return e.status();
    }
}

UpdateResult UpdateDriver::applyUpsert(const bson_t* query, const ApplyOptions& opts) const {
    bson::Doc seed = seedUpsertDocument(query, isReplacement());
    ApplyOptions o = opts;
    o.isUpsertInsert = true;
    o.positionalIndex.reset();
    UpdateResult r = apply(seed.get(), o);
    r.modified = true;  // an insert always writes
    return r;
}

bson::Doc seedUpsertDocument(const bson_t* query, bool idOnly) {
    auto matcher = uassertStatusOK(query::Matcher::parse(query));
    bson::Doc fields = uassertStatusOK(matcher->upsertSeedFields());

    // Paths in order, as mongod's EqualityMatches map; overlapping paths cannot both be set.
    std::vector<std::pair<std::string, bson_iter_t>> paths;  // iterators own no value copy
    bson_iter_t it;
    bson_iter_init(&it, fields.get());
    while (bson_iter_next(&it)) {
        std::string path = bson_iter_key(&it);
        if (idOnly && path != "_id") continue;
        paths.emplace_back(path, it);
    }
    std::sort(paths.begin(), paths.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < paths.size(); ++i) {
        for (size_t j = 0; j < paths.size(); ++j) {
            const std::string& a = paths[i].first;
            const std::string& b = paths[j].first;
            if (i == j) continue;
            if (a == b) {
                uasserted(ErrorCode::NotSingleValueField,
                          fmt::format("cannot infer query fields to set, path '{}' is matched "
                                      "twice",
                                      a));
            }
            if (b.size() > a.size() && b.compare(0, a.size(), a) == 0 && b[a.size()] == '.') {
                uasserted(ErrorCode::NotSingleValueField,
                          fmt::format("cannot infer query fields to set, both paths '{}' and '{}' "
                                      "are matched",
                                      b, a));
            }
        }
    }

    auto root = Element::makeObject("");
    for (auto& [path, value] : paths) {
        auto parts = parseUpdatePath(path);
        Element* cur = root.get();
        for (size_t i = 0; i + 1 < parts.size(); ++i) {
            Element* next = cur->findField(parts[i]);
            if (!next) next = cur->appendChild(Element::makeObject(parts[i]));
            if (!next->isObject()) {
                uasserted(ErrorCode::NotSingleValueField,
                          fmt::format("cannot infer query fields to set, path '{}' is matched "
                                      "twice",
                                      path));
            }
            cur = next;
        }
        cur->appendChild(Element::fromValue(parts.back(), *bson_iter_value(&value)));
    }
    moveIdFirst(root.get());
    return root->toDoc();
}

}  // namespace halo::update
