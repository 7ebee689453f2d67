#pragma once
// The oplog (`local.oplog.rs`): one BSON entry per data change, written in the
// same WiredTiger transaction as the change it records, keyed by its cluster
// time (record id = Timestamp as a 64-bit integer, so it sorts by time; valid
// until 2038, when the seconds reach 2^31). Capped by size.
//
// Visibility: timestamps are reserved before commit, so transactions can
// commit out of timestamp order. Readers (change streams) only read up to
// visibleUpTo(): the newest timestamp below every still-pending one, so a
// reader never skips an entry that commits later with a smaller timestamp.
//
// Thread-safe.
#include <array>
#include <asio.hpp>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bson/doc.h"
#include "store/repl/logical_clock.h"
#include "store/storage/catalog.h"

namespace halo::store {

inline constexpr const char* kOplogNs = "local.oplog.rs";

struct OplogEntry {
    char op = 'n';  // i, u, d, c, n
    std::string ns;
    // The collection's UUID, owned: a transaction buffers entries while the
    // catalog entry they came from may be replaced (createIndexes after create).
    std::optional<std::array<uint8_t, 16>> uuid;
    void setUuid(const uint8_t* u) {
        if (!u) {
            uuid.reset();
            return;
        }
        uuid.emplace();
        std::memcpy(uuid->data(), u, 16);
    }
    bson::Doc o;
    std::optional<bson::Doc> o2;
    // Session info for retryable writes and transactions.
    std::optional<bson::Doc> lsid;
    int64_t txnNumber = -1;
    int32_t stmtId = -1;
    /// Post-image of an update (kept for change streams; not a mongod field).
    std::optional<bson::Doc> postImage;
    /// Pre-image of an update/delete when the collection records them.
    std::optional<bson::Doc> preImage;
};

class Oplog {
  public:
    Oplog(Catalog& catalog, LogicalClock& clock, int64_t maxBytes);

    /// Creates the oplog collection when absent and advances the clock past its
    /// newest entry. Call once at start-up, before any write.
    Status open();

    /// One storage transaction's worth of entries. Destroyed without
    /// committed(): its reserved timestamps are released (the txn rolled back).
    class Unit {
      public:
        Unit(Oplog& log, Session& s) : log_(log), s_(s) {}
        /// A unit inside a multi-document transaction: entries are buffered in
        /// `buffer` and written as one applyOps entry at commit.
        Unit(Oplog& log, Session& s, std::vector<OplogEntry>* buffer)
            : log_(log), s_(s), buffer_(buffer) {}
        ~Unit();
        Unit(const Unit&) = delete;
        Unit& operator=(const Unit&) = delete;
        /// Reserves a timestamp and inserts the entry in the session's transaction.
        Timestamp append(OplogEntry e);
        /// Marks the unit's entries committed (call right after the txn commits).
        void committed();
        /// Committed, but shown to readers of the oplog only once the caller
        /// passes the returned timestamps to releaseCommitted (after the journal
        /// sync that makes them durable: CommandDurability).
        std::vector<Timestamp> committedLater();
        Timestamp lastTs() const { return last_; }
        bool empty() const { return reserved_.empty(); }

      private:
        Oplog& log_;
        Session& s_;
        std::vector<Timestamp> reserved_;
        std::vector<OplogEntry>* buffer_ = nullptr;
        Timestamp last_;
        bool done_ = false;
    };

    /// Every entry at or below this timestamp is durable (or was rolled back).
    Timestamp visibleUpTo() const;
    /// The newest committed entry (mongod's lastApplied on a primary): every
    /// acknowledged write is at or before it, even while an older write still
    /// holds visibleUpTo() back.
    Timestamp lastCommitted() const;
    /// The newest entry this thread committed since the last reset: a write's
    /// own optime, which its reply reports as operationTime (as mongod does),
    /// even while an older concurrent write keeps visibleUpTo() behind it.
    static Timestamp lastCommittedOnThisThread();
    static void resetLastCommittedOnThisThread();
    /// The oldest entry still in the oplog (null when empty).
    Timestamp oldest(Session& s) const;
    /// The newest timestamp whose entry may have been removed by capping: a
    /// reader positioned before it has lost history.
    Timestamp truncatedThrough() const;
    LogicalClock& clock() { return clock_; }
    std::shared_ptr<const CollectionEntry> collection() const { return coll_; }

    /// Cancels `timer` (through its executor) at the next commit: wakes an
    /// awaitData getMore without polling. Expired timers are pruned here.
    void wakeOnNextCommit(std::weak_ptr<asio::steady_timer> timer);
    /// Counts commits; a waiter compares it before and after registering so a
    /// commit in between is never missed.
    uint64_t commitSeq() const { return commitSeq_.load(); }

    /// Deletes the oldest entries while the oplog exceeds its size. Called after
    /// each write commits (cheap when under the cap) and by the periodic reaper.
    void truncateIfNeeded();

    /// The entries of units committed with committedLater() become visible.
    void releaseCommitted(const std::vector<Timestamp>& ts) { release(ts, true); }

  private:
    void release(const std::vector<Timestamp>& ts, bool committed);

    Catalog& catalog_;
    LogicalClock& clock_;
    int64_t maxBytes_;
    std::shared_ptr<const CollectionEntry> coll_;
    mutable std::mutex mu_;
    std::mutex truncateMu_;
    std::set<uint64_t> pending_;
    Timestamp lastCommitted_;
    Timestamp truncatedThrough_;
    std::atomic<uint64_t> commitSeq_{0};
    std::vector<std::weak_ptr<asio::steady_timer>> waiters_;
};

/// The `o` of a transaction's commit entry: {applyOps: [op, ...]}.
bson::Doc applyOpsEntry(const std::vector<OplogEntry>& ops);

/// Builds the BSON of an entry at `ts` (the shape of mongod's oplog entries).
bson::Doc oplogEntryToBson(const OplogEntry& e, Timestamp ts, int64_t wallMillis);

}  // namespace halo::store
