#pragma once
// The proxy's in-flight client operations, for currentOp and killOp as mongos
// answers them: each client connection runs one command at a time and
// publishes it here while it runs, with the tier it was sent to.
//
// Thread-safety: every method may be called from any thread. A connection's
// slot is written only by that connection's coroutine (begin/end/sentTo) and
// read by currentOp under the slot's mutex; the command document it points to
// stays valid between begin() and end().
#include <bson/bson.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "bson/doc.h"

namespace halo::tiering {

class Operations;

/// One client connection's slot.
class OperationSlot {
  public:
    OperationSlot(Operations& ops, uint64_t connectionId, std::string client);
    ~OperationSlot();
    OperationSlot(const OperationSlot&) = delete;
    OperationSlot& operator=(const OperationSlot&) = delete;

    /// A command starts (`cmd` must outlive the matching end()).
    void begin(const bson_t* cmd, const std::string& db, std::string principal = {});
    void end();
    /// The command was (also) sent to this tier.
    void sentTo(const char* tierName) { tier_.store(tierName, std::memory_order_relaxed); }
    /// Whether killOp asked this command to stop.
    bool killed() const { return killed_.load(std::memory_order_relaxed); }
    /// The command running now (null when idle); for the connection's own thread.
    const bson_t* command() const { return cmd_; }

  private:
    friend class Operations;
    Operations& ops_;
    const uint64_t connectionId_;
    const std::string client_;
    std::mutex mu_;
    int64_t opid_ = 0;  // 0: idle
    const bson_t* cmd_ = nullptr;
    std::string db_;
    std::string principal_;  // the user running it ("" without authentication)
    std::chrono::steady_clock::time_point started_{};
    std::atomic<const char*> tier_{nullptr};
    std::atomic<bool> killed_{false};
};

class Operations {
  public:
    /// currentOp documents in mongod's shape (opid, active, secs_running,
    /// microsecs_running, op, ns, command, client, desc, connectionId,
    /// currentOpTime) plus `halocline: {tier}`; idle connections too when asked.
    /// With `onlyOf`, only that user's operations (what a user without the
    /// inprog privilege may see, as on mongod).
    std::vector<bson::Doc> current(bool includeIdle, const std::string* onlyOf = nullptr) const;
    /// Marks operation `opid` killed; false when no such operation runs (or,
    /// with `onlyOf`, when it is another user's).
    bool kill(int64_t opid, const std::string* onlyOf = nullptr);
    /// Marks killed every operation but `except` whose command names a session
    /// in `ids` (lsid id bytes); returns how many.
    size_t killSessions(const std::set<std::string>& ids, const OperationSlot* except);

  private:
    friend class OperationSlot;
    mutable std::mutex mu_;
    std::set<OperationSlot*> slots_;
    std::atomic<int64_t> nextOpId_{1};
};

}  // namespace halo::tiering
