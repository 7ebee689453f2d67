// The proxy's own commands: status, currentOp, killOp, killSessions,
// connPoolStats, feeder control, routing explanations.
#include <fmt/format.h>

#include <cstring>
#include <set>

#include "common/clock.h"
#include "common/log.h"
#include "store/query/matcher.h"
#include "store/rules/kill_sessions.h"
#include "tiering/client_connection.h"
#include "tiering/worker_context.h"
#include "tiering/workers.h"

namespace halo::tiering {

bson::Doc ClientConnection::isSelf() {
    // Which process answers: the proxy itself, never a tier behind it.
    static const bson_oid_t self = [] {
        bson_oid_t o;
        bson_oid_init(&o, nullptr);
        return o;
    }();
    bson::Doc d;
    BSON_APPEND_DOUBLE(d.mut(), "ok", 1.0);
    BSON_APPEND_OID(d.mut(), "id", &self);
    return d;
}

asio::awaitable<bson::Doc> ClientConnection::currentOp(const bson_t* cmd, const std::string& name) {
    // The filter: the legacy command's other fields, or the $match stages after
    // $currentOp. Nothing else may follow it here (the proxy has no pipeline).
    bson::Doc filter;
    bool includeIdle = false;
    if (name == "aggregate") {
        bson_t pipeline, spec;
        bson_iter_t it;
        bson::subDocument(cmd, "pipeline", &pipeline);
        bson_iter_init(&it, &pipeline);
        bson_iter_next(&it);
        bson_iter_t st;
        bson_iter_recurse(&it, &st);
        bson_iter_next(&st);
        if (BSON_ITER_HOLDS_DOCUMENT(&st)) {
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&st, &len, &data);
            bson_init_static(&spec, data, len);
            includeIdle = truthy(&spec, "idleConnections");
        }
        bson_t all;
        BSON_APPEND_ARRAY_BEGIN(filter.mut(), "$and", &all);
        ArrayKey k;
        size_t n = 0;
        while (bson_iter_next(&it)) {
            bson_t match;
            bson_iter_t m;
            if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &m) ||
                !bson_iter_next(&m) || std::string_view(bson_iter_key(&m)) != "$match" ||
                !BSON_ITER_HOLDS_DOCUMENT(&m))
                co_return errorDoc(Status(ErrorCode::CommandNotSupported,
                                          "halocline: through the proxy only $match stages may "
                                          "follow $currentOp"));
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&m, &len, &data);
            bson_init_static(&match, data, len);
            bson_append_document(&all, k(n++), -1, &match);
        }
        bson_append_array_end(filter.mut(), &all);
        if (n == 0) filter = bson::Doc();
    } else {
        bson_iter_t it;
        bson_iter_init(&it, cmd);
        while (bson_iter_next(&it)) {
            std::string_view k = bson_iter_key(&it);
            if (k == "currentOp" || k == "$all" || k == "$ownOps" || k == "$db" || k == "lsid" ||
                k == "$clusterTime" || k == "$readPreference" || k == "comment")
                continue;
            bson_append_iter(filter.mut(), nullptr, 0, &it);
        }
        includeIdle = truthy(cmd, "$all");
    }
    auto matcher = query::Matcher::parse(filter.get());
    if (!matcher.isOK()) co_return errorDoc(matcher.getStatus());
    // Without the inprog privilege a user sees only its own operations.
    std::string me = auth_.principal();
    bool all = !auth_.enabled() || access::maySeeAllOperations(auth_.privileges());
    std::vector<bson::Doc> ops = p_.operations().current(includeIdle, all ? nullptr : &me);
    bson::Doc out;
    bson_t arr;
    ArrayKey k;
    size_t n = 0;
    if (name == "aggregate") {
        bson_t cursor;
        BSON_APPEND_DOCUMENT_BEGIN(out.mut(), "cursor", &cursor);
        BSON_APPEND_ARRAY_BEGIN(&cursor, "firstBatch", &arr);
        for (auto& op : ops)
            if (matcher.getValue()->matches(op.get()))
                bson_append_document(&arr, k(n++), -1, op.get());
        bson_append_array_end(&cursor, &arr);
        BSON_APPEND_INT64(&cursor, "id", 0);
        BSON_APPEND_UTF8(&cursor, "ns", "admin.$cmd.aggregate");
        bson_append_document_end(out.mut(), &cursor);
    } else {
        BSON_APPEND_ARRAY_BEGIN(out.mut(), "inprog", &arr);
        for (auto& op : ops)
            if (matcher.getValue()->matches(op.get()))
                bson_append_document(&arr, k(n++), -1, op.get());
        bson_append_array_end(out.mut(), &arr);
    }
    BSON_APPEND_DOUBLE(out.mut(), "ok", 1.0);
    co_return out;
}

bson::Doc ClientConnection::killOp(const bson_t* cmd) {
    bson_iter_t it;
    if (!bson_iter_init_find(&it, cmd, "op") || !BSON_ITER_HOLDS_NUMBER(&it))
        return errorDoc(
            Status(ErrorCode::TypeMismatch, "Did not provide \"op\" field or it is not a number"));
    std::string me = auth_.principal();
    bool any = !auth_.enabled() || access::mayKillAnyOperation(auth_.privileges());
    p_.operations().kill(bson_iter_as_int64(&it), any ? nullptr : &me);
    // As mongod: the same answer whether or not the operation was found.
    bson::Doc out;
    BSON_APPEND_UTF8(out.mut(), "info", "attempting to kill op");
    BSON_APPEND_DOUBLE(out.mut(), "ok", 1.0);
    return out;
}

namespace {

bool internalSession(const std::string& id) {
    return sessionIdHasPrefix(id, kInternalSessionPrefix) ||
           sessionIdHasPrefix(id, kAppSessionPrefix);
}

}  // namespace

asio::awaitable<bson::Doc> ClientConnection::killSessions(const Request& r) {
    // The tiers see every client session as the proxy's own user, beside the
    // sessions of the proxy's workers and promotions: an empty list forwarded
    // would end those too. So the proxy names the sessions itself: the ones
    // the client listed; the caller's (or, for killAllSessions, the named
    // users') from its own table of session owners; or every client session
    // the tiers hold ($listLocalSessions, a standard stage).
    auto parsed = store::parseKillSessions(r.cmd);
    if (!parsed.isOK()) co_return errorDoc(parsed.getStatus());
    const store::KillSessionsArgs& args = parsed.getValue();
    std::set<std::string> ids = args.ids;
    // The users whose sessions go ("user@db"); without authentication the
    // caller's sessions are every client session.
    std::set<std::string> owners = args.users;
    if (args.mine && auth_.enabled()) owners.insert(auth_.principal());
    const bool everySession = args.every || (args.mine && !auth_.enabled());
    if (!owners.empty() && auth_.enabled())
        for (auto& id : p_.sessionsOwnedBy([&](const std::string& p) { return owners.count(p); }))
            ids.insert(std::move(id));
    if (everySession) {
        bson::Doc list;
        BSON_APPEND_INT32(list.mut(), "aggregate", 1);
        bson_t pipeline, stage, spec, cursor;
        BSON_APPEND_ARRAY_BEGIN(list.mut(), "pipeline", &pipeline);
        BSON_APPEND_DOCUMENT_BEGIN(&pipeline, "0", &stage);
        BSON_APPEND_DOCUMENT_BEGIN(&stage, "$listLocalSessions", &spec);
        BSON_APPEND_BOOL(&spec, "allUsers", true);
        bson_append_document_end(&stage, &spec);
        bson_append_document_end(&pipeline, &stage);
        bson_append_array_end(list.mut(), &pipeline);
        BSON_APPEND_DOCUMENT_BEGIN(list.mut(), "cursor", &cursor);
        bson_append_document_end(list.mut(), &cursor);
        BSON_APPEND_UTF8(list.mut(), "$db", "admin");
        for (Tier* t : {&p_.archive(), &p_.fast()}) {
            auto sessions = co_await t->collect(list.get());
            if (!sessions.isOK()) co_return errorDoc(sessions.getStatus());
            for (const auto& s : sessions.getValue()) {
                bson_iter_t it, id;
                if (bson_iter_init(&it, s.get()) && bson_iter_find_descendant(&it, "_id.id", &id) &&
                    BSON_ITER_HOLDS_BINARY(&id))
                    ids.insert(bson::binaryBytes(id));
            }
        }
        for (auto& id : p_.sessionsOwnedBy([](const std::string&) { return true; }))
            ids.insert(std::move(id));
    }
    std::erase_if(ids, internalSession);
    if (ids.empty()) co_return okReply();
    // What runs in the proxy itself (a read waiting for the feeder, a merged
    // read's buffered cursor), then the tiers' operations, cursors and transactions.
    p_.operations().killSessions(ids, &slot_);
    p_.killRemote(p_.cursors().removeSessions(ids));
    constexpr size_t kPerCommand = 10'000;  // well inside a command's 16 MB
    for (auto from = ids.begin(); from != ids.end();) {
        bson::Doc kill;
        bson_t list, entry;
        ArrayKey key;
        BSON_APPEND_ARRAY_BEGIN(kill.mut(), "killSessions", &list);
        for (size_t n = 0; from != ids.end() && n < kPerCommand; ++from, ++n) {
            bson_append_document_begin(&list, key(n), -1, &entry);
            bson_append_binary(&entry, "id", 2, BSON_SUBTYPE_UUID,
                               reinterpret_cast<const uint8_t*>(from->data()),
                               static_cast<uint32_t>(from->size()));
            bson_append_document_end(&list, &entry);
        }
        bson_append_array_end(kill.mut(), &list);
        BSON_APPEND_UTF8(kill.mut(), "$db", "admin");
        for (Tier* t : {&p_.archive(), &p_.fast()}) {
            auto rep = co_await t->runOk(kill.get());
            if (!rep.isOK()) co_return errorDoc(rep.getStatus());
        }
    }
    co_return okReply();
}

bson::Doc ClientConnection::connPoolStats() {
    bson::Doc out;
    int64_t inUse = 0, available = 0, created = 0;
    bson_t hosts, h;
    BSON_APPEND_DOCUMENT_BEGIN(out.mut(), "hosts", &hosts);
    for (Tier* t : {&p_.fast(), &p_.archive()}) {
        Tier::PoolStats s = t->poolStats();
        std::string host = t->info().primary;
        if (host.empty()) host = t->name();
        bson_append_document_begin(&hosts, host.c_str(), -1, &h);
        BSON_APPEND_INT64(&h, "inUse", s.inUse);
        BSON_APPEND_INT64(&h, "available", s.available);
        BSON_APPEND_INT64(&h, "leased", 0);
        BSON_APPEND_INT64(&h, "created", s.created);
        BSON_APPEND_INT64(&h, "refreshing", 0);
        BSON_APPEND_UTF8(&h, "tier", t->name().c_str());
        bson_append_document_end(&hosts, &h);
        inUse += s.inUse;
        available += s.available;
        created += s.created;
    }
    bson_append_document_end(out.mut(), &hosts);
    BSON_APPEND_INT64(out.mut(), "numClientConnections", 0);
    BSON_APPEND_INT64(out.mut(), "numAScopedConnections", 0);
    BSON_APPEND_INT64(out.mut(), "totalInUse", inUse);
    BSON_APPEND_INT64(out.mut(), "totalAvailable", available);
    BSON_APPEND_INT64(out.mut(), "totalLeased", 0);
    BSON_APPEND_INT64(out.mut(), "totalCreated", created);
    BSON_APPEND_INT64(out.mut(), "totalRefreshing", 0);
    bson_t rs;
    BSON_APPEND_DOCUMENT_BEGIN(out.mut(), "replicaSets", &rs);
    bson_append_document_end(out.mut(), &rs);
    BSON_APPEND_DOUBLE(out.mut(), "ok", 1.0);
    return out;
}

asio::awaitable<bson::Doc> ClientConnection::pauseFeeder(const bson_iter_t& arg) {
    if (!BSON_ITER_HOLDS_NUMBER(&arg) || bson_iter_as_int64(&arg) < 0)
        co_return errorDoc(Status(ErrorCode::BadValue,
                                  "haloclinePauseFeeder takes the pause in milliseconds (0: "
                                  "resume)"));
    const int64_t ms = bson_iter_as_int64(&arg);
    const int64_t until = ms == 0 ? 0 : wallMillis() + ms;
    // Durable, in the fast tier: whichever proxy leads the workers now or
    // later reads it (the feeder checks it between batches).
    bson::Doc f;
    BSON_APPEND_DATE_TIME(f.mut(), "until", until);
    Status st =
        co_await workers::saveStateDoc(p_.tiers().fast, p_.tiers().meta, "feederPause", f.get());
    if (!st.isOK()) co_return errorDoc(st);
    bson::Doc d;
    if (until)
        BSON_APPEND_DATE_TIME(d.mut(), "pausedUntil", until);
    else
        BSON_APPEND_NULL(d.mut(), "pausedUntil");
    BSON_APPEND_DOUBLE(d.mut(), "ok", 1.0);
    co_return d;
}

asio::awaitable<bson::Doc> ClientConnection::flushFeeder(const bson_t* cmd) {
    std::chrono::milliseconds timeout = p_.config().causalWaitTimeout;
    bson_iter_t it;
    if (bson_iter_init_find(&it, cmd, "maxTimeMS") && BSON_ITER_HOLDS_NUMBER(&it) &&
        bson_iter_as_int64(&it) > 0)
        timeout = std::chrono::milliseconds(bson_iter_as_int64(&it));
    Status st = co_await p_.awaitApplied(0, "every tiered collection", timeout,
                                         [this] { return slot_.killed(); });
    if (!st.isOK()) co_return errorDoc(st);
    bson::Doc d;
    appendOpTime(d.mut(), "appliedTime", p_.state().feederApplied.load());
    BSON_APPEND_DOUBLE(d.mut(), "ok", 1.0);
    co_return d;
}

bson::Doc ClientConnection::status() {
    auto& s = p_.state();
    bson::Doc d;
    bson_t tiers, t;
    BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "tiers", &tiers);
    for (Tier* tier : {&p_.fast(), &p_.archive()}) {
        bson_append_document_begin(&tiers, tier->name().c_str(), -1, &t);
        BSON_APPEND_BOOL(&t, "reachable", tier->reachable());
        // Requests this proxy sent to the tier (clients' and its own): divided by
        // the operations served, the round trips per operation.
        BSON_APPEND_INT64(&t, "roundTrips", tier->poolStats().roundTrips);
        std::string primary = tier->info().primary;
        BSON_APPEND_UTF8(&t, "primary", primary.c_str());
        bson_append_document_end(&tiers, &t);
    }
    bson_append_document_end(d.mut(), &tiers);
    bson_t w;
    BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "workers", &w);
    static const char* roles[] = {"disabled", "standby", "leader"};
    BSON_APPEND_UTF8(&w, "role", roles[s.role.load()]);
    bson_append_document_end(d.mut(), &w);
    bson_t f;
    BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "feeder", &f);
    appendOpTime(&f, "appliedTime", s.feederApplied.load());
    BSON_APPEND_INT64(&f, "lagOps", s.feederLagOps.load());
    BSON_APPEND_DOUBLE(&f, "lagSeconds", s.feederLagMillis.load() / 1000.0);
    BSON_APPEND_INT64(&f, "events", s.feederEvents.load());
    BSON_APPEND_INT64(&f, "archiveWrites", s.feederApplies.load());
    BSON_APPEND_UTF8(&f, "mode", p_.config().feederLazy ? "lazy" : "eager");
    appendOpTime(&f, "receivedTime", s.feederReceived.load());
    BSON_APPEND_INT64(&f, "pendingDocuments", s.feederPending.load());
    if (int64_t until = s.feederPausedUntil.load(); until > wallMillis())
        BSON_APPEND_DATE_TIME(&f, "pausedUntil", until);
    else
        BSON_APPEND_NULL(&f, "pausedUntil");
    bson_append_document_end(d.mut(), &f);
    int64_t fast = 0, archive = 0;
    bson_t cols;
    BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "collections", &cols);
    for (const auto& p : p_.config().collections) {
        auto* pr = s.progress(p.ns);
        bson_t c, warm, ev, rt;
        bson_append_document_begin(&cols, p.ns.c_str(), -1, &c);
        BSON_APPEND_UTF8(&c, "ageField", p.ageField.c_str());
        std::string problem = pr->policyProblem();
        if (!problem.empty()) BSON_APPEND_UTF8(&c, "policyProblem", problem.c_str());
        if (auto refused = pr->refusals()) {
            // Documents the archive refused (CONSISTENCY.md, Refused documents): the first few.
            bson_t rf, arr;
            BSON_APPEND_DOCUMENT_BEGIN(&c, "refused", &rf);
            BSON_APPEND_INT64(&rf, "count", static_cast<int64_t>(refused->size()));
            BSON_APPEND_ARRAY_BEGIN(&rf, "documents", &arr);
            ArrayKey k;
            for (size_t i = 0; i < refused->size() && i < 20; ++i) {
                const Refusal& f = (*refused)[i];
                bson_t e;
                bson_append_document_begin(&arr, k(i), -1, &e);
                bson_iter_t vit;
                if (const bson_value_t* v = idValue(f.id, &vit)) bson_append_value(&e, "_id", 3, v);
                BSON_APPEND_INT32(&e, "code", f.code);
                BSON_APPEND_UTF8(&e, "errmsg", f.errmsg.c_str());
                BSON_APPEND_DATE_TIME(&e, "since", f.sinceMs);
                bson_append_document_end(&arr, &e);
            }
            bson_append_array_end(&rf, &arr);
            bson_append_document_end(&c, &rf);
        }
        BSON_APPEND_INT64(&c, "horizonMillis", p.horizon.count());
        BSON_APPEND_DOCUMENT_BEGIN(&c, "warm", &warm);
        int64_t low = pr->warmLowMs.load();
        if (low == std::numeric_limits<int64_t>::max())
            BSON_APPEND_NULL(&warm, "low");
        else
            BSON_APPEND_DATE_TIME(&warm, "low", low);
        BSON_APPEND_BOOL(&warm, "done", pr->warmDone.load());
        BSON_APPEND_INT64(&warm, "warmed", pr->warmed.load());
        bson_append_document_end(&c, &warm);
        int64_t fl = p_.router().fastLowMs(p);
        if (fl == std::numeric_limits<int64_t>::max())
            BSON_APPEND_NULL(&c, "fastHoldsAbove");
        else
            BSON_APPEND_DATE_TIME(&c, "fastHoldsAbove", fl);
        BSON_APPEND_DOCUMENT_BEGIN(&c, "evictor", &ev);
        BSON_APPEND_INT64(&ev, "backlog", pr->evictBacklog.load());
        BSON_APPEND_INT64(&ev, "evicted", pr->evicted.load());
        bson_append_document_end(&c, &ev);
        BSON_APPEND_DOCUMENT_BEGIN(&c, "routing", &rt);
        int64_t rf = pr->routedFast.load(), ra = pr->routedArchive.load();
        BSON_APPEND_INT64(&rt, "fast", rf);
        BSON_APPEND_INT64(&rt, "archive", ra);
        BSON_APPEND_INT64(&rt, "idLookupHits", pr->idLookupHits.load());
        BSON_APPEND_INT64(&rt, "idLookupMisses", pr->idLookupMisses.load());
        BSON_APPEND_INT64(&rt, "mergedReads", pr->mergedReads.load());
        BSON_APPEND_INT64(&rt, "coldWrites", pr->coldWrites.load());
        BSON_APPEND_INT64(&rt, "promoted", pr->promoted.load());
        bson_append_document_end(&c, &rt);
        BSON_APPEND_DOUBLE(&c, "hitRatio", rf + ra ? static_cast<double>(rf) / (rf + ra) : 0.0);
        bson_append_document_end(&cols, &c);
        fast += rf;
        archive += ra;
    }
    bson_append_document_end(d.mut(), &cols);
    bson_t r;
    BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "routing", &r);
    BSON_APPEND_INT64(&r, "fast", fast);
    BSON_APPEND_INT64(&r, "archive", archive);
    bson_append_document_end(d.mut(), &r);
    BSON_APPEND_DOUBLE(d.mut(), "hitRatio",
                       fast + archive ? static_cast<double>(fast) / (fast + archive) : 0.0);
    BSON_APPEND_INT64(d.mut(), "openCursors", static_cast<int64_t>(p_.cursors().size()));
    if (const net::Listener* l = p_.listener()) {
        // As serverStatus.connections on mongod.
        bson_t conn;
        auto current = static_cast<int64_t>(l->openConnections());
        BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "connections", &conn);
        BSON_APPEND_INT64(&conn, "current", current);
        BSON_APPEND_INT64(&conn, "available",
                          std::max<int64_t>(0, p_.config().maxIncomingConnections - current));
        BSON_APPEND_INT64(&conn, "totalCreated", static_cast<int64_t>(l->totalConnections()));
        BSON_APPEND_INT64(&conn, "rejected", static_cast<int64_t>(l->rejectedConnections()));
        bson_append_document_end(d.mut(), &conn);
    }
    bson_t sec;
    BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "security", &sec);
    BSON_APPEND_BOOL(&sec, "authorization", p_.config().authorization);
    BSON_APPEND_INT64(&sec, "authenticationsSucceeded", p_.authCounters().succeeded.load());
    BSON_APPEND_INT64(&sec, "authenticationsFailed", p_.authCounters().failed.load());
    bson_append_document_end(d.mut(), &sec);
    BSON_APPEND_DOUBLE(d.mut(), "ok", 1.0);
    appendClock(d.mut(), 0);
    return d;
}

asio::awaitable<bson::Doc> ClientConnection::explainRouting(const bson_t* cmd,
                                                            const std::string& reqDb) {
    bson_t inner;
    if (!bson::subDocument(cmd, "haloclineExplain", &inner))
        co_return errorDoc(
            Status(ErrorCode::TypeMismatch,
                   "haloclineExplain takes a command document, e.g. "
                   "{haloclineExplain: {find: 'orders', filter: {...}}, db: 'shop'}"));
    std::string db = str(cmd, "db");
    if (db.empty()) db = str(&inner, "$db");
    if (db.empty()) db = reqDb;
    bson::Doc out;
    appendRouting(out.mut(), routingOf(&inner, db));
    BSON_APPEND_DOUBLE(out.mut(), "ok", 1.0);
    appendClock(out.mut(), 0);
    co_return out;
}

ClientConnection::Routing ClientConnection::routingOf(const bson_t* inner, const std::string& db) {
    Routing r;
    bson_iter_t it;
    std::string coll;
    if (bson_iter_init(&it, inner) && bson_iter_next(&it)) {
        r.name = bson_iter_key(&it);
        if (BSON_ITER_HOLDS_UTF8(&it)) coll = bson_iter_utf8(&it, nullptr);
    }
    r.ns = coll.empty() ? "" : db + "." + coll;
    r.policy = r.ns.empty() ? nullptr : p_.config().policyFor(r.ns);
    Decision& d = r.decision;
    if (!r.policy) {
        d.route = Route::Archive;
        d.reason = r.ns.empty() ? "not a collection command: the archive answers"
                                : "untiered collection: passed through to the archive";
    } else if (bson_has_field(inner, "autocommit") || bson_has_field(inner, "startTransaction")) {
        d.route = Route::Refuse;
        d.reason = "transactions on tiered collections are refused (code 263)";
        d.refusal = Status(ErrorCode::OperationNotSupportedInTransaction, d.reason);
    } else if (isReadCommand(r.name)) {
        d = p_.router().routeRead(*r.policy, r.name, inner);
    } else if (isWriteCommand(r.name)) {
        d.route = Route::Fast;
        d.reason =
            "writes land in the fast tier after the documents they can touch are copied "
            "up from the archive";
    } else if (isDdlCommand(r.name)) {
        d.route = Route::Archive;
        d.reason = "schema changes apply to both tiers, the archive first";
    } else {
        d.route = Route::Archive;
        d.reason = "the archive holds the whole collection";
    }
    return r;
}

void ClientConnection::appendRouting(bson_t* out, const Routing& r) {
    std::string route(routeName(r.decision.route));
    BSON_APPEND_UTF8(out, "tier", route.c_str());
    BSON_APPEND_UTF8(out, "reason", r.decision.reason.c_str());
    BSON_APPEND_UTF8(out, "namespace", r.ns.c_str());
    BSON_APPEND_BOOL(out, "tiered", r.policy != nullptr);
    if (!r.policy) return;
    int64_t fl = p_.router().fastLowMs(*r.policy);
    if (fl == std::numeric_limits<int64_t>::max())
        BSON_APPEND_NULL(out, "fastHoldsAbove");
    else
        BSON_APPEND_DATE_TIME(out, "fastHoldsAbove", fl);
    if (r.decision.route == Route::Archive && isReadCommand(r.name))
        BSON_APPEND_BOOL(out, "waitsForFeeder", p_.config().causalReads);
}

}  // namespace halo::tiering
