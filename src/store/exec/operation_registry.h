#pragma once
// The operations in flight, for currentOp/$currentOp and killOp.
//
// A connection registers itself (addClient) and, for every request, one
// ActiveOperation that lives from the moment the request is read until its
// reply is sent, including the time a getMore or an awaitable hello waits
// for data. killOp sets the operation's kill flag (checkForInterrupt, see
// interrupt.h) and wakes a waiting operation by cancelling its timer, after
// which it fails with Interrupted (11601).
//
// Thread-safety: every method is thread-safe; one mutex guards the tables and
// the operations' descriptions. The description keeps a pointer to the running
// command, copied only when a report is built or the operation starts to wait,
// so the common path copies no command document.
#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bson/doc.h"

namespace halo::store {

class OperationRegistry;

/// One in-flight operation. Created by OperationRegistry::begin.
class ActiveOperation {
  public:
    int64_t opid() const { return opid_; }
    uint64_t connectionId() const { return connectionId_; }
    /// The flag checkForInterrupt() watches.
    const std::atomic<bool>* killedFlag() const { return &killed_; }
    bool killed() const { return killed_.load(); }

  private:
    friend class OperationRegistry;
    int64_t opid_ = 0;
    uint64_t connectionId_ = 0;
    std::chrono::steady_clock::time_point started_;
    std::atomic<bool> killed_{false};
    // Guarded by the registry's mutex.
    bool described_ = false;
    std::string op_;  // mongod's op: "query", "getmore", "insert", "update", "remove", "command"
    std::string ns_;
    const bson_t* command_ = nullptr;                          // valid while the command runs
    bson::Doc ownCommand_;                                     // kept while the operation waits
    std::optional<std::pair<std::string, std::string>> user_;  // (user, db)
    std::weak_ptr<asio::steady_timer> waitTimer_;
};

class OperationRegistry {
  public:
    struct ReportOptions {
        std::string host;              // "host:port" of this server
        bool idleConnections = false;  // also connections with no operation
        std::optional<std::pair<std::string, std::string>> onlyUser;  // allUsers: false
    };

    void addClient(uint64_t connectionId, std::string remote);
    void removeClient(uint64_t connectionId);
    /// The handshake's client document (shown as clientMetadata).
    void setClientMetadata(uint64_t connectionId, const bson_t* metadata);

    /// Registers a new operation of `connectionId`; end() removes it.
    std::shared_ptr<ActiveOperation> begin(uint64_t connectionId);
    void end(const ActiveOperation& op);

    /// What the operation runs: mongod's op and ns (describeCommand) and the
    /// command, which must stay valid until detachCommand() or end().
    void describe(ActiveOperation& op, std::string kind, std::string ns, const bson_t* command,
                  std::optional<std::pair<std::string, std::string>> user);
    /// The command stops running on this thread: keep a copy when the operation
    /// is to wait (a deferral), drop the pointer either way.
    void detachCommand(ActiveOperation& op, bool keepCopy);

    /// Registers the timer the waiting operation sleeps on. Returns false when
    /// the operation was already killed (then it must not wait).
    bool waitOn(ActiveOperation& op, std::weak_ptr<asio::steady_timer> timer);

    /// killOp: marks the operation killed and wakes it if it waits. False when
    /// no operation has this id, or (with `onlyUser`) when it runs as another user.
    bool kill(int64_t opid,
              const std::optional<std::pair<std::string, std::string>>& onlyUser = std::nullopt);
    /// Kills every operation running in a session whose lsid id bytes `match`
    /// accepts, except operation `exceptOpid` (the command asking); returns how many.
    size_t killSessions(const std::function<bool(const std::string&)>& match, int64_t exceptOpid);

    /// The $currentOp documents, in opid order (idle connections last).
    std::vector<bson::Doc> report(const ReportOptions& options) const;

  private:
    /// Sets the kill flag and ends a wait in progress; the caller holds mu_.
    static void killLocked(ActiveOperation& op);

    struct Client {
        std::string remote;
        bson::Doc metadata;
    };
    mutable std::mutex mu_;
    std::atomic<int64_t> nextOpid_{1};
    std::map<uint64_t, Client> clients_;
    std::map<int64_t, std::shared_ptr<ActiveOperation>> ops_;
};

/// mongod's `op` and `ns` for a command run on `db`: find -> ("query", "db.coll"),
/// getMore -> "getmore", insert/update/delete -> "insert"/"update"/"remove",
/// anything else "command" on the collection it names or "db.$cmd".
std::pair<std::string, std::string> describeCommand(std::string_view db, const bson_t* command);

}  // namespace halo::store
