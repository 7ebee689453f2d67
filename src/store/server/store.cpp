#include "store/server/store.h"

#include <fmt/format.h>

#include <cstring>
#include <thread>
#include <vector>

#include "common/log.h"
#include "net/tls.h"
#include "store/commands/auth_commands.h"
#include "store/commands/command.h"
#include "store/commands/fail_command.h"
#include "store/commands/profiler.h"
#include "store/commands/write_path.h"
#include "store/exec/cursor_manager.h"
#include "store/exec/interrupt.h"
#include "store/repl/oplog.h"
#include "store/rules/error_labels.h"
#include "store/server/service.h"
#include "store/storage/catalog.h"
#include "store/storage/engine.h"
#include "store/storage/record_store.h"
#include "store/txn/session_catalog.h"

namespace halo::store {

namespace {

std::string firstCommandString(const bson_t* cmd) {
    bson_iter_t it;
    if (bson_iter_init(&it, cmd) && bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, nullptr);
    return {};
}

/// Whether a client's command may change admin.system.users or
/// admin.system.roles directly (not through the user and role commands).
bool writesAuthzDocuments(std::string_view name, std::string_view db, const bson_t* cmd) {
    auto isAuthzNs = [](std::string_view ns) {
        return ns == "admin.system.users" || ns == "admin.system.roles";
    };
    if (name == "renameCollection") {
        bson_iter_t to;
        return isAuthzNs(firstCommandString(cmd)) ||
               (bson_iter_init_find(&to, cmd, "to") && BSON_ITER_HOLDS_UTF8(&to) &&
                isAuthzNs(bson_iter_utf8(&to, nullptr)));
    }
    if (db != "admin") return false;
    if (name == "dropDatabase") return true;
    static constexpr std::string_view kWrites[] = {"insert",        "update",        "delete",
                                                   "findAndModify", "findandmodify", "drop"};
    if (std::find(std::begin(kWrites), std::end(kWrites), name) == std::end(kWrites)) return false;
    std::string coll = firstCommandString(cmd);
    return coll == "system.users" || coll == "system.roles";
}

/// A write concern a one-member replica set cannot satisfy, as mongod 7.0
/// reports it after the write (writeConcernError, the write stays): w above the
/// number of data-bearing members is UnsatisfiableWriteConcern (100), a tag
/// set mode that the configuration does not define UnknownReplWriteConcern (79).
/// Returns the writeConcernError document, or nothing when w is satisfiable.
std::optional<bson::Doc> unsatisfiableWriteConcern(const bson::Fields& args) {
    bson_t wc;
    if (!args.subDocument("writeConcern", &wc)) return std::nullopt;
    bson_iter_t w;
    if (!bson::find(&wc, "w", &w)) return std::nullopt;
    Status problem;
    if (BSON_ITER_HOLDS_UTF8(&w)) {
        std::string_view mode = bson_iter_utf8(&w, nullptr);
        if (mode == "majority") return std::nullopt;
        problem = Status(ErrorCode::UnknownReplWriteConcern,
                         fmt::format("No write concern mode named '{}' found in replica set "
                                     "configuration",
                                     mode));
    } else if (bson::isNumber(bson_iter_type(&w))) {
        if (bson_iter_as_int64(&w) <= 1) return std::nullopt;
        problem = Status(ErrorCode::UnsatisfiableWriteConcern, "Not enough data-bearing nodes");
    } else {
        return std::nullopt;
    }
    bson::Doc out;
    BSON_APPEND_INT32(out.mut(), "code", problem.codeNumber());
    std::string_view name = codeName(problem.code());
    bson_append_utf8(out.mut(), "codeName", 8, name.data(), static_cast<int>(name.size()));
    BSON_APPEND_UTF8(out.mut(), "errmsg", problem.reason().c_str());
    // errInfo: the write concern as applied (mongod adds wtimeout and its provenance).
    bson_t info, applied;
    BSON_APPEND_DOCUMENT_BEGIN(out.mut(), "errInfo", &info);
    BSON_APPEND_DOCUMENT_BEGIN(&info, "writeConcern", &applied);
    bson::appendIter(&applied, "w", w);
    bson_iter_t it;
    if (bson::find(&wc, "j", &it)) bson::appendIter(&applied, "j", it);
    if (bson::find(&wc, "wtimeout", &it))
        bson::appendIter(&applied, "wtimeout", it);
    else
        BSON_APPEND_INT32(&applied, "wtimeout", 0);
    BSON_APPEND_UTF8(&applied, "provenance", "clientSupplied");
    bson_append_document_end(&info, &applied);
    bson_append_document_end(out.mut(), &info);
    return out;
}

}  // namespace

void appendError(bson_t* reply, const Status& s) {
    BSON_APPEND_DOUBLE(reply, "ok", 0.0);
    bson::appendMessage(reply, "errmsg", s.reason());
    BSON_APPEND_INT32(reply, "code", s.codeNumber());
    std::string_view name = codeName(s.code());
    bson_append_utf8(reply, "codeName", 8, name.data(), static_cast<int>(name.size()));
}

Store::Store(StoreOptions opts) : opts_(std::move(opts)) {
    profiling_.setServerDefaults(opts_.slowMs, opts_.slowOpSampleRate);
}

Store::~Store() {
    stop();
}

Status Store::start() {
    started_ = std::chrono::steady_clock::now();
    log::info("control", 4615611, "Halocline store starting",
              fmt::format(R"({{"pid":{},"port":{},"dbPath":{}}})", getpid(), opts_.port,
                          log::quote(opts_.dbPath)));
    // TLS settings are checked before storage opens: a bad file fails fast.
    auto tls = net::TlsServerContext::create(opts_.tls);
    if (!tls.isOK()) return tls.getStatus();
    auto esw = Engine::open(opts_);
    if (!esw.isOK()) return esw.getStatus();
    engine_ = std::move(esw.getValue());
    catalog_ = std::make_unique<Catalog>(*engine_);
    Status s = catalog_->load();
    if (!s.isOK()) return s;
    cursors_ =
        std::make_unique<CursorManager>(std::chrono::milliseconds(opts_.cursorTimeoutMillis));
    bson_oid_init(&processId_, nullptr);
    oplog_ = std::make_unique<Oplog>(*catalog_, clock_, opts_.oplogSizeMB * 1024 * 1024);
    s = oplog_->open();
    if (!s.isOK()) return s;
    // History from before this start is gone: snapshot reads start here (every
    // commit from now on has a later time).
    {
        auto now = static_cast<uint32_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
        Timestamp start = std::max(oplog_->visibleUpTo(), Timestamp{now, 0},
                                   [](Timestamp a, Timestamp b) { return a < b; });
        clock_.advanceTo(start);
        oldestReadable_ = start.asU64();
    }
    engine_->advanceTimestamps(oldestReadable_, oldestReadable_);
    sessions_ = std::make_unique<SessionCatalog>(*engine_, *catalog_, *oplog_);
    catalog_->setBeforeDrop(
        [this](const std::string& ns) { return sessions_->abortTransactionsWriting(ns); });
    s = sessions_->open();
    if (!s.isOK()) return s;

    // Commands run to completion on the connection's thread, blocking on disk
    // reads and on durable commits: there are more threads than cores for I/O
    // concurrency (queue depth, commits sharing one log sync). Each thread has
    // an io_context of its own with its share of the connections: no wake-ups
    // of other threads to hand a ready socket or a finished write over.
    int n = opts_.threads > 0 ? opts_.threads : kDefaultThreads;
    std::vector<asio::io_context*> contexts;
    for (int i = 0; i < n; ++i) {
        connectionContexts_.push_back(std::make_unique<asio::io_context>(1));
        contexts.push_back(connectionContexts_.back().get());
    }
    listener_ = std::make_unique<net::Listener>(
        io_, opts_.bindIp, opts_.port,
        [this](const net::ConnectionInfo& info) {
            return std::make_unique<ServiceConnection>(*this, info);
        },
        tls.getValue(), contexts);
    listener_->setMaxConnections(static_cast<size_t>(opts_.maxConns));
    s = listener_->start();
    if (!s.isOK()) return s;

    reaperTimer_ = std::make_unique<asio::steady_timer>(io_);
    struct Reaper {
        Store* self;
        void operator()(asio::error_code ec) const {
            if (ec || self->stopping_) return;
            self->cursors_->reapIdle();
            self->advanceSnapshotHistory();
            self->oplog_->truncateIfNeeded();
            self->sessions_->reap(std::chrono::seconds(60), std::chrono::minutes(30));
            self->reaperTimer_->expires_after(std::chrono::seconds(1));
            self->reaperTimer_->async_wait(*this);
        }
    };
    reaperTimer_->expires_after(std::chrono::seconds(1));
    reaperTimer_->async_wait(Reaper{this});

    // The TTL monitor, every ttlMonitorSleepSecs (mongod's default 60 s).
    ttlTimer_ = std::make_unique<asio::steady_timer>(io_);
    struct TtlMonitor {
        Store* self;
        void operator()(asio::error_code ec) const {
            if (ec || self->stopping_) return;
            try {
                int64_t n =
                    removeExpired(*self, std::chrono::duration_cast<std::chrono::milliseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
                self->counters_.ttlDeleted += n;
                if (n > 0)
                    log::info("index", 5479200, "Deleted expired documents using index",
                              fmt::format(R"({{"numDeleted":{}}})", n));
            } catch (const DBException& e) {
                log::warning("index", 22537, "Error processing TTL index",
                             fmt::format(R"({{"error":{}}})", log::quote(e.what())));
            }
            self->counters_.ttlPasses++;
            self->ttlTimer_->expires_after(std::chrono::seconds(self->opts_.ttlMonitorSleepSecs));
            self->ttlTimer_->async_wait(*this);
        }
    };
    ttlTimer_->expires_after(std::chrono::seconds(opts_.ttlMonitorSleepSecs));
    ttlTimer_->async_wait(TtlMonitor{this});

    threads_.emplace_back([this] { io_.run(); });
    for (auto& c : connectionContexts_) {
        threads_.emplace_back([c = c.get()] {
            auto idle = asio::make_work_guard(*c);  // runs until stop(), with or without clients
            c->run();
        });
    }
    if (!opts_.auth)
        log::warning("control", 22120,
                     "Access control is not enabled for the database. Read and write access to "
                     "data and configuration is unrestricted");
    log::info("network", 23016, "Waiting for connections",
              fmt::format(R"({{"port":{},"ssl":"{}"}})", listener_->port(),
                          opts_.tls.enabled() ? "on" : "off"));
    return Status::OK();
}

void Store::stop() {
    if (stopping_.exchange(true)) return;
    log::info("control", 4784900, "Shutting down");
    if (listener_) listener_->stop();
    if (reaperTimer_) {
        asio::post(io_, [this] { reaperTimer_->cancel(); });
    }
    if (ttlTimer_) {
        asio::post(io_, [this] { ttlTimer_->cancel(); });
    }
    io_.stop();
    for (auto& c : connectionContexts_) c->stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
    listener_.reset();
    reaperTimer_.reset();
    ttlTimer_.reset();
    cursors_.reset();
    if (catalog_) catalog_->setBeforeDrop(nullptr);
    sessions_.reset();
    oplog_.reset();
    if (catalog_) catalog_->shutdown();
    catalog_.reset();
    engine_.reset();
    log::info("control", 23138, "Shutting down with code 0", R"({"exitCode":0})");
}

void Store::advanceSnapshotHistory() {
    // Keep minSnapshotHistoryWindowInSeconds of history behind the point every
    // write below has committed (a pending write's commit time is above it).
    Timestamp visible = oplog_->visibleUpTo();
    if (visible.isNull()) return;
    // History costs cache (WiredTiger keeps every version newer than the oldest
    // timestamp): without snapshot reads in the last window only a few seconds
    // are kept, enough for a snapshot read that starts now.
    constexpr int kIdleWindowSecs = 5;
    int configured = std::max(0, opts_.minSnapshotHistoryWindowInSeconds);
    int64_t nowSecs = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
    bool recent = nowSecs - lastSnapshotReadSecs_.load() <= configured;
    uint32_t window =
        static_cast<uint32_t>(recent ? configured : std::min(configured, kIdleWindowSecs));
    Timestamp oldest = visible.secs > window ? Timestamp{visible.secs - window, 0} : Timestamp{};
    if (oldest.asU64() <= oldestReadable_.load()) {
        engine_->advanceTimestamps(visible.asU64(), 0);
        return;
    }
    engine_->advanceTimestamps(visible.asU64(), oldest.asU64());
    oldestReadable_ = oldest.asU64();
}

void Store::requestShutdown() {
    std::lock_guard lk(shutdownMu_);
    shutdownRequested_ = true;
    shutdownCv_.notify_all();
}

void Store::waitForShutdown() {
    std::unique_lock lk(shutdownMu_);
    shutdownCv_.wait(lk, [this] { return shutdownRequested_; });
}

uint16_t Store::port() const {
    return listener_ ? listener_->port() : 0;
}
size_t Store::openConnections() const {
    return listener_ ? listener_->openConnections() : 0;
}
uint64_t Store::totalConnections() const {
    return listener_ ? listener_->totalConnections() : 0;
}
uint64_t Store::rejectedConnections() const {
    return listener_ ? listener_->rejectedConnections() : 0;
}

std::string Store::hostAndPort() const {
    std::string host = opts_.bindIp;
    auto comma = host.find(',');
    if (comma != std::string::npos) host = host.substr(0, comma);
    if (host == "0.0.0.0") host = "127.0.0.1";
    return fmt::format("{}:{}", host, port());
}

void Store::runCommand(ClientState& client, std::string_view db, const bson_t* cmd, bson_t* reply,
                       Deferral* deferral, bool finalAttempt) {
    bson::Fields fields(cmd);
    runCommand(client, db, fields, reply, deferral, finalAttempt);
}

void Store::runCommand(ClientState& client, std::string_view db, const bson::Fields& args,
                       bson_t* reply, Deferral* deferral, bool finalAttempt) {
    const bson_t* cmd = args.doc();
    if (args.size() == 0) {
        appendError(reply, Status(ErrorCode::FailedToParse, "Empty command"));
        return;
    }
    std::string_view name = args.key(0);
    counters_.command++;
    Oplog::resetLastCommittedOnThisThread();
    const CommandSpec* spec = CommandRegistry::instance().find(name);
    if (!spec || (spec->testOnly && !opts_.enableTestCommands)) {
        appendError(reply,
                    Status(ErrorCode::CommandNotFound, fmt::format("no such command: '{}'", name)));
        return;
    }
    if (!bson_utf8_validate(db.data(), db.size(), false)) {
        // It would come back in cursor namespaces and messages, unreadable by drivers.
        appendError(reply, Status(ErrorCode::InvalidNamespace,
                                  fmt::format("Invalid database name: '{}': names must be valid "
                                              "UTF-8",
                                              bson::printableUtf8(db))));
        return;
    }
    if (Status named = bson::commandTargetUtf8(cmd, db); !named.isOK()) {
        appendError(reply, named);  // the same for the collection a command names
        return;
    }
    if (spec->adminOnly && db != "admin") {
        appendError(reply,
                    Status(ErrorCode::Unauthorized,
                           fmt::format("{} may only be run against the admin database.", name)));
        return;
    }
    // The failCommand fail point acts before anything else about the command
    // (mongod evaluates it before authorization and before the session).
    std::optional<bson::Doc> labelsOverride;
    const bool rerunAfterConflict = deferral && deferral->writeConflicts > 0;
    if (!rerunAfterConflict && (client.blockedByFailPoint || failPoints_.failCommand.maybeOn())) {
        if (applyFailCommand(client, db, *spec, args, reply, deferral, finalAttempt,
                             &labelsOverride))
            return;
    }
    authz::CommandAccess access;
    const bool checked = opts_.auth && !client.internal;
    if (checked) {
        Status s;
        try {
            s = authorize(client, db, name, cmd, &access);
        } catch (const DBException& e) {
            s = e.status();  // reading the user's or a role's document failed
        }
        if (!s.isOK()) {
            appendError(reply, s);
            if (isReplicaSet()) appendClusterTime(reply);
            return;
        }
    }
    std::optional<bson::Doc> wcError;
    if (!client.internal && takesWriteConcern(name)) {
        wcError = unsatisfiableWriteConcern(args);
        if (wcError && !isReplicaSet()) {
            // A standalone refuses w > 1 before running the command.
            bson_iter_t code;
            if (bson::find(wcError->get(), "code", &code) &&
                bson_iter_int32(&code) == static_cast<int>(ErrorCode::UnsatisfiableWriteConcern)) {
                appendError(reply,
                            Status(ErrorCode::BadValue, "cannot use 'w' > 1 with a standalone"));
                return;
            }
            wcError.reset();
        }
    }
    const bool writesAuthz = !client.internal && writesAuthzDocuments(name, db, cmd);
    if (writesAuthz && bson_has_field(cmd, "autocommit") && name != "drop" &&
        name != "renameCollection" && name != "dropDatabase") {
        // As mongod: no system collection is written inside a transaction (here
        // it also keeps every change to users and roles visible to authorization).
        appendError(reply, Status(ErrorCode::OperationNotSupportedInTransaction,
                                  fmt::format("Cannot write to system collection {}.{} within a "
                                              "transaction.",
                                              db, firstCommandString(cmd))));
        if (isReplicaSet()) appendClusterTime(reply);
        return;
    }
    // A direct write to users or roles: connections resolve their privileges again.
    struct BumpAfter {
        Store* store;
        ~BumpAfter() {
            if (store) store->bumpAuthzGeneration();
        }
    } bumpAfter{writesAuthz ? this : nullptr};
    OperationContext op{*this, client, std::string(db), cmd, args, name, deferral, finalAttempt};
    op.access = checked ? &access : nullptr;
    ActiveOperation* active = client.internal ? nullptr : client.activeOp.get();
    auto [kind, ns] = describeCommand(db, cmd);
    if (active) {
        std::optional<std::pair<std::string, std::string>> user;
        if (client.user) user.emplace(client.user->user, client.user->db);
        operations_.describe(*active, kind, ns, cmd, std::move(user));
    }
    // The store's own commands run inside the operation that asked for them.
    std::optional<InterruptScope> interruptible;
    if (active) interruptible.emplace(active->killedFlag());
    // The handler writes into `body`, which an error may leave with a child
    // document still open: then only the whole body can be dropped.
    bson_t body = BSON_INITIALIZER;
    const auto started = std::chrono::steady_clock::now();
    // The command's writes are durable before its reply (and before change
    // streams see them): one journal sync here, or when an error ends it.
    CommandDurability durability(*this);
    std::optional<ConflictYieldScope> yieldOnConflict;
    if (spec->yieldsOnWriteConflict && deferral && !client.internal)
        yieldOnConflict.emplace(durability, *deferral);
    try {
        gossipClusterTime(args);
        runWithSession(op, *spec, &body);
        durability.flush();
        bson_concat(reply, &body);
        bson_iter_t okIt;
        if (!bson::find(reply, "ok", &okIt)) BSON_APPEND_DOUBLE(reply, "ok", 1.0);
        // The write happened; the write concern could not be satisfied.
        if (wcError && !(deferral && deferral->requested))
            BSON_APPEND_DOCUMENT(reply, "writeConcernError", wcError->get());
    } catch (const ConflictYield& y) {
        bson_reinit(reply);  // nothing of it happened: it runs again later
        deferral->requested = true;
        deferral->writeConflicts = y.attempts;
    } catch (const ErrorWithInfo& e) {
        bson_reinit(reply);
        appendError(reply, e.status());
        if (e.info()) bson_concat(reply, e.info()->get());
    } catch (const DBException& e) {
        bson_reinit(reply);
        appendError(reply, e.status());
    } catch (const std::exception& e) {
        bson_reinit(reply);
        appendError(reply, Status(ErrorCode::InternalError, e.what()));
    }
    bson_destroy(&body);
    const bool deferred = deferral && deferral->requested;
    if (!deferred) {
        // A write concern error the failCommand fail point makes up (mongod does
        // this while it waits for the write concern, after the command ran,
        // also for a statement inside a transaction).
        if (failPoints_.failCommand.maybeOn() && takesWriteConcern(name) &&
            !bson_has_field(reply, "writeConcernError")) {
            FailPointTarget target = failPointTarget(spec, name, ns, client, cmd);
            if (auto wce = evaluateFailCommandWriteConcern(failPoints_.failCommand, target)) {
                bson_concat(reply, wce->field.get());
                if (wce->errorLabels) labelsOverride = std::move(wce->errorLabels);
            }
        }
        appendErrorLabels(client, name, args, reply, labelsOverride, op.changeStream);
    }
    if (active) operations_.detachCommand(*active, deferred);
    if (!client.internal && !deferred) {
        int64_t micros = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::steady_clock::now() - started)
                             .count();
        recordUsage(name, ns, micros);
        profileCommand(*this, client, db, cmd, reply, micros);
    }
    if (isReplicaSet()) appendClusterTime(reply);
}

void Store::recordUsage(std::string_view name, const std::string& ns, int64_t micros) {
    if (ns.find(".$cmd") != std::string::npos) return;  // no collection
    // The collection is gone (its statistics went with it), or the first field is no collection.
    if (name == "drop" || name == "renameCollection") return;
    Top::Kind k;
    Top::Access a;
    Top::classify(name, &k, &a);
    top_.record(ns, k, a, micros);
}

bool ClientState::fromLocalhost() const {
    // remote is "address:port" (net::Listener); IPv6 without brackets.
    return remote.rfind("127.", 0) == 0 || remote.rfind("::1:", 0) == 0 ||
           remote.rfind("::ffff:127.", 0) == 0;
}

bson::Doc Store::runInternal(std::string_view db, const bson_t* cmd) {
    // The caller may be a command running in a session or a transaction: the
    // internal command must not record into, or run inside, that.
    CurrentOperation saved = currentOperation();
    currentOperation() = CurrentOperation{};
    ClientState internal;
    internal.internal = true;
    internal.remote = "internal";
    bson::Doc reply;
    runCommand(internal, db, cmd, reply.mut());
    currentOperation() = saved;
    return reply;
}

namespace {

Status notAuthorized(std::string_view db, const bson_t* cmd) {
    // As mongod's snipForLogging: a password is never echoed back.
    bson::Doc shownCmd;
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (k == "pwd")
            BSON_APPEND_UTF8(shownCmd.mut(), "pwd", "xxx");
        else
            bson::appendIter(shownCmd.mut(), k, it);
    }
    std::string shown = shownCmd.toJson();
    if (shown.size() > 4096) shown = shown.substr(0, 4096) + " ...";
    return Status(ErrorCode::Unauthorized,
                  fmt::format("not authorized on {} to execute command {}", db, shown));
}

/// The localhost exception lets a connection without a user create the first
/// user, on admin, with roles of admin (mongod's createUser and grantRole there).
bool isFirstUserCreation(std::string_view name, std::string_view db,
                         const authz::CommandAccess& access) {
    if (name != "createUser" || db != "admin" || access.anyOf.empty()) return false;
    const authz::ActionSet allowed{authz::ActionType::createUser, authz::ActionType::grantRole};
    for (const auto& alt : access.anyOf)
        for (const auto& need : alt.needs)
            if (!(need.resource == authz::ResourcePattern::database("admin")) ||
                !allowed.containsAll(need.actions))
                return false;
    return true;
}

}  // namespace

Status Store::authorize(ClientState& client, std::string_view db, std::string_view name,
                        const bson_t* cmd, authz::CommandAccess* access) {
    if (client.user && client.user->generation != authzGeneration()) {
        // A user or role document changed since this connection resolved its
        // privileges: resolve them again; a dropped user is no longer authenticated.
        uint64_t gen = authzGeneration();
        auto doc = findUserDoc(*this, client.user->db, client.user->user);
        if (!doc) {
            client.user.reset();
        } else {
            client.user->roles = rolesOf(doc->get());
            client.user->privileges = privilegesOf(*this, client.user->roles);
            client.user->generation = gen;
        }
    }
    authz::Identity self;
    if (client.user) self = {client.user->user, client.user->db, client.user->roles};
    *access = authz::commandAccess(name, db, cmd, client.user ? &self : nullptr);
    if (!access->requiresAuth) return Status::OK();
    if (!client.user) {
        if (!client.fromLocalhost() || anyUserOrRoleExists(*this))
            return Status(ErrorCode::Unauthorized,
                          fmt::format("Command {} requires authentication", name));
        return isFirstUserCreation(name, db, *access) ? Status::OK() : notAuthorized(db, cmd);
    }
    if (authz::isAuthorized(*client.user->privileges, access->anyOf)) return Status::OK();
    return notAuthorized(db, cmd);
}

void Store::gossipClusterTime(const bson::Fields& cmd) {
    bson_t ct;
    bson_iter_t it;
    if (cmd.subDocument("$clusterTime", &ct) && bson::find(&ct, "clusterTime", &it) &&
        BSON_ITER_HOLDS_TIMESTAMP(&it)) {
        Timestamp t;
        bson_iter_timestamp(&it, &t.secs, &t.inc);
        // Only ever move forward; never past what we could have produced.
        if (clock_.latest() < t && t.secs <= clock_.reserve().secs + 3600) clock_.advanceTo(t);
    }
}

void Store::appendClusterTime(bson_t* reply) {
    Timestamp t = oplog_ ? oplog_->visibleUpTo() : clock_.latest();
    // A write reports its own optime (mongod's operationTime), not the
    // visibility point an older concurrent write may still hold back; any
    // other command the newest committed optime (mongod's lastApplied), which
    // no acknowledged write is after.
    Timestamp own = Oplog::lastCommittedOnThisThread();
    if (own.isNull() && oplog_ && t < oplog_->lastCommitted()) t = oplog_->lastCommitted();
    if (t < own) t = own;
    appendTimestamp(reply, "operationTime", t);
    // {clusterTime: <t>, signature: {hash: <20 zero bytes>, keyId: 0}} is the
    // same document on every reply but for its first value: built once, then
    // copied with the time written in place.
    struct Template {
        std::vector<uint8_t> bytes;
        Template() {
            bson::Doc d;
            appendTimestamp(d.mut(), "clusterTime", Timestamp{});
            bson_t sig;
            BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "signature", &sig);
            uint8_t zeros[20] = {};
            bson_append_binary(&sig, "hash", 4, BSON_SUBTYPE_BINARY, zeros, 20);
            BSON_APPEND_INT64(&sig, "keyId", 0);
            bson_append_document_end(d.mut(), &sig);
            bytes.assign(d.data(), d.data() + d.size());
        }
    };
    static const Template tpl;
    // The first element's value: after the length (4), its type (1) and name.
    constexpr size_t kTimeOffset = 4 + 1 + sizeof("clusterTime");
    uint8_t buf[128];  // the template is 88 bytes
    HALO_INVARIANT(tpl.bytes.size() <= sizeof buf);
    std::memcpy(buf, tpl.bytes.data(), tpl.bytes.size());
    Timestamp latest = clock_.latest();
    uint64_t raw = (static_cast<uint64_t>(latest.secs) << 32) | latest.inc;  // little-endian host
    std::memcpy(buf + kTimeOffset, &raw, 8);
    bson_t ct;
    bson_init_static(&ct, buf, tpl.bytes.size());
    bson_append_document(reply, "$clusterTime", 12, &ct);
}

namespace {

/// Commands that may run inside a multi-document transaction.
bool allowedInTransaction(std::string_view name) {
    static constexpr std::string_view kAllowed[] = {"find",
                                                    "getMore",
                                                    "killCursors",
                                                    "insert",
                                                    "update",
                                                    "delete",
                                                    "findAndModify",
                                                    "findandmodify",
                                                    "aggregate",
                                                    "distinct",
                                                    "commitTransaction",
                                                    "abortTransaction",
                                                    "create",
                                                    "createIndexes",
                                                    "bulkWrite",
                                                    "hello",
                                                    "isMaster",
                                                    "ismaster",
                                                    "ping",
                                                    "buildInfo",
                                                    "buildinfo",
                                                    "endSessions"};
    for (auto a : kAllowed)
        if (a == name) return true;
    return false;
}

/// Resets the thread's current-operation context when the command ends.
struct CurrentOperationScope {
    ~CurrentOperationScope() {
        currentOperation() = CurrentOperation{};
        Catalog::transactionToken() = nullptr;
    }
};

}  // namespace

std::optional<Timestamp> Store::waitForReadConcern(const OperationContext& op) {
    const bson::Fields& cmd = op.args;
    bson_t rc;
    if (!cmd.subDocument("readConcern", &rc)) return std::nullopt;
    bson_iter_t it;
    std::string_view level;
    if (bson::find(&rc, "level", &it)) {
        if (!BSON_ITER_HOLDS_UTF8(&it))
            uasserted(ErrorCode::TypeMismatch, "readConcern.level must be a string");
        level = bson_iter_utf8(&it, nullptr);
        if (level != "local" && level != "majority" && level != "snapshot" &&
            level != "available" && level != "linearizable")
            uasserted(ErrorCode::FailedToParse,
                      fmt::format("{} is not a valid read concern level", level));
    }
    auto timeOf = [&](const char* field) -> std::optional<Timestamp> {
        if (!bson::find(&rc, field, &it)) return std::nullopt;
        if (!BSON_ITER_HOLDS_TIMESTAMP(&it))
            uasserted(ErrorCode::TypeMismatch,
                      fmt::format("readConcern.{} must be a timestamp", field));
        Timestamp t;
        bson_iter_timestamp(&it, &t.secs, &t.inc);
        return t;
    };
    std::optional<Timestamp> at = timeOf("atClusterTime");
    std::optional<Timestamp> after = timeOf("afterClusterTime");
    const bool snapshot = level == "snapshot";
    const bool inTransaction = cmd.has("autocommit");
    // mongod's ReadConcernArgs checks.
    if (after && at)
        uasserted(ErrorCode::InvalidOptions,
                  "Can not specify both afterClusterTime and atClusterTime");
    if (after && (level == "available" || level == "linearizable"))
        uasserted(ErrorCode::InvalidOptions,
                  "afterClusterTime field can be set only if level is equal to majority, local, or "
                  "snapshot");
    if (at && !snapshot)
        uasserted(ErrorCode::InvalidOptions,
                  "atClusterTime field can be set only if level is equal to snapshot");
    if (after && after->isNull())
        uasserted(ErrorCode::InvalidOptions, "afterClusterTime cannot be a null timestamp");
    if (at && at->isNull())
        uasserted(ErrorCode::InvalidOptions, "atClusterTime cannot be a null timestamp");
    if (snapshot && !inTransaction && op.name != "find" && op.name != "aggregate" &&
        op.name != "distinct" && op.name != "getMore") {
        // mongod 7.0 reads at a snapshot outside transactions only for these.
        std::string shown = "{ readConcern: { level: \"snapshot\"";
        if (at) shown += fmt::format(", atClusterTime: Timestamp({}, {})", at->secs, at->inc);
        shown += " } }";
        uasserted(ErrorCode::InvalidOptions,
                  fmt::format("Command {} does not support {} :: caused by :: read concern not "
                              "supported",
                              op.name, shown));
    }
    if (at) {
        Timestamp current = clock_.latest();
        if (current < *at)
            uasserted(ErrorCode::InvalidOptions,
                      fmt::format("readConcern atClusterTime value must not be greater than the "
                                  "current clusterTime. Requested clusterTime: Timestamp({}, {}); "
                                  "current clusterTime: Timestamp({}, {})",
                                  at->secs, at->inc, current.secs, current.inc));
        if (at->asU64() < oldestReadable_.load())
            uasserted(ErrorCode::SnapshotTooOld,
                      fmt::format("Read timestamp Timestamp({}, {}) is older than the oldest "
                                  "available timestamp.",
                                  at->secs, at->inc));
    }
    if (!after) after = at;
    if (after) {
        // A single member: every write up to `after` is visible once no write with a
        // smaller timestamp is still committing. A time beyond ours moves the clock.
        if (clock_.latest() < *after) clock_.advanceTo(*after);
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (oplog_->visibleUpTo() < *after) {
            if (std::chrono::steady_clock::now() > deadline)
                uasserted(ErrorCode::MaxTimeMSExpired,
                          "timed out waiting for afterClusterTime to become visible");
            std::this_thread::yield();
        }
    }
    if (!snapshot || inTransaction || op.name == "getMore") return std::nullopt;
    lastSnapshotReadSecs_ = std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
    if (at) return at;
    // No time given: the newest time at which every write has committed (at or
    // after afterClusterTime, which was waited for above).
    Timestamp t = oplog_->visibleUpTo();
    if (t.asU64() < oldestReadable_.load()) t = Timestamp::fromU64(oldestReadable_.load());
    return t;
}

/// Adds a snapshot read's cluster time to its reply, where mongod puts it:
/// cursor.atClusterTime for find, aggregate and getMore, atClusterTime for distinct.
void appendAtClusterTime(bson_t* body, Timestamp at) {
    bson_t cursor;
    if (!bson::subDocument(body, "cursor", &cursor)) {
        bson_iter_t values;
        if (bson::find(body, "values", &values)) appendTimestamp(body, "atClusterTime", at);
        return;
    }
    bson::Doc rebuilt;
    bson_iter_t it;
    bson_iter_init(&it, body);
    while (bson_iter_next(&it)) {
        std::string_view key = bson_iter_key(&it);
        if (key != "cursor") {
            bson::appendIter(rebuilt.mut(), key, it);
            continue;
        }
        bson_t c;
        BSON_APPEND_DOCUMENT_BEGIN(rebuilt.mut(), "cursor", &c);
        bson_concat(&c, &cursor);
        appendTimestamp(&c, "atClusterTime", at);
        bson_append_document_end(rebuilt.mut(), &c);
    }
    bson_reinit(body);
    bson_concat(body, rebuilt.get());
}

namespace {

/// Whether a command only reads: find, count, distinct, or an aggregate with no
/// $out or $merge stage.
bool pureRead(const OperationContext& op) {
    if (op.name == "find" || op.name == "count" || op.name == "distinct") return true;
    if (op.name != "aggregate") return false;
    bson_iter_t it, stages;
    if (!op.args.find("pipeline", &it) || !BSON_ITER_HOLDS_ARRAY(&it)) return false;
    bson_iter_recurse(&it, &stages);
    while (bson_iter_next(&stages)) {
        bson_iter_t stage;
        if (!BSON_ITER_HOLDS_DOCUMENT(&stages) || !bson_iter_recurse(&stages, &stage) ||
            !bson_iter_next(&stage))
            return false;
        std::string_view name = bson_iter_key(&stage);
        if (name == "$out" || name == "$merge") return false;
    }
    return true;
}

/// Runs a command outside any multi-document transaction. A pure read that
/// WiredTiger rolled back (it may, under cache pressure) runs again, as mongod
/// retries a WriteConflict internally instead of reporting it. Writes retry
/// inside their own storage transaction (runWriteTxn).
void runOutsideTransaction(OperationContext& op, const CommandSpec& spec, bson_t* body) {
    if (!pureRead(op)) {
        spec.run(op, body);
        return;
    }
    for (int attempt = 0;; ++attempt) {
        try {
            spec.run(op, body);
            return;
        } catch (const DBException& e) {
            if (e.code() != ErrorCode::WriteConflict || attempt >= 1000) throw;
            bson_reinit(body);
            writeConflictBackoff(attempt);
        }
    }
}

}  // namespace

void Store::runWithSession(OperationContext& op, const CommandSpec& spec, bson_t* body) {
    // A snapshot read outside a transaction reads at one cluster time, which the
    // reply reports; its cursor's getMores read at the same time.
    struct ReadAtScope {
        ~ReadAtScope() { currentOperation().readAt.reset(); }
    } readAtScope;
    if (isReplicaSet()) currentOperation().readAt = waitForReadConcern(op);
    runInSession(op, spec, body);
    // (a getMore sets readAt from its cursor)
    if (const auto& at = currentOperation().readAt) appendAtClusterTime(body, *at);
}

void Store::runInSession(OperationContext& op, const CommandSpec& spec, bson_t* body) {
    bson_t lsidDoc;
    if (!op.args.subDocument("lsid", &lsidDoc)) {
        if (op.args.has("txnNumber"))
            uasserted(ErrorCode::IllegalOperation,
                      "Transaction numbers are only allowed on commands with a session id");
        runOutsideTransaction(op, spec, body);
        return;
    }
    std::string owner = op.client.user ? op.client.user->user + "@" + op.client.user->db : "";
    auto st = sessions_->get(&lsidDoc, owner);
    bson_iter_t it;
    bool haveTxnNumber = op.args.find("txnNumber", &it);
    int64_t txnNumber = haveTxnNumber ? bson_iter_as_int64(&it) : -1;
    bool autocommitFalse =
        op.args.find("autocommit", &it) && !bson::isTruthy(*bson_iter_value(&it));
    bool startTxn = op.args.find("startTransaction", &it) && bson::isTruthy(*bson_iter_value(&it));
    if (op.name == "endSessions") {
        spec.run(op, body);
        return;
    }
    if (!haveTxnNumber) {
        if (autocommitFalse || startTxn)
            uasserted(ErrorCode::InvalidOptions,
                      "txnNumber must be provided for multi-document transactions");
        runOutsideTransaction(op, spec, body);  // a plain session: nothing to track
        return;
    }
    std::unique_lock lk(st->mu);
    CurrentOperationScope scope;
    CurrentOperation& cur = currentOperation();
    cur.sessions = sessions_.get();
    cur.txnNumber = txnNumber;
    if (!autocommitFalse) {
        if (startTxn)
            uasserted(ErrorCode::InvalidOptions, "startTransaction requires autocommit: false");
        // A retryable write (or a read carrying a txnNumber).
        cur.freshTxnNumber = sessions_->checkTxnNumber(*st, txnNumber);
        cur.retryable = st.get();
        struct CloseAfter {  // before `scope` resets the current operation
            ClientState& client;
            ~CloseAfter() {
                if (currentOperation().closeConnection) client.closeConnection = true;
            }
        } closeAfter{op.client};
        spec.run(op, body);
        return;
    }
    if (!isReplicaSet())
        uasserted(ErrorCode::IllegalOperation,
                  "Transaction numbers are only allowed on a replica set member or mongos");
    if (op.name == "count")
        uasserted(
            ErrorCode::OperationNotSupportedInTransaction,
            "Cannot run 'count' in a multi-document transaction. Please see "
            "http://dochub.mongodb.org/core/transaction-count for a recommended alternative.");
    if (!allowedInTransaction(op.name))
        uasserted(ErrorCode::OperationNotSupportedInTransaction,
                  fmt::format("Cannot run '{}' in a multi-document transaction.", op.name));
    if (startTxn) {
        sessions_->checkTxnNumber(*st, txnNumber);
        if (st->txnNumber == txnNumber && st->txn != SessionState::Txn::None)
            uasserted(
                ErrorCode::ConflictingOperationInProgress,
                fmt::format("Transaction {} has already been started on this session.", txnNumber));
        // readConcern {level: "snapshot", atClusterTime}: the transaction reads at it
        // (checked and waited for by waitForReadConcern).
        uint64_t readAt = 0;
        bson_t rc;
        bson_iter_t at;
        if (op.args.subDocument("readConcern", &rc) && bson::find(&rc, "atClusterTime", &at) &&
            BSON_ITER_HOLDS_TIMESTAMP(&at)) {
            Timestamp t;
            bson_iter_timestamp(&at, &t.secs, &t.inc);
            readAt = t.asU64();
        }
        sessions_->begin(*st, txnNumber, readAt);
    } else if (st->txnNumber != txnNumber &&
               !(op.name == "commitTransaction" && sessions_->committedBefore(*st, txnNumber))) {
        uasserted(ErrorCode::NoSuchTransaction,
                  fmt::format("Given transaction number {} does not match any in-progress "
                              "transactions. The active "
                              "transaction number is {}",
                              txnNumber, st->txnNumber));
    }
    if (op.name == "commitTransaction" && st->txn == SessionState::Txn::Committed)
        return;  // retried commit
    if (st->txn != SessionState::Txn::InProgress) {
        uasserted(
            ErrorCode::NoSuchTransaction,
            st->txn == SessionState::Txn::Aborted
                ? fmt::format("Transaction with {{ txnNumber: {} }} has been aborted.", txnNumber)
                : fmt::format("Transaction {} is not in progress", txnNumber));
    }
    cur.txn = st.get();
    Catalog::transactionToken() = st.get();  // its uncommitted collections are visible to it
    try {
        spec.run(op, body);
    } catch (...) {
        // Any error inside a transaction aborts it, as in mongod.
        sessions_->abort(*st);
        throw;
    }
    // A write error (reported in the reply's writeErrors) aborts it too.
    if (cur.abortTransactionAfterCommand) sessions_->abort(*st);
}

namespace {

/// The reply's code when it failed, and its writeConcernError's code.
std::pair<std::optional<int>, std::optional<int>> replyCodes(const bson_t* reply) {
    std::optional<int> code, wcCode;
    bson_iter_t it;
    if (bson::find(reply, "ok", &it) && !bson::isTruthy(*bson_iter_value(&it)))
        code = bson::find(reply, "code", &it) ? static_cast<int>(bson_iter_as_int64(&it))
                                              : static_cast<int>(ErrorCode::UnknownError);
    bson_t wce;
    if (bson::subDocument(reply, "writeConcernError", &wce))
        wcCode = bson::find(&wce, "code", &it) ? static_cast<int>(bson_iter_as_int64(&it))
                                               : static_cast<int>(ErrorCode::UnknownError);
    return {code, wcCode};
}

/// Whether an aggregate's pipeline opens a change stream.
bool opensChangeStream(const bson::Fields& args) {
    bson_iter_t it, stages, stage;
    if (!args.find("pipeline", &it) || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &stages) || !bson_iter_next(&stages) ||
        !BSON_ITER_HOLDS_DOCUMENT(&stages) || !bson_iter_recurse(&stages, &stage) ||
        !bson_iter_next(&stage))
        return false;
    return std::string_view(bson_iter_key(&stage)) == "$changeStream";
}

}  // namespace

void Store::appendErrorLabels(const ClientState& client, std::string_view name,
                              const bson::Fields& args, bson_t* reply,
                              const std::optional<bson::Doc>& labelsOverride, bool changeStream) {
    auto [code, wcCode] = replyCodes(reply);
    if (!code && !wcCode) return;
    if (!bson_has_field(reply, "errorLabels")) {
        // A fail point that named the labels replaces the store's own.
        LabelContext ctx;
        ctx.command = name;
        ctx.hasTxnNumber = args.has("txnNumber");
        ctx.hasAutocommit = args.has("autocommit");
        ctx.internalClient = client.internal || client.internalClient;
        // A getMore knows once it holds its cursor (one that failed before,
        // by a fail point too, does not: mongod does not label it either).
        ctx.changeStream = changeStream || (code && name == "aggregate" && opensChangeStream(args));
        store::appendErrorLabels(reply, ctx, code, wcCode, labelsOverride);
    }
    // A not-primary error carries the topologyVersion it was seen at (mongod
    // does so on a replica set): drivers ignore an error no newer than their view.
    if (isReplicaSet() &&
        ((code && isNotPrimaryError(*code)) || (wcCode && isNotPrimaryError(*wcCode))) &&
        !bson_has_field(reply, "topologyVersion")) {
        bson_t tv;
        BSON_APPEND_DOCUMENT_BEGIN(reply, "topologyVersion", &tv);
        BSON_APPEND_OID(&tv, "processId", &processId_);
        BSON_APPEND_INT64(&tv, "counter", 0);
        bson_append_document_end(reply, &tv);
    }
}

bool Store::applyFailCommand(ClientState& client, std::string_view db, const CommandSpec& spec,
                             const bson::Fields& args, bson_t* reply, Deferral* deferral,
                             bool finalAttempt, std::optional<bson::Doc>* labelsOverride) {
    const std::string_view name = args.key(0);
    const auto now = std::chrono::steady_clock::now();
    FailCommandEffect effect;
    if (client.blockedByFailPoint) {
        // A command the fail point held resumes, unless its wait is not over.
        const bool killed = client.activeOp && client.activeOp->killed();
        if (!killed && now < client.blockedByFailPoint->until && deferral && !finalAttempt) {
            deferral->requested = true;
            deferral->deadline = client.blockedByFailPoint->until;
            return true;
        }
        effect = failCommandEffectOf(std::move(client.blockedByFailPoint->data));
        client.blockedByFailPoint.reset();
        log::info("command", 20433, "Unblocking command via 'failCommand' failpoint",
                  fmt::format(R"({{"command":{}}})", log::quote(name)));
        if (killed) {
            effect.closeConnection = false;
            effect.error = Status(ErrorCode::Interrupted, "operation was interrupted");
        }
    } else {
        FailPointTarget target = failPointTarget(
            &spec, name, describeCommand(db, args.doc()).second, client, args.doc());
        effect = evaluateFailCommand(failPoints_.failCommand, target);
        if (!effect.fired()) return false;
        if (effect.block && effect.block->count() > 0) {
            log::info("command", 20432, "Blocking command via 'failCommand' failpoint",
                      fmt::format(R"({{"command":{},"blockTime":"{} ms"}})", log::quote(name),
                                  effect.block->count()));
            if (deferral && !finalAttempt) {
                // The connection waits on a timer; its thread serves other connections.
                client.blockedByFailPoint =
                    ClientState::BlockedCommand{effect.data, now + *effect.block};
                deferral->requested = true;
                deferral->deadline = client.blockedByFailPoint->until;
                if (ActiveOperation* active = client.activeOp.get()) {
                    // currentOp shows the waiting command (and killOp ends the wait).
                    std::optional<std::pair<std::string, std::string>> user;
                    if (client.user) user.emplace(client.user->user, client.user->db);
                    auto [kind, ns] = describeCommand(db, args.doc());
                    operations_.describe(*active, kind, ns, args.doc(), std::move(user));
                    operations_.detachCommand(*active, true);
                }
                return true;
            }
            // No way to wait without the thread (a legacy OP_QUERY command).
            std::this_thread::sleep_for(*effect.block);
        }
    }
    *labelsOverride = std::move(effect.errorLabels);
    if (effect.closeConnection) {
        log::info("command", 20431,
                  "Failing command via 'failCommand' failpoint: closing connection",
                  fmt::format(R"({{"command":{}}})", log::quote(name)));
        client.closeConnection = true;  // the reply below is never sent
        appendError(
            reply, Status(ErrorCode::Location50985, "Failing command via 'failCommand' failpoint"));
        return true;
    }
    if (!effect.error) return false;  // the command runs (after a wait, with set labels)
    appendError(reply, *effect.error);
    appendErrorLabels(client, name, args, reply, *labelsOverride, false);
    if (isReplicaSet()) appendClusterTime(reply);
    return true;
}

}  // namespace halo::store
