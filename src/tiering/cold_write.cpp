#include "tiering/cold_write.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>

#include "common/clock.h"
#include "common/log.h"
#include "tiering/router.h"
#include "tiering/worker_context.h"

namespace halo::tiering {

namespace {

std::string_view topField(std::string_view path) {
    return path.substr(0, path.find('.'));
}

/// Whether an update document is made of operators none of which writes the
/// top-level field `age` (a replacement or a pipeline could write anything).
bool leavesAgeAlone(const bson_iter_t& u, std::string_view age) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&u)) return false;
    bson_iter_t ops;
    bson_iter_recurse(&u, &ops);
    bool any = false;
    while (bson_iter_next(&ops)) {
        std::string_view op = bson_iter_key(&ops);
        if (op.empty() || op[0] != '$' || !BSON_ITER_HOLDS_DOCUMENT(&ops)) return false;
        any = true;
        bson_iter_t fields;
        bson_iter_recurse(&ops, &fields);
        while (bson_iter_next(&fields)) {
            if (topField(bson_iter_key(&fields)) == age) return false;
            if (op == "$rename") {
                if (!BSON_ITER_HOLDS_UTF8(&fields)) return false;
                if (topField(bson_iter_utf8(&fields, nullptr)) == age) return false;
            }
        }
    }
    return any;
}

/// A collation other than the simple one can make `_id: "a"` match "A" too.
bool simpleCollation(const bson_t* d) {
    bson_t c;
    if (!bson::subDocument(d, "collation", &c)) return true;
    return bson_empty(&c) || bson::stringField(&c, "locale") == "simple";
}

bson::Doc guardKeyFilter(const Metadata& meta, const std::string& ns, const Id& id,
                         const bson_t* version) {
    bson::Doc q;
    meta.appendTombstoneKey(q.mut(), "_id", ns, id);
    if (version) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, version, "v"))
            bson_append_value(q.mut(), kColdGuardField, -1, bson_iter_value(&it));
    }
    return q;
}

/// Runs a guarded command in the archive; once more when the first attempt
/// went unanswered (its session makes the second a retry, never a repeat).
asio::awaitable<StatusWith<bson::Doc>> runInArchive(Tiers& t, const bson_t* cmd) {
    auto r = co_await t.archive.run(cmd);
    if (!r.isOK() && unanswered(r.getStatus())) r = co_await t.archive.run(cmd);
    co_return r;
}

/// Turns X's guard, if it is still `version`'s, into a mark (CONSISTENCY.md,
/// Cold writes): counts the cold write first, so the mark's number is above
/// every count a promotion that read the archive before the write can hold;
/// and records the retryable statement `retryKey` as run in the archive before
/// the guard goes, so a promotion that follows finds the record (all majority,
/// journaled).
asio::awaitable<Status> releaseGuard(Tiers& t, const std::string& ns, const Id& id,
                                     const bson_t* version, const bson_t* retryKey) {
    // The count and the record in one round trip (Tier::runAll), in that order.
    bson::Doc count = countColdWriteCommand(t.meta, ns);
    std::vector<const bson_t*> first{count.get()};
    bson::Doc up;
    bson_t arr, stmt;
    if (retryKey) {
        BSON_APPEND_UTF8(up.mut(), "update", Metadata::kRetries);
        bson_t u, rq, set;
        BSON_APPEND_ARRAY_BEGIN(up.mut(), "updates", &arr);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &stmt);
        BSON_APPEND_DOCUMENT_BEGIN(&stmt, "q", &rq);
        BSON_APPEND_DOCUMENT(&rq, "_id", retryKey);
        bson_append_document_end(&stmt, &rq);
        BSON_APPEND_DOCUMENT_BEGIN(&stmt, "u", &u);
        BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
        BSON_APPEND_BOOL(&set, "inArchive", true);
        BSON_APPEND_DATE_TIME(&set, "at", wallMillis());
        bson_append_document_end(&u, &set);
        bson_append_document_end(&stmt, &u);
        BSON_APPEND_BOOL(&stmt, "upsert", true);
        bson_append_document_end(&arr, &stmt);
        bson_append_array_end(up.mut(), &arr);
        appendMajority(up.mut());
        BSON_APPEND_UTF8(up.mut(), "$db", t.meta.db.c_str());
        first.push_back(up.get());
    }
    auto replies = co_await t.fast.runAll(first);
    if (!replies.isOK()) co_return replies.getStatus();
    auto mark = coldCountFrom(replies.getValue()[0].get());
    if (!mark.isOK()) co_return mark.getStatus();
    if (retryKey) {
        Status recorded = replyStatus(replies.getValue()[1].get());
        if (!recorded.isOK()) co_return recorded;
    }
    bson::Doc release;
    BSON_APPEND_UTF8(release.mut(), "update", Metadata::kTombstones);
    BSON_APPEND_ARRAY_BEGIN(release.mut(), "updates", &arr);
    BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &stmt);
    bson::Doc q = guardKeyFilter(t.meta, ns, id, version);
    BSON_APPEND_DOCUMENT(&stmt, "q", q.get());
    bson_t u;
    BSON_APPEND_DOCUMENT_BEGIN(&stmt, "u", &u);
    BSON_APPEND_INT64(&u, kColdMarkField, mark.getValue());
    BSON_APPEND_DATE_TIME(&u, "at", wallMillis());
    bson_append_document_end(&stmt, &u);
    bson_append_document_end(&arr, &stmt);
    bson_append_array_end(release.mut(), &arr);
    appendMajority(release.mut());
    BSON_APPEND_UTF8(release.mut(), "$db", t.meta.db.c_str());
    co_return (co_await t.fast.runOk(release.get())).getStatus();
}

/// Takes X's guard: writes it (majority, journaled) where nothing or a mark
/// holds X's tombstone key, then checks that F(X) does not exist. The guard's
/// version ({v: ObjectId}), or nullopt: X is in the fast tier (the guard
/// becomes a mark again), or its key is taken (a tombstone, or another guard:
/// `existing` gets the latter).
asio::awaitable<StatusWith<std::optional<bson::Doc>>> takeGuard(
    Tiers& t, const std::string& ns, const Id& id, const bson_t* cmd, const bson_t* retryKey,
    std::optional<bson::Doc>* existing) {
    using Out = std::optional<bson::Doc>;
    bson_oid_t oid;
    bson_oid_init(&oid, nullptr);
    bson::Doc version;
    BSON_APPEND_OID(version.mut(), "v", &oid);
    // An upsert that replaces a mark; a tombstone or a guard (no mark) makes
    // it insert X's key again: duplicate key.
    bson::Doc ins;
    BSON_APPEND_UTF8(ins.mut(), "update", Metadata::kTombstones);
    bson_t arr, stmt, q, exists, g;
    BSON_APPEND_ARRAY_BEGIN(ins.mut(), "updates", &arr);
    BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &stmt);
    BSON_APPEND_DOCUMENT_BEGIN(&stmt, "q", &q);
    t.meta.appendTombstoneKey(&q, "_id", ns, id);
    BSON_APPEND_DOCUMENT_BEGIN(&q, kColdMarkField, &exists);
    BSON_APPEND_BOOL(&exists, "$exists", true);
    bson_append_document_end(&q, &exists);
    bson_append_document_end(&stmt, &q);
    BSON_APPEND_DOCUMENT_BEGIN(&stmt, "u", &g);
    BSON_APPEND_OID(&g, kColdGuardField, &oid);
    BSON_APPEND_DATE_TIME(&g, "at", wallMillis());
    BSON_APPEND_DOCUMENT(&g, "cmd", cmd);
    if (retryKey) BSON_APPEND_DOCUMENT(&g, "retry", retryKey);
    bson_append_document_end(&stmt, &g);
    BSON_APPEND_BOOL(&stmt, "upsert", true);
    bson_append_document_end(&arr, &stmt);
    bson_append_array_end(ins.mut(), &arr);
    appendMajority(ins.mut());
    BSON_APPEND_UTF8(ins.mut(), "$db", t.meta.db.c_str());
    // One round trip (Tier::runAll): the guard's upsert, then F(X), then X's
    // tombstone key, which the fast tier reads after the upsert ran.
    std::vector<Id> one;
    one.push_back(id.copy());
    bson::Doc pc = presentInCommand(ns, one);
    bson::Doc kc = keyStatesCommand(t.meta, ns, one);
    std::vector<const bson_t*> cmds{ins.get(), pc.get(), kc.get()};
    auto replies = co_await t.fast.runAll(cmds);
    if (!replies.isOK()) co_return replies.getStatus();
    Status ir = replyStatus(replies.getValue()[0].get());
    if (!ir.isOK()) {
        if (ir.code() != ErrorCode::DuplicateKey) co_return ir;
        // Whose key is it? A guard may be finished by this writer (see runCold).
        std::vector<bson::Doc> tombs = batchOf(replies.getValue()[2].get());
        KeyStates k = keyStatesFrom(tombs, one);
        if (!k.guards.empty()) *existing = std::move(k.guards[0]);
        co_return Out{};
    }
    // After the guard: a promotion that committed before it shows here; one
    // that had not yet written X's key meets the guard.
    Status found = replyStatus(replies.getValue()[1].get());
    const bool present = found.isOK() && presentFrom(batchOf(replies.getValue()[1].get()), one)[0];
    if (!found.isOK() || present) {
        Status rel = co_await releaseGuard(t, ns, id, version.get(), nullptr);
        if (!found.isOK()) co_return found;
        if (!rel.isOK()) co_return rel;
        co_return Out{};
    }
    co_return Out(std::move(version));
}

/// releaseGuard after the reply (a coroutine of its own: its arguments live
/// in its frame).
asio::awaitable<void> releaseLater(Tiers& t, std::string ns, Id id, bson::Doc version,
                                   std::optional<bson::Doc> key) {
    Status rel = co_await releaseGuard(t, ns, id, version.get(), key ? key->get() : nullptr);
    if (!rel.isOK())
        log::warning(
            "tiering", 8210070, "Cold write done; its guard stays until another writer finishes it",
            fmt::format(R"({{"ns":{},"error":{}}})", log::quote(ns), log::quote(rel.reason())));
}

/// Whether a write reply says the statement ran: ok: 1 and no write error.
bool ranStatement(const bson_t* reply) {
    bson_iter_t it;
    if (!bson_iter_init_find(&it, reply, "ok") || bson_iter_as_double(&it) != 1.0) return false;
    return !bson_iter_init_find(&it, reply, "writeErrors");
}

}  // namespace

bool sameRetry(const bson_t* guard, const bson_t* retryKey) {
    bson_t g;
    if (!retryKey || !bson::subDocument(guard, "retry", &g)) return false;
    return g.len == retryKey->len && memcmp(bson_get_data(&g), bson_get_data(retryKey), g.len) == 0;
}

int64_t coldGuardAgeMillis(const bson_t* guard) {
    bson_iter_t it;
    if (!bson_iter_init_find(&it, guard, "at") || !BSON_ITER_HOLDS_DATE_TIME(&it)) return 0;
    return wallMillis() - bson_iter_date_time(&it);
}

std::optional<Id> coldTarget(std::string_view kind, const bson_t* stmt, const CollectionPolicy& p) {
    const char* filterKey = kind == "findAndModify" ? "query" : "q";
    bson_t q;
    if (!bson::subDocument(stmt, filterKey, &q) || !simpleCollation(stmt)) return std::nullopt;
    auto id = exactId(&q);
    if (!id) return std::nullopt;
    if (truthy(stmt, "upsert")) return std::nullopt;
    if (kind == "delete") return id;
    if (kind == "findAndModify" && truthy(stmt, "remove")) return id;
    bson_iter_t u;
    if (!bson_iter_init_find(&u, stmt, kind == "findAndModify" ? "update" : "u"))
        return std::nullopt;
    if (!leavesAgeAlone(u, topField(p.ageField))) return std::nullopt;
    return id;
}

asio::awaitable<StatusWith<std::optional<bson::Doc>>> runCold(Tiers& t, const std::string& ns,
                                                              const Id& id,
                                                              const bson_t* archiveCmd,
                                                              const bson_t* retryKey) {
    std::optional<bson::Doc> version;
    for (int attempt = 0; attempt < 2 && !version; ++attempt) {
        std::optional<bson::Doc> existing;
        auto g = co_await takeGuard(t, ns, id, archiveCmd, retryKey, &existing);
        if (!g.isOK()) co_return g.getStatus();
        version = std::move(g.getValue());
        if (version) break;
        // Another writer's guard: finish it when that writer is this
        // statement's first attempt (a retry) or has gone quiet; otherwise
        // the write takes the promoting path, which waits for the guard.
        if (!existing || attempt > 0 ||
            (!sameRetry(existing->get(), retryKey) &&
             coldGuardAgeMillis(existing->get()) < kColdGuardPatienceMillis))
            co_return std::optional<bson::Doc>{};
        Status fin = co_await finishColdGuard(t, ns, existing->get());
        if (!fin.isOK()) co_return fin;
    }
    if (!version) co_return std::optional<bson::Doc>{};
    auto r = co_await runInArchive(t, archiveCmd);
    if (!r.isOK() && unanswered(r.getStatus()))
        co_return r.getStatus();  // the outcome is unknown: the guard stays for finishColdGuard
    // The reply need not wait for the guard's removal: until it is gone,
    // promotions of X wait, and a writer that finds it left behind finishes
    // it (a rerun the archive answers from its record).
    // Recorded for a retry only when the archive ran the statement: a refused
    // one (ok: 0, a write error) is not in its session record, and its retry
    // must not run there once X has been copied up.
    std::optional<bson::Doc> key;
    if (retryKey && r.isOK() && ranStatement(r.getValue().get())) key = bson::Doc::copyOf(retryKey);
    asio::co_spawn(co_await asio::this_coro::executor,
                   releaseLater(t, ns, id.copy(), std::move(*version), std::move(key)),
                   asio::detached);
    if (!r.isOK()) co_return r.getStatus();
    co_return std::optional<bson::Doc>(std::move(r.getValue()));
}

asio::awaitable<Status> finishColdGuard(Tiers& t, const std::string& ns, const bson_t* guard) {
    bson_t cmd;
    Id id;
    bson_iter_t it, sub;
    if (!bson::subDocument(guard, "cmd", &cmd) || !bson_iter_init_find(&it, guard, "_id") ||
        !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &sub) ||
        !bson_iter_find(&sub, "id"))
        co_return Status(ErrorCode::InternalError,
                         "halocline: a cold-write guard without its command");
    id = makeId(*bson_iter_value(&sub));
    auto r = co_await runInArchive(t, &cmd);
    if (!r.isOK()) co_return r.getStatus();
    bson::Doc version;
    if (bson_iter_init_find(&it, guard, kColdGuardField))
        bson_append_value(version.mut(), "v", 1, bson_iter_value(&it));
    bson_t retry;
    bool hasRetry = bson::subDocument(guard, "retry", &retry) && ranStatement(r.getValue().get());
    log::info("tiering", 8210071, "Finished a cold write another writer left",
              fmt::format(R"({{"ns":{}}})", log::quote(ns)));
    co_return co_await releaseGuard(t, ns, id, version.get(), hasRetry ? &retry : nullptr);
}

}  // namespace halo::tiering
