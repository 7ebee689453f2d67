#include "store/storage/record_store.h"

#include <fmt/format.h>

#include <algorithm>

#include "store/query/collator.h"
#include "store/query/matcher.h"
#include "store/storage/key_string.h"

namespace halo::store::rs {
namespace {

WT_ITEM item(const void* data, size_t size) {
    WT_ITEM it{};
    it.data = data;
    it.size = size;
    return it;
}

std::string ridBytes(int64_t rid) {
    std::string out;
    keystring::appendRecordId(out, rid);
    return out;
}

}  // namespace

std::vector<std::string> indexKeys(const IndexEntry& idx, const bson_t* doc, bool* multikey) {
    std::vector<std::string> keys;
    *multikey = false;
    if (idx.partialFilter && !idx.partialFilter->matches(doc)) return keys;
    KeyGenOptions opts;
    opts.sparse = idx.sparse;
    opts.collator = idx.collator.get();
    uassertStatusOK(generateKeys(doc, idx.pattern, opts, &keys, multikey));
    return keys;
}

void throwDuplicateKey(const CollectionEntry& c, const IndexEntry& idx, const bson_t* doc) {
    bson::Doc keyValue;
    std::string shown;
    for (const auto& [path, desc] : idx.pattern.fields) {
        bson_iter_t it;
        if (!shown.empty()) shown += ", ";
        if (bson::findDotted(doc, path, &it)) {
            bson::appendIter(keyValue.mut(), path, it);
            shown += fmt::format("{}: {}", path, bson::valueToString(*bson_iter_value(&it)));
        } else {
            bson_append_null(keyValue.mut(), path.c_str(), static_cast<int>(path.size()));
            shown += fmt::format("{}: null", path);
        }
    }
    auto info = std::make_shared<bson::Doc>();
    BSON_APPEND_DOCUMENT(info->mut(), "keyPattern", idx.keyPattern.get());
    BSON_APPEND_DOCUMENT(info->mut(), "keyValue", keyValue.get());
    throw DuplicateKeyError(
        Status(ErrorCode::DuplicateKey,
               fmt::format("E11000 duplicate key error collection: {} index: {} dup key: {{ {} }}",
                           c.ns, idx.name, shown)),
        std::move(info));
}

void insertIndexKeys(Session& s, const CollectionEntry& c, const IndexEntry& idx, const bson_t* doc,
                     int64_t rid) {
    bool multikey = false;
    auto keys = indexKeys(idx, doc, &multikey);
    if (keys.empty()) return;
    if (multikey && !idx.multikey.load()) idx.multikey = true;
    std::string rb = ridBytes(rid);
    if (idx.unique) {
        Cursor cur = s.open(idx.uri, "overwrite=false");
        for (const auto& k : keys) {
            WT_ITEM key = item(k.data(), k.size());
            WT_ITEM val = item(rb.data(), rb.size());
            cur->set_key(cur.get(), &key);
            cur->set_value(cur.get(), &val);
            int ret = cur->insert(cur.get());
            if (ret == WT_DUPLICATE_KEY) {
                // The same document may already own this key (update keeping a key).
                cur->set_key(cur.get(), &key);
                if (cur->search(cur.get()) == 0) {
                    WT_ITEM existing;
                    cur->get_value(cur.get(), &existing);
                    if (existing.size == rb.size() &&
                        std::memcmp(existing.data, rb.data(), rb.size()) == 0)
                        continue;
                }
                throwDuplicateKey(c, idx, doc);
            }
            wtCheck(ret, "index insert");
        }
    } else {
        Cursor cur = s.open(idx.uri);
        for (const auto& k : keys) {
            std::string full = k + rb;
            WT_ITEM key = item(full.data(), full.size());
            WT_ITEM val = item("", 0);
            cur->set_key(cur.get(), &key);
            cur->set_value(cur.get(), &val);
            wtCheck(cur->insert(cur.get()), "index insert");
        }
    }
}

void removeIndexKeys(Session& s, const CollectionEntry& c, const IndexEntry& idx, const bson_t* doc,
                     int64_t rid) {
    bool multikey = false;
    auto keys = indexKeys(idx, doc, &multikey);
    if (keys.empty()) return;
    Cursor cur = s.open(idx.uri);
    std::string rb = ridBytes(rid);
    for (const auto& k : keys) {
        std::string full = idx.unique ? k : k + rb;
        WT_ITEM key = item(full.data(), full.size());
        cur->set_key(cur.get(), &key);
        int ret = cur->remove(cur.get());
        if (ret != WT_NOTFOUND) wtCheck(ret, "index remove");
    }
}

static void insertRecord(Session& s, const CollectionEntry& c, int64_t rid, const bson_t* doc) {
    {
        Cursor cur = s.open(c.uri, "overwrite=false");
        WT_ITEM val = item(bson_get_data(doc), doc->len);
        cur->set_key(cur.get(), rid);
        cur->set_value(cur.get(), &val);
        wtCheck(cur->insert(cur.get()), "record insert");
    }
    for (const auto& idx : c.indexes) insertIndexKeys(s, c, *idx, doc, rid);
}

void insertWithRecordId(Session& s, const CollectionEntry& c, int64_t rid, const bson_t* doc) {
    insertRecord(s, c, rid, doc);
    c.numRecords++;
    c.dataSize += doc->len;
}

int64_t insert(Session& s, const CollectionEntry& c, const bson_t* doc) {
    int64_t rid = c.nextRecordId.fetch_add(1);
    insertRecord(s, c, rid, doc);
    return rid;
}

void update(Session& s, const CollectionEntry& c, int64_t rid, const bson_t* oldDoc,
            const bson_t* newDoc) {
    {
        Cursor cur = s.open(c.uri);
        WT_ITEM val = item(bson_get_data(newDoc), newDoc->len);
        cur->set_key(cur.get(), rid);
        cur->set_value(cur.get(), &val);
        wtCheck(cur->update(cur.get()), "record update");
    }
    std::string rb = ridBytes(rid);
    for (const auto& idxp : c.indexes) {
        const IndexEntry& idx = *idxp;
        bool mk1 = false, mk2 = false;
        auto oldKeys = indexKeys(idx, oldDoc, &mk1);
        auto newKeys = indexKeys(idx, newDoc, &mk2);
        std::sort(oldKeys.begin(), oldKeys.end());
        std::sort(newKeys.begin(), newKeys.end());
        if (oldKeys == newKeys) continue;
        if (mk2 && !idx.multikey.load()) idx.multikey = true;
        std::vector<std::string> removed, added;
        std::set_difference(oldKeys.begin(), oldKeys.end(), newKeys.begin(), newKeys.end(),
                            std::back_inserter(removed));
        std::set_difference(newKeys.begin(), newKeys.end(), oldKeys.begin(), oldKeys.end(),
                            std::back_inserter(added));
        Cursor cur = s.open(idx.uri, "overwrite=false");
        for (const auto& k : removed) {
            std::string full = idx.unique ? k : k + rb;
            WT_ITEM key = item(full.data(), full.size());
            cur->set_key(cur.get(), &key);
            int ret = cur->remove(cur.get());
            if (ret != WT_NOTFOUND) wtCheck(ret, "index remove");
        }
        for (const auto& k : added) {
            std::string full = idx.unique ? k : k + rb;
            WT_ITEM key = item(full.data(), full.size());
            WT_ITEM val = idx.unique ? item(rb.data(), rb.size()) : item("", 0);
            cur->set_key(cur.get(), &key);
            cur->set_value(cur.get(), &val);
            int ret = cur->insert(cur.get());
            if (ret == WT_DUPLICATE_KEY && idx.unique) throwDuplicateKey(c, idx, newDoc);
            if (ret == WT_DUPLICATE_KEY) continue;
            wtCheck(ret, "index insert");
        }
    }
}

void remove(Session& s, const CollectionEntry& c, int64_t rid, const bson_t* oldDoc) {
    {
        Cursor cur = s.open(c.uri);
        cur->set_key(cur.get(), rid);
        wtCheck(cur->remove(cur.get()), "record remove");
    }
    for (const auto& idx : c.indexes) removeIndexKeys(s, c, *idx, oldDoc, rid);
}

std::optional<bson::Doc> fetch(Session& s, const CollectionEntry& c, int64_t rid) {
    Cursor cur = s.open(c.uri);
    cur->set_key(cur.get(), rid);
    int ret = cur->search(cur.get());
    if (ret == WT_NOTFOUND) return std::nullopt;
    wtCheck(ret, "record fetch");
    WT_ITEM v;
    wtCheck(cur->get_value(cur.get(), &v), "record value");
    return bson::Doc::copyOf(static_cast<const uint8_t*>(v.data), v.size);
}

std::optional<int64_t> findById(Session& s, const CollectionEntry& c, const bson_value_t& id) {
    const IndexEntry* idx = c.idIndex();
    if (!idx) return std::nullopt;
    std::string k;
    keystring::appendValue(k, id, false, idx->collator.get());
    Cursor cur = s.open(idx->uri);
    WT_ITEM key = item(k.data(), k.size());
    cur->set_key(cur.get(), &key);
    int ret = cur->search(cur.get());
    if (ret == WT_NOTFOUND) return std::nullopt;
    wtCheck(ret, "_id lookup");
    WT_ITEM v;
    cur->get_value(cur.get(), &v);
    return keystring::readRecordIdSuffix(
        std::string_view(static_cast<const char*>(v.data), v.size));
}

}  // namespace halo::store::rs
