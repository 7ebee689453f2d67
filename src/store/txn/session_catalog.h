#pragma once
// Logical sessions: retryable writes and multi-document transactions.
//
// Retryable writes: every statement executed with (lsid, txnNumber) records
// its outcome in the durable table `_retryable` in the same WiredTiger
// transaction as the write, keyed (lsid, txnNumber, stmtId). A retry finds the
// record and returns the original outcome instead of executing again, also
// after a restart.
//
// Transactions: `startTransaction` pins a WiredTiger session with a snapshot
// transaction to the logical session; every statement of the transaction runs
// in it; writes buffer their oplog entries, which commitTransaction writes as
// one applyOps entry in the same WiredTiger commit. Abort (or any error, or the
// lifetime limit) rolls back: nothing reaches the data or the oplog.
//
// Thread-safety: the catalog is thread-safe; one command at a time holds a
// session's mutex (commands on one session are serialized, as in mongod).
#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bson/doc.h"
#include "store/repl/oplog.h"
#include "store/storage/catalog.h"

namespace halo::store {

struct SessionState {
    std::mutex mu;
    std::string key;  // lsid.id bytes
    bson::Doc lsid;   // as the client sent it
    int64_t txnNumber = -1;
    enum class Txn { None, InProgress, Committed, Aborted } txn = Txn::None;
    std::unique_ptr<Session> wtSession;  // the open transaction's snapshot
    std::vector<OplogEntry> txnOps;      // buffered until commit
    // Collections the open transaction created (by namespace and UUID): their
    // create entries are in txnOps; an abort drops them again.
    std::vector<std::pair<std::string, std::array<uint8_t, 16>>> createdInTxn;
    std::chrono::steady_clock::time_point lastUse;
    std::chrono::steady_clock::time_point txnStart;
    std::string owner;  // "user@db" of the client that first used it; empty without auth
    // The retryable-write records this session wrote since the store started:
    // their txnNumber and highest stmtId. The next txnNumber removes them by
    // key; scanning for them would walk every record removed before (WiredTiger
    // keeps removed keys until the page is reconciled), which grows per write.
    int64_t recordedTxn = -1;
    int32_t recordedMaxStmt = -1;
    bool recordedCommit = false;  // recordedTxn is a committed transaction's
    bool swept = false;           // records older than the store's start are removed
};

/// What a command runs under: nothing, a retryable write, or a transaction.
struct OperationSession {
    std::shared_ptr<SessionState> state;  // null without lsid
    int64_t txnNumber = -1;               // -1: none
    bool inTransaction = false;
};

class SessionCatalog {
  public:
    SessionCatalog(Engine& engine, Catalog& catalog, Oplog& oplog);
    Status open();

    /// The state for `lsid` (created on first use, owned by `owner`).
    std::shared_ptr<SessionState> get(const bson_t* lsid, std::string_view owner = {});
    /// The sessions in memory: lsid as sent, owner and last use ($listLocalSessions).
    struct LocalSession {
        bson::Doc lsid;
        std::string owner;
        std::chrono::steady_clock::time_point lastUse;
    };
    std::vector<LocalSession> list() const;
    void end(const bson_t* lsid);

    // Transactions (the caller holds state.mu).
    /// `readAt` (a cluster time as u64, 0 for none): the transaction reads at
    /// that time (readConcern snapshot with atClusterTime) instead of the newest data.
    void begin(SessionState& st, int64_t txnNumber, uint64_t readAt = 0);
    /// Commits, recording the outcome durably in the same storage transaction.
    void commit(SessionState& st);
    void abort(SessionState& st);
    /// Whether transaction `txnNumber` of this session committed, also before a
    /// restart (then `st` becomes that transaction, committed): a retried
    /// commitTransaction answers ok, as mongod's config.transactions makes it.
    bool committedBefore(SessionState& st, int64_t txnNumber);

    // Retryable writes. Callers run inside a storage transaction on `s`.
    /// The recorded outcome of (lsid, txnNumber, stmtId), if it executed.
    std::optional<bson::Doc> findStatement(Session& s, const SessionState& st, int64_t txnNumber,
                                           int32_t stmtId);
    void recordStatement(Session& s, SessionState& st, int64_t txnNumber, int32_t stmtId,
                         const bson_t* outcome);
    /// Validates and registers txnNumber for a retryable write: TransactionTooOld (225) when older.
    /// Returns true when `txnNumber` is newer than any this session has used
    /// (also before a restart): nothing can be recorded under it yet.
    bool checkTxnNumber(SessionState& st, int64_t txnNumber);

    /// Aborts transactions past their lifetime, forgets idle sessions.
    void reap(std::chrono::seconds txnLifetime, std::chrono::minutes idle);
    /// The lsid id bytes of the sessions whose owner ("user@db", empty without
    /// authentication) `owner` accepts.
    std::vector<std::string> sessionsOwnedBy(
        const std::function<bool(const std::string&)>& owner) const;
    /// Aborts the transaction in progress of every session whose lsid id bytes
    /// `match` accepts (killSessions). A session running a command right now is
    /// left to that command, which the same kill interrupts (an error inside a
    /// transaction aborts it).
    void abortTransactions(const std::function<bool(const std::string&)>& match);
    /// Aborts the transactions in progress that wrote to `ns`, whose tables a
    /// drop is about to remove with their uncommitted writes (mongod's drop
    /// waits for them instead; here they end as if killed, and their commit
    /// answers NoSuchTransaction, which drivers retry). A transaction running a
    /// command right now is skipped.
    Status abortTransactionsWriting(const std::string& ns);
    size_t activeSessions() const;

  private:
    /// After a rollback: drops the collections the transaction created, unless
    /// another client has written to one meanwhile (it then stays, and its
    /// create entry is written to the oplog on its own).
    void undoCreatedCollections(SessionState& st);
    /// Removes the records of this session's transactions older than `txnNumber`.
    void forgetOlder(Cursor& c, SessionState& st, int64_t txnNumber);
    static void putRecord(Cursor& c, const std::string& key, const bson_t* value);
    /// Tracks what the next txnNumber must remove (`stmtId` -1: none of the statements).
    static void noteRecorded(SessionState& st, int64_t txnNumber, int32_t stmtId);

    Engine& engine_;
    Catalog& catalog_;
    Oplog& oplog_;
    mutable std::mutex mu_;
    std::map<std::string, std::shared_ptr<SessionState>> sessions_;
};

/// The transaction or retryable write the current thread's command runs in;
/// set by the dispatcher for the duration of one command.
struct CurrentOperation {
    SessionState* txn = nullptr;        // in a multi-document transaction
    SessionState* retryable = nullptr;  // a retryable write (not in a transaction)
    int64_t txnNumber = -1;
    SessionCatalog* sessions = nullptr;
    // The retryable write's txnNumber is new to its session: no statement of
    // it has run before, so there is no earlier outcome to look up.
    bool freshTxnNumber = false;
    // A statement of a write command failed inside the transaction: the reply
    // reports it in writeErrors (ok: 1) and the transaction aborts afterwards.
    bool abortTransactionAfterCommand = false;
    // A snapshot read outside a transaction (readConcern level snapshot): every
    // storage read of the command, and of its cursor's getMores, is at this time.
    std::optional<Timestamp> readAt;
    // A fail point (onPrimaryTransactionalWrite) asked to close the client's
    // connection once the command is over, without a reply.
    bool closeConnection = false;
};
CurrentOperation& currentOperation();

}  // namespace halo::store
