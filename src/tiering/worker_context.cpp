#include "tiering/worker_context.h"

#include <fmt/format.h>

#include <cstring>

#include "common/clock.h"
#include "common/log.h"

namespace halo::tiering::workers {

int64_t nowMillis() {
    return wallMillis();
}

WorkerContext::WorkerContext(asio::io_context& io, const ProxyConfig& c, Tiers& t, SharedState& s,
                             std::string o)
    : strand(asio::make_strand(io)), cfg(c), tiers(t), state(s), owner(std::move(o)) {}

asio::awaitable<void> WorkerContext::sleep(std::chrono::milliseconds d) {
    if (stopping.load()) co_return;
    asio::steady_timer timer(strand, d);
    timers.insert(&timer);
    asio::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    timers.erase(&timer);
}

void WorkerContext::cancelTimers() {
    for (auto* t : timers) t->cancel();
}

void FailureLog::failed(const Status& s, std::string_view what, std::string_view ns) {
    ++failures_;
    auto now = Clock::now();
    if (failures_ == 1 || now - lastLog_ >= std::chrono::seconds(30)) {
        lastLog_ = now;
        log::warning("tiering", logId_, fmt::format("{} failed; retrying", worker_),
                     fmt::format(R"({{"worker":{},"step":{},"ns":{},"code":{},"error":{},)"
                                 R"("failures":{}}})",
                                 log::quote(worker_), log::quote(what), log::quote(ns),
                                 s.codeNumber(), log::quote(s.reason()), failures_));
    }
    backoff_ = std::min<std::chrono::milliseconds>(backoff_ * 2, std::chrono::seconds(5));
}

void FailureLog::succeeded() {
    if (failures_ > 0)
        log::info("tiering", logId_ + 100, fmt::format("{} recovered", worker_),
                  fmt::format(R"({{"worker":{},"failures":{}}})", log::quote(worker_), failures_));
    failures_ = 0;
    backoff_ = std::chrono::milliseconds(250);
}

bool tombstoneTarget(const bson_t* tombstone, std::string* ns, Id* id) {
    bson_t key;
    if (!bson::subDocument(tombstone, "_id", &key)) return false;
    bson_iter_t it;
    if (!bson_iter_init_find(&it, &key, "ns") || !BSON_ITER_HOLDS_UTF8(&it)) return false;
    *ns = bson_iter_utf8(&it, nullptr);
    if (!bson_iter_init_find(&it, &key, "id")) return false;
    *id = makeId(*bson_iter_value(&it));
    return true;
}

bool sameBytes(const bson_t* a, const bson_t* b) {
    return a->len == b->len && std::memcmp(bson_get_data(a), bson_get_data(b), a->len) == 0;
}

void appendEpochBump(bson_t* updates, const char* key, const std::string& ns) {
    bson_t stmt, q, u, inc;
    bson_append_document_begin(updates, key, -1, &stmt);
    BSON_APPEND_DOCUMENT_BEGIN(&stmt, "q", &q);
    BSON_APPEND_UTF8(&q, "_id", stateId("epoch", ns).c_str());
    bson_append_document_end(&stmt, &q);
    BSON_APPEND_DOCUMENT_BEGIN(&stmt, "u", &u);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &inc);
    BSON_APPEND_INT64(&inc, "n", 1);
    bson_append_document_end(&u, &inc);
    bson_append_document_end(&stmt, &u);
    BSON_APPEND_BOOL(&stmt, "upsert", true);
    bson_append_document_end(updates, &stmt);
}

asio::awaitable<Status> saveStateDoc(Tier& tier, const Metadata& meta, const std::string& id,
                                     const bson_t* fields, OpTime* opTime) {
    bson::Doc c;
    BSON_APPEND_UTF8(c.mut(), "update", Metadata::kState);
    bson_t arr, stmt, q, u;
    BSON_APPEND_ARRAY_BEGIN(c.mut(), "updates", &arr);
    BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &stmt);
    BSON_APPEND_DOCUMENT_BEGIN(&stmt, "q", &q);
    BSON_APPEND_UTF8(&q, "_id", id.c_str());
    bson_append_document_end(&stmt, &q);
    BSON_APPEND_DOCUMENT_BEGIN(&stmt, "u", &u);
    BSON_APPEND_DOCUMENT(&u, "$set", fields);
    bson_append_document_end(&stmt, &u);
    BSON_APPEND_BOOL(&stmt, "upsert", true);
    bson_append_document_end(&arr, &stmt);
    bson_append_array_end(c.mut(), &arr);
    appendMajority(c.mut());
    BSON_APPEND_UTF8(c.mut(), "$db", meta.db.c_str());
    auto r = co_await tier.runOk(c.get());
    if (!r.isOK()) co_return r.getStatus();
    if (opTime) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, r.getValue().get(), "operationTime"))
            if (auto ts = timestampValue(&it)) *opTime = *ts;
    }
    co_return Status::OK();
}

asio::awaitable<Status> refreshFeederProgress(Tiers& t, SharedState& s) {
    std::vector<std::string> ids{"feeder"};
    auto r = co_await loadStateDocs(t.archive, t.meta, ids);
    if (!r.isOK()) co_return r.getStatus();
    auto it = r.getValue().find("feeder");
    if (it == r.getValue().end()) co_return Status::OK();
    const bson_t* d = it->second.get();
    bson_iter_t ti;
    if (bson_iter_init_find(&ti, d, "appliedTime"))
        if (auto applied = timestampValue(&ti)) s.noteApplied(*applied);
    s.feederLagMillis = intField(d, "lagMillis");
    s.feederLagOps = intField(d, "lagOps");
    s.feederEvents = intField(d, "events");
    s.feederApplies = intField(d, "applies");
    // After the applied time: every refusal the feeder recorded before saving
    // it is then known here, so an archive read it allows can check them.
    auto refused = co_await loadRefusals(t);
    if (!refused.isOK()) co_return refused.getStatus();
    publishRefusals(s, std::move(refused.getValue()));
    co_return Status::OK();
}

asio::awaitable<StatusWith<std::map<std::string, Refusals>>> loadRefusals(Tiers& t) {
    bson::Doc c;
    BSON_APPEND_UTF8(c.mut(), "find", Metadata::kRefused);
    BSON_APPEND_INT64(c.mut(), "batchSize", 100000);
    BSON_APPEND_UTF8(c.mut(), "$db", t.meta.db.c_str());
    auto r = co_await t.fast.collect(c.get());
    if (!r.isOK()) co_return r.getStatus();
    std::map<std::string, Refusals> out;
    for (auto& d : r.getValue()) {
        std::string ns;
        Refusal f;
        if (!tombstoneTarget(d.get(), &ns, &f.id)) continue;
        f.code = static_cast<int>(intField(d.get(), "code"));
        bson_iter_t it;
        if (bson_iter_init_find(&it, d.get(), "errmsg") && BSON_ITER_HOLDS_UTF8(&it))
            f.errmsg = bson_iter_utf8(&it, nullptr);
        f.sinceMs = dateField(d.get(), "since").value_or(0);
        out[ns].push_back(std::move(f));
    }
    co_return out;
}

void publishRefusals(SharedState& s, std::map<std::string, Refusals> byNs) {
    for (auto& [ns, progress] : s.collections) {
        auto it = byNs.find(ns);
        if (it == byNs.end() || it->second.empty())
            progress->setRefusals(nullptr);
        else
            progress->setRefusals(std::make_shared<const Refusals>(std::move(it->second)));
    }
}

asio::awaitable<StatusWith<std::map<std::string, bson::Doc>>> loadStateDocs(
    Tier& tier, const Metadata& meta, const std::vector<std::string>& ids) {
    bson::Doc c = stateFind(meta, ids);
    auto r = co_await tier.collect(c.get());
    if (!r.isOK()) co_return r.getStatus();
    std::map<std::string, bson::Doc> out;
    for (auto& d : r.getValue()) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, d.get(), "_id") && BSON_ITER_HOLDS_UTF8(&it))
            out.emplace(bson_iter_utf8(&it, nullptr), std::move(d));
    }
    co_return out;
}

namespace {

void cursorInfo(const bson_t* reply, int64_t* id, std::string* coll) {
    bson_t cursor;
    *id = 0;
    if (!bson::subDocument(reply, "cursor", &cursor)) return;
    bson_iter_t it;
    if (bson_iter_init_find(&it, &cursor, "id") && BSON_ITER_HOLDS_NUMBER(&it))
        *id = bson_iter_as_int64(&it);
    if (bson_iter_init_find(&it, &cursor, "ns") && BSON_ITER_HOLDS_UTF8(&it)) {
        std::string ns = bson_iter_utf8(&it, nullptr);
        auto dot = ns.find('.');
        *coll = dot == std::string::npos ? ns : ns.substr(dot + 1);
    }
}

}  // namespace

asio::awaitable<Status> forEachBatch(Tier& tier, const bson_t* cmd, BatchFn fn) {
    std::string db;
    bson_iter_t it;
    if (bson_iter_init_find(&it, cmd, "$db") && BSON_ITER_HOLDS_UTF8(&it))
        db = bson_iter_utf8(&it, nullptr);
    auto r = co_await tier.runOk(cmd);
    while (true) {
        if (!r.isOK()) co_return r.getStatus();
        int64_t id = 0;
        std::string coll;
        cursorInfo(r.getValue().get(), &id, &coll);
        auto docs = batchOf(r.getValue().get());
        // (No co_await inside ?: -- GCC 12 miscompiles it.)
        Status st = Status::OK();
        if (!docs.empty()) st = co_await fn(docs);
        if (!st.isOK()) {
            if (id != 0) {
                bson::Doc kill;
                BSON_APPEND_UTF8(kill.mut(), "killCursors", coll.c_str());
                bson_t arr;
                BSON_APPEND_ARRAY_BEGIN(kill.mut(), "cursors", &arr);
                BSON_APPEND_INT64(&arr, "0", id);
                bson_append_array_end(kill.mut(), &arr);
                BSON_APPEND_UTF8(kill.mut(), "$db", db.c_str());
                (void)co_await tier.run(kill.get());
            }
            co_return st;
        }
        if (id == 0) co_return Status::OK();
        bson::Doc more;
        BSON_APPEND_INT64(more.mut(), "getMore", id);
        BSON_APPEND_UTF8(more.mut(), "collection", coll.c_str());
        BSON_APPEND_UTF8(more.mut(), "$db", db.c_str());
        r = co_await tier.runOk(more.get());
    }
}

int64_t intField(const bson_t* d, const char* key, int64_t dflt) {
    bson_iter_t it;
    if (bson_iter_init_find(&it, d, key) && BSON_ITER_HOLDS_NUMBER(&it))
        return bson_iter_as_int64(&it);
    return dflt;
}

bool boolField(const bson_t* d, const char* key) {
    bson_iter_t it;
    return bson_iter_init_find(&it, d, key) && BSON_ITER_HOLDS_BOOL(&it) && bson_iter_bool(&it);
}

std::optional<int64_t> dateField(const bson_t* d, const char* key) {
    bson_iter_t it;
    if (bson_iter_init_find(&it, d, key) && BSON_ITER_HOLDS_DATE_TIME(&it))
        return bson_iter_date_time(&it);
    return std::nullopt;
}

}  // namespace halo::tiering::workers
