#pragma once
// Client transactions at the proxy (docs/CONSISTENCY.md, Transactions): the
// tier each one runs in, the client's session as a command runner on the fast
// tier, and the check that lets a statement after the first run at the
// transaction's snapshot. Standard MongoDB only: the client's own lsid and
// txnNumber on the fast tier, finds inside the transaction, finds outside it.
#include <asio.hpp>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "bson/doc.h"
#include "bson/fields.h"
#include "tiering/protocol.h"
#include "tiering/tier.h"

namespace halo::tiering {

/// A client transaction: its lsid's id bytes and its txnNumber.
struct TxnKey {
    std::string lsid;
    int64_t txnNumber = 0;
};
/// The transaction a command is a statement of (it carries lsid, txnNumber
/// and autocommit, as only statements of a transaction do).
std::optional<TxnKey> txnKeyOf(const bson_t* cmd);
/// The same, over the command's field index (one pass over it, read once).
std::optional<TxnKey> txnKeyOf(const bson::Fields& cmd);

/// Where a transaction runs: tiered collections in the fast tier, untiered
/// ones in the archive, never both (one replica set commits it).
enum class TxnSide { Archive, Fast };

/// The transactions this proxy saw start (drivers keep a transaction on the
/// router that started it). Entries idle for 30 minutes are forgotten, as
/// mongod forgets idle sessions.
class TxnTable {
  public:
    struct Entry {
        TxnSide side = TxnSide::Archive;
        int statements = 0;
    };
    std::optional<Entry> find(const TxnKey& k);
    void put(const TxnKey& k, const Entry& e);

  private:
    struct Slot {
        int64_t txnNumber;
        Entry entry;
        std::chrono::steady_clock::time_point used;
    };
    std::mutex mu_;
    std::unordered_map<std::string, Slot> slots_;
    size_t puts_ = 0;
};

/// The client's transaction on the fast tier: every command gets the client's
/// lsid, txnNumber and autocommit; the first one sent for a statement that
/// starts the transaction also gets startTransaction and its readConcern.
class ClientTxn {
  public:
    ClientTxn(Tier& fast, const bson_t* clientCmd);
    asio::awaitable<StatusWith<bson::Doc>> run(const bson_t* cmd);
    CommandRunner runner();
    /// Whether the transaction was started by this statement's commands.
    bool started() const { return started_; }
    /// abortTransaction with the client's session (its reply is ignored:
    /// NoSuchTransaction when the transaction never reached the tier).
    asio::awaitable<void> abort();

  private:
    Tier& fast_;
    bson::Doc lsid_;
    int64_t txnNumber_ = 0;
    bool startPending_ = false;
    bool started_ = false;
    std::optional<bson::Doc> readConcern_;
};

/// CONSISTENCY.md, Transactions: whether a statement after the first may run
/// at the transaction's snapshot, after `candidates` (the ids it names, or the
/// archive's matches of its filter when `range`) were promoted and pinned.
/// Every candidate must have been in the fast tier or tombstoned at the
/// snapshot; one that was not, but is there now, arrived since: a
/// TransientTransactionError. A range statement, or one whose missing
/// candidate is nowhere now, also needs no cold write to have finished on the
/// collection since the snapshot.
/// `atSnapshot` runs a read at the snapshot (the transaction's, or a snapshot
/// read's atClusterTime).
asio::awaitable<Status> snapshotHolds(Tiers& t, const CommandRunner& atSnapshot,
                                      const std::string& ns, const std::vector<Id>& candidates,
                                      bool range);

/// Whether a driver may retry the whole transaction after `s` (mongod's
/// TransientTransactionError label): write conflicts, a transaction the tier
/// no longer has, a tier that did not answer.
bool transientInTransaction(const Status& s);

}  // namespace halo::tiering
