#pragma once
// Shared plumbing for commands that touch collections: the DDL lock dance
// for implicit creation, a retrying write transaction, and cursor batches.
#include <chrono>
#include <optional>
#include <shared_mutex>

#include "store/commands/command.h"
#include "store/exec/cursor_manager.h"
#include "store/repl/oplog.h"
#include "store/server/store.h"
#include "store/storage/catalog.h"
#include "store/storage/engine.h"
#include "store/txn/session_catalog.h"

namespace halo::store {

/// Holds the catalog's DDL lock shared for the duration of a data operation.
class CollectionLock {
  public:
    explicit CollectionLock(Catalog& c) : lk_(c.ddlLock()) {}

  private:
    std::shared_lock<std::shared_mutex> lk_;
};

/// The collection `ns` (null when there is none), looked up under the DDL lock:
/// for a caller that holds no lock (never with it held: it is not recursive).
std::shared_ptr<const CollectionEntry> lookupCollection(Store& store, std::string_view ns);

/// Makes sure `ns` exists (creating it under the exclusive DDL lock, as an
/// implicit create by the first write does), without holding any lock after.
void ensureCollection(Store& store, const std::string& ns);

/// Inside a multi-document transaction, records that it created `c` (by
/// create, createIndexes or a first write, as mongod 4.4+ allows): other
/// clients do not see it until the transaction commits (theirs wait), the
/// create's oplog entry commits with the transaction, and an abort drops the
/// collection again. No-op outside a transaction.
void noteCreatedInTransaction(Catalog& catalog, const CollectionEntry& c);
/// Whether the open transaction created `ns` itself.
bool createdInThisTransaction(const CollectionEntry& c);

/// The writes of one command become durable together: each commits as it runs,
/// and one journal sync before the reply makes them all durable (mongod too
/// waits for the journal once per command, not per statement). Their oplog
/// entries are shown to change streams and oplog readers only after that sync,
/// so nothing a reader saw can be lost by a crash. A long command syncs every
/// kMaxStatements writes or kMaxHold, so that it never holds the oplog's
/// visibility (and the readers waiting on it) for long. A thread runs at most one
/// command at a time; an inner command (Store::runInternal) has its own scope.
/// Writes outside any scope (background work) sync as they commit.
class CommandDurability {
  public:
    explicit CommandDurability(Store& store);
    ~CommandDurability();
    CommandDurability(const CommandDurability&) = delete;
    CommandDurability& operator=(const CommandDurability&) = delete;
    /// Syncs the journal when a write committed since the last call, then
    /// releases the writes' oplog entries (also when the sync fails, which throws).
    void flush();
    /// The innermost scope of this thread's command, or null.
    static CommandDurability* current();
    /// A write committed without a sync; `ts` are its oplog entries.
    void deferred(std::vector<Timestamp> ts);

    /// How many writes of this command committed (durable yet or not).
    uint64_t commits() const { return commits_; }

    static constexpr size_t kMaxStatements = 128;
    static constexpr std::chrono::milliseconds kMaxHold{5};

  private:
    Store& store_;
    CommandDurability* outer_;
    uint64_t commits_ = 0;
    size_t pending_ = 0;
    std::chrono::steady_clock::time_point firstPending_;
    std::vector<Timestamp> entries_;
};

/// Thrown by a write command's write that keeps conflicting with another
/// transaction's uncommitted write, before any write of its statement
/// committed: the command gives its thread back (the thread serves several
/// connections, maybe the very transaction it waits for) and its connection
/// runs it again after writeConflictDelay(attempts), on a timer
/// (Deferral::writeConflicts), from that statement on (WriteProgress).
/// Not a DBException, so no statement records it as its write error.
struct ConflictYield {
    int attempts;  // write conflicts so far, over every run of the command
};

/// One statement's error in a write command's reply (writeErrors).
struct WriteError {
    int32_t index;
    Status status;
    std::shared_ptr<const bson::Doc> info;  // keyPattern/keyValue, errInfo (ErrorWithInfo)
};

/// A write command's statements done so far and their part of the reply. It
/// outlives a ConflictYield (Deferral::progress): the next run skips the
/// statements before `next`, which committed, instead of applying them twice.
struct WriteProgress {
    int32_t next = 0;  // the first statement not done
    int64_t n = 0;
    int64_t nModified = 0;
    int32_t upserts = 0;
    std::optional<bson::Doc> upserted;  // the reply's `upserted` array so far
    std::vector<WriteError> errors;

    /// The record an earlier run left (the command yielded), else `local`: it
    /// is kept (moved to Deferral::progress) only when the command yields.
    static WriteProgress& of(OperationContext& op, WriteProgress& local);
    /// Whether statement `index` still has to run; if so, a write conflict
    /// from here on may yield the thread (ConflictYieldScope::statementStart).
    bool runs(int32_t index);
};

/// While a client's write command (insert, update, delete, findAndModify) runs
/// outside a transaction: its writes may yield on a conflict (ConflictYield)
/// instead of sleeping on their thread. `priorConflicts`: the command's write
/// conflicts in its earlier runs. A NoConflictYield scope inside turns it off
/// (a step with an effect outside its storage transaction).
class ConflictYieldScope {
  public:
    ConflictYieldScope(const CommandDurability& durability, Deferral& deferral);
    ~ConflictYieldScope();
    ConflictYieldScope(const ConflictYieldScope&) = delete;
    ConflictYieldScope& operator=(const ConflictYieldScope&) = delete;

    /// The command's statements before this one are recorded in its
    /// WriteProgress: a conflict from here on may yield (rather than only
    /// before the command's first commit).
    static void statementStart(WriteProgress* progress);

  private:
    friend bool waitOutWriteConflict(int attempt);
    friend class NoConflictYield;
    const CommandDurability& durability_;
    uint64_t mark_ = 0;  // durability_.commits() when the current statement began
    Deferral& deferral_;
    WriteProgress* progress_ = nullptr;  // the command's, from its current statement on
    int prior_;
    int suppressed_ = 0;
    ConflictYieldScope* outer_;
};

class NoConflictYield {
  public:
    NoConflictYield();
    ~NoConflictYield();
    NoConflictYield(const NoConflictYield&) = delete;
    NoConflictYield& operator=(const NoConflictYield&) = delete;
};

/// A single-document write's `attempt`th WriteConflict in a row (0-based), as
/// mongod's writeConflictRetry: false once the retries are exhausted (the
/// caller rethrows); otherwise checks for interruption, then either yields the
/// thread (throws ConflictYield, see above) or backs off on it and returns true.
bool waitOutWriteConflict(int attempt);

/// A multi-document transaction that WiredTiger rolled back: when its writes
/// take 15% of the cache or more (mongod's transactionTooLargeForCacheThreshold,
/// 0.75 of the 20% dirty trigger), a retry could never fit either, so it fails
/// with TransactionTooLargeForCache (388, no TransientTransactionError label)
/// instead of a WriteConflict the driver would retry forever.
/// `bytes`: what the transaction wrote (transactionWriteBytes), also checked
/// when its commit is rolled back.
void throwIfTooLargeForCache(Store& store, int64_t bytes);
int64_t transactionWriteBytes(const SessionState& txn);

/// Runs `fn(session, oplogUnit)` in a storage transaction, retrying on
/// WriteConflict as mongod does for single-document writes; the data change
/// and its oplog entries commit together, and are durable before the command's
/// reply (CommandDurability; at once when no command is running).
template <typename Fn>
auto runWriteTxn(Store& store, Fn&& fn) {
    if (SessionState* txn = currentOperation().txn) {
        // Inside a multi-document transaction: its snapshot, its buffered oplog,
        // no commit here; a conflict aborts the transaction (no internal retry).
        Oplog::Unit unit(store.oplog(), *txn->wtSession, &txn->txnOps);
        try {
            return fn(*txn->wtSession, unit);
        } catch (const DBException& e) {
            if (e.code() == ErrorCode::WriteConflict)
                throwIfTooLargeForCache(store, transactionWriteBytes(*txn));
            throw;
        }
    }
    // Trims the oplog once the write is done (it catches its own errors).
    struct TrimAfter {
        Oplog& log;
        ~TrimAfter() { log.truncateIfNeeded(); }
    } trim{store.oplog()};
    PooledSession s(store.catalog().sessions());
    for (int attempt = 0;; ++attempt) {
        try {
            Txn txn(*s);
            Oplog::Unit unit(store.oplog(), *s);
            auto commit = [&] {
                if (CommandDurability* d = CommandDurability::current()) {
                    txn.commit(false);
                    d->deferred(unit.committedLater());
                } else {
                    txn.commitThenSync();
                    unit.committed();
                }
            };
            if constexpr (std::is_void_v<decltype(fn(*s, unit))>) {
                fn(*s, unit);
                commit();
                return;
            } else {
                auto r = fn(*s, unit);
                commit();
                return r;
            }
        } catch (const DBException& e) {
            // Also a conflict that reached us as a Status (not only the
            // exception type): a single-document write never reports it.
            if (e.code() != ErrorCode::WriteConflict || !waitOutWriteConflict(attempt)) throw;
        }
    }
}

/// Inserts `docs` into the existing collection `ns` in one storage transaction
/// (an _id generated where missing, each validated): all or none. For internal
/// bulk writes ($out's temporary collection), not retryable writes.
void insertBatch(Store& store, const std::string& ns, const std::vector<bson::Doc>& docs);

/// The TTL monitor's pass: removes every document whose TTL-indexed date (or
/// the earliest date of an array) is older than the index's expireAfterSeconds,
/// one delete per document, each replicated as an ordinary delete (as mongod's
/// TTL monitor does). Returns how many it removed.
int64_t removeExpired(Store& store, int64_t nowMillis);

/// Retryable writes: the recorded outcome of statement `stmtId` of the current
/// (lsid, txnNumber), when it already executed; nullopt otherwise.
std::optional<bson::Doc> priorOutcome(Store& store, int32_t stmtId);
/// Records a statement's outcome in the write's own transaction (no-op unless
/// the command is a retryable write).
void recordOutcome(Store& store, Session& s, int32_t stmtId, const bson_t* outcome);

/// A read's storage transaction: the open multi-document transaction's
/// snapshot when there is one, else a pooled session with its own snapshot.
class ReadScope {
  public:
    explicit ReadScope(Store& store);
    ~ReadScope();
    Session& session() { return *session_; }
    void done();

  private:
    std::optional<PooledSession> pooled_;
    std::optional<Txn> txn_;
    Session* session_;
};

/// Oplog helpers for the CRUD write path.
void logInsert(Oplog::Unit& u, const CollectionEntry& c, const bson_t* doc);
void logUpdate(Oplog::Unit& u, const CollectionEntry& c, const bson_t* before, const bson_t* after,
               bool replacement);
void logDelete(Oplog::Unit& u, const CollectionEntry& c, const bson_t* doc);
/// A DDL entry ({create|drop|renameCollection|dropDatabase|createIndexes|dropIndexes...}) in its
/// own txn.
void logCreate(Store& store, const CollectionEntry& c);
void logCommand(Store& store, const std::string& db, const bson_t* o,
                const uint8_t* uuid = nullptr);

/// Runs a registered command in this process as a client's command would run
/// on this connection (no authorization check: the caller's command was
/// authorized) and returns its reply; a command error, or the first of its
/// write errors, is thrown (with keyPattern/keyValue/errInfo kept).
bson::Doc runCommandInternally(OperationContext& op, const std::string& db, const bson_t* cmd);

/// Validates a namespace's database name (InvalidNamespace 73).
void validateDbName(std::string_view db);

/// Fills `arrayName` ("firstBatch"/"nextBatch") from the stream: up to
/// batchSize documents (0: no count limit) and about 16 MB. Returns true when
/// the stream is exhausted.
bool fillBatch(Session& s, DocStream& stream, bson_t* cursorDoc, const char* arrayName,
               int64_t batchSize, bool firstBatch);

/// The bytes of a command's lsid.id (empty when it has none), and its txnNumber.
std::string sessionIdBytes(const bson::Fields& cmd);
std::optional<int64_t> txnNumberOf(const bson::Fields& cmd);

/// A client cursor over `stream`, owned by the command's session and transaction.
std::unique_ptr<ClientCursor> newCursor(OperationContext& op, const std::string& ns,
                                        std::shared_ptr<const CollectionEntry> coll,
                                        std::unique_ptr<DocStream> stream);

/// Registers a cursor if the stream has more, and appends the {cursor: {...}} reply.
void replyWithCursor(OperationContext& op, const std::string& ns,
                     std::shared_ptr<const CollectionEntry> coll, std::unique_ptr<DocStream> stream,
                     int64_t batchSize, bool singleBatch, bson_t* reply, bool tailable = false,
                     bool awaitData = false);

}  // namespace halo::store
