#pragma once
// The WiredTiger boundary: connection, sessions and cursors as RAII objects,
// WiredTiger return codes converted to Status here and nowhere else.
//
// Thread-safety: Engine is thread-safe. A Session (and its cursors) must be used
// by one thread at a time, as WiredTiger requires.
#include <wiredtiger.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "store/server/options.h"

namespace halo::store {

/// Converts a WiredTiger return code (WT_ROLLBACK becomes WriteConflict).
Status wtStatus(int ret, std::string_view context);

/// Thrown inside a storage transaction when WiredTiger reports a conflict; the
/// write path retries the whole operation, as mongod does.
class WriteConflictException : public DBException {
  public:
    WriteConflictException()
        : DBException(ErrorCode::WriteConflict,
                      "WriteConflict error: this operation conflicted with another operation. "
                      "Please retry your operation or multi-document transaction.") {}
};

/// Throws WriteConflictException for WT_ROLLBACK, DBException otherwise.
void wtCheck(int ret, std::string_view context);

class Cursor {
  public:
    Cursor() = default;
    explicit Cursor(WT_CURSOR* c) : c_(c) {}
    Cursor(Cursor&& o) noexcept : c_(o.c_) { o.c_ = nullptr; }
    Cursor& operator=(Cursor&& o) noexcept {
        if (this != &o) {
            close();
            c_ = o.c_;
            o.c_ = nullptr;
        }
        return *this;
    }
    ~Cursor() { close(); }
    WT_CURSOR* get() const { return c_; }
    WT_CURSOR* operator->() const { return c_; }
    explicit operator bool() const { return c_ != nullptr; }
    void close() {
        if (c_) c_->close(c_);
        c_ = nullptr;
    }

  private:
    WT_CURSOR* c_ = nullptr;
};

class Session {
  public:
    explicit Session(WT_SESSION* s) : s_(s) {}
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    WT_SESSION* get() const { return s_; }
    /// Opens a cursor; throws on failure (a missing table is a bug by then).
    Cursor open(const std::string& uri, const char* config = nullptr);
    /// Begins a transaction; without `config`, with the session's snapshot isolation.
    void begin(const char* config = nullptr);
    /// Commits; `durable` forces the journal to disk before returning, which
    /// keeps the transaction's updates uncommitted (conflicting) for the whole
    /// log sync. Writers that others may race use commitThenSync() instead.
    void commit(bool durable = true);
    /// Commits without waiting, then waits until the journal holding the
    /// commit is on disk (mongod's waitUntilDurable after a j:true write): the
    /// updates stop conflicting as soon as they are committed, and concurrent
    /// commits share one log sync.
    void commitThenSync();
    void rollback();
    bool inTransaction() const { return inTxn_; }
    /// Sets the open transaction's commit timestamp (a cluster time as u64):
    /// its updates become visible to readers at that timestamp and later.
    void setCommitTimestamp(uint64_t ts);

  private:
    WT_SESSION* s_;
    bool inTxn_ = false;
};

/// A storage transaction scope: begin on construction, rollback unless committed.
class Txn {
  public:
    explicit Txn(Session& s, const char* config = nullptr) : s_(s) { s_.begin(config); }
    ~Txn() {
        if (s_.inTransaction()) s_.rollback();
    }
    void commit(bool durable = true) { s_.commit(durable); }
    void commitThenSync() { s_.commitThenSync(); }

  private:
    Session& s_;
};

/// Waits before attempt `attempt` (0-based) of an operation that WiredTiger
/// refused with a write conflict, as mongod backs off: the first retries at
/// once, later ones sleep longer (up to 10 ms), so a writer waiting out
/// another's commit does not spin on the CPU that commit needs.
void writeConflictBackoff(int attempt);
/// How long writeConflictBackoff(attempt) sleeps (zero: it only yields the CPU).
std::chrono::microseconds writeConflictDelay(int attempt);

class Engine {
  public:
    static StatusWith<std::unique_ptr<Engine>> open(const StoreOptions& opts);
    ~Engine();
    std::unique_ptr<Session> newSession();
    WT_CONNECTION* conn() const { return conn_; }
    const std::string& tableConfig() const { return tableConfig_; }
    /// Creates a table with the given key/value formats and the store's compressor.
    Status createTable(Session& s, const std::string& uri, const char* keyFormat,
                       const char* valueFormat);
    /// Drops a table; a table still in use is retried at the next checkpoint.
    Status dropTable(Session& s, const std::string& uri);
    /// WiredTiger statistic by key (e.g. WT_STAT_CONN_CACHE_BYTES_INUSE).
    int64_t connStat(int key);
    /// A table's block-manager statistics: its file size and the bytes in it
    /// free for reuse (zeros when the statistics cannot be read, e.g. while the
    /// table is being dropped).
    struct TableSizes {
        int64_t fileBytes = 0;
        int64_t reusableBytes = 0;
    };
    TableSizes tableSizes(const std::string& uri);
    /// The configuration string the table was created with (WiredTiger metadata).
    std::string creationString(const std::string& uri);
    /// Rewrites the table so free space returns to the filesystem (WT compact).
    Status compact(const std::string& uri);
    void checkpoint();
    /// Moves WiredTiger's stable and oldest timestamps forward (never back):
    /// history older than `oldest` may be discarded, so reads at a timestamp
    /// below it are no longer possible. Timestamps are cluster times as u64.
    void advanceTimestamps(uint64_t stable, uint64_t oldest);

  private:
    explicit Engine(WT_CONNECTION* c, std::string tableConfig)
        : conn_(c), tableConfig_(std::move(tableConfig)) {}
    WT_CONNECTION* conn_;
    std::string tableConfig_;
};

}  // namespace halo::store
