// The worker lease (CONSISTENCY.md, Worker lease), the standby refresh of the
// shared state, and the start/stop of the worker sessions.
#include "tiering/workers.h"

#include <fmt/format.h>

#include "common/log.h"
#include "tiering/worker_context.h"

namespace halo::tiering {

using namespace workers;
using std::chrono::milliseconds;

struct Workers::Context : WorkerContext {
    using WorkerContext::WorkerContext;
};

namespace {

constexpr milliseconds kTick{250};

/// Logs an exception that escaped a worker coroutine (a bug, never data).
void logEscaped(std::exception_ptr e, const char* what) {
    if (!e) return;
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& x) {
        log::error(
            "tiering", 8210090, "Worker coroutine ended by an exception",
            fmt::format(R"({{"worker":{},"error":{}}})", log::quote(what), log::quote(x.what())));
    } catch (...) {
        log::error("tiering", 8210090, "Worker coroutine ended by an exception",
                   fmt::format(R"({{"worker":{}}})", log::quote(what)));
    }
}

void setRole(WorkerContext& ctx, WorkerRole r) {
    ctx.state.role = static_cast<int>(r);
}

/// One attempt to take or renew the lease. OK: we hold it until
/// `sentAt + lease`; DuplicateKey: another proxy holds it.
asio::awaitable<Status> tryLease(WorkerContext& ctx) {
    int64_t now = nowMillis();
    bson::Doc c;
    BSON_APPEND_UTF8(c.mut(), "findAndModify", Metadata::kState);
    bson_t q, orArr, a, b, lt, u, set;
    BSON_APPEND_DOCUMENT_BEGIN(c.mut(), "query", &q);
    BSON_APPEND_UTF8(&q, "_id", "lease");
    BSON_APPEND_ARRAY_BEGIN(&q, "$or", &orArr);
    BSON_APPEND_DOCUMENT_BEGIN(&orArr, "0", &a);
    BSON_APPEND_UTF8(&a, "owner", ctx.owner.c_str());
    bson_append_document_end(&orArr, &a);
    BSON_APPEND_DOCUMENT_BEGIN(&orArr, "1", &b);
    BSON_APPEND_DOCUMENT_BEGIN(&b, "expiresAt", &lt);
    BSON_APPEND_DATE_TIME(&lt, "$lt", now);
    bson_append_document_end(&b, &lt);
    bson_append_document_end(&orArr, &b);
    bson_append_array_end(&q, &orArr);
    bson_append_document_end(c.mut(), &q);
    BSON_APPEND_DOCUMENT_BEGIN(c.mut(), "update", &u);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
    BSON_APPEND_UTF8(&set, "owner", ctx.owner.c_str());
    BSON_APPEND_DATE_TIME(&set, "expiresAt", now + ctx.cfg.lease.count());
    bson_append_document_end(&u, &set);
    bson_append_document_end(c.mut(), &u);
    BSON_APPEND_BOOL(c.mut(), "upsert", true);
    BSON_APPEND_BOOL(c.mut(), "new", true);
    appendMajority(c.mut());
    BSON_APPEND_UTF8(c.mut(), "$db", ctx.tiers.meta.db.c_str());
    auto r = co_await ctx.tiers.fast.runOk(c.get());
    co_return r.getStatus();
}

asio::awaitable<void> releaseLease(WorkerContext& ctx) {
    bson::Doc c;
    BSON_APPEND_UTF8(c.mut(), "update", Metadata::kState);
    bson_t arr, stmt, q, u, set;
    BSON_APPEND_ARRAY_BEGIN(c.mut(), "updates", &arr);
    BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &stmt);
    BSON_APPEND_DOCUMENT_BEGIN(&stmt, "q", &q);
    BSON_APPEND_UTF8(&q, "_id", "lease");
    BSON_APPEND_UTF8(&q, "owner", ctx.owner.c_str());
    bson_append_document_end(&stmt, &q);
    BSON_APPEND_DOCUMENT_BEGIN(&stmt, "u", &u);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
    BSON_APPEND_DATE_TIME(&set, "expiresAt", 0);
    bson_append_document_end(&u, &set);
    bson_append_document_end(&stmt, &u);
    bson_append_document_end(&arr, &stmt);
    bson_append_array_end(c.mut(), &arr);
    appendMajority(c.mut());
    BSON_APPEND_UTF8(c.mut(), "$db", ctx.tiers.meta.db.c_str());
    auto r = co_await ctx.tiers.fast.runOk(c.get());
    if (r.isOK())
        log::info("tiering", 8210004, "Worker lease released",
                  fmt::format(R"({{"owner":{}}})", log::quote(ctx.owner)));
}

/// A standby (or a proxy with workers disabled) reads what the leader's
/// workers published: the feeder's applied time, warm and evict progress.
asio::awaitable<Status> refreshFromDurable(WorkerContext& ctx) {
    Status fed = co_await refreshFeederProgress(ctx.tiers, ctx.state);
    if (!fed.isOK()) co_return fed;
    std::vector<std::string> ids;
    for (const auto& c : ctx.cfg.collections) {
        ids.push_back(stateId("warm", c.ns));
        ids.push_back(stateId("evict", c.ns));
    }
    auto r = co_await loadStateDocs(ctx.tiers.fast, ctx.tiers.meta, ids);
    if (!r.isOK()) co_return r.getStatus();
    auto& docs = r.getValue();
    SharedState& s = ctx.state;
    for (const auto& c : ctx.cfg.collections) {
        CollectionProgress* p = s.progress(c.ns);
        if (!p) continue;
        auto w = docs.find(stateId("warm", c.ns));
        if (w == docs.end()) {
            p->warmLowMs = std::numeric_limits<int64_t>::max();
            p->warmDone = false;
        } else {
            auto low = dateField(w->second.get(), "low");
            p->warmLowMs = low ? *low : std::numeric_limits<int64_t>::max();
            p->warmDone = boolField(w->second.get(), "done");
            p->warmed = intField(w->second.get(), "warmed");
        }
        auto e = docs.find(stateId("evict", c.ns));
        if (e != docs.end()) {
            p->evicted = intField(e->second.get(), "evicted");
            p->evictBacklog = intField(e->second.get(), "backlog");
        }
    }
    co_return Status::OK();
}

/// A worker session: runs one worker for lease acquisition `gen`.
asio::awaitable<void> session(std::shared_ptr<WorkerContext> ctx, uint64_t gen, int kind,
                              const CollectionPolicy* policy) {
    try {
        if (kind == 0) co_await runFeeder(*ctx, gen);
        if (kind == 1) co_await runEvictor(*ctx, gen);
        if (kind == 2) co_await runWarmer(*ctx, gen, *policy);
    } catch (const std::exception& e) {
        log::error("tiering", 8210090, "Worker ended by an exception",
                   fmt::format(R"({{"kind":{},"error":{}}})", kind, log::quote(e.what())));
    }
    --ctx->activeSessions;
}

void spawnSessions(const std::shared_ptr<WorkerContext>& ctx) {
    uint64_t gen = ctx->gen;
    auto spawn = [&](int kind, const CollectionPolicy* p) {
        ++ctx->activeSessions;
        asio::co_spawn(ctx->strand, session(ctx, gen, kind, p),
                       [](std::exception_ptr e) { logEscaped(e, "session"); });
    };
    spawn(0, nullptr);
    spawn(1, nullptr);
    for (const auto& c : ctx->cfg.collections) spawn(2, &c);
}

/// Holds the lease (CONSISTENCY.md, Worker lease): renews it every third of
/// its time; workers may start steps only until half the lease time after the
/// last successful renewal was sent, so they have stopped well before another
/// proxy can take over (which needs the full lease time, by its own clock).
asio::awaitable<void> leaseLoop(std::shared_ptr<WorkerContext> ctx) {
    WorkerContext& c = *ctx;
    const milliseconds lease = c.cfg.lease;
    const milliseconds renewEvery = std::max(lease / 3, milliseconds(1));
    Clock::time_point nextAttempt = Clock::now();
    bool spawnedForGen = false;
    FailureLog leaseLog("lease", 8210010);
    FailureLog refreshLog("standby refresh", 8210012);
    setRole(c, WorkerRole::Standby);
    while (!c.stopping.load()) {
        auto now = Clock::now();
        if (now >= nextAttempt) {
            Status st = co_await tryLease(c);
            if (st.isOK()) {
                leaseLog.succeeded();
                if (!c.leader) {
                    c.leader = true;
                    ++c.gen;
                    spawnedForGen = false;
                    setRole(c, WorkerRole::Leader);
                    log::info("tiering", 8210001, "Worker lease acquired; workers start",
                              fmt::format(R"({{"owner":{},"leaseMillis":{}}})", log::quote(c.owner),
                                          lease.count()));
                }
                c.workUntil = now + lease / 2;
                nextAttempt = now + renewEvery;
            } else if (st.code() == ErrorCode::DuplicateKey) {
                leaseLog.succeeded();
                if (c.leader) {
                    c.leader = false;
                    setRole(c, WorkerRole::Standby);
                    log::warning("tiering", 8210002, "Worker lease taken by another proxy",
                                 fmt::format(R"({{"owner":{}}})", log::quote(c.owner)));
                }
                nextAttempt = now + renewEvery;
            } else {
                leaseLog.failed(st, "renew lease");
                nextAttempt = now + std::min(renewEvery, milliseconds(500));
            }
        }
        if (c.leader && Clock::now() >= c.workUntil) {
            c.leader = false;
            setRole(c, WorkerRole::Standby);
            log::warning("tiering", 8210003,
                         "Worker lease could not be renewed in time; workers stop",
                         fmt::format(R"({{"owner":{}}})", log::quote(c.owner)));
        }
        if (c.leader && !spawnedForGen && c.activeSessions == 0) {
            spawnedForGen = true;
            spawnSessions(ctx);
        }
        if (!c.leader) {
            Status st = co_await refreshFromDurable(c);
            if (st.isOK())
                refreshLog.succeeded();
            else
                refreshLog.failed(st, "read state");
        }
        co_await c.sleep(kTick);
    }
    // Stopping: wait (bounded) for the sessions to finish their step, then
    // hand the lease over at once instead of letting it expire.
    auto deadline = Clock::now() + lease / 2;
    while (c.activeSessions > 0 && Clock::now() < deadline) {
        asio::steady_timer t(c.strand, milliseconds(20));
        asio::error_code ec;
        co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    if (c.leader && c.activeSessions == 0) co_await releaseLease(c);
    c.leader = false;
    setRole(c, WorkerRole::Disabled);
}

/// With workers disabled this proxy still routes, so it follows the durable state.
asio::awaitable<void> refreshLoop(std::shared_ptr<WorkerContext> ctx) {
    FailureLog refreshLog("state refresh", 8210012);
    while (!ctx->stopping.load()) {
        Status st = co_await refreshFromDurable(*ctx);
        if (st.isOK())
            refreshLog.succeeded();
        else
            refreshLog.failed(st, "read state");
        co_await ctx->sleep(kTick);
    }
}

}  // namespace

Workers::Workers(asio::io_context& io, const ProxyConfig& cfg, Tiers& tiers, SharedState& state,
                 std::string ownerId)
    : ctx_(std::make_shared<Context>(io, cfg, tiers, state, std::move(ownerId))) {}

Workers::~Workers() {
    stop();
}

void Workers::start() {
    std::shared_ptr<WorkerContext> ctx = ctx_;
    if (ctx->started.exchange(true) || ctx->stopping.load()) return;
    if (!ctx->cfg.workersEnabled) {
        setRole(*ctx, WorkerRole::Disabled);
        asio::co_spawn(ctx->strand, refreshLoop(ctx),
                       [](std::exception_ptr e) { logEscaped(e, "refresh"); });
        return;
    }
    asio::co_spawn(ctx->strand, leaseLoop(ctx),
                   [](std::exception_ptr e) { logEscaped(e, "lease"); });
}

void Workers::stop() {
    if (ctx_->stopping.exchange(true)) return;
    std::shared_ptr<WorkerContext> ctx = ctx_;
    asio::post(ctx->strand, [ctx] { ctx->cancelTimers(); });
}

}  // namespace halo::tiering
