#pragma once
// The durable catalog of databases, collections and indexes, kept in the
// WiredTiger table `_catalog` (one BSON entry per collection). Each collection
// is a record store table (key: int64 record id, value: BSON); each index is a
// table of order-preserving keys (see key_string.h).
//
// Concurrency: every data operation holds ddlLock() shared for its duration;
// DDL (create/drop/rename/indexes) takes it exclusively, so a table is never
// dropped under a running operation. Entries are immutable except for the
// atomic counters and the multikey flags.
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "bson/doc.h"
#include "common/status.h"
#include "store/storage/engine.h"
#include "store/storage/index_keys.h"

namespace halo::query {
class Collator;
class Matcher;
struct CollectionValidation;
}  // namespace halo::query

namespace halo::store {

struct IndexEntry {
    std::string name;
    bson::Doc spec;        // as listIndexes shows it: {v:2, key:{...}, name:..., unique:...}
    bson::Doc keyPattern;  // the `key` document
    IndexKeyPattern pattern;
    bool unique = false;
    bool sparse = false;
    std::shared_ptr<query::Matcher> partialFilter;  // null when not partial
    /// The index's collation (its string keys are comparison keys); null: simple.
    std::shared_ptr<const query::Collator> collator;
    std::string uri;
    mutable std::atomic<bool> multikey{false};
    bool isIdIndex() const { return name == "_id_"; }
};

struct CollectionEntry {
    std::string ns;  // "db.coll"
    std::string db;
    std::string name;
    uint8_t uuid[16] = {};
    bson::Doc options;  // create options (capped, validator, ...)
    /// The parsed validator and its level/action (from `options`); null when
    /// the collection has no validator.
    std::shared_ptr<const query::CollectionValidation> validation;
    /// The default collation (options.collation, stored normalized); null: simple.
    /// Commands without a collation use it; new indexes inherit it.
    std::shared_ptr<const query::Collator> collator;
    std::string uri;  // record store table
    std::vector<std::shared_ptr<IndexEntry>> indexes;
    mutable std::atomic<int64_t> nextRecordId{1};
    mutable std::atomic<int64_t> numRecords{0};
    mutable std::atomic<int64_t> dataSize{0};
    /// Plans that scanned the whole collection ($collStats queryExecStats).
    mutable std::atomic<int64_t> collectionScans{0};

    const IndexEntry* findIndex(std::string_view name) const;
    const IndexEntry* idIndex() const;
};

/// A pool of WiredTiger sessions; operations borrow one and give it back.
class SessionPool {
  public:
    explicit SessionPool(Engine& e) : engine_(e) {}
    std::unique_ptr<Session> acquire();
    void release(std::unique_ptr<Session> s);
    /// Closes every idle session (so a table can be dropped). Caller holds the DDL lock.
    void closeIdle();

  private:
    Engine& engine_;
    std::mutex mu_;
    std::vector<std::unique_ptr<Session>> idle_;
};

/// RAII borrow of a pooled session.
class PooledSession {
  public:
    explicit PooledSession(SessionPool& p) : pool_(p), s_(p.acquire()) {}
    ~PooledSession() {
        if (s_->inTransaction()) s_->rollback();
        pool_.release(std::move(s_));
    }
    Session& operator*() { return *s_; }
    Session* operator->() { return s_.get(); }

  private:
    SessionPool& pool_;
    std::unique_ptr<Session> s_;
};

class Catalog {
  public:
    explicit Catalog(Engine& e);
    ~Catalog();

    /// Reads the catalog at start-up; recounts sizes after an unclean shutdown;
    /// drops tables left behind by DDL interrupted by a crash.
    Status load();
    /// Persists collection sizes and marks a clean shutdown.
    void shutdown();

    Engine& engine() { return engine_; }
    SessionPool& sessions() { return sessions_; }
    std::shared_mutex& ddlLock() { return ddl_; }

    // Collections a multi-document transaction created and has not committed
    // are seen only by that transaction: the thread running one of its
    // statements names it here (an opaque token, null outside transactions).
    static const void*& transactionToken();
    /// Hides `ns` from every thread whose transactionToken() is not `owner`.
    void markPendingCreate(const std::string& ns, const void* owner);
    /// The transaction committed (or its collection was dropped): visible to all.
    void clearPendingCreate(const std::string& ns);

    // Lookups (callers hold ddlLock() shared or exclusive). A collection another
    // transaction created and has not committed is absent.
    std::shared_ptr<const CollectionEntry> lookup(std::string_view ns) const;
    /// Also a collection some transaction created and has not committed.
    std::shared_ptr<const CollectionEntry> lookupIncludingPending(std::string_view ns) const;
    std::vector<std::shared_ptr<const CollectionEntry>> listCollections(std::string_view db) const;
    std::vector<std::string> listDatabases() const;

    // DDL. Callers hold ddlLock() exclusively.
    /// Creates a collection with its _id index. NamespaceExists(48) if present,
    /// WriteConflict(112) while another transaction's uncommitted create holds it.
    StatusWith<std::shared_ptr<const CollectionEntry>> createCollection(const std::string& ns,
                                                                        const bson_t* options,
                                                                        bool withIdIndex = true);
    /// Returns the collection, creating it implicitly (as writes do) when absent.
    std::shared_ptr<const CollectionEntry> getOrCreate(const std::string& ns);
    /// Called before a drop removes `ns`'s tables (the collection's, or one of
    /// its indexes'): open transactions may hold uncommitted writes in them,
    /// which WiredTiger would drop with the table under them. Not OK: the drop
    /// does not happen.
    void setBeforeDrop(std::function<Status(const std::string& ns)> f) {
        beforeDrop_ = std::move(f);
    }
    Status dropCollection(const std::string& ns);
    Status renameCollection(const std::string& from, const std::string& to, bool dropTarget);
    /// Builds the index from existing documents; fails (leaving nothing) on a
    /// duplicate key for unique indexes.
    Status createIndex(const std::string& ns, const bson_t* spec);
    Status dropIndex(const std::string& ns, const std::string& name);
    /// Replaces the collection's options (collMod).
    Status setOptions(const std::string& ns, const bson_t* options);

    /// Parses and validates an index spec as createIndexes receives it. An index
    /// without `collation` inherits `collectionDefault` (null when loading stored
    /// specs, which always name their collation).
    static StatusWith<std::shared_ptr<IndexEntry>> parseIndexSpec(
        const std::string& ns, const bson_t* spec,
        const std::shared_ptr<const query::Collator>& collectionDefault = nullptr);

  private:
    std::function<Status(const std::string& ns)> beforeDrop_;
    Status persist(Session& s, const CollectionEntry& e);
    /// Persists a modified entry in its own transaction, then makes it current.
    Status commitEntry(const std::shared_ptr<CollectionEntry>& next);
    std::string newIdent(const char* kind);
    Status buildIndex(Session& s, const CollectionEntry& coll, const IndexEntry& idx);
    /// At load: re-keys an index whose spec names a collation but whose keys
    /// were built bytewise by an older version.
    void rebuildWithCollation(Session& s, CollectionEntry& coll, IndexEntry& idx);
    void dropTableEventually(const std::string& uri);

    Engine& engine_;
    SessionPool sessions_;
    mutable std::shared_mutex ddl_;
    std::map<std::string, std::shared_ptr<CollectionEntry>, std::less<>> colls_;
    std::atomic<uint64_t> identCounter_{0};
    std::vector<std::string> pendingDrops_;
    /// Whether `ns` is another transaction's uncommitted collection.
    bool hiddenFromThisThread(std::string_view ns) const;
    mutable std::mutex pendingMu_;
    std::map<std::string, const void*, std::less<>> pendingCreates_;
    std::atomic<size_t> pendingCount_{0};  // pendingCreates_.size(), read without the mutex
};

/// Splits "db.coll" at the first dot.
std::pair<std::string, std::string> splitNs(std::string_view ns);

}  // namespace halo::store
