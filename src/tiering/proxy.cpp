#include "tiering/proxy.h"

#include <fmt/format.h>

#include <functional>
#include <future>
#include <limits>
#include <set>
#include <span>

#include "common/clock.h"
#include "common/log.h"
#include "net/tls.h"
#include "store/query/matcher.h"
#include "tiering/client_auth.h"
#include "tiering/client_connection.h"
#include "tiering/cold_write.h"
#include "tiering/merged_read.h"
#include "tiering/transactions.h"
#include "tiering/worker_context.h"
#include "tiering/workers.h"
#include "wire/message.h"

namespace halo::tiering {

namespace {

/// {ping: 1, $db: "admin"}, built once: archive reads send it on every call.
const bson_t* pingCommand() {
    static const bson::Doc cmd = [] {
        bson::Doc d;
        BSON_APPEND_INT32(d.mut(), "ping", 1);
        BSON_APPEND_UTF8(d.mut(), "$db", "admin");
        return d;
    }();
    return cmd.get();
}

}  // namespace

// ---------------------------------------------------------------------------

Proxy::Proxy(ProxyConfig cfg, int threads)
    : cfg_(std::move(cfg)),
      threadCount_(threads > 0 ? threads : std::max(2u, std::thread::hardware_concurrency())),
      fast_("fast", cfg_.fastUri),
      archive_("archive", cfg_.archiveUri),
      fastSessions_(SessionKind::Internal),
      appSessions_(SessionKind::App),
      archiveSessions_(SessionKind::Random),
      fastClock_(fast_),
      demandClock_(fast_, Metadata{cfg_.metadataDb}),
      users_(archive_, cfg_.userCacheInvalidation),
      tiers_{fast_, archive_, fastSessions_, appSessions_, Metadata{cfg_.metadataDb}},
      state_(cfg_),
      router_(cfg_, state_),
      cursors_(cfg_.maxCursors) {
    tiers_.archiveSessions = &archiveSessions_;
}

Proxy::~Proxy() {
    stop();
}

uint16_t Proxy::port() const {
    return listener_ ? listener_->port() : 0;
}

Status Proxy::claimSession(const std::string& lsidId, const std::string& principal) {
    auto now = std::chrono::steady_clock::now();
    std::lock_guard lk(sessionsMu_);
    auto [it, fresh] = sessionOwners_.try_emplace(lsidId, SessionOwner{principal, now});
    if (!fresh && it->second.principal != principal)
        return Status(ErrorCode::Unauthorized,
                      fmt::format("Cannot use a logical session that belongs to another user "
                                  "(this connection is authenticated as {})",
                                  principal));
    it->second.lastUsed = now;
    return Status::OK();
}

std::vector<std::string> Proxy::sessionsOwnedBy(
    const std::function<bool(const std::string& principal)>& owner) {
    std::vector<std::string> out;
    std::lock_guard lk(sessionsMu_);
    for (const auto& [id, o] : sessionOwners_)
        if (owner(o.principal)) out.push_back(id);
    return out;
}

asio::awaitable<StatusWith<OpTime>> Proxy::writesBefore() {
    if (!cfg_.feederLazy) {
        auto r = co_await fastClock_.now();
        if (r.isOK()) state_.noteFastTime(r.getValue());
        co_return r;
    }
    // The demand is a write at time T: every write acknowledged before it is
    // earlier, and the feeder applies up to T - 1 when the batch ends on it.
    auto r = co_await demandClock_.now();
    if (!r.isOK()) co_return r;
    state_.noteFastTime(r.getValue());
    co_return r.getValue() - 1;
}

asio::awaitable<Status> Proxy::awaitApplied(OpTime target, const std::string& ns,
                                            std::chrono::milliseconds timeout,
                                            const std::function<bool()>& killed) {
    SharedState& s = state_;
    if (target == 0) {
        auto r = co_await writesBefore();
        if (!r.isOK()) co_return r.getStatus();
        target = r.getValue();
    }
    if (s.feederApplied.load() >= target) co_return Status::OK();
    auto deadline = std::chrono::steady_clock::now() + timeout;
    asio::steady_timer timer(co_await asio::this_coro::executor);
    while (s.feederApplied.load() < target) {
        // The leader's feeder publishes its progress in memory; other proxies
        // read it from the archive, where the feeder saves it after every batch.
        if (s.role.load() != static_cast<int>(WorkerRole::Leader) && s.claimFeederRefresh()) {
            Status st = co_await workers::refreshFeederProgress(tiers_, s);
            if (!st.isOK()) co_return st;
            if (s.feederApplied.load() >= target) break;
        }
        if (std::chrono::steady_clock::now() >= deadline)
            co_return Status(
                ErrorCode::ExceededTimeLimit,
                fmt::format("halocline: {} needs the archive to have received every write "
                            "acknowledged before (feeder behind by {} ms); waited {} ms "
                            "(tiering.causalWaitTimeout)",
                            ns, s.feederLagMillis.load(), timeout.count()));
        if (killed && killed()) co_return interrupted();
        timer.expires_after(std::chrono::milliseconds(2));
        asio::error_code ec;
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    co_return Status::OK();
}

namespace {

asio::awaitable<void> pollPause() {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    timer.expires_after(std::chrono::milliseconds(1));
    asio::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

}  // namespace

asio::awaitable<GateHold> Proxy::beginWrite(const std::string& ns) {
    CollectionProgress* prog = state_.progress(ns);
    if (!prog) co_return GateHold{};
    // The write counts itself before it checks for a drop, the drop the other
    // way round: one of them always sees the other.
    for (;;) {
        GateHold hold(&prog->writers);
        if (prog->drops.load() == 0) co_return hold;
        hold.release();
        while (prog->drops.load() != 0) co_await pollPause();
    }
}

asio::awaitable<StatusWith<std::vector<GateHold>>> Proxy::beginDrop(
    const std::vector<std::string>& namespaces, std::chrono::milliseconds timeout,
    const std::function<bool()>& killed) {
    std::vector<GateHold> holds;
    std::vector<std::pair<CollectionProgress*, std::string>> progs;
    for (const auto& ns : namespaces) {
        if (CollectionProgress* prog = state_.progress(ns)) {
            holds.emplace_back(&prog->drops);
            progs.emplace_back(prog, ns);
        }
    }
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (const auto& [prog, ns] : progs) {
        while (prog->writers.load() != 0) {
            if (std::chrono::steady_clock::now() >= deadline)
                co_return Status(ErrorCode::ExceededTimeLimit,
                                 fmt::format("halocline: dropping {} waits for the writes to it "
                                             "in flight; waited {} ms (tiering.causalWaitTimeout)",
                                             ns, timeout.count()));
            if (killed && killed()) co_return interrupted();
            co_await pollPause();
        }
    }
    co_return holds;
}

void Proxy::killRemote(const std::vector<CursorEntry>& dropped) {
    auto kill = [this](Tier* t, const std::string& ns, int64_t remoteId) {
        auto [db, coll] = splitNs(ns);
        bson::Doc c;
        BSON_APPEND_UTF8(c.mut(), "killCursors", coll.c_str());
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(c.mut(), "cursors", &arr);
        BSON_APPEND_INT64(&arr, "0", remoteId);
        bson_append_array_end(c.mut(), &arr);
        BSON_APPEND_UTF8(c.mut(), "$db", db.empty() ? "admin" : db.c_str());
        asio::co_spawn(
            io_,
            [t, c = std::move(c)]() -> asio::awaitable<void> { (void)co_await t->run(c.get()); },
            asio::detached);
    };
    for (const auto& e : dropped) {
        if (e.remoteId != 0) kill(e.tier, e.ns, e.remoteId);
        if (e.merged && e.merged->fastId != 0) kill(&fast_, e.ns, e.merged->fastId);
    }
}

asio::awaitable<void> Proxy::checkPolicies() {
    for (const auto& p : cfg_.collections) {
        auto r = co_await checkAgeField(archive_, p);
        if (!r.isOK()) {
            log::warning("tiering", 8210054, "Could not sample the archive to check a policy",
                         fmt::format(R"({{"ns":{},"error":{}}})", log::quote(p.ns),
                                     log::quote(r.getStatus().reason())));
            continue;
        }
        if (r.getValue().empty()) continue;
        log::warning("tiering", 8210053, "A tiered collection's policy does not fit its data",
                     fmt::format(R"({{"ns":{},"ageField":{},"problem":{}}})", log::quote(p.ns),
                                 log::quote(p.ageField), log::quote(r.getValue())));
        state_.progress(p.ns)->setPolicyProblem(std::move(r.getValue()));
    }
}

asio::awaitable<void> Proxy::reapLoop() {
    asio::steady_timer timer(io_);
    while (true) {
        timer.expires_after(std::chrono::seconds(1));
        asio::error_code ec;
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        {
            std::lock_guard lk(mu_);
            if (shutdown_) co_return;
        }
        killRemote(cursors_.reap(cfg_.cursorTimeout));
        {
            auto idle = std::chrono::steady_clock::now() - std::chrono::minutes(30);
            std::lock_guard lk(sessionsMu_);
            std::erase_if(sessionOwners_, [&](const auto& e) { return e.second.lastUsed < idle; });
        }
    }
}

Status Proxy::start(std::chrono::milliseconds tierWait) {
    // net.tls is checked before anything waits on the tiers: a bad file fails fast.
    auto tls = net::TlsServerContext::create(cfg_.tls);
    if (!tls.isOK()) return tls.getStatus();
    for (Tier* t : {&fast_, &archive_}) {
        Status s = t->init();
        if (!s.isOK()) return s;
    }
    // io_ runs the workers, the acceptor and the proxy's own background steps on
    // one thread. Client connections are spread over an io_context per thread:
    // a connection's reads, its tier round trips (Tier pools connections per
    // context) and its reply never hand over between threads.
    work_.emplace(io_.get_executor());
    threads_.emplace_back([this] { io_.run(); });
    for (int i = 0; i < threadCount_; ++i) {
        connectionContexts_.push_back(std::make_unique<asio::io_context>(1));
        asio::io_context* c = connectionContexts_.back().get();
        threads_.emplace_back([c] {
            auto idle = asio::make_work_guard(*c);  // runs until stop(), with or without clients
            c->run();
        });
    }

    // Wait for both primaries and prepare the fast tier.
    std::promise<Status> ready;
    auto fut = ready.get_future();
    asio::co_spawn(
        io_,
        [this, tierWait, &ready]() -> asio::awaitable<void> {
            auto deadline = std::chrono::steady_clock::now() + tierWait;
            asio::steady_timer timer(io_);
            Status last = Status::OK();
            while (true) {
                auto a = co_await archive_.runOk(pingCommand());
                auto f = co_await fast_.runOk(pingCommand());
                if (a.isOK() && f.isOK()) {
                    // Replies carry the fast tier's clock from the first one on.
                    bson_iter_t t;
                    if (bson_iter_init_find(&t, f.getValue().get(), "operationTime"))
                        state_.noteFastTime(toOpTime(t));
                    last = co_await ensureSetup(cfg_, tiers_);
                    if (last.isOK()) break;
                } else {
                    last = a.isOK() ? f.getStatus() : a.getStatus();
                    // A refused credential does not heal by waiting: fail now.
                    if (last.code() == ErrorCode::AuthenticationFailed) break;
                }
                // A tier whose certificate we reject (or that rejects ours) will
                // not change its mind while we wait: say so now.
                if (last.code() == ErrorCode::SSLHandshakeFailed) break;
                if (std::chrono::steady_clock::now() >= deadline) break;
                timer.expires_after(std::chrono::milliseconds(200));
                asio::error_code ec;
                co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            }
            ready.set_value(last);
        },
        asio::detached);
    Status s = fut.get();
    if (!s.isOK()) return s;

    listener_ = std::make_unique<net::Listener>(
        io_, cfg_.bindIp, static_cast<uint16_t>(cfg_.port),
        [this](const net::ConnectionInfo& info) -> std::unique_ptr<net::FrameHandler> {
            return std::make_unique<ClientConnection>(*this, info);
        },
        tls.getValue(),
        [this] {
            std::vector<asio::io_context*> v;
            for (auto& c : connectionContexts_) v.push_back(c.get());
            return v;
        }());
    listener_->setMaxConnections(static_cast<size_t>(cfg_.maxIncomingConnections));
    s = listener_->start();
    if (!s.isOK()) return s;
    asio::co_spawn(io_, reapLoop(), asio::detached);
    asio::co_spawn(io_, checkPolicies(), asio::detached);
    if (cfg_.workersEnabled) {
        std::string owner = fmt::format("{}:{}:{}", cfg_.bindIp, listener_->port(), ::getpid());
        workers_ = std::make_unique<Workers>(io_, cfg_, tiers_, state_, owner);
        workers_->start();
    }
    if (!cfg_.authorization)
        log::warning("control", 22120,
                     "Access control is not enabled for the proxy. Read and write access to data "
                     "and configuration is unrestricted: every client acts as the proxy's tier "
                     "user",
                     "{}");
    log::info("network", 23016, "Waiting for connections",
              fmt::format(R"({{"port":{},"ssl":"{}"}})", listener_->port(),
                          cfg_.tls.enabled() ? "on" : "off"));
    return Status::OK();
}

void Proxy::requestShutdown() {
    std::lock_guard lk(mu_);
    shutdown_ = true;
    cv_.notify_all();
}

void Proxy::waitForShutdown() {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [this] { return shutdown_; });
}

void Proxy::stop() {
    {
        std::lock_guard lk(mu_);
        shutdown_ = true;
    }
    if (workers_) workers_->stop();
    if (listener_) listener_->stop();
    work_.reset();
    io_.stop();
    for (auto& c : connectionContexts_) c->stop();
    for (auto& t : threads_)
        if (t.joinable()) t.join();
    threads_.clear();
    workers_.reset();
    listener_.reset();
    // The connections' coroutines end with their contexts, while everything
    // they refer to still exists; the tiers' idle sockets on those contexts go first.
    for (Tier* t : {&fast_, &archive_}) t->closeIdle();
    connectionContexts_.clear();
}

}  // namespace halo::tiering
