#include "store/storage/catalog.h"

#include <fmt/format.h>
#include <openssl/rand.h>

#include <chrono>
#include <set>

#include "bson/compare.h"
#include "common/log.h"
#include "store/query/collator.h"
#include "store/query/document_validator.h"
#include "store/query/matcher.h"
#include "store/storage/record_store.h"

namespace halo::store {
namespace {
constexpr const char* kCatalogUri = "table:_catalog";
constexpr const char* kSizesUri = "table:_sizes";
constexpr const char* kCleanKey = "__clean_shutdown";

WT_ITEM item(const void* data, size_t size) {
    WT_ITEM it{};
    it.data = data;
    it.size = size;
    return it;
}
}  // namespace

namespace {
/// Parses the validation settings kept in `e.options` (create and collMod
/// checked them before storing them).
void attachValidation(CollectionEntry& e) {
    auto sw = query::CollectionValidation::fromOptions(e.options.get(), "create", e.collator);
    if (!sw.isOK()) {
        log::warning("storage", 7390100, "Collection validator cannot be parsed; not enforced",
                     fmt::format(R"({{"namespace":{},"error":{}}})", log::quote(e.ns),
                                 log::quote(sw.getStatus().reason())));
        e.validation.reset();
        return;
    }
    e.validation = sw.getValue().validator
                       ? std::make_shared<const query::CollectionValidation>(sw.getValue())
                       : nullptr;
}
}  // namespace

namespace {
/// Parses a `collation` option (a collection's or an index's) into its collator
/// and the normalized spec to store instead: none for the simple collation.
StatusWith<query::CollatorPtr> parseCollationOption(const bson_iter_t& it, std::string_view what) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&it))
        return Status(ErrorCode::TypeMismatch,
                      fmt::format("BSON field '{}.collation' is the wrong type '{}', expected type "
                                  "'object'",
                                  what, bson::typeName(bson_iter_type(&it))));
    bson_t spec;
    bson::subDocumentAt(it, &spec);
    return query::Collator::parse(&spec);
}

/// `options` with its `collation` replaced by `coll`'s normalized spec (or removed
/// when `coll` is null), keeping the other fields in order.
bson::Doc withCollation(const bson_t* options, const query::Collator* coll) {
    bson::Doc out;
    bool placed = false;
    bson_iter_t it;
    if (options && bson_iter_init(&it, options)) {
        while (bson_iter_next(&it)) {
            std::string_view k = bson_iter_key(&it);
            if (k == "collation") {
                if (coll && !placed) coll->appendTo(out.mut(), "collation");
                placed = true;
                continue;
            }
            bson::appendIter(out.mut(), k, it);
        }
    }
    if (coll && !placed) coll->appendTo(out.mut(), "collation");
    return out;
}

/// The collection's default collation from its stored (normalized) options.
void attachCollation(CollectionEntry& e) {
    bson_iter_t it;
    e.collator.reset();
    if (!bson_iter_init_find(&it, e.options.get(), "collation")) return;
    auto sw = parseCollationOption(it, "create");
    if (!sw.isOK()) {
        log::warning("storage", 7390101, "Collection collation cannot be parsed; not applied",
                     fmt::format(R"({{"namespace":{},"error":{}}})", log::quote(e.ns),
                                 log::quote(sw.getStatus().reason())));
        return;
    }
    e.collator = sw.getValue();
}
}  // namespace

/// A copy of `e` (same tables and indexes) to modify and swap in under the DDL lock.
std::shared_ptr<CollectionEntry> cloneEntry(const CollectionEntry& e) {
    auto next = std::make_shared<CollectionEntry>();
    next->ns = e.ns;
    next->db = e.db;
    next->name = e.name;
    std::memcpy(next->uuid, e.uuid, 16);
    next->options = e.options.copy();
    next->validation = e.validation;
    next->collator = e.collator;
    next->uri = e.uri;
    next->indexes = e.indexes;
    next->nextRecordId = e.nextRecordId.load();
    next->numRecords = e.numRecords.load();
    next->dataSize = e.dataSize.load();
    next->collectionScans = e.collectionScans.load();
    return next;
}

std::pair<std::string, std::string> splitNs(std::string_view ns) {
    auto dot = ns.find('.');
    if (dot == std::string_view::npos) return {std::string(ns), ""};
    return {std::string(ns.substr(0, dot)), std::string(ns.substr(dot + 1))};
}

const IndexEntry* CollectionEntry::findIndex(std::string_view n) const {
    for (const auto& i : indexes)
        if (i->name == n) return i.get();
    return nullptr;
}

const IndexEntry* CollectionEntry::idIndex() const {
    return findIndex("_id_");
}

std::unique_ptr<Session> SessionPool::acquire() {
    {
        std::lock_guard lk(mu_);
        if (!idle_.empty()) {
            auto s = std::move(idle_.back());
            idle_.pop_back();
            return s;
        }
    }
    return engine_.newSession();
}

void SessionPool::release(std::unique_ptr<Session> s) {
    std::lock_guard lk(mu_);
    if (idle_.size() < 256) idle_.push_back(std::move(s));
}

void SessionPool::closeIdle() {
    std::lock_guard lk(mu_);
    idle_.clear();
}

Catalog::Catalog(Engine& e) : engine_(e), sessions_(e) {}
Catalog::~Catalog() = default;

std::string Catalog::newIdent(const char* kind) {
    auto now = std::chrono::system_clock::now().time_since_epoch().count();
    return fmt::format("table:{}-{}-{}", kind, identCounter_++, now);
}

StatusWith<std::shared_ptr<IndexEntry>> Catalog::parseIndexSpec(
    const std::string& ns, const bson_t* spec, const query::CollatorPtr& collectionDefault) {
    auto idx = std::make_shared<IndexEntry>();
    bool haveCollation = false;
    bson_iter_t it;
    bool haveKey = false, haveName = false;
    bson::Doc normalized;
    BSON_APPEND_INT32(normalized.mut(), "v", 2);
    bson_t key;
    bson_t partial;
    bool havePartial = false;
    if (!bson_iter_init(&it, spec)) return Status(ErrorCode::FailedToParse, "invalid index spec");
    while (bson_iter_next(&it)) {
        std::string_view f = bson_iter_key(&it);
        if (f == "key") {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                return Status(ErrorCode::TypeMismatch, "The field 'key' must be an object");
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&it, &len, &data);
            bson_init_static(&key, data, len);
            haveKey = true;
        } else if (f == "name") {
            if (!BSON_ITER_HOLDS_UTF8(&it))
                return Status(ErrorCode::TypeMismatch, "The field 'name' must be a string");
            idx->name = bson_iter_utf8(&it, nullptr);
            if (idx->name.empty())
                return Status(ErrorCode::CannotCreateIndex, "index name cannot be empty");
            haveName = true;
        } else if (f == "unique") {
            idx->unique = bson::isTruthy(*bson_iter_value(&it));
        } else if (f == "sparse") {
            idx->sparse = bson::isTruthy(*bson_iter_value(&it));
        } else if (f == "partialFilterExpression") {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                return Status(ErrorCode::TypeMismatch,
                              "The field 'partialFilterExpression' must be an object");
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&it, &len, &data);
            bson_init_static(&partial, data, len);
            havePartial = true;
        } else if (f == "v" || f == "background" || f == "ns") {
            continue;  // v is always 2; background is ignored since 4.2
        } else if (f == "collation") {
            auto csw = parseCollationOption(it, "createIndexes.indexes");
            if (!csw.isOK()) return csw.getStatus();
            idx->collator = csw.getValue();
            haveCollation = true;
            // Stored normalized; the simple collation is not shown at all.
            if (idx->collator) idx->collator->appendTo(normalized.mut(), "collation");
            continue;
        } else if (f == "expireAfterSeconds" || f == "hidden" || f == "weights" ||
                   f == "default_language" || f == "language_override" || f == "textIndexVersion" ||
                   f == "2dsphereIndexVersion" || f == "bits" || f == "min" || f == "max" ||
                   f == "storageEngine" || f == "wildcardProjection") {
            // Accepted and kept in the spec.
        } else {
            return Status(ErrorCode::InvalidIndexSpecificationOption,
                          fmt::format("The field '{}' is not valid for an index specification. "
                                      "Specification: {}",
                                      f, bson::toJson(spec)));
        }
        if (f != "key" && f != "name") bson::appendIter(normalized.mut(), f, it);
    }
    if (!haveCollation && collectionDefault) {
        // An index created without a collation inherits the collection's default.
        idx->collator = collectionDefault;
        idx->collator->appendTo(normalized.mut(), "collation");
    }
    if (!haveKey)
        return Status(ErrorCode::FailedToParse,
                      "The 'key' field is a required property of an index specification");
    if (!haveName)
        return Status(ErrorCode::FailedToParse,
                      "The 'name' field is a required property of an index specification");
    auto psw = parseKeyPattern(&key);
    if (!psw.isOK()) return psw.getStatus();
    idx->pattern = std::move(psw.getValue());
    idx->keyPattern = bson::Doc::copyOf(&key);
    if (idx->name == "_id_") {
        if (idx->pattern.fields.size() != 1 || idx->pattern.fields[0].first != "_id")
            return Status(ErrorCode::BadValue,
                          "The index name '_id_' is reserved for the _id index, "
                          "which must have key pattern {_id: 1}");
        idx->unique = true;
    }
    if (havePartial) {
        query::MatcherParseOptions mo;
        mo.collator = idx->collator;  // as in mongod, under the index's collation
        auto msw = query::Matcher::parse(&partial, mo);
        if (!msw.isOK()) return msw.getStatus();
        idx->partialFilter = std::move(msw.getValue());
    }
    // Order as mongod lists it: v, key, name, then options.
    bson::Doc ordered;
    BSON_APPEND_INT32(ordered.mut(), "v", 2);
    BSON_APPEND_DOCUMENT(ordered.mut(), "key", &key);
    BSON_APPEND_UTF8(ordered.mut(), "name", idx->name.c_str());
    bson_iter_init(&it, normalized.get());
    while (bson_iter_next(&it)) {
        if (std::string_view(bson_iter_key(&it)) == "v") continue;
        bson::appendIter(ordered.mut(), bson_iter_key(&it), it);
    }
    idx->spec = std::move(ordered);
    (void)ns;
    return idx;
}

Status Catalog::persist(Session& s, const CollectionEntry& e) {
    bson::Doc d;
    BSON_APPEND_UTF8(d.mut(), "ns", e.ns.c_str());
    bson_append_binary(d.mut(), "uuid", 4, BSON_SUBTYPE_UUID, e.uuid, 16);
    BSON_APPEND_DOCUMENT(d.mut(), "options", e.options.get());
    BSON_APPEND_UTF8(d.mut(), "uri", e.uri.c_str());
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(d.mut(), "indexes", &arr);
    int i = 0;
    for (const auto& idx : e.indexes) {
        std::string k = std::to_string(i++);
        bson_t child;
        BSON_APPEND_DOCUMENT_BEGIN(&arr, k.c_str(), &child);
        BSON_APPEND_DOCUMENT(&child, "spec", idx->spec.get());
        BSON_APPEND_UTF8(&child, "uri", idx->uri.c_str());
        BSON_APPEND_BOOL(&child, "multikey", idx->multikey.load());
        // Keys built with the collation (sort keys); older versions kept a collation
        // in the spec but built bytewise keys (see load()).
        if (idx->collator) BSON_APPEND_BOOL(&child, "collationKeys", true);
        bson_append_document_end(&arr, &child);
    }
    bson_append_array_end(d.mut(), &arr);
    try {
        Cursor c = s.open(kCatalogUri);
        c->set_key(c.get(), e.ns.c_str());
        WT_ITEM v = item(d.data(), d.size());
        c->set_value(c.get(), &v);
        wtCheck(c->insert(c.get()), "catalog insert");
    } catch (const DBException& ex) {
        return ex.status();
    }
    return Status::OK();
}

Status Catalog::load() {
    PooledSession s(sessions_);
    Status st = engine_.createTable(*s, kCatalogUri, "S", "u");
    if (!st.isOK()) return st;
    st = engine_.createTable(*s, kSizesUri, "S", "qq");
    if (!st.isOK()) return st;
    std::set<std::string> referenced;
    std::vector<std::pair<std::shared_ptr<CollectionEntry>, std::shared_ptr<IndexEntry>>> rekey;
    try {
        Cursor c = s->open(kCatalogUri);
        while (c->next(c.get()) == 0) {
            const char* ns;
            WT_ITEM v;
            wtCheck(c->get_key(c.get(), &ns), "catalog key");
            wtCheck(c->get_value(c.get(), &v), "catalog value");
            bson::Doc d = bson::Doc::copyOf(static_cast<const uint8_t*>(v.data), v.size);
            auto e = std::make_shared<CollectionEntry>();
            e->ns = ns;
            std::tie(e->db, e->name) = splitNs(e->ns);
            bson_iter_t it;
            if (bson::find(d.get(), "uuid", &it) && BSON_ITER_HOLDS_BINARY(&it)) {
                bson_subtype_t st2;
                uint32_t len;
                const uint8_t* data;
                bson_iter_binary(&it, &st2, &len, &data);
                if (len == 16) std::memcpy(e->uuid, data, 16);
            }
            bson_t sub;
            if (bson::subDocument(d.get(), "options", &sub)) e->options = bson::Doc::copyOf(&sub);
            attachCollation(*e);
            attachValidation(*e);
            if (bson::find(d.get(), "uri", &it)) e->uri = bson_iter_utf8(&it, nullptr);
            referenced.insert(e->uri);
            if (bson::find(d.get(), "indexes", &it) && BSON_ITER_HOLDS_ARRAY(&it)) {
                bson_iter_t ai;
                bson_iter_recurse(&it, &ai);
                while (bson_iter_next(&ai)) {
                    bson_t ientry;
                    uint32_t len;
                    const uint8_t* data;
                    bson_iter_document(&ai, &len, &data);
                    bson_init_static(&ientry, data, len);
                    bson_t spec;
                    if (!bson::subDocument(&ientry, "spec", &spec)) continue;
                    auto isw = parseIndexSpec(e->ns, &spec);
                    if (!isw.isOK()) return isw.getStatus();
                    auto idx = isw.getValue();
                    bson_iter_t f;
                    if (bson::find(&ientry, "uri", &f)) idx->uri = bson_iter_utf8(&f, nullptr);
                    if (bson::find(&ientry, "multikey", &f)) idx->multikey = bson_iter_as_bool(&f);
                    if (idx->collator && !bson::find(&ientry, "collationKeys", &f))
                        rekey.emplace_back(e, idx);
                    referenced.insert(idx->uri);
                    e->indexes.push_back(idx);
                }
            }
            colls_[e->ns] = e;
        }
        // Sizes: trusted only after a clean shutdown.
        Cursor sz = s->open(kSizesUri);
        bool clean = false;
        sz->set_key(sz.get(), kCleanKey);
        if (sz->search(sz.get()) == 0) clean = true;
        for (auto& [ns, e] : colls_) {
            // Next record id: one past the largest.
            Cursor rc = s->open(e->uri);
            if (rc->prev(rc.get()) == 0) {
                int64_t rid;
                rc->get_key(rc.get(), &rid);
                e->nextRecordId = rid + 1;
            }
            if (!clean) {
                // Multikey flags are persisted at clean shutdown (and with DDL); after a
                // crash an index may have become multikey unrecorded. Assume it did:
                // the planner then never relies on single-valued keys it cannot prove.
                for (auto& idx : e->indexes)
                    if (!idx->isIdIndex()) idx->multikey = true;
            }
            if (clean) {
                sz->set_key(sz.get(), ns.c_str());
                if (sz->search(sz.get()) == 0) {
                    int64_t n, bytes;
                    sz->get_value(sz.get(), &n, &bytes);
                    e->numRecords = n;
                    e->dataSize = bytes;
                }
            } else {
                rc->reset(rc.get());
                int64_t n = 0, bytes = 0;
                while (rc->next(rc.get()) == 0) {
                    WT_ITEM v;
                    rc->get_value(rc.get(), &v);
                    ++n;
                    bytes += static_cast<int64_t>(v.size);
                }
                e->numRecords = n;
                e->dataSize = bytes;
            }
        }
        // From now on the sizes are unreliable until the next clean shutdown.
        Txn txn(*s);
        sz->set_key(sz.get(), kCleanKey);
        if (sz->search(sz.get()) == 0) wtCheck(sz->remove(sz.get()), "clear clean marker");
        sz.close();
        txn.commit();
        // Tables left by DDL that a crash interrupted.
        std::vector<std::string> orphans;
        Cursor meta = s->open("metadata:");
        while (meta->next(meta.get()) == 0) {
            const char* k;
            meta->get_key(meta.get(), &k);
            std::string key = k;
            if (key.rfind("table:", 0) != 0) continue;
            if (key == kCatalogUri || key == kSizesUri || key.rfind("table:_", 0) == 0) continue;
            if (!referenced.count(key)) orphans.push_back(key);
        }
        meta.close();
        for (const auto& o : orphans) {
            log::info("storage", 22251, "Dropping unreferenced table",
                      fmt::format(R"({{"uri":{}}})", log::quote(o)));
            (void)engine_.dropTable(*s, o);
        }
        for (auto& [e, idx] : rekey) rebuildWithCollation(*s, *e, *idx);
    } catch (const DBException& ex) {
        return ex.status();
    }
    return Status::OK();
}

void Catalog::shutdown() {
    std::unique_lock lk(ddl_);
    try {
        PooledSession s(sessions_);
        Txn txn(*s);
        Cursor sz = s->open(kSizesUri);
        for (auto& [ns, e] : colls_) {
            sz->set_key(sz.get(), ns.c_str());
            sz->set_value(sz.get(), e->numRecords.load(), e->dataSize.load());
            wtCheck(sz->insert(sz.get()), "sizes");
        }
        sz.close();
        // Multikey flags learnt since the last DDL.
        for (auto& [ns, e] : colls_) {
            Status st = persist(*s, *e);
            if (!st.isOK()) throw DBException(st);
        }
        sz = s->open(kSizesUri);
        sz->set_key(sz.get(), kCleanKey);
        sz->set_value(sz.get(), int64_t{1}, int64_t{0});
        wtCheck(sz->insert(sz.get()), "sizes");
        sz.close();
        txn.commit();
    } catch (const DBException& ex) {
        log::warning("storage", 22252, "Could not persist collection sizes",
                     fmt::format(R"({{"error":{}}})", log::quote(ex.what())));
    }
    sessions_.closeIdle();
}

const void*& Catalog::transactionToken() {
    thread_local const void* token = nullptr;
    return token;
}

void Catalog::markPendingCreate(const std::string& ns, const void* owner) {
    std::lock_guard lk(pendingMu_);
    pendingCreates_[ns] = owner;
    pendingCount_ = pendingCreates_.size();
}

void Catalog::clearPendingCreate(const std::string& ns) {
    std::lock_guard lk(pendingMu_);
    pendingCreates_.erase(ns);
    pendingCount_ = pendingCreates_.size();
}

bool Catalog::hiddenFromThisThread(std::string_view ns) const {
    if (pendingCount_.load(std::memory_order_acquire) == 0) return false;  // the usual case
    std::lock_guard lk(pendingMu_);
    auto it = pendingCreates_.find(ns);
    return it != pendingCreates_.end() && it->second != transactionToken();
}

std::shared_ptr<const CollectionEntry> Catalog::lookup(std::string_view ns) const {
    auto it = colls_.find(ns);
    if (it == colls_.end() || hiddenFromThisThread(ns)) return nullptr;
    return it->second;
}

std::shared_ptr<const CollectionEntry> Catalog::lookupIncludingPending(std::string_view ns) const {
    auto it = colls_.find(ns);
    return it == colls_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const CollectionEntry>> Catalog::listCollections(
    std::string_view db) const {
    std::vector<std::shared_ptr<const CollectionEntry>> out;
    for (const auto& [ns, e] : colls_)
        if (e->db == db && !hiddenFromThisThread(ns)) out.push_back(e);
    return out;
}

std::vector<std::string> Catalog::listDatabases() const {
    std::set<std::string> dbs;
    for (const auto& [ns, e] : colls_)
        if (!hiddenFromThisThread(ns)) dbs.insert(e->db);
    return {dbs.begin(), dbs.end()};
}

StatusWith<std::shared_ptr<const CollectionEntry>> Catalog::createCollection(const std::string& ns,
                                                                             const bson_t* options,
                                                                             bool withIdIndex) {
    if (colls_.count(ns)) {
        if (hiddenFromThisThread(ns))
            return Status(ErrorCode::WriteConflict,
                          "WriteConflict error: this operation conflicted with another operation. "
                          "Please retry your operation or multi-document transaction.");
        return Status(ErrorCode::NamespaceExists, fmt::format("Collection {} already exists.", ns));
    }
    // Names come back in listCollections, listDatabases and change events, where a
    // driver must be able to read them: no database or collection of invalid UTF-8.
    if (!bson_utf8_validate(ns.data(), ns.size(), false))
        return Status(ErrorCode::InvalidNamespace,
                      fmt::format("Invalid namespace specified '{}': names must be valid UTF-8",
                                  bson::printableUtf8(ns)));
    auto e = std::make_shared<CollectionEntry>();
    e->ns = ns;
    std::tie(e->db, e->name) = splitNs(ns);
    RAND_bytes(e->uuid, 16);
    e->uuid[6] = (e->uuid[6] & 0x0f) | 0x40;
    e->uuid[8] = (e->uuid[8] & 0x3f) | 0x80;
    e->options = options ? bson::Doc::copyOf(options) : bson::Doc();
    bson_iter_t collIt;
    if (options && bson_iter_init_find(&collIt, options, "collation")) {
        auto csw = parseCollationOption(collIt, "create");
        if (!csw.isOK()) return csw.getStatus();
        e->collator = csw.getValue();
        e->options = withCollation(options, e->collator.get());
    }
    attachValidation(*e);
    e->uri = newIdent("collection");
    auto id = std::make_shared<IndexEntry>();
    auto idSpec = bson::Doc::fromJsonOrDie(R"({"key": {"_id": 1}, "name": "_id_"})");
    auto isw = parseIndexSpec(ns, idSpec.get(), e->collator);
    if (!isw.isOK()) return isw.getStatus();
    id = isw.getValue();
    id->uri = newIdent("index");
    if (withIdIndex) e->indexes.push_back(id);
    PooledSession s(sessions_);
    Status st = engine_.createTable(*s, e->uri, "q", "u");
    if (!st.isOK()) return st;
    if (withIdIndex) {
        st = engine_.createTable(*s, id->uri, "u", "u");
        if (!st.isOK()) return st;
    }
    try {
        Txn txn(*s);
        st = persist(*s, *e);
        if (!st.isOK()) return st;
        txn.commit();
    } catch (const DBException& ex) {
        return ex.status();
    }
    colls_[ns] = e;
    return std::shared_ptr<const CollectionEntry>(e);
}

std::shared_ptr<const CollectionEntry> Catalog::getOrCreate(const std::string& ns) {
    if (auto e = lookup(ns)) return e;
    return uassertStatusOK(createCollection(ns, nullptr));
}

void Catalog::dropTableEventually(const std::string& uri) {
    sessions_.closeIdle();
    PooledSession s(sessions_);
    Status st = engine_.dropTable(*s, uri);
    if (!st.isOK()) {
        // Still referenced somewhere (e.g. a checkpoint); dropped as an orphan at next start-up.
        log::info(
            "storage", 22253, "Deferring table drop",
            fmt::format(R"({{"uri":{},"reason":{}}})", log::quote(uri), log::quote(st.reason())));
    }
}

Status Catalog::dropCollection(const std::string& ns) {
    auto it = colls_.find(ns);
    if (it == colls_.end()) return Status(ErrorCode::NamespaceNotFound, "ns not found");
    if (beforeDrop_)
        if (Status st = beforeDrop_(ns); !st.isOK()) return st;
    auto e = it->second;
    {
        PooledSession s(sessions_);
        try {
            Txn txn(*s);
            Cursor c = s->open(kCatalogUri);
            c->set_key(c.get(), ns.c_str());
            wtCheck(c->remove(c.get()), "catalog remove");
            c.close();
            txn.commit();
        } catch (const DBException& ex) {
            return ex.status();
        }
    }
    colls_.erase(it);
    clearPendingCreate(ns);
    dropTableEventually(e->uri);
    for (const auto& idx : e->indexes) dropTableEventually(idx->uri);
    return Status::OK();
}

Status Catalog::renameCollection(const std::string& from, const std::string& to, bool dropTarget) {
    auto it = colls_.find(from);
    if (it == colls_.end())
        return Status(ErrorCode::NamespaceNotFound, "source namespace does not exist");
    if (colls_.count(to)) {
        if (!dropTarget) return Status(ErrorCode::NamespaceExists, "target namespace exists");
        Status st = dropCollection(to);
        if (!st.isOK()) return st;
        it = colls_.find(from);
    }
    auto e = cloneEntry(*it->second);
    e->ns = to;
    std::tie(e->db, e->name) = splitNs(to);
    PooledSession s(sessions_);
    try {
        Txn txn(*s);
        Cursor c = s->open(kCatalogUri);
        c->set_key(c.get(), from.c_str());
        wtCheck(c->remove(c.get()), "catalog remove");
        c.close();
        Status st = persist(*s, *e);
        if (!st.isOK()) return st;
        txn.commit();
    } catch (const DBException& ex) {
        return ex.status();
    }
    colls_.erase(from);
    colls_[to] = e;
    return Status::OK();
}

Status Catalog::buildIndex(Session& s, const CollectionEntry& coll, const IndexEntry& idx) {
    int64_t lastRid = 0;
    bool done = false;
    while (!done) {
        Txn txn(s);
        Cursor rc = s.open(coll.uri);
        rc->set_key(rc.get(), lastRid + 1);
        int exact = 0;
        int ret = rc->search_near(rc.get(), &exact);
        if (ret == 0 && exact < 0) ret = rc->next(rc.get());
        int batch = 0;
        while (ret == 0 && batch < 1000) {
            int64_t rid;
            WT_ITEM v;
            rc->get_key(rc.get(), &rid);
            rc->get_value(rc.get(), &v);
            bson::View doc(static_cast<const uint8_t*>(v.data), v.size);
            rs::insertIndexKeys(s, coll, idx, doc.get(), rid);
            lastRid = rid;
            ++batch;
            ret = rc->next(rc.get());
        }
        if (ret == WT_NOTFOUND)
            done = true;
        else if (ret != 0)
            wtCheck(ret, "index build scan");
        rc.close();
        txn.commit(false);
    }
    return Status::OK();
}

void Catalog::rebuildWithCollation(Session& s, CollectionEntry& coll, IndexEntry& idx) {
    // Written by a version that kept `collation` in index specs but keyed strings
    // bytewise: such keys would make collated lookups miss documents. Rebuild them
    // into a new table; if the collation makes a unique index's keys collide, keep
    // the bytewise keys and drop the collation from the spec (a correct simple index).
    std::string oldUri = idx.uri;
    idx.uri = newIdent("index");
    Status st = engine_.createTable(s, idx.uri, "u", "u");
    if (st.isOK()) {
        try {
            st = buildIndex(s, coll, idx);
        } catch (const DBException& ex) {
            st = ex.status();
        }
    }
    if (!st.isOK()) {
        log::warning("storage", 7390102, "Index cannot be rebuilt with its collation; kept simple",
                     fmt::format(R"({{"namespace":{},"index":{},"error":{}}})", log::quote(coll.ns),
                                 log::quote(idx.name), log::quote(st.reason())));
        (void)engine_.dropTable(s, idx.uri);
        idx.uri = oldUri;
        idx.collator.reset();
        idx.spec = withCollation(idx.spec.get(), nullptr);
    }
    Txn txn(s);
    uassertStatusOK(persist(s, coll));
    txn.commit();
    if (st.isOK()) {
        log::info("storage", 7390103, "Rebuilt index keys with the index collation",
                  fmt::format(R"({{"namespace":{},"index":{}}})", log::quote(coll.ns),
                              log::quote(idx.name)));
        (void)engine_.dropTable(s, oldUri);
    }
}

Status Catalog::createIndex(const std::string& ns, const bson_t* specDoc) {
    auto coll = std::const_pointer_cast<CollectionEntry>(
        std::static_pointer_cast<const CollectionEntry>(getOrCreate(ns)));
    auto isw = parseIndexSpec(ns, specDoc, coll->collator);
    if (!isw.isOK()) return isw.getStatus();
    auto idx = isw.getValue();
    for (const auto& existing : coll->indexes) {
        // Indexes on the same key with different collations may coexist (as in mongod).
        bool sameKey = bson::compareDocs(existing->keyPattern.get(), idx->keyPattern.get()) == 0 &&
                       query::sameCollation(existing->collator.get(), idx->collator.get());
        if (existing->name == idx->name) {
            if (sameKey && existing->unique == idx->unique && existing->sparse == idx->sparse)
                return Status::OK();
            return Status(
                ErrorCode::IndexKeySpecsConflict,
                fmt::format(
                    "An existing index has the same name as the requested index. "
                    "When index names are not specified, they are auto generated and can "
                    "cause conflicts. Please refer to our documentation. Requested index: {}, "
                    "existing index: {}",
                    idx->spec.toJson(), existing->spec.toJson()));
        }
        if (sameKey && !idx->partialFilter && !existing->partialFilter) {
            return Status(
                ErrorCode::IndexOptionsConflict,
                fmt::format("Index already exists with a different name: {}", existing->name));
        }
    }
    idx->uri = newIdent("index");
    PooledSession s(sessions_);
    Status st = engine_.createTable(*s, idx->uri, "u", "u");
    if (!st.isOK()) return st;
    try {
        st = buildIndex(*s, *coll, *idx);
    } catch (const DBException& ex) {
        st = ex.status();
    }
    if (st.isOK()) {
        auto next = cloneEntry(*coll);
        next->indexes.push_back(idx);
        st = commitEntry(next);
        if (st.isOK()) return st;
    }
    dropTableEventually(idx->uri);
    return st;
}

Status Catalog::commitEntry(const std::shared_ptr<CollectionEntry>& next) {
    PooledSession s(sessions_);
    try {
        Txn txn(*s);
        Status st = persist(*s, *next);
        if (!st.isOK()) return st;
        txn.commit();
    } catch (const DBException& ex) {
        return ex.status();
    }
    colls_[next->ns] = next;
    return Status::OK();
}

Status Catalog::setOptions(const std::string& ns, const bson_t* options) {
    auto it = colls_.find(ns);
    if (it == colls_.end())
        return Status(ErrorCode::NamespaceNotFound, fmt::format("ns does not exist: {}", ns));
    auto coll = it->second;
    auto next = cloneEntry(*coll);
    next->options = bson::Doc::copyOf(options);
    attachValidation(*next);
    Status st = commitEntry(next);
    if (!st.isOK()) return st;
    return Status::OK();
}

Status Catalog::dropIndex(const std::string& ns, const std::string& name) {
    auto it = colls_.find(ns);
    if (it == colls_.end())
        return Status(ErrorCode::NamespaceNotFound, fmt::format("ns not found {}", ns));
    auto coll = it->second;
    const IndexEntry* target = coll->findIndex(name);
    if (!target)
        return Status(ErrorCode::IndexNotFound,
                      fmt::format("index not found with name [{}]", name));
    if (beforeDrop_)
        if (Status st = beforeDrop_(ns); !st.isOK()) return st;
    if (target->isIdIndex()) return Status(ErrorCode::InvalidOptions, "cannot drop _id index");
    auto next = cloneEntry(*coll);
    std::string uri;
    next->indexes.clear();
    for (const auto& idx : coll->indexes) {
        if (idx->name == name)
            uri = idx->uri;
        else
            next->indexes.push_back(idx);
    }
    Status st = commitEntry(next);
    if (!st.isOK()) return st;
    dropTableEventually(uri);
    return Status::OK();
}

}  // namespace halo::store
