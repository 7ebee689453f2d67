#include "store/exec/collection_validator.h"

#include <fmt/format.h>

#include <functional>
#include <map>
#include <set>

#include "common/log.h"
#include "store/exec/interrupt.h"
#include "store/query/document_validator.h"
#include "store/storage/key_string.h"
#include "store/storage/record_store.h"

namespace halo::store {
namespace {

constexpr size_t kBuckets = 1 << 16;
constexpr size_t kMaxReported = 100;  // entries listed per kind, as mongod caps its lists

/// An index entry in one canonical form: the key followed by the record id
/// (unique indexes store the record id as the value, others in the key).
std::string entryOf(std::string_view key, std::string_view value, bool unique) {
    std::string e(key);
    if (unique) e.append(value);
    return e;
}

struct Buckets {
    std::vector<int64_t> count = std::vector<int64_t>(kBuckets, 0);
    std::vector<uint64_t> mix = std::vector<uint64_t>(kBuckets, 0);

    static size_t bucketOf(std::string_view e) {
        return std::hash<std::string_view>{}(e) % kBuckets;
    }
    /// A second hash, so that a missing and an extra entry in one bucket do not cancel.
    static uint64_t fingerprint(std::string_view e) {
        uint64_t h = 1469598103934665603ULL;
        for (unsigned char c : e) h = (h ^ c) * 1099511628211ULL;
        return h;
    }
    void add(std::string_view e, int sign) {
        size_t b = bucketOf(e);
        count[b] += sign;
        mix[b] += sign > 0 ? fingerprint(e) : -fingerprint(e);
    }
    bool consistent(size_t b) const { return count[b] == 0 && mix[b] == 0; }
};

/// Calls f(cursor) on every row of the table, checking for killOp.
template <class F>
void forEachRow(Session& s, const std::string& uri, F&& f) {
    Cursor c = s.open(uri);
    int ret;
    while ((ret = c->next(c.get())) == 0) {
        checkForInterrupt();
        f(c.get());
    }
    if (ret != WT_NOTFOUND) wtCheck(ret, "validate scan " + uri);
}

/// Calls f(recordId, document, validBson) for every record.
template <class F>
void forEachRecord(Session& s, const CollectionEntry& c, F&& f) {
    forEachRow(s, c.uri, [&](WT_CURSOR* rc) {
        int64_t rid;
        WT_ITEM v;
        wtCheck(rc->get_key(rc, &rid), "validate record id");
        wtCheck(rc->get_value(rc, &v), "validate record");
        const auto* data = static_cast<const uint8_t*>(v.data);
        bool ok = bson::validate(data, v.size).isOK();
        bson::View doc = ok ? bson::View(data, v.size) : bson::View();
        f(rid, doc.get(), ok);
    });
}

/// Calls f(entry) for every entry of the index, in canonical form.
template <class F>
void forEachIndexEntry(Session& s, const IndexEntry& idx, F&& f) {
    forEachRow(s, idx.uri, [&](WT_CURSOR* ic) {
        WT_ITEM k, v;
        wtCheck(ic->get_key(ic, &k), "validate index key");
        wtCheck(ic->get_value(ic, &v), "validate index value");
        f(entryOf({static_cast<const char*>(k.data), k.size},
                  {static_cast<const char*>(v.data), v.size}, idx.unique));
    });
}

/// The entries `doc` (record `rid`) implies in `idx`; none when its keys
/// cannot be generated (then no insert could have stored it: reported).
std::vector<std::string> expectedEntries(const IndexEntry& idx, const bson_t* doc, int64_t rid,
                                         bool* keyError) {
    bool multikey = false;
    std::vector<std::string> out;
    std::string rb;
    keystring::appendRecordId(rb, rid);
    try {
        for (auto& k : rs::indexKeys(idx, doc, &multikey)) out.push_back(k + rb);
    } catch (const DBException&) {
        *keyError = true;
    }
    return out;
}

bson::Doc idKeyOf(const bson_t* doc) {
    bson::Doc d;
    bson_iter_t it;
    if (bson::find(doc, "_id", &it)) bson::appendIter(d.mut(), "_id", it);
    return d;
}

}  // namespace

ValidateResults validateCollection(Session& s, const CollectionEntry& c) {
    ValidateResults r;
    std::vector<Buckets> buckets(c.indexes.size());
    const auto* schema = c.validation ? c.validation->validator.get() : nullptr;
    bool keyErrors = false;

    // Pass 1: the records, and the index entries they imply.
    forEachRecord(s, c, [&](int64_t rid, const bson_t* doc, bool ok) {
        ++r.nrecords;
        if (!ok) {
            ++r.nInvalidDocuments;
            log::error("storage", 20289, "Document is not valid BSON",
                       fmt::format(R"({{"namespace":{},"recordId":{}}})", log::quote(c.ns), rid));
            return;
        }
        if (schema && !schema->matches(doc)) {
            ++r.nNonCompliantDocuments;
            log::warning("storage", 5363500,
                         "Document is not compliant with the collection's schema",
                         fmt::format(R"({{"namespace":{},"recordId":{},"reason":{}}})",
                                     log::quote(c.ns), rid, schema->errInfo(doc).toJson()));
        }
        for (size_t i = 0; i < c.indexes.size(); ++i)
            for (const auto& e : expectedEntries(*c.indexes[i], doc, rid, &keyErrors))
                buckets[i].add(e, 1);
    });

    // Pass 2: what the indexes hold.
    for (size_t i = 0; i < c.indexes.size(); ++i) {
        ValidateResults::IndexResult ir;
        ir.name = c.indexes[i]->name;
        forEachIndexEntry(s, *c.indexes[i], [&](const std::string& e) {
            ++ir.keys;
            buckets[i].add(e, -1);
        });
        r.indexes.push_back(std::move(ir));
    }

    // Pass 3, only for buckets that disagree: name the entries.
    int64_t missing = 0, extra = 0;
    for (size_t i = 0; i < c.indexes.size(); ++i) {
        const IndexEntry& idx = *c.indexes[i];
        std::set<size_t> bad;
        for (size_t b = 0; b < kBuckets; ++b)
            if (!buckets[i].consistent(b)) bad.insert(b);
        if (bad.empty()) continue;
        r.indexes[i].valid = false;
        std::multiset<std::string> actual;
        forEachIndexEntry(s, idx, [&](const std::string& e) {
            if (bad.count(Buckets::bucketOf(e))) actual.insert(e);
        });
        std::map<std::string, std::pair<int64_t, bson::Doc>> expected;  // entry -> record
        forEachRecord(s, c, [&](int64_t rid, const bson_t* doc, bool ok) {
            if (!ok) return;
            bool ignored = false;
            for (auto& e : expectedEntries(idx, doc, rid, &ignored))
                if (bad.count(Buckets::bucketOf(e)))
                    expected.emplace(e, std::pair{rid, idKeyOf(doc)});
        });
        for (auto& [e, rec] : expected) {
            auto it = actual.find(e);
            if (it != actual.end()) {
                actual.erase(it);
                continue;
            }
            ++missing;
            if (r.missingIndexEntries.size() >= kMaxReported) continue;
            bson::Doc d;
            BSON_APPEND_UTF8(d.mut(), "indexName", idx.name.c_str());
            BSON_APPEND_INT64(d.mut(), "recordId", rec.first);
            BSON_APPEND_DOCUMENT(d.mut(), "idKey", rec.second.get());
            r.missingIndexEntries.push_back(std::move(d));
        }
        for (const auto& e : actual) {
            ++extra;
            if (r.extraIndexEntries.size() >= kMaxReported) continue;
            bson::Doc d;
            BSON_APPEND_UTF8(d.mut(), "indexName", idx.name.c_str());
            if (e.size() >= keystring::kRecordIdSize)
                BSON_APPEND_INT64(d.mut(), "recordId", keystring::readRecordIdSuffix(e));
            r.extraIndexEntries.push_back(std::move(d));
        }
    }
    if (r.nInvalidDocuments > 0)
        r.errors.push_back("Detected one or more invalid documents. See logs.");
    if (keyErrors)
        r.errors.push_back("Detected one or more documents whose index keys cannot be generated.");
    if (missing > 0) r.errors.push_back(fmt::format("Detected {} missing index entries.", missing));
    if (extra > 0) r.errors.push_back(fmt::format("Detected {} extra index entries.", extra));
    for (const auto& ir : r.indexes)
        if (!ir.valid)
            r.errors.push_back(fmt::format("Index with name: {} has inconsistencies.", ir.name));
    if (c.numRecords.load() != r.nrecords)
        r.warnings.push_back(
            fmt::format("The collection's record count ({}) did not match the records found ({}).",
                        c.numRecords.load(), r.nrecords));
    if (r.nNonCompliantDocuments > 0)
        r.warnings.push_back(
            "Detected one or more documents not compliant with the collection's schema. Check "
            "logs for log id 5363500.");
    return r;
}

}  // namespace halo::store
