#pragma once
// The embedded store: one WiredTiger engine, its catalog and cursors, and the
// network front end speaking the MongoDB wire protocol. start()/stop().
#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "auth/scram.h"
#include "bson/doc.h"
#include "bson/fields.h"
#include "common/status.h"
#include "net/listener.h"
#include "store/authz/authorization.h"
#include "store/exec/operation_registry.h"
#include "store/exec/profile_settings.h"
#include "store/exec/top.h"
#include "store/repl/logical_clock.h"
#include "store/rules/fail_point.h"
#include "store/server/options.h"
#include "wire/message.h"

namespace halo::store {

class Engine;
class Catalog;
class CursorManager;
class Oplog;
class SessionCatalog;
struct CommandSpec;
struct Deferral;
struct OperationContext;

/// The user a connection authenticated as, with its roles and the privileges
/// they resolve to, read at that time (read again when any user or role
/// document changes: see Store::authzGeneration()).
struct AuthenticatedUser {
    std::string user;
    std::string db;
    std::vector<authz::RoleName> roles;  // held directly
    std::shared_ptr<const authz::PrivilegeSet> privileges;
    uint64_t generation = 0;
};

/// A SASL conversation in progress on one connection (saslStart .. saslContinue).
struct SaslConversation {
    int32_t id = 1;
    std::string db;    // the authentication database
    std::string user;  // known once the client-first message is read
    std::unique_ptr<halo::auth::ScramServer> scram;
    bool skipEmptyExchange = false;
    bool awaitingEmptyStep = false;  // proof checked, server-final sent, done:false
};

/// Per-connection state shared by the commands run on that connection.
struct ClientState {
    uint64_t connectionId = 0;
    std::string remote;
    std::string local;
    std::vector<wire::Compressor> compressors;  // negotiated, in client preference order
    bson::Doc clientMetadata;
    bool sawHandshake = false;
    std::optional<AuthenticatedUser> user;  // set by a finished SASL conversation
    std::optional<SaslConversation> sasl;
    bool internal = false;  // the store's own work: never subject to authorization
    /// Its handshake said internalClient (another server, as mongod tags it):
    /// fail points spare it unless told otherwise; no RetryableWriteError labels.
    bool internalClient = false;
    /// Close the connection instead of replying to the current request (a fail point).
    bool closeConnection = false;
    /// A command held by failCommand's blockConnection: the connection waits
    /// (without its thread) until `until`, then the command resumes with `data`.
    struct BlockedCommand {
        std::shared_ptr<const bson::Doc> data;
        std::chrono::steady_clock::time_point until;
    };
    std::optional<BlockedCommand> blockedByFailPoint;
    /// The request this connection is running (set by the connection while it
    /// handles one; what currentOp shows and killOp interrupts).
    std::shared_ptr<ActiveOperation> activeOp;
    /// A connection from a loopback address (the localhost exception).
    bool fromLocalhost() const;
};

struct Counters {
    std::atomic<int64_t> insert{0}, query{0}, update{0}, del{0}, getmore{0}, command{0};
    std::atomic<int64_t> ttlPasses{0}, ttlDeleted{0};  // serverStatus metrics.ttl
};

class Store {
  public:
    explicit Store(StoreOptions opts);
    ~Store();

    /// Opens storage and starts listening; returns once the port is bound.
    Status start();
    /// Stops accepting, closes connections, drains and closes storage.
    void stop();
    /// Blocks until stop() (e.g. on SIGINT/SIGTERM).
    void waitForShutdown();
    void requestShutdown();

    uint16_t port() const;
    const StoreOptions& options() const { return opts_; }
    Engine& engine() { return *engine_; }
    Catalog& catalog() { return *catalog_; }
    CursorManager& cursors() { return *cursors_; }
    Counters& counters() { return counters_; }
    /// In-flight operations (currentOp, killOp).
    OperationRegistry& operations() { return operations_; }
    /// Per-collection usage and latency statistics (top, $collStats latencyStats).
    Top& top() { return top_; }
    /// The database profiler's levels, slowms and sampleRate.
    ProfileSettings& profiling() { return profiling_; }
    /// Test-only fail points (configureFailPoint, with enableTestCommands).
    FailPoints& failPoints() { return failPoints_; }
    std::chrono::steady_clock::time_point startTime() const { return started_; }
    size_t openConnections() const;
    uint64_t totalConnections() const;
    uint64_t rejectedConnections() const;
    int64_t maxConnections() const { return opts_.maxConns; }
    std::string hostAndPort() const;

    /// Runs one command document; fills `reply` (ok:1 or the error shape). Never throws.
    /// With `deferral`, the command may ask to be run again later instead of replying
    /// (then `reply` is to be discarded).
    void runCommand(ClientState& client, std::string_view db, const bson_t* cmd, bson_t* reply,
                    Deferral* deferral = nullptr, bool finalAttempt = true);
    /// The same, with the command's fields already read (bson::Fields over it).
    void runCommand(ClientState& client, std::string_view db, const bson::Fields& cmd,
                    bson_t* reply, Deferral* deferral = nullptr, bool finalAttempt = true);

    bool isReplicaSet() const { return !opts_.replSet.empty(); }
    bool authEnabled() const { return opts_.auth; }
    /// Bumped by every change to admin.system.users or admin.system.roles:
    /// connections re-read their user's roles and privileges (and lose a
    /// dropped user) on their next command.
    uint64_t authzGeneration() const { return authzGeneration_.load(); }
    void bumpAuthzGeneration() { ++authzGeneration_; }
    /// Runs a command as the store itself (no authorization, no session, no
    /// transaction of the calling operation) and returns the reply.
    bson::Doc runInternal(std::string_view db, const bson_t* cmd);
    LogicalClock& clock() { return clock_; }
    Oplog& oplog() { return *oplog_; }
    SessionCatalog& sessions() { return *sessions_; }
    /// A random id for this process's topologyVersion.
    const bson_oid_t& processId() const { return processId_; }
    asio::io_context& io() { return io_; }

  private:
    void gossipClusterTime(const bson::Fields& cmd);
    /// Checks the command's readConcern and waits for its afterClusterTime /
    /// atClusterTime to be visible. Returns the cluster time a snapshot read
    /// outside a transaction reads at (nullopt for any other read concern).
    std::optional<Timestamp> waitForReadConcern(const OperationContext& op);
    void appendClusterTime(bson_t* reply);
    /// Labels a failed reply (or one with a writeConcernError) as mongod does,
    /// or with the labels a fail point named; adds topologyVersion to a
    /// not-primary error on a replica set.
    void appendErrorLabels(const ClientState& client, std::string_view name,
                           const bson::Fields& args, bson_t* reply,
                           const std::optional<bson::Doc>& labelsOverride, bool changeStream);
    /// The failCommand fail point's part in a command: true when it answered
    /// (an error, a closed connection, or a wait to come back from), false when
    /// the command runs; `labelsOverride` receives the labels it names.
    bool applyFailCommand(ClientState& client, std::string_view db, const CommandSpec& spec,
                          const bson::Fields& args, bson_t* reply, Deferral* deferral,
                          bool finalAttempt, std::optional<bson::Doc>* labelsOverride);
    void runWithSession(OperationContext& op, const struct CommandSpec& spec, bson_t* body);
    void runInSession(OperationContext& op, const CommandSpec& spec, bson_t* body);
    /// Counts a finished command in the usage statistics of the collection it names.
    void recordUsage(std::string_view name, const std::string& ns, int64_t micros);
    /// With --auth: whether `client` may run command `name`; the error to send
    /// otherwise. `access` receives the command's rule (cursors keep it).
    Status authorize(ClientState& client, std::string_view db, std::string_view name,
                     const bson_t* cmd, authz::CommandAccess* access);

    StoreOptions opts_;
    std::unique_ptr<Engine> engine_;
    std::unique_ptr<Catalog> catalog_;
    std::unique_ptr<CursorManager> cursors_;
    LogicalClock clock_;
    // The oldest cluster time snapshot reads may ask for (history kept in
    // WiredTiger since then; the start-up time after a restart).
    std::atomic<uint64_t> oldestReadable_{0};
    // When a snapshot read last asked for a time (seconds since the epoch): the
    // full history window is kept only while snapshot reads happen.
    std::atomic<int64_t> lastSnapshotReadSecs_{0};
    void advanceSnapshotHistory();
    std::unique_ptr<Oplog> oplog_;
    std::unique_ptr<SessionCatalog> sessions_;
    bson_oid_t processId_;
    // Before the contexts: connections (destroyed with them) deregister from it.
    OperationRegistry operations_;
    // Client connections, spread over these; each is run by one thread of its
    // own, so a connection's I/O and commands never hand over between threads.
    // Declared before io_, so destroyed after it: a pending accept on io_
    // holds a socket of the context the next connection goes to.
    std::vector<std::unique_ptr<asio::io_context>> connectionContexts_;
    asio::io_context io_;  // acceptors, timers, the TTL monitor
    std::unique_ptr<net::Listener> listener_;
    std::vector<std::thread> threads_;
    std::unique_ptr<asio::steady_timer> reaperTimer_;
    std::unique_ptr<asio::steady_timer> ttlTimer_;
    Counters counters_;
    Top top_;
    ProfileSettings profiling_;
    FailPoints failPoints_;
    std::chrono::steady_clock::time_point started_;
    std::atomic<bool> stopping_{false};
    std::atomic<uint64_t> authzGeneration_{1};
    std::mutex shutdownMu_;
    std::condition_variable shutdownCv_;
    bool shutdownRequested_ = false;
};

/// Appends the {ok:0, errmsg, code, codeName} error shape.
void appendError(bson_t* reply, const Status& s);

}  // namespace halo::store
