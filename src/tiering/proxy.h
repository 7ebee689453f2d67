#pragma once
// The Halocline proxy: speaks the MongoDB wire protocol to applications, answers
// `hello` as a router (mongos-style), and sends every command to the tier that
// can answer it (docs/CONSISTENCY.md). Asynchronous throughout: client
// connections and tier connections are coroutines on one io_context.
#include <asio.hpp>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "net/listener.h"
#include "store/rules/fail_point.h"
#include "tiering/client_auth.h"
#include "tiering/config.h"
#include "tiering/cursors.h"
#include "tiering/fast_clock.h"
#include "tiering/operations.h"
#include "tiering/protocol.h"
#include "tiering/read_promotions.h"
#include "tiering/router.h"
#include "tiering/state.h"
#include "tiering/tier.h"
#include "tiering/transactions.h"
#include "tiering/users.h"

namespace halo::tiering {

class Workers;

class Proxy {
  public:
    explicit Proxy(ProxyConfig cfg, int threads = 0);
    ~Proxy();

    /// Finds both tiers' primaries (waiting up to `tierWait`), prepares the
    /// fast tier, starts listening and starts the workers.
    Status start(std::chrono::milliseconds tierWait = std::chrono::seconds(30));
    void requestShutdown();
    void waitForShutdown();
    void stop();
    uint16_t port() const;

    // Used by client connections.
    const ProxyConfig& config() const { return cfg_; }
    Tier& fast() { return fast_; }
    /// A time at or after every fast-tier write acknowledged before this call:
    /// the fast tier's time now (a ping), or, with a lazy feeder, from the
    /// demand that makes the feeder write what it gathered (FastClock).
    asio::awaitable<StatusWith<OpTime>> writesBefore();
    Tier& archive() { return archive_; }
    Tiers& tiers() { return tiers_; }
    SharedState& state() { return state_; }
    Router& router() { return router_; }
    CursorMap& cursors() { return cursors_; }
    TxnTable& transactions() { return transactions_; }
    /// mongos' failCommand fail point, evaluated by the proxy itself on its
    /// clients' commands (setParameter.enableTestCommands only).
    store::FailPoint& failCommand() { return failCommand_; }
    /// A getMore that found its cursor fails (errorCode); the cursor is gone.
    store::FailPoint& failGetMoreAfterCursorCheckout() { return failGetMore_; }
    Operations& operations() { return operations_; }
    UserCache& users() { return users_; }
    AuthCounters& authCounters() { return authCounters_; }
    const net::Listener* listener() const { return listener_.get(); }
    asio::io_context& io() { return io_; }
    void killRemote(const std::vector<CursorEntry>& dropped);
    /// Copies up, in the background and batched, what the archive answered `_id` reads of.
    ReadPromotions& readPromotions() { return readPromotions_; }
    /// A logical session belongs to the first user that uses it: another
    /// user's command with it gets 13 (the tiers see every client session as
    /// the proxy's user, so they cannot tell them apart). Idle sessions are
    /// forgotten after 30 minutes, as mongod's logical session timeout.
    Status claimSession(const std::string& lsidId, const std::string& principal);
    /// The ids of the sessions users that `owner` accepts have used (auth only).
    std::vector<std::string> sessionsOwnedBy(
        const std::function<bool(const std::string& principal)>& owner);
    /// Waits until the feeder has applied every fast-tier write up to `target`
    /// (0: the fast tier's time now), up to `timeout`; `ns` names the
    /// collection in the timeout's message (ExceededTimeLimit).
    asio::awaitable<Status> awaitApplied(OpTime target, const std::string& ns,
                                         std::chrono::milliseconds timeout,
                                         const std::function<bool()>& killed = {});

    /// Counts a tiered write of `ns` in flight until the hold is destroyed,
    /// after waiting for a drop of it in progress on this proxy.
    asio::awaitable<GateHold> beginWrite(const std::string& ns);
    /// Holds new writes of the tiered collections `namespaces` and waits (up
    /// to `timeout`, else ExceededTimeLimit) until this proxy's writes in
    /// flight on them have finished; the holds last until the drop is done.
    asio::awaitable<StatusWith<std::vector<GateHold>>> beginDrop(
        const std::vector<std::string>& namespaces, std::chrono::milliseconds timeout,
        const std::function<bool()>& killed);

  private:
    asio::awaitable<void> reapLoop();
    /// Samples the archive for each policy and publishes (and logs) what does
    /// not fit: routing reasons and haloclineStatus then name it.
    asio::awaitable<void> checkPolicies();

    ProxyConfig cfg_;
    int threadCount_;
    // Before io_: client connections (whose slots it holds) may live as long as io_.
    Operations operations_;
    asio::io_context io_;
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
    std::vector<std::thread> threads_;
    Tier fast_;
    Tier archive_;
    SessionPool fastSessions_;  // internal: promotion, eviction, warm-up
    SessionPool appSessions_;   // deletes with tombstones
    SessionPool archiveSessions_;
    FastClock fastClock_;
    FastClock demandClock_;  // probes with the lazy feeder's demand
    UserCache users_;
    Tiers tiers_;
    SharedState state_;
    ReadPromotions readPromotions_{io_, tiers_, state_};
    Router router_;
    CursorMap cursors_;
    TxnTable transactions_;
    store::FailPoint failCommand_;
    store::FailPoint failGetMore_;
    std::mutex sessionsMu_;
    struct SessionOwner {
        std::string principal;
        std::chrono::steady_clock::time_point lastUsed;
    };
    std::unordered_map<std::string, SessionOwner> sessionOwners_;
    AuthCounters authCounters_;
    std::vector<std::unique_ptr<asio::io_context>> connectionContexts_;  // one thread each
    std::unique_ptr<net::Listener> listener_;
    std::unique_ptr<Workers> workers_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool shutdown_ = false;
};

}  // namespace halo::tiering
