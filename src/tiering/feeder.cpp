// CONSISTENCY.md, The feeder: tails the fast tier's change stream and makes
// the archive reflect every fast-tier write, batch by batch, from a durable
// resume token.
//
// Metrics: feederLagMillis is now minus the wall time of the last event of the
// last applied batch (0 when a batch brought nothing). feederLagOps is the
// number of events in the batch being applied (0 between batches): an
// approximation, since the events still in the fast tier's oplog beyond the
// batch are not counted.
#include <fmt/format.h>

#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "common/log.h"
#include "tiering/cold_write.h"
#include "tiering/worker_context.h"

namespace halo::tiering::workers {

namespace {

using std::chrono::milliseconds;

constexpr int64_t kAwaitMillis = 300;       // getMore wait when the stream is idle
constexpr int64_t kShortAwaitMillis = 5;    // ... when the last batch ended on an event
constexpr int64_t kPauseCheckMillis = 500;  // how often the feeder looks for an operator's pause
constexpr size_t kIdsPerLookup = 500;       // ids per find {_id: {$in}}
constexpr size_t kArchiveCommandBytes = 12 * 1024 * 1024;
constexpr int64_t kRefusedRetryMillis = 30'000;  // how often refused documents are tried again
constexpr int64_t kLazyMaxPending = 100'000;     // a lazy feeder writes once it gathered this many

/// Whether an archive error on one statement says the archive will not store
/// that document (a refusal, CONSISTENCY.md, Refused documents) rather than
/// that the write could not run now (a failover, a timeout, a conflict), which
/// is retried with the whole batch.
bool isRefusal(int code) {
    switch (code) {
        case 6:      // HostUnreachable
        case 7:      // HostNotFound
        case 24:     // LockTimeout
        case 50:     // MaxTimeMSExpired
        case 64:     // WriteConcernFailed
        case 89:     // NetworkTimeout
        case 91:     // ShutdownInProgress
        case 112:    // WriteConflict
        case 189:    // PrimarySteppedDown
        case 262:    // ExceededTimeLimit
        case 9001:   // SocketException
        case 10107:  // NotWritablePrimary
        case 11600:  // InterruptedAtShutdown
        case 11601:  // Interrupted
        case 11602:  // InterruptedDueToReplStateChange
        case 13435:  // NotPrimaryNoSecondaryOk
        case 13436:  // NotPrimaryOrSecondary
            return false;
        default:
            return true;
    }
}

/// An archive write of document `d` as an update statement's `u`: the whole
/// document as a replacement, or, when a top-level field name starts with '$'
/// (which a replacement may not hold), the pipeline {$replaceWith: {$literal: d}},
/// which stores any document a client could store, byte for byte.
void appendArchiveImage(bson_t* stmt, const bson_t* d) {
    bson_iter_t it;
    bool dollar = false;
    if (bson_iter_init(&it, d))
        while (!dollar && bson_iter_next(&it)) dollar = bson_iter_key(&it)[0] == '$';
    if (!dollar) {
        BSON_APPEND_DOCUMENT(stmt, "u", d);
        return;
    }
    bson_t pipeline, stage, with;
    BSON_APPEND_ARRAY_BEGIN(stmt, "u", &pipeline);
    BSON_APPEND_DOCUMENT_BEGIN(&pipeline, "0", &stage);
    BSON_APPEND_DOCUMENT_BEGIN(&stage, "$replaceWith", &with);
    BSON_APPEND_DOCUMENT(&with, "$literal", d);
    bson_append_document_end(&stage, &with);
    bson_append_document_end(&pipeline, &stage);
    bson_append_array_end(stmt, &pipeline);
}

bool isLostPosition(const Status& s) {
    return s.code() == ErrorCode::ChangeStreamHistoryLost ||
           s.code() == ErrorCode::ChangeStreamFatalError ||
           s.code() == ErrorCode::InvalidResumeToken;
}

class Feeder {
  public:
    Feeder(WorkerContext& ctx, uint64_t gen)
        : ctx_(ctx), gen_(gen), classifier_(tieredSet(ctx.cfg), ctx.tiers.meta) {}

    asio::awaitable<void> run() {
        ctx_.recentWrites.reset(gen_, nowMillis());
        while (ctx_.leading(gen_)) {
            Status st = co_await stream();
            co_await killCursor();
            if (st.isOK()) continue;
            if (!ctx_.leading(gen_)) break;  // the lease ended mid-step: not a failure
            flog_.failed(st, step_);
            co_await ctx_.sleep(flog_.backoff());
        }
        co_await killCursor();
        ctx_.state.feederLagOps = 0;
    }

  private:
    static std::set<std::string> tieredSet(const ProxyConfig& cfg) {
        std::set<std::string> s;
        for (const auto& c : cfg.collections) s.insert(c.ns);
        return s;
    }

    Status lostLease() const {
        return Status(ErrorCode::OperationFailed, "the worker lease is no longer held");
    }

    /// Opens the stream (from the token, or after a rescan) and applies
    /// batches until leadership ends or something fails.
    asio::awaitable<Status> stream() {
        if (!loaded_) {
            step_ = "read state";
            std::vector<std::string> ids{"feeder"};
            auto docs = co_await loadStateDocs(ctx_.tiers.archive, ctx_.tiers.meta, ids);
            if (!docs.isOK()) co_return docs.getStatus();
            auto it = docs.getValue().find("feeder");
            if (it != docs.getValue().end()) {
                const bson_t* d = it->second.get();
                bson_t tok;
                if (bson::subDocument(d, "token", &tok)) token_ = bson::Doc::copyOf(&tok);
                bson_iter_t ti;
                if (bson_iter_init_find(&ti, d, "appliedTime"))
                    if (auto t = timestampValue(&ti)) ctx_.state.noteApplied(*t);
                ctx_.state.feederEvents = intField(d, "events");
                ctx_.state.feederApplies = intField(d, "applies");
            }
            step_ = "read refusals";
            auto refused = co_await loadRefusals(ctx_.tiers);
            if (!refused.isOK()) co_return refused.getStatus();
            refused_.clear();
            for (auto& [ns, list] : refused.getValue())
                for (auto& f : list) {
                    std::string k = idKey(f.id);
                    refused_[ns].emplace(std::move(k), std::move(f));
                }
            publishRefused();
            loaded_ = true;
        }
        // The stream resumes from the last applied batch: what was gathered
        // since comes again.
        clearPending();
        Status st = Status::OK();
        if (!needRescan_ && !token_.empty()) {
            step_ = "resume change stream";
            st = co_await open(token_.get(), 0);
            if (isLostPosition(st)) {
                log::warning("tiering", 8210021,
                             "Feeder cannot resume its change stream; rescanning the fast tier",
                             fmt::format(R"({{"code":{},"error":{}}})", st.codeNumber(),
                                         log::quote(st.reason())));
                needRescan_ = true;
            } else if (!st.isOK()) {
                co_return st;
            }
        }
        if (needRescan_ || token_.empty()) {
            step_ = "rescan";
            auto t0 = co_await rescan();
            if (!t0.isOK()) co_return t0.getStatus();
            needRescan_ = false;
            step_ = "open change stream";
            st = co_await open(nullptr, t0.getValue());
            if (!st.isOK()) co_return st;
        }
        while (ctx_.leading(gen_)) {
            if (cursorId_ == 0) co_return Status::OK();  // closed by the server: reopen
            Status paused = co_await waitWhilePaused();
            if (!paused.isOK()) co_return paused;
            if (!ctx_.leading(gen_)) break;
            step_ = "getMore";
            bson::Doc more;
            BSON_APPEND_INT64(more.mut(), "getMore", cursorId_);
            BSON_APPEND_UTF8(more.mut(), "collection", cursorColl_.c_str());
            BSON_APPEND_INT64(more.mut(), "batchSize", ctx_.cfg.feederBatchSize);
            BSON_APPEND_INT64(more.mut(), "maxTimeMS",
                              endedOnEvent_ ? kShortAwaitMillis : kAwaitMillis);
            BSON_APPEND_UTF8(more.mut(), "$db", "admin");
            auto r = co_await ctx_.tiers.fast.runOk(more.get());
            if (!r.isOK()) {
                if (r.getStatus().code() == ErrorCode::ChangeStreamHistoryLost) needRescan_ = true;
                cursorId_ = 0;  // the server closed it on error
                co_return r.getStatus();
            }
            st = co_await onReply(r.getValue().get());
            if (!st.isOK()) co_return st;
            st = co_await retryRefused();
            if (!st.isOK()) co_return st;
        }
        co_return Status::OK();
    }

    /// An operator's pause (haloclinePauseFeeder, state.feederPause in the fast
    /// tier), read at most every kPauseCheckMillis: waits while it lasts,
    /// applying nothing (the change stream keeps the events meanwhile).
    asio::awaitable<Status> waitWhilePaused() {
        while (ctx_.leading(gen_)) {
            int64_t now = nowMillis();
            if (now >= nextPauseCheckMs_) {
                step_ = "read pause";
                std::vector<std::string> ids{"feederPause"};
                auto docs = co_await loadStateDocs(ctx_.tiers.fast, ctx_.tiers.meta, ids);
                if (!docs.isOK()) co_return docs.getStatus();
                auto it = docs.getValue().find("feederPause");
                int64_t until = 0;
                bson_iter_t u;
                if (it != docs.getValue().end() &&
                    bson_iter_init_find(&u, it->second.get(), "until") &&
                    BSON_ITER_HOLDS_DATE_TIME(&u))
                    until = bson_iter_date_time(&u);
                if (until != ctx_.state.feederPausedUntil.exchange(until))
                    log::info("tiering", 8210024,
                              until > now ? "Feeder paused by an operator" : "Feeder resumed",
                              fmt::format(R"({{"untilMillis":{}}})", until));
                nextPauseCheckMs_ = now + kPauseCheckMillis;
            }
            int64_t until = ctx_.state.feederPausedUntil.load();
            if (until <= now) co_return Status::OK();
            step_ = "paused";
            co_await ctx_.sleep(milliseconds(std::min(until - now, kPauseCheckMillis)));
        }
        co_return Status::OK();
    }

    /// Every kRefusedRetryMillis, applies the refused documents again: the
    /// archive may accept them now (an operator relaxed a validator or removed
    /// a conflicting document).
    asio::awaitable<Status> retryRefused() {
        int64_t now = nowMillis();
        if (refused_.empty() || now - lastRefusedRetryMs_ < kRefusedRetryMillis)
            co_return Status::OK();
        lastRefusedRetryMs_ = now;
        std::vector<std::pair<std::string, std::vector<Id>>> again;
        for (auto& [ns, byId] : refused_) {
            std::vector<Id> ids;
            for (auto& [k, f] : byId) ids.push_back(f.id.copy());
            again.emplace_back(ns, std::move(ids));
        }
        for (auto& [ns, ids] : again) {
            step_ = "retry refused documents";
            Status st = co_await applyIds(ns, ids);
            if (!st.isOK()) co_return st;
        }
        co_return Status::OK();
    }

    void publishRefused() {
        std::map<std::string, Refusals> byNs;
        for (auto& [ns, byId] : refused_)
            for (auto& [k, f] : byId)
                byNs[ns].push_back(Refusal{f.id.copy(), f.code, f.errmsg, f.sinceMs});
        publishRefusals(ctx_.state, std::move(byNs));
    }

    asio::awaitable<Status> open(const bson_t* resumeAfter, OpTime startAt) {
        cursorId_ = 0;
        endedOnEvent_ = false;
        bson::Doc c;
        BSON_APPEND_INT32(c.mut(), "aggregate", 1);
        bson_t pipeline, stage, cs, project;
        BSON_APPEND_ARRAY_BEGIN(c.mut(), "pipeline", &pipeline);
        BSON_APPEND_DOCUMENT_BEGIN(&pipeline, "0", &stage);
        BSON_APPEND_DOCUMENT_BEGIN(&stage, "$changeStream", &cs);
        BSON_APPEND_BOOL(&cs, "allChangesForCluster", true);
        if (resumeAfter)
            BSON_APPEND_DOCUMENT(&cs, "resumeAfter", resumeAfter);
        else
            bson_append_timestamp(&cs, "startAtOperationTime", -1, opTimeSeconds(startAt),
                                  opTimeIncrement(startAt));
        bson_append_document_end(&stage, &cs);
        bson_append_document_end(&pipeline, &stage);
        // Every event of the fast tier, not only the tiered collections': any
        // write then ends the getMore's wait at once, so the applied time
        // passes the fast tier's current time promptly, which archive reads
        // wait for (read-your-writes). The classifier picks what to apply.
        // Keep events small: the feeder re-reads documents; it needs no images.
        BSON_APPEND_DOCUMENT_BEGIN(&pipeline, "1", &stage);
        BSON_APPEND_DOCUMENT_BEGIN(&stage, "$project", &project);
        for (const char* f : {"operationType", "ns", "documentKey", "clusterTime", "wallTime",
                              "fullDocument.promote"})
            BSON_APPEND_INT32(&project, f, 1);
        bson_append_document_end(&stage, &project);
        bson_append_document_end(&pipeline, &stage);
        bson_append_array_end(c.mut(), &pipeline);
        bson_t cursor;
        BSON_APPEND_DOCUMENT_BEGIN(c.mut(), "cursor", &cursor);
        BSON_APPEND_INT64(&cursor, "batchSize", ctx_.cfg.feederBatchSize);
        bson_append_document_end(c.mut(), &cursor);
        BSON_APPEND_UTF8(c.mut(), "$db", "admin");
        auto r = co_await ctx_.tiers.fast.runOk(c.get());
        if (!r.isOK()) co_return r.getStatus();
        co_return co_await onReply(r.getValue().get());
    }

    /// Applies one reply's batch, saves the token, publishes the applied time.
    asio::awaitable<Status> onReply(const bson_t* reply) {
        bson_t cursor;
        if (!bson::subDocument(reply, "cursor", &cursor))
            co_return Status(ErrorCode::ProtocolError, "change stream reply without a cursor");
        bson_iter_t it;
        cursorId_ = bson_iter_init_find(&it, &cursor, "id") && BSON_ITER_HOLDS_NUMBER(&it)
                        ? bson_iter_as_int64(&it)
                        : 0;
        if (bson_iter_init_find(&it, &cursor, "ns") && BSON_ITER_HOLDS_UTF8(&it)) {
            std::string ns = bson_iter_utf8(&it, nullptr);
            auto dot = ns.find('.');
            cursorColl_ = dot == std::string::npos ? ns : ns.substr(dot + 1);
        }
        std::vector<bson::Doc> events = batchOf(reply);
        bson::Doc token;
        bson_t pbrt;
        if (bson::subDocument(&cursor, "postBatchResumeToken", &pbrt))
            token = bson::Doc::copyOf(&pbrt);
        bson_t lastId;
        bool haveLastId = !events.empty() && bson::subDocument(events.back().get(), "_id", &lastId);
        if (token.empty() && haveLastId) token = bson::Doc::copyOf(&lastId);
        if (token.empty()) co_return Status::OK();  // nothing to learn from this reply
        endedOnEvent_ = haveLastId && sameBytes(&lastId, token.get());

        SharedState& s = ctx_.state;
        const int64_t n = static_cast<int64_t>(events.size());
        TouchedIds touched = classifier_.classify(events);
        OpTime tokenTime = resumeTokenTime(token.get()).value_or(touched.lastTime.value_or(0));
        OpTime received = appliedTimeOfBatch(tokenTime, endedOnEvent_);
        gather(touched, n, received);
        s.feederEvents += n;
        s.feederReceived = std::max(s.feederReceived.load(), received);
        receivedToken_ = std::move(token);

        // Eager: every batch. Lazy: when the oldest gathered document has
        // waited lazyDelay, when a proxy's archive read demands it, or when
        // the gathering is large; and at once when nothing is gathered (the
        // archive already reflects everything received).
        const int64_t now = nowMillis();
        const bool flush = !ctx_.cfg.feederLazy || pendingDocs_ == 0 || touched.demanded ||
                           pendingDocs_ >= kLazyMaxPending ||
                           now - pendingSinceMs_ >= ctx_.cfg.feederLazyDelay.count();
        if (!flush) co_return Status::OK();
        step_ = "apply batch";
        s.feederLagOps = pendingEvents_;
        for (auto& [ns, ids] : pending_) {
            for (size_t i = 0; i < ids.size(); i += kIdsPerLookup) {
                std::vector<Id> chunk;
                for (size_t j = i; j < ids.size() && j < i + kIdsPerLookup; ++j)
                    chunk.push_back(ids[j].copy());
                Status st = co_await applyIds(ns, chunk);
                if (!st.isOK()) co_return st;
            }
        }
        const OpTime applied = received;
        int64_t lag = pendingEvents_ > 0 && lastWallMs_ > 0
                          ? std::max<int64_t>(0, nowMillis() - lastWallMs_)
                          : 0;
        // Saved whenever it advanced: proxies that are not leading read the
        // applied time from here before an archive read (read-your-writes
        // across proxies). The save goes to the archive, so it adds no fast-tier
        // event and never wakes the stream again.
        if (pendingEvents_ > 0 || applied > lastSavedApplied_) {
            step_ = "save token";
            if (!ctx_.leading(gen_)) co_return lostLease();
            bson::Doc f;
            BSON_APPEND_DOCUMENT(f.mut(), "token", receivedToken_.get());
            bson_append_timestamp(f.mut(), "appliedTime", -1, opTimeSeconds(applied),
                                  opTimeIncrement(applied));
            BSON_APPEND_DATE_TIME(f.mut(), "savedAt", nowMillis());
            BSON_APPEND_INT64(f.mut(), "lagMillis", lag);
            BSON_APPEND_INT64(f.mut(), "lagOps", 0);
            BSON_APPEND_INT64(f.mut(), "events", s.feederEvents.load());
            BSON_APPEND_INT64(f.mut(), "applies", s.feederApplies.load());
            Status st =
                co_await saveStateDoc(ctx_.tiers.archive, ctx_.tiers.meta, "feeder", f.get());
            if (!st.isOK()) co_return st;
            lastSavedApplied_ = applied;
        }
        token_ = bson::Doc::copyOf(receivedToken_.get());
        clearPending();
        s.noteApplied(applied);
        s.feederLagMillis = lag;
        flog_.succeeded();
        co_return Status::OK();
    }

    /// Adds a batch's touched documents to what the next flush writes, and
    /// records them for the evictor (RecentWrites: recent, and pending until
    /// written).
    void gather(const TouchedIds& touched, int64_t events, OpTime received) {
        const int64_t now = nowMillis();
        RecentWrites* rw = ctx_.recentWrites.gen == gen_ ? &ctx_.recentWrites : nullptr;
        for (auto& [ns, ids] : touched.byNs)
            for (auto& id : ids) {
                std::string k = RecentWrites::key(ns, id);
                if (rw) rw->note(k, now);
                if (!pendingKeys_.insert(k).second) continue;
                if (pendingDocs_++ == 0) pendingSinceMs_ = now;
                pending_[ns].push_back(id.copy());
                if (rw) rw->pending.insert(std::move(k));
            }
        if (rw) {
            for (auto& [ns, id] : touched.promoted) rw->note(RecentWrites::key(ns, id), now);
            rw->prune(now, kRecentWriteGraceMillis);
            rw->seenThrough = std::max(rw->seenThrough, received);
        }
        pendingEvents_ += events;
        if (touched.lastWallMs > 0) lastWallMs_ = touched.lastWallMs;
        ctx_.state.feederPending = pendingDocs_;
        ctx_.state.feederLagOps = pendingEvents_;
    }

    void clearPending() {
        pending_.clear();
        pendingKeys_.clear();
        pendingDocs_ = 0;
        pendingEvents_ = 0;
        if (ctx_.recentWrites.gen == gen_) ctx_.recentWrites.pending.clear();
        ctx_.state.feederPending = 0;
        ctx_.state.feederLagOps = 0;
    }

    /// For each id: F(X) exists -> replace A(X) with it; else tombstoned ->
    /// delete A(X); else it left by eviction -> nothing (never a delete). Then
    /// removes the tombstones it acted on, with an epoch bump.
    asio::awaitable<Status> applyIds(const std::string& ns, const std::vector<Id>& ids) {
        if (ids.empty()) co_return Status::OK();
        auto [db, coll] = splitNs(ns);
        Tiers& t = ctx_.tiers;
        auto withMajority = [](bson_t* c) {
            bson_t rc;
            BSON_APPEND_DOCUMENT_BEGIN(c, "readConcern", &rc);
            BSON_APPEND_UTF8(&rc, "level", "majority");
            bson_append_document_end(c, &rc);
        };
        // Tombstones first, then documents: a tombstone seen before the
        // document read is older than whatever that read finds, so "document
        // present" means the delete it records was superseded by a re-insert.
        // (The other order could pair a document read before a delete with the
        // tombstone of that delete, and remove the tombstone of a live delete.)
        bson::Doc tc;
        BSON_APPEND_UTF8(tc.mut(), "find", Metadata::kTombstones);
        appendTombstoneIn(tc.mut(), "filter", t.meta, ns, ids);
        BSON_APPEND_INT64(tc.mut(), "batchSize", 100000);
        withMajority(tc.mut());
        BSON_APPEND_UTF8(tc.mut(), "$db", t.meta.db.c_str());
        step_ = "read tombstones";
        auto tombs = co_await t.fast.collect(tc.get());
        if (!tombs.isOK()) co_return tombs.getStatus();

        bson::Doc fc;
        BSON_APPEND_UTF8(fc.mut(), "find", coll.c_str());
        appendIdIn(fc.mut(), "filter", ids);
        BSON_APPEND_INT64(fc.mut(), "batchSize", 100000);
        withMajority(fc.mut());
        BSON_APPEND_UTF8(fc.mut(), "$db", db.c_str());
        step_ = "read fast documents";
        auto docs = co_await t.fast.collect(fc.get());
        if (!docs.isOK()) co_return docs.getStatus();
        std::unordered_map<std::string, const bson::Doc*> fast, dead;
        for (auto& d : docs.getValue()) {
            Id id;
            if (idOf(d.get(), &id)) fast.emplace(idKey(id), &d);
        }
        for (auto& d : tombs.getValue()) {
            std::string tns;
            Id id;
            // A cold write's guard or mark is no delete: the archive holds X (cold_write.h).
            bson_iter_t guard;
            if (bson_iter_init_find(&guard, d.get(), kColdGuardField) ||
                bson_iter_init_find(&guard, d.get(), kColdMarkField))
                continue;
            if (tombstoneTarget(d.get(), &tns, &id) && tns == ns) dead.emplace(idKey(id), &d);
        }
        std::vector<const bson::Doc*> upserts;
        std::vector<Id> deletes;
        std::vector<const bson::Doc*> removals;  // tombstones acted on
        for (const Id& id : ids) {
            std::string k = idKey(id);
            auto f = fast.find(k);
            auto d = dead.find(k);
            if (f != fast.end()) {
                upserts.push_back(f->second);
                // A tombstone older than a re-insert: the archive gets the
                // document, and the tombstone must not block its eviction.
                if (d != dead.end()) removals.push_back(d->second);
            } else if (d != dead.end()) {
                deletes.push_back(id.copy());
                removals.push_back(d->second);
            }
            // Neither: X left by eviction, and the archive holds it.
        }

        step_ = "write archive";
        std::vector<const bson_t*> images;
        for (auto* d : upserts) images.push_back(d->get());
        std::vector<std::pair<size_t, Status>> refusedNow;  // index into upserts
        Status wst = co_await writeImages(db, coll, images, false, &refusedNow);
        if (!wst.isOK()) co_return wst;
        // A validator refusal: the fast tier already validated the document
        // (or a promotion copied an archived one that predates the validator),
        // so the archive takes the copy as it is (bypassDocumentValidation).
        std::vector<const bson_t*> again;
        std::vector<size_t> againIdx;
        std::vector<std::pair<size_t, Status>> kept;
        for (auto& r : refusedNow) {
            if (r.second.code() == ErrorCode::DocumentValidationFailure) {
                again.push_back(images[r.first]);
                againIdx.push_back(r.first);
            } else {
                kept.push_back(std::move(r));
            }
        }
        if (!again.empty()) {
            std::vector<std::pair<size_t, Status>> still;
            wst = co_await writeImages(db, coll, again, true, &still);
            if (!wst.isOK()) co_return wst;
            for (auto& r : still) kept.emplace_back(againIdx[r.first], std::move(r.second));
        }
        refusedNow = std::move(kept);
        step_ = "record refusals";
        std::set<std::string> refusedKeys;
        for (auto& [idx, why] : refusedNow) {
            Id id;
            if (idOf(upserts[idx]->get(), &id)) refusedKeys.insert(idKey(id));
        }
        std::vector<std::pair<Id, Status>> newly;
        for (auto& [idx, why] : refusedNow) {
            Id id;
            if (!idOf(upserts[idx]->get(), &id)) continue;
            newly.emplace_back(std::move(id), why);
        }
        if (!deletes.empty()) {
            if (!ctx_.leading(gen_)) co_return lostLease();
            bson::Doc c;
            BSON_APPEND_UTF8(c.mut(), "delete", coll.c_str());
            bson_t arr;
            BSON_APPEND_ARRAY_BEGIN(c.mut(), "deletes", &arr);
            ArrayKey k;
            for (size_t j = 0; j < deletes.size(); ++j) {
                bson_t stmt, q;
                bson_append_document_begin(&arr, k(j), -1, &stmt);
                BSON_APPEND_DOCUMENT_BEGIN(&stmt, "q", &q);
                bson_iter_t vit;
                if (const bson_value_t* v = idValue(deletes[j], &vit))
                    bson_append_value(&q, "_id", 3, v);
                bson_append_document_end(&stmt, &q);
                BSON_APPEND_INT32(&stmt, "limit", 1);
                bson_append_document_end(&arr, &stmt);
            }
            bson_append_array_end(c.mut(), &arr);
            BSON_APPEND_BOOL(c.mut(), "ordered", false);
            appendMajority(c.mut());
            BSON_APPEND_UTF8(c.mut(), "$db", db.c_str());
            auto r = co_await t.archive.runOk(c.get());
            if (!r.isOK()) co_return r.getStatus();
            ctx_.state.feederApplies += static_cast<int64_t>(deletes.size());
        }
        // After every archive write of the batch: a record is cleared only once
        // the archive holds the document's current state.
        Status rec = co_await recordRefusals(ns, ids, newly, refusedKeys);
        if (!rec.isOK()) co_return rec;
        if (!removals.empty()) {
            step_ = "remove tombstones";
            co_return co_await removeTombstones(ns, removals);
        }
        co_return Status::OK();
    }

    /// Writes a refusal record for each newly refused document (and logs it),
    /// and clears the records of the other `ids`, which the archive now
    /// reflects. Publishes the result to the shared state.
    asio::awaitable<Status> recordRefusals(const std::string& ns, const std::vector<Id>& ids,
                                           const std::vector<std::pair<Id, Status>>& newly,
                                           const std::set<std::string>& refusedKeys) {
        Tiers& t = ctx_.tiers;
        auto& known = refused_[ns];
        std::vector<const Id*> cleared;
        for (const Id& id : ids)
            if (!refusedKeys.count(idKey(id)) && known.count(idKey(id))) cleared.push_back(&id);
        std::vector<const std::pair<Id, Status>*> changed;
        for (auto& n : newly) {
            auto it = known.find(idKey(n.first));
            if (it == known.end() || it->second.code != n.second.codeNumber() ||
                it->second.errmsg != n.second.reason())
                changed.push_back(&n);
        }
        if (cleared.empty() && changed.empty()) {
            if (known.empty()) refused_.erase(ns);
            co_return Status::OK();
        }
        if (!changed.empty()) {
            bson::Doc c;
            BSON_APPEND_UTF8(c.mut(), "update", Metadata::kRefused);
            bson_t arr;
            BSON_APPEND_ARRAY_BEGIN(c.mut(), "updates", &arr);
            ArrayKey k;
            int64_t now = nowMillis();
            for (size_t j = 0; j < changed.size(); ++j) {
                const auto& [id, why] = *changed[j];
                bson_t stmt, q, u;
                bson_append_document_begin(&arr, k(j), -1, &stmt);
                BSON_APPEND_DOCUMENT_BEGIN(&stmt, "q", &q);
                Metadata::appendTombstoneKey(&q, "_id", ns, id);
                bson_append_document_end(&stmt, &q);
                BSON_APPEND_DOCUMENT_BEGIN(&stmt, "u", &u);
                Metadata::appendTombstoneKey(&u, "_id", ns, id);
                BSON_APPEND_INT32(&u, "code", why.codeNumber());
                BSON_APPEND_UTF8(&u, "errmsg", why.reason().c_str());
                BSON_APPEND_DATE_TIME(&u, "since", now);
                bson_append_document_end(&stmt, &u);
                BSON_APPEND_BOOL(&stmt, "upsert", true);
                bson_append_document_end(&arr, &stmt);
            }
            bson_append_array_end(c.mut(), &arr);
            appendMajority(c.mut());
            BSON_APPEND_UTF8(c.mut(), "$db", t.meta.db.c_str());
            auto r = co_await t.fast.runOk(c.get());
            if (!r.isOK()) co_return r.getStatus();
            for (auto* n : changed) {
                bson_iter_t vit;
                const bson_value_t* v = idValue(n->first, &vit);
                bson::Doc shown;
                if (v) bson_append_value(shown.mut(), "_id", 3, v);
                char* json = bson_as_relaxed_extended_json(shown.get(), nullptr);
                log::warning("tiering", 8210030,
                             "The archive refused a document; it stays in the fast tier and "
                             "archive reads that could include it fail until it is resolved",
                             fmt::format(R"({{"ns":{},"document":{},"code":{},"error":{}}})",
                                         log::quote(ns), json ? json : "{}", n->second.codeNumber(),
                                         log::quote(n->second.reason())));
                bson_free(json);
                Refusal f{n->first.copy(), n->second.codeNumber(), n->second.reason(), now};
                known[idKey(n->first)] = std::move(f);
            }
        }
        if (!cleared.empty()) {
            bson::Doc c;
            BSON_APPEND_UTF8(c.mut(), "delete", Metadata::kRefused);
            bson_t arr;
            BSON_APPEND_ARRAY_BEGIN(c.mut(), "deletes", &arr);
            ArrayKey k;
            for (size_t j = 0; j < cleared.size(); ++j) {
                bson_t stmt, q;
                bson_append_document_begin(&arr, k(j), -1, &stmt);
                BSON_APPEND_DOCUMENT_BEGIN(&stmt, "q", &q);
                Metadata::appendTombstoneKey(&q, "_id", ns, *cleared[j]);
                bson_append_document_end(&stmt, &q);
                BSON_APPEND_INT32(&stmt, "limit", 1);
                bson_append_document_end(&arr, &stmt);
            }
            bson_append_array_end(c.mut(), &arr);
            appendMajority(c.mut());
            BSON_APPEND_UTF8(c.mut(), "$db", t.meta.db.c_str());
            auto r = co_await t.fast.runOk(c.get());
            if (!r.isOK()) co_return r.getStatus();
            for (const Id* id : cleared) {
                known.erase(idKey(*id));
                log::info("tiering", 8210031, "A refused document reached the archive",
                          fmt::format(R"({{"ns":{}}})", log::quote(ns)));
            }
        }
        if (known.empty()) refused_.erase(ns);
        publishRefused();
        co_return Status::OK();
    }

    /// Writes each document of `images` over its archive copy (upsert by _id),
    /// in commands of at most kArchiveCommandBytes. A command that fails, or a
    /// statement that fails for a reason that is not the document's (failover,
    /// timeout, conflict), fails the whole call: the batch is retried. Statements
    /// the archive refuses are appended to `refused` (index into `images`).
    asio::awaitable<Status> writeImages(const std::string& db, const std::string& coll,
                                        const std::vector<const bson_t*>& images, bool bypass,
                                        std::vector<std::pair<size_t, Status>>* refused) {
        Tiers& t = ctx_.tiers;
        size_t i = 0;
        while (i < images.size()) {
            if (!ctx_.leading(gen_)) co_return lostLease();
            bson::Doc c;
            BSON_APPEND_UTF8(c.mut(), "update", coll.c_str());
            bson_t arr;
            BSON_APPEND_ARRAY_BEGIN(c.mut(), "updates", &arr);
            ArrayKey k;
            size_t bytes = 0, n = 0;
            const size_t first = i;
            for (; i < images.size(); ++i, ++n) {
                const bson_t* d = images[i];
                if (n > 0 && bytes + d->len > kArchiveCommandBytes) break;
                bytes += d->len;
                bson_t stmt, q;
                bson_append_document_begin(&arr, k(n), -1, &stmt);
                BSON_APPEND_DOCUMENT_BEGIN(&stmt, "q", &q);
                bson_iter_t idIt;
                if (bson_iter_init_find(&idIt, d, "_id")) bson_append_iter(&q, "_id", 3, &idIt);
                bson_append_document_end(&stmt, &q);
                appendArchiveImage(&stmt, d);
                BSON_APPEND_BOOL(&stmt, "upsert", true);
                bson_append_document_end(&arr, &stmt);
            }
            bson_append_array_end(c.mut(), &arr);
            BSON_APPEND_BOOL(c.mut(), "ordered", false);
            if (bypass) BSON_APPEND_BOOL(c.mut(), "bypassDocumentValidation", true);
            appendMajority(c.mut());
            BSON_APPEND_UTF8(c.mut(), "$db", db.c_str());
            auto r = co_await t.archive.run(c.get());
            if (!r.isOK()) co_return r.getStatus();
            const bson_t* reply = r.getValue().get();
            bson_t werrs;
            bool haveErrors = bson::subDocument(reply, "writeErrors", &werrs);
            bson_t wce;
            if (bson::subDocument(reply, "writeConcernError", &wce) || !haveErrors) {
                Status st = replyStatus(reply);
                if (!st.isOK()) co_return st;
            }
            size_t refusedHere = 0;
            if (haveErrors) {
                bson_iter_t e;
                bson_iter_init(&e, &werrs);
                while (bson_iter_next(&e)) {
                    if (!BSON_ITER_HOLDS_DOCUMENT(&e)) continue;
                    uint32_t len;
                    const uint8_t* data;
                    bson_iter_document(&e, &len, &data);
                    bson::View w(data, len);
                    int64_t index = intField(w.get(), "index", -1);
                    int code = static_cast<int>(intField(w.get(), "code", 8));
                    std::string msg;
                    bson_iter_t m;
                    if (bson_iter_init_find(&m, w.get(), "errmsg") && BSON_ITER_HOLDS_UTF8(&m))
                        msg = bson_iter_utf8(&m, nullptr);
                    if (index < 0 || static_cast<size_t>(index) >= n || !isRefusal(code))
                        co_return Status(static_cast<ErrorCode>(code), msg);
                    refused->emplace_back(first + static_cast<size_t>(index),
                                          Status(static_cast<ErrorCode>(code), msg));
                    ++refusedHere;
                }
            }
            ctx_.state.feederApplies += static_cast<int64_t>(n - refusedHere);
        }
        co_return Status::OK();
    }

    /// One fast-tier transaction: delete each tombstone only if it is still
    /// the one we saw (same `v`), and bump the departure epoch (CONSISTENCY.md,
    /// Promotion: a document leaving the fast tier's protection must fail
    /// every promotion that read the archive before).
    asio::awaitable<Status> removeTombstones(const std::string& ns,
                                             const std::vector<const bson::Doc*>& tombs) {
        Tiers& t = ctx_.tiers;
        Status last = Status::OK();
        for (int attempt = 0; attempt < 5; ++attempt) {
            if (!ctx_.leading(gen_)) co_return lostLease();
            auto lease = t.fastSessions.take();
            Transaction txn(t.fast, lease.lsid.get(), lease.txnNumber);
            Status st = Status::OK();
            do {
                bson::Doc del;
                BSON_APPEND_UTF8(del.mut(), "delete", Metadata::kTombstones);
                bson_t arr;
                BSON_APPEND_ARRAY_BEGIN(del.mut(), "deletes", &arr);
                ArrayKey k;
                for (size_t i = 0; i < tombs.size(); ++i) {
                    bson_t stmt, q;
                    bson_append_document_begin(&arr, k(i), -1, &stmt);
                    BSON_APPEND_DOCUMENT_BEGIN(&stmt, "q", &q);
                    bson_iter_t it;
                    if (bson_iter_init_find(&it, tombs[i]->get(), "_id"))
                        bson_append_iter(&q, "_id", 3, &it);
                    if (bson_iter_init_find(&it, tombs[i]->get(), "v")) {
                        bson_append_iter(&q, "v", 1, &it);
                    } else {
                        bson_t ex;
                        BSON_APPEND_DOCUMENT_BEGIN(&q, "v", &ex);
                        BSON_APPEND_BOOL(&ex, "$exists", false);
                        bson_append_document_end(&q, &ex);
                    }
                    bson_append_document_end(&stmt, &q);
                    BSON_APPEND_INT32(&stmt, "limit", 1);
                    bson_append_document_end(&arr, &stmt);
                }
                bson_append_array_end(del.mut(), &arr);
                BSON_APPEND_UTF8(del.mut(), "$db", t.meta.db.c_str());
                auto dr = co_await txn.run(del.get());
                if (!dr.isOK()) {
                    st = dr.getStatus();
                    break;
                }
                bson::Doc up;
                BSON_APPEND_UTF8(up.mut(), "update", Metadata::kState);
                BSON_APPEND_ARRAY_BEGIN(up.mut(), "updates", &arr);
                appendEpochBump(&arr, "0", ns);
                bson_append_array_end(up.mut(), &arr);
                BSON_APPEND_UTF8(up.mut(), "$db", t.meta.db.c_str());
                auto ur = co_await txn.run(up.get());
                if (!ur.isOK()) {
                    st = ur.getStatus();
                    break;
                }
                if (!ctx_.leading(gen_)) {
                    st = lostLease();
                    break;
                }
                st = (co_await txn.commit()).getStatus();
            } while (false);
            if (!st.isOK()) co_await txn.abort();
            t.fastSessions.give(std::move(lease));
            if (st.isOK() || !isTransient(st)) co_return st;
            last = st;
            co_await ctx_.sleep(milliseconds(20 * (attempt + 1)));
        }
        co_return last;
    }

    /// After the change stream lost our position (or on the very first start):
    /// applies every document and tombstone of every tiered collection, and
    /// returns a time taken before the scan, from which the stream restarts.
    asio::awaitable<StatusWith<OpTime>> rescan() {
        Tiers& t = ctx_.tiers;
        bson::Doc mark;
        BSON_APPEND_DATE_TIME(mark.mut(), "rescanStartedAt", nowMillis());
        OpTime t0 = 0;
        // Majority-acknowledged, so every write at or before t0 is visible to the scan.
        Status st = co_await saveStateDoc(t.fast, t.meta, "feederRescan", mark.get(), &t0);
        if (!st.isOK()) co_return st;
        if (t0 == 0)
            co_return Status(ErrorCode::ProtocolError,
                             "the fast tier's reply carried no operationTime (is it a replica "
                             "set?)");
        int64_t scanned = 0;
        for (const auto& p : ctx_.cfg.collections) {
            auto [db, coll] = splitNs(p.ns);
            const std::string ns = p.ns;
            bson::Doc c;
            BSON_APPEND_UTF8(c.mut(), "find", coll.c_str());
            bson_t proj;
            BSON_APPEND_DOCUMENT_BEGIN(c.mut(), "projection", &proj);
            BSON_APPEND_INT32(&proj, "_id", 1);
            bson_append_document_end(c.mut(), &proj);
            BSON_APPEND_INT64(c.mut(), "batchSize", static_cast<int64_t>(kIdsPerLookup));
            BSON_APPEND_UTF8(c.mut(), "$db", db.c_str());
            st = co_await forEachBatch(
                t.fast, c.get(), [&](std::vector<bson::Doc>& docs) -> asio::awaitable<Status> {
                    std::vector<Id> ids;
                    for (auto& d : docs) {
                        Id id;
                        if (idOf(d.get(), &id)) ids.push_back(std::move(id));
                    }
                    scanned += static_cast<int64_t>(ids.size());
                    co_return co_await applyIds(ns, ids);
                });
            if (!st.isOK()) co_return st;
            bson::Doc tc;
            BSON_APPEND_UTF8(tc.mut(), "find", Metadata::kTombstones);
            bson_t f;
            BSON_APPEND_DOCUMENT_BEGIN(tc.mut(), "filter", &f);
            BSON_APPEND_UTF8(&f, "_id.ns", ns.c_str());
            bson_append_document_end(tc.mut(), &f);
            BSON_APPEND_INT64(tc.mut(), "batchSize", static_cast<int64_t>(kIdsPerLookup));
            BSON_APPEND_UTF8(tc.mut(), "$db", t.meta.db.c_str());
            st = co_await forEachBatch(
                t.fast, tc.get(), [&](std::vector<bson::Doc>& docs) -> asio::awaitable<Status> {
                    std::vector<Id> ids;
                    for (auto& d : docs) {
                        std::string tns;
                        Id id;
                        if (tombstoneTarget(d.get(), &tns, &id) && tns == ns)
                            ids.push_back(std::move(id));
                    }
                    scanned += static_cast<int64_t>(ids.size());
                    co_return co_await applyIds(ns, ids);
                });
            if (!st.isOK()) co_return st;
        }
        // The scan applied everything up to t0, but recorded no recent writes:
        // the evictor waits a whole grace period from now.
        if (ctx_.recentWrites.gen == gen_) ctx_.recentWrites.reset(gen_, nowMillis());
        log::info("tiering", 8210022, "Feeder rescanned the fast tier",
                  fmt::format(R"({{"ids":{},"restartAt":{{"t":{},"i":{}}}}})", scanned,
                              opTimeSeconds(t0), opTimeIncrement(t0)));
        ctx_.state.noteApplied(t0);
        co_return t0;
    }

    asio::awaitable<void> killCursor() {
        if (cursorId_ == 0) co_return;
        bson::Doc kill;
        BSON_APPEND_UTF8(kill.mut(), "killCursors", cursorColl_.c_str());
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(kill.mut(), "cursors", &arr);
        BSON_APPEND_INT64(&arr, "0", cursorId_);
        bson_append_array_end(kill.mut(), &arr);
        BSON_APPEND_UTF8(kill.mut(), "$db", "admin");
        cursorId_ = 0;
        (void)co_await ctx_.tiers.fast.run(kill.get());
    }

    WorkerContext& ctx_;
    const uint64_t gen_;
    ChangeBatchClassifier classifier_;
    bool loaded_ = false;
    bool needRescan_ = false;
    bson::Doc token_;          // the token of the last applied batch (empty: none yet)
    bson::Doc receivedToken_;  // the token of the last batch received
    // What the next flush writes (CONSISTENCY.md, The feeder, Lazy mode): the
    // documents touched since the last flush, per namespace in first-seen order.
    std::map<std::string, std::vector<Id>> pending_;
    std::unordered_set<std::string> pendingKeys_;
    int64_t pendingDocs_ = 0;
    int64_t pendingEvents_ = 0;   // events received since the last flush
    int64_t pendingSinceMs_ = 0;  // when the first of pending_ was gathered
    int64_t lastWallMs_ = 0;      // wallTime of the last event received
    int64_t cursorId_ = 0;
    std::string cursorColl_ = "$cmd.aggregate";
    bool endedOnEvent_ = false;
    int64_t nextPauseCheckMs_ = 0;
    OpTime lastSavedApplied_ = 0;
    // The documents the archive refuses: ns -> idKey -> refusal (mirrors <meta>.refused).
    std::map<std::string, std::map<std::string, Refusal>> refused_;
    int64_t lastRefusedRetryMs_ = 0;
    const char* step_ = "start";
    FailureLog flog_{"feeder", 8210020};
};

}  // namespace

asio::awaitable<void> runFeeder(WorkerContext& ctx, uint64_t gen) {
    Feeder f(ctx, gen);
    co_await f.run();
}

}  // namespace halo::tiering::workers
