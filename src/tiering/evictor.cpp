// CONSISTENCY.md, The evictor: removes fast-tier documents older than the
// horizon, oldest first and rate-limited, only when the archive holds a
// byte-identical copy, in a transaction that re-checks the document and its
// tombstone and bumps the departure epoch.
#include <fmt/format.h>

#include <unordered_map>

#include "common/log.h"
#include "tiering/cold_write.h"
#include "tiering/worker_context.h"

namespace halo::tiering::workers {

namespace {

using std::chrono::milliseconds;

constexpr size_t kDocsPerTxn = 100;

class Evictor {
  public:
    Evictor(WorkerContext& ctx, uint64_t gen) : ctx_(ctx), gen_(gen) {}

    asio::awaitable<void> run() {
        FailureLog flog("evictor", 8210030);
        bool loaded = false;
        while (ctx_.leading(gen_)) {
            Status st = Status::OK();
            if (!loaded) {
                st = co_await loadCounters();
                loaded = st.isOK();
            }
            for (const auto& p : ctx_.cfg.collections) {
                if (!st.isOK() || !ctx_.leading(gen_)) break;
                st = co_await pass(p);
                if (st.isOK()) st = co_await sweepColdMarks(p.ns);
                if (!st.isOK() && ctx_.leading(gen_)) flog.failed(st, step_, p.ns);
            }
            if (st.isOK()) flog.succeeded();
            co_await ctx_.sleep(st.isOK() ? ctx_.cfg.evictorInterval
                                          : std::max(ctx_.cfg.evictorInterval, flog.backoff()));
        }
    }

  private:
    struct Persisted {
        int64_t evicted = -1;
        int64_t backlog = -1;
    };

    asio::awaitable<Status> loadCounters() {
        step_ = "read state";
        std::vector<std::string> ids;
        for (const auto& p : ctx_.cfg.collections) ids.push_back(stateId("evict", p.ns));
        auto docs = co_await loadStateDocs(ctx_.tiers.fast, ctx_.tiers.meta, ids);
        if (!docs.isOK()) co_return docs.getStatus();
        for (const auto& p : ctx_.cfg.collections) {
            auto it = docs.getValue().find(stateId("evict", p.ns));
            CollectionProgress* prog = ctx_.state.progress(p.ns);
            if (it == docs.getValue().end() || !prog) continue;
            prog->evicted = intField(it->second.get(), "evicted");
            prog->evictBacklog = intField(it->second.get(), "backlog");
            persisted_[p.ns] = {prog->evicted.load(), prog->evictBacklog.load()};
        }
        co_return Status::OK();
    }

    /// Removes the marks of cold writes finished more than
    /// kColdMarkLifetimeMillis ago (cold_write.h), at most every few seconds:
    /// a promotion commits within kPromotionDeadline of reading its counts, so
    /// none that could hold an older version of a mark's document is left.
    asio::awaitable<Status> sweepColdMarks(const std::string& ns) {
        const auto now = std::chrono::steady_clock::now();
        auto& last = lastSweep_[ns];
        if (last.time_since_epoch().count() != 0 && now - last < kSweepInterval)
            co_return Status::OK();
        last = now;
        step_ = "sweep cold-write marks";
        Tiers& t = ctx_.tiers;
        bson::Doc del;
        BSON_APPEND_UTF8(del.mut(), "delete", Metadata::kTombstones);
        bson_t arr, stmt, q, exists, lt;
        BSON_APPEND_ARRAY_BEGIN(del.mut(), "deletes", &arr);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &stmt);
        BSON_APPEND_DOCUMENT_BEGIN(&stmt, "q", &q);
        BSON_APPEND_UTF8(&q, "_id.ns", ns.c_str());
        BSON_APPEND_DOCUMENT_BEGIN(&q, kColdMarkField, &exists);
        BSON_APPEND_BOOL(&exists, "$exists", true);
        bson_append_document_end(&q, &exists);
        BSON_APPEND_DOCUMENT_BEGIN(&q, "at", &lt);
        BSON_APPEND_DATE_TIME(&lt, "$lt", nowMillis() - kColdMarkLifetimeMillis);
        bson_append_document_end(&q, &lt);
        bson_append_document_end(&stmt, &q);
        BSON_APPEND_INT32(&stmt, "limit", 0);
        bson_append_document_end(&arr, &stmt);
        bson_append_array_end(del.mut(), &arr);
        appendMajority(del.mut());
        BSON_APPEND_UTF8(del.mut(), "$db", t.meta.db.c_str());
        co_return (co_await t.fast.runOk(del.get())).getStatus();
    }

    /// {ageField: {$lt: cutoff}}
    static void appendOlderThan(bson_t* out, const char* key, const CollectionPolicy& p,
                                int64_t cutoffMs) {
        bson_t f, lt;
        bson_append_document_begin(out, key, -1, &f);
        bson_append_document_begin(&f, p.ageField.c_str(), -1, &lt);
        appendAgeBound(&lt, "$lt", p.ageField == "_id", cutoffMs);
        bson_append_document_end(&f, &lt);
        bson_append_document_end(out, &f);
    }

    asio::awaitable<Status> pass(const CollectionPolicy& p) {
        Tiers& t = ctx_.tiers;
        auto [db, coll] = splitNs(p.ns);
        CollectionProgress* prog = ctx_.state.progress(p.ns);
        const int64_t cutoff = nowMillis() - p.horizon.count();
        const int64_t limit =
            std::max<int64_t>(1, static_cast<int64_t>(ctx_.cfg.evictorMaxDocsPerSecond) *
                                     ctx_.cfg.evictorInterval.count() / 1000);

        step_ = "find old documents";
        bson::Doc fc;
        BSON_APPEND_UTF8(fc.mut(), "find", coll.c_str());
        appendOlderThan(fc.mut(), "filter", p, cutoff);
        bson_t sort;
        BSON_APPEND_DOCUMENT_BEGIN(fc.mut(), "sort", &sort);
        BSON_APPEND_INT32(&sort, p.ageField.c_str(), 1);
        bson_append_document_end(fc.mut(), &sort);
        BSON_APPEND_INT64(fc.mut(), "limit", limit);
        BSON_APPEND_INT64(fc.mut(), "batchSize", limit);
        BSON_APPEND_BOOL(fc.mut(), "singleBatch", true);
        BSON_APPEND_UTF8(fc.mut(), "$db", db.c_str());
        auto reply = co_await t.fast.runOk(fc.get());
        if (!reply.isOK()) co_return reply.getStatus();
        std::vector<bson::Doc> old = batchOf(reply.getValue().get());
        OpTime readAt = 0;
        bson_iter_t ot;
        if (bson_iter_init_find(&ot, reply.getValue().get(), "operationTime"))
            readAt = timestampValue(&ot).value_or(0);

        int64_t evicted = 0;
        if (!old.empty() && co_await feederHasSeen(readAt)) {
            // Just written (perhaps promoted for a write still on its way): not
            // yet, and not worth an archive read either (each one may cost the
            // archive a disk read, every pass, while the document stays recent).
            std::vector<const bson::Doc*> settled;
            std::vector<Id> ids;
            const int64_t now = nowMillis();
            for (auto& d : old) {
                Id id;
                if (!idOf(d.get(), &id)) continue;
                if (unsettled(p.ns, id, now)) continue;
                settled.push_back(&d);
                ids.push_back(std::move(id));
            }
            std::vector<const bson::Doc*> candidates;
            if (!ids.empty()) {
                step_ = "read archive copies";
                bson::Doc ac;
                BSON_APPEND_UTF8(ac.mut(), "find", coll.c_str());
                appendIdIn(ac.mut(), "filter", ids);
                BSON_APPEND_INT64(ac.mut(), "batchSize", limit);
                BSON_APPEND_UTF8(ac.mut(), "$db", db.c_str());
                auto archived = co_await t.archive.collect(ac.get());
                if (!archived.isOK()) co_return archived.getStatus();
                std::unordered_map<std::string, const bson::Doc*> inArchive;
                for (auto& d : archived.getValue()) {
                    Id id;
                    if (idOf(d.get(), &id)) inArchive.emplace(idKey(id), &d);
                }
                // Only copies the archive holds byte for byte; the others wait for the feeder.
                for (size_t i = 0; i < settled.size(); ++i) {
                    auto it = inArchive.find(idKey(ids[i]));
                    if (it != inArchive.end() && sameBytes(it->second->get(), settled[i]->get()))
                        candidates.push_back(settled[i]);
                }
            }
            // The feeder may have received a write of a candidate since the
            // archive read (it will read F(X) and write what it read): leave those.
            std::erase_if(candidates, [&](const bson::Doc* d) {
                Id id;
                return !idOf(d->get(), &id) || unsettled(p.ns, id, nowMillis());
            });
            for (size_t i = 0; i < candidates.size(); i += kDocsPerTxn) {
                std::vector<const bson::Doc*> chunk(
                    candidates.begin() + static_cast<std::ptrdiff_t>(i),
                    candidates.begin() +
                        static_cast<std::ptrdiff_t>(std::min(candidates.size(), i + kDocsPerTxn)));
                auto n = co_await evict(p.ns, chunk);
                if (!n.isOK()) co_return n.getStatus();
                evicted += n.getValue();
            }
        }

        step_ = "count backlog";
        bson::Doc cc;
        BSON_APPEND_UTF8(cc.mut(), "count", coll.c_str());
        appendOlderThan(cc.mut(), "query", p, cutoff);
        BSON_APPEND_UTF8(cc.mut(), "$db", db.c_str());
        auto counted = co_await t.fast.runOk(cc.get());
        if (!counted.isOK()) co_return counted.getStatus();
        int64_t backlog = intField(counted.getValue().get(), "n");

        if (prog) {
            prog->evicted += evicted;
            prog->evictBacklog = backlog;
            Persisted& saved = persisted_[p.ns];
            if (saved.evicted != prog->evicted.load() || saved.backlog != backlog) {
                step_ = "save state";
                bson::Doc f;
                BSON_APPEND_INT64(f.mut(), "evicted", prog->evicted.load());
                BSON_APPEND_INT64(f.mut(), "backlog", backlog);
                BSON_APPEND_DATE_TIME(f.mut(), "at", nowMillis());
                Status st = co_await saveStateDoc(t.fast, t.meta, stateId("evict", p.ns), f.get());
                if (!st.isOK()) co_return st;
                saved = {prog->evicted.load(), backlog};
            }
        }
        co_return Status::OK();
    }

    /// Written lately (RecentWrites), or received by the feeder and not yet
    /// written to the archive (a lazy feeder's gathering).
    bool unsettled(const std::string& ns, const Id& id, int64_t now) const {
        const RecentWrites& rw = ctx_.recentWrites;
        std::string k = RecentWrites::key(ns, id);
        return rw.recent(k, now, kRecentWriteGraceMillis) || rw.pending.count(k) > 0;
    }

    /// Whether this leader's feeder has recorded every write up to `readAt`
    /// for a whole grace period (RecentWrites); waits a little for it.
    asio::awaitable<bool> feederHasSeen(OpTime readAt) {
        const RecentWrites& rw = ctx_.recentWrites;
        for (int i = 0; i < 40; ++i) {
            if (!ctx_.leading(gen_) || rw.gen != gen_) co_return false;
            if (nowMillis() - rw.since < kRecentWriteGraceMillis) co_return false;
            if (readAt != 0 && rw.seenThrough >= readAt) co_return true;
            co_await ctx_.sleep(milliseconds(50));
        }
        co_return false;
    }

    /// The eviction transaction for `docs` (each as read before the archive
    /// check). Returns how many were removed.
    asio::awaitable<StatusWith<int64_t>> evict(const std::string& ns,
                                               const std::vector<const bson::Doc*>& docs) {
        Tiers& t = ctx_.tiers;
        auto [db, coll] = splitNs(ns);
        for (int attempt = 0; attempt < 3; ++attempt) {
            if (!ctx_.leading(gen_)) co_return int64_t{0};
            step_ = "evict";
            auto lease = t.fastSessions.take();
            Transaction txn(t.fast, lease.lsid.get(), lease.txnNumber);
            auto inTxn = [&txn](const bson_t* c) { return txn.run(c); };
            Status st = Status::OK();
            std::vector<Id> keep;
            do {
                std::vector<Id> ids;
                std::unordered_map<std::string, const bson::Doc*> seen;
                for (auto* d : docs) {
                    Id id;
                    if (!idOf(d->get(), &id)) continue;
                    seen.emplace(idKey(id), d);
                    ids.push_back(std::move(id));
                }
                // Re-read F(X) in the transaction: a concurrent write wins.
                bson::Doc fc;
                BSON_APPEND_UTF8(fc.mut(), "find", coll.c_str());
                appendIdIn(fc.mut(), "filter", ids);
                BSON_APPEND_INT64(fc.mut(), "batchSize", 100000);
                BSON_APPEND_UTF8(fc.mut(), "$db", db.c_str());
                auto now = co_await collectWith(inTxn, fc.get());
                if (!now.isOK()) {
                    st = now.getStatus();
                    break;
                }
                std::set<std::string> unchanged;
                for (auto& d : now.getValue()) {
                    Id id;
                    if (!idOf(d.get(), &id)) continue;
                    auto it = seen.find(idKey(id));
                    if (it != seen.end() && sameBytes(it->second->get(), d.get()))
                        unchanged.insert(idKey(id));
                }
                // A tombstone means the latest state is "deleted": not ours to touch.
                bson::Doc tc;
                BSON_APPEND_UTF8(tc.mut(), "find", Metadata::kTombstones);
                appendTombstoneIn(tc.mut(), "filter", t.meta, ns, ids);
                BSON_APPEND_INT64(tc.mut(), "batchSize", 100000);
                BSON_APPEND_UTF8(tc.mut(), "$db", t.meta.db.c_str());
                auto tombs = co_await collectWith(inTxn, tc.get());
                if (!tombs.isOK()) {
                    st = tombs.getStatus();
                    break;
                }
                for (auto& d : tombs.getValue()) {
                    std::string tns;
                    Id id;
                    if (tombstoneTarget(d.get(), &tns, &id)) unchanged.erase(idKey(id));
                }
                for (auto& id : ids)
                    if (unchanged.count(idKey(id))) keep.push_back(id.copy());
                if (keep.empty()) break;
                // Pins (CONSISTENCY.md, Pins): write every pin key, so a proxy
                // pinning one concurrently conflicts with us, and leave pinned
                // documents alone: a write is about to touch them.
                st = co_await skipPinned(ns, inTxn, &keep);
                if (!st.isOK() || keep.empty()) break;
                bson::Doc del;
                BSON_APPEND_UTF8(del.mut(), "delete", coll.c_str());
                bson_t arr, stmt;
                BSON_APPEND_ARRAY_BEGIN(del.mut(), "deletes", &arr);
                BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &stmt);
                appendIdIn(&stmt, "q", keep);
                BSON_APPEND_INT32(&stmt, "limit", 0);
                bson_append_document_end(&arr, &stmt);
                bson_append_array_end(del.mut(), &arr);
                BSON_APPEND_UTF8(del.mut(), "$db", db.c_str());
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
                    st = Status(ErrorCode::OperationFailed, "the worker lease is no longer held");
                    break;
                }
                st = (co_await txn.commit()).getStatus();
            } while (false);
            if (!st.isOK() || keep.empty()) co_await txn.abort();
            t.fastSessions.give(std::move(lease));
            if (st.isOK()) co_return static_cast<int64_t>(keep.size());
            if (!isTransient(st)) co_return st;
            co_await ctx_.sleep(milliseconds(20 * (attempt + 1)));
        }
        // Still conflicting: these documents are being written; try next pass.
        co_return int64_t{0};
    }

    /// In the eviction transaction: touches the pin of each id in `keep`,
    /// drops the ids a live pin protects, and deletes the pins of the rest.
    asio::awaitable<Status> skipPinned(const std::string& ns, const CommandRunner& inTxn,
                                       std::vector<Id>* keep) {
        Tiers& t = ctx_.tiers;
        bson_oid_t touch;
        bson_oid_init(&touch, nullptr);
        bson::Doc up;
        BSON_APPEND_UTF8(up.mut(), "update", Metadata::kPins);
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(up.mut(), "updates", &arr);
        ArrayKey key;
        for (size_t i = 0; i < keep->size(); ++i) {
            bson_t stmt, q, u, set, soi;
            bson_append_document_begin(&arr, key(i), -1, &stmt);
            BSON_APPEND_DOCUMENT_BEGIN(&stmt, "q", &q);
            t.meta.appendTombstoneKey(&q, "_id", ns, (*keep)[i]);
            bson_append_document_end(&stmt, &q);
            BSON_APPEND_DOCUMENT_BEGIN(&stmt, "u", &u);
            BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
            BSON_APPEND_OID(&set, "evictor", &touch);
            bson_append_document_end(&u, &set);
            BSON_APPEND_DOCUMENT_BEGIN(&u, "$setOnInsert", &soi);
            BSON_APPEND_INT32(&soi, "n", 0);
            bson_append_document_end(&u, &soi);
            bson_append_document_end(&stmt, &u);
            BSON_APPEND_BOOL(&stmt, "upsert", true);
            bson_append_document_end(&arr, &stmt);
        }
        bson_append_array_end(up.mut(), &arr);
        BSON_APPEND_UTF8(up.mut(), "$db", t.meta.db.c_str());
        auto ur = co_await inTxn(up.get());
        if (!ur.isOK()) co_return ur.getStatus();
        bson::Doc pc;
        BSON_APPEND_UTF8(pc.mut(), "find", Metadata::kPins);
        appendTombstoneIn(pc.mut(), "filter", t.meta, ns, *keep);
        BSON_APPEND_INT64(pc.mut(), "batchSize", 100000);
        BSON_APPEND_UTF8(pc.mut(), "$db", t.meta.db.c_str());
        auto pins = co_await collectWith(inTxn, pc.get());
        if (!pins.isOK()) co_return pins.getStatus();
        std::set<std::string> pinned;
        int64_t staleBefore = nowMillis() - kStalePinMillis;
        for (auto& d : pins.getValue()) {
            bson_iter_t it;
            int64_t n = 0, at = 0;
            if (bson_iter_init_find(&it, d.get(), "n") && BSON_ITER_HOLDS_NUMBER(&it))
                n = bson_iter_as_int64(&it);
            if (bson_iter_init_find(&it, d.get(), "at") && BSON_ITER_HOLDS_DATE_TIME(&it))
                at = bson_iter_date_time(&it);
            std::string tns;
            Id id;
            if (n > 0 && at > staleBefore && tombstoneTarget(d.get(), &tns, &id))
                pinned.insert(idKey(id));
        }
        std::vector<Id> free;
        for (auto& id : *keep)
            if (!pinned.count(idKey(id))) free.push_back(std::move(id));
        *keep = std::move(free);
        if (keep->empty()) co_return Status::OK();
        bson::Doc del;
        BSON_APPEND_UTF8(del.mut(), "delete", Metadata::kPins);
        bson_t darr, stmt;
        BSON_APPEND_ARRAY_BEGIN(del.mut(), "deletes", &darr);
        BSON_APPEND_DOCUMENT_BEGIN(&darr, "0", &stmt);
        appendTombstoneIn(&stmt, "q", t.meta, ns, *keep);
        BSON_APPEND_INT32(&stmt, "limit", 0);
        bson_append_document_end(&darr, &stmt);
        bson_append_array_end(del.mut(), &darr);
        BSON_APPEND_UTF8(del.mut(), "$db", t.meta.db.c_str());
        auto dr = co_await inTxn(del.get());
        co_return dr.getStatus();
    }

    WorkerContext& ctx_;
    const uint64_t gen_;
    static constexpr std::chrono::seconds kSweepInterval{5};

    std::map<std::string, Persisted> persisted_;
    std::map<std::string, std::chrono::steady_clock::time_point> lastSweep_;
    const char* step_ = "start";
};

}  // namespace

asio::awaitable<void> runEvictor(WorkerContext& ctx, uint64_t gen) {
    Evictor e(ctx, gen);
    co_await e.run();
}

}  // namespace halo::tiering::workers
