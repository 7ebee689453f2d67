#pragma once
// Open client cursors: ids are random non-zero int64s, each maps to a resumable
// DocStream plus its namespace. Idle cursors are reaped after the timeout;
// the table is bounded. Thread-safe; a cursor is checked out by one getMore at
// a time (a concurrent getMore on the same id gets CursorInUse-like errors).
#include <asio.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "store/exec/doc_stream.h"

namespace halo::store {

namespace authz {
struct CursorAuth;
}

struct ClientCursor {
    int64_t id = 0;
    std::string ns;
    std::shared_ptr<const CollectionEntry> coll;  // null for collection-less streams
    std::unique_ptr<DocStream> stream;
    std::chrono::steady_clock::time_point lastUsed;
    bool tailable = false;
    bool awaitData = false;
    int64_t batchSize = 0;  // from the originating command
    bool noTimeout = false;
    // The logical session and transaction that opened the cursor: a getMore
    // must come from the same ones (mongod's 50736-50741).
    std::string lsid;  // the lsid's `id` bytes; empty: not opened in a session
    std::optional<int64_t> txnNumber;
    // With --auth: who opened it and what its command needed (getMore and
    // killCursors check it, as mongod does). Null without authorization.
    std::shared_ptr<const authz::CursorAuth> auth;
    // A snapshot read's cluster time (as u64): every getMore reads at it.
    std::optional<uint64_t> readAt;
};

class CursorManager {
  public:
    explicit CursorManager(std::chrono::milliseconds idleTimeout, size_t maxCursors = 100000)
        : timeout_(idleTimeout), max_(maxCursors) {}

    /// Registers a cursor and returns its id. ResourceExhausted-like error when full.
    int64_t add(std::unique_ptr<ClientCursor> c);
    /// Takes the cursor out for a getMore; nullptr when unknown (or in use).
    std::unique_ptr<ClientCursor> checkout(int64_t id, bool* inUse);
    /// Returns a checked-out cursor that still has results.
    void checkin(std::unique_ptr<ClientCursor> c);
    /// Kills a cursor; false when unknown.
    bool kill(int64_t id);
    /// Kills every cursor opened in a session whose lsid id bytes `match`
    /// accepts (killSessions, killAllSessions); returns how many.
    size_t killSessions(const std::function<bool(const std::string&)>& match);
    /// Whether cursor `id` exists (also while checked out); fills its
    /// namespace and authorization (null when opened without authorization).
    bool describe(int64_t id, std::string* ns,
                  std::shared_ptr<const authz::CursorAuth>* auth) const;
    void reapIdle();
    /// Cancels `timer` (through its executor) when cursor `id` is killed: a
    /// getMore waiting for data on that cursor returns at once.
    void wakeOnKill(int64_t id, std::weak_ptr<asio::steady_timer> timer);
    size_t open() const;
    int64_t timedOut() const { return timedOut_; }

  private:
    std::chrono::milliseconds timeout_;
    size_t max_;
    mutable std::mutex mu_;
    std::map<int64_t, std::unique_ptr<ClientCursor>> cursors_;
    struct CheckedOut {
        bool killed = false;
        std::string ns;
        std::shared_ptr<const authz::CursorAuth> auth;
        std::string lsid;
    };
    std::map<int64_t, CheckedOut> checkedOut_;
    std::multimap<int64_t, std::weak_ptr<asio::steady_timer>> killWaiters_;
    int64_t timedOut_ = 0;
};

}  // namespace halo::store
