#pragma once
// The proxy's own cursor ids, each mapped to (tier, the tier's cursor id).
// Bounded: past the limit the least recently used cursor is dropped (and
// killed on its tier). Idle cursors are reaped after the configured timeout.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "bson/doc.h"

namespace halo::tiering {

class Tier;

/// A change stream on a database or the cluster that covers tiered
/// collections: the fast tier's stream for those merged with the archive's
/// for the rest (CONSISTENCY.md, Change streams). Shared by the copies of its
/// cursor entry; one getMore at a time.
struct MergedStream {
    int64_t fastId = 0;  // the fast tier's cursor; 0 once its stream ended
    int64_t archiveId = 0;
    // How far the client has seen each tier's stream: the resume tokens that
    // make up the merged token.
    bson::Doc fastPos, archivePos;
    bool updateLookup = false;
    std::atomic<bool> busy{false};
};

/// The rest of a merged read's documents, which the proxy holds and serves
/// to getMores itself (a merged read has no tier cursor behind it).
struct BufferedCursor {
    std::mutex mu;
    std::vector<bson::Doc> docs;
    size_t next = 0;
};

struct CursorEntry {
    Tier* tier = nullptr;
    int64_t remoteId = 0;
    std::string ns;
    // A proof-routed cursor on the fast tier: it lives at most half the clock-skew
    // guard, after which eviction may reach its range. A cursor at a snapshot (in a
    // transaction, or a snapshot read) is not one: a later eviction is invisible
    // there (CONSISTENCY.md, Transactions).
    bool fastTiered = false;
    // A change stream on a tiered collection: the proxy completes its events
    // (ClientConnection::completeEvents), looking updates up when asked.
    bool changeStream = false;
    bool updateLookup = false;
    // A merged stream: `tier`/`remoteId` are the archive's cursor, `merged`
    // holds the fast tier's.
    std::shared_ptr<MergedStream> merged;
    // A merged read's remaining documents (`tier` null, no remote cursor).
    std::shared_ptr<BufferedCursor> buffered;
    std::string owner;  // the user ("user@db") that opened it; empty without auth
    std::string lsid;   // the id bytes of the session that opened it; empty without one
    std::chrono::steady_clock::time_point created;
    std::chrono::steady_clock::time_point lastUsed;
};

class CursorMap {
  public:
    explicit CursorMap(size_t max) : max_(max), rng_(std::random_device{}()) {}

    /// Registers a tier cursor and returns the proxy's id for it. Entries pushed
    /// out by the bound are appended to `dropped` (to be killed on their tier).
    int64_t add(CursorEntry e, std::vector<CursorEntry>* dropped);
    std::optional<CursorEntry> find(int64_t id);
    void touch(int64_t id);
    void erase(int64_t id);
    /// Removes and returns cursors idle for longer than `idle`.
    std::vector<CursorEntry> reap(std::chrono::milliseconds idle);
    /// Removes and returns the cursors opened by sessions in `ids` (lsid id bytes).
    std::vector<CursorEntry> removeSessions(const std::set<std::string>& ids);
    size_t size() const;

  private:
    std::vector<CursorEntry> removeIf(const std::function<bool(const CursorEntry&)>& pred);

    size_t max_;
    mutable std::mutex mu_;
    std::mt19937_64 rng_;
    std::unordered_map<int64_t, CursorEntry> map_;
};

}  // namespace halo::tiering
