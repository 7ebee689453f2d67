// CONSISTENCY.md, The warmer: per collection, one pass over the archive by age
// descending, from the top down to now - horizon, promoting every document of
// each batch, and publishing `low` (the fast tier holds every document whose
// age is strictly above it) after each batch.
//
// The archive is read with sort {age: -1} only (no _id tie-break), so that an
// ascending index on the age field serves it with a bounded scan. Ties across
// a batch boundary are handled by re-reading the last age inclusively while
// excluding the ids already handled at exactly that age; `low` claims only
// ages strictly above the last age read, so a document with that age that is
// not yet read is never claimed. When the age field is _id there are no ties.
#include <fmt/format.h>

#include "common/log.h"
#include "tiering/worker_context.h"

namespace halo::tiering::workers {

namespace {

using std::chrono::milliseconds;

class Warmer {
  public:
    Warmer(WorkerContext& ctx, uint64_t gen, const CollectionPolicy& p)
        : ctx_(ctx),
          gen_(gen),
          p_(p),
          idIsAge_(p.ageField == "_id"),
          progress_(ctx.state.progress(p.ns)),
          stateId_(stateId("warm", p.ns)),
          flog_("warmer", 8210040) {}

    asio::awaitable<void> run() {
        while (ctx_.leading(gen_)) {
            Status st = co_await step();
            if (st.isOK()) {
                flog_.succeeded();
                continue;
            }
            if (!ctx_.leading(gen_)) break;  // the lease ended mid-step: not a failure
            flog_.failed(st, step_, p_.ns);
            co_await ctx_.sleep(flog_.backoff());
        }
    }

  private:
    /// Loads the persisted pass when needed, then warms one batch (or, once
    /// the pass is done, waits and checks that its state still exists).
    asio::awaitable<Status> step() {
        if (!loaded_) {
            step_ = "read state";
            auto docs = co_await loadStateDocs(ctx_.tiers.fast, ctx_.tiers.meta, stateIds_);
            if (!docs.isOK()) co_return docs.getStatus();
            auto it = docs.getValue().find(stateId_);
            if (it == docs.getValue().end()) {
                Status st = co_await startPass();
                if (!st.isOK()) co_return st;
            } else {
                const bson_t* d = it->second.get();
                pass_ = dateField(d, "pass").value_or(nowMillis());
                warmed_ = intField(d, "warmed");
                done_ = boolField(d, "done");
                auto low = dateField(d, "low");
                lowMs_ = low ? *low : kNone;
                bson_iter_t k;
                if (bson_iter_init_find(&k, d, "lowKey")) {
                    lowKey_ = makeId(*bson_iter_value(&k));
                    lowInclusive_ = true;  // resume: re-read ties at the last age
                }
                ties_.clear();
                publish();
                if (!done_)
                    log::info("tiering", 8210042, "Warmer resumes its pass",
                              fmt::format(R"({{"ns":{},"lowMillis":{},"warmed":{}}})",
                                          log::quote(p_.ns), lowMs_, warmed_));
            }
            loaded_ = true;
        }
        if (done_) {
            co_await ctx_.sleep(ctx_.cfg.warmerInterval);
            if (!ctx_.leading(gen_)) co_return Status::OK();
            step_ = "check state";
            auto docs = co_await loadStateDocs(ctx_.tiers.fast, ctx_.tiers.meta, stateIds_);
            if (!docs.isOK()) co_return docs.getStatus();
            if (!docs.getValue().count(stateId_)) {
                log::info("tiering", 8210043,
                          "Warm state of a collection disappeared; a new pass starts",
                          fmt::format(R"({{"ns":{}}})", log::quote(p_.ns)));
                loaded_ = false;
            }
            co_return Status::OK();
        }
        co_return co_await batch();
    }

    asio::awaitable<Status> startPass() {
        pass_ = nowMillis();
        warmed_ = 0;
        done_ = false;
        lowMs_ = kNone;
        lowKey_.reset();
        ties_.clear();
        publish();
        step_ = "save state";
        bson::Doc f;
        BSON_APPEND_DATE_TIME(f.mut(), "pass", pass_);
        BSON_APPEND_BOOL(f.mut(), "done", false);
        BSON_APPEND_INT64(f.mut(), "warmed", 0);
        Status st = co_await saveStateDoc(ctx_.tiers.fast, ctx_.tiers.meta, stateId_, f.get());
        if (st.isOK())
            log::info("tiering", 8210041, "Warmer starts a pass",
                      fmt::format(R"({{"ns":{}}})", log::quote(p_.ns)));
        co_return st;
    }

    void publish() {
        if (!progress_) return;
        progress_->warmLowMs = lowMs_;
        progress_->warmDone = done_;
        progress_->warmed = warmed_;
    }

    /// The archive query for the next batch: age in [cutoff, low) (or
    /// [cutoff, low] minus the ties already handled), oldest last.
    bson::Doc batchQuery(int64_t cutoffMs, int limit) const {
        auto [db, coll] = splitNs(p_.ns);
        bson::Doc c;
        BSON_APPEND_UTF8(c.mut(), "find", coll.c_str());
        bson_t f, range;
        BSON_APPEND_DOCUMENT_BEGIN(c.mut(), "filter", &f);
        bson_append_document_begin(&f, p_.ageField.c_str(), -1, &range);
        appendAgeBound(&range, "$gte", idIsAge_, cutoffMs);
        if (lowKey_) {
            bson_iter_t it;
            const bson_value_t* v = idValue(*lowKey_, &it);
            if (v) bson_append_value(&range, lowInclusive_ ? "$lte" : "$lt", -1, v);
        }
        if (!ties_.empty()) {
            // Only for a date age field (a unique _id has no ties).
            bson_append_document_end(&f, &range);
            bson_t id, arr;
            BSON_APPEND_DOCUMENT_BEGIN(&f, "_id", &id);
            BSON_APPEND_ARRAY_BEGIN(&id, "$nin", &arr);
            ArrayKey k;
            for (size_t i = 0; i < ties_.size(); ++i) {
                bson_iter_t it;
                if (const bson_value_t* v = idValue(ties_[i], &it))
                    bson_append_value(&arr, k(i), -1, v);
            }
            bson_append_array_end(&id, &arr);
            bson_append_document_end(&f, &id);
        } else {
            bson_append_document_end(&f, &range);
        }
        bson_append_document_end(c.mut(), &f);
        bson_t sort;
        BSON_APPEND_DOCUMENT_BEGIN(c.mut(), "sort", &sort);
        BSON_APPEND_INT32(&sort, p_.ageField.c_str(), -1);
        bson_append_document_end(c.mut(), &sort);
        BSON_APPEND_INT64(c.mut(), "limit", limit);
        BSON_APPEND_INT64(c.mut(), "batchSize", limit);
        BSON_APPEND_UTF8(c.mut(), "$db", db.c_str());
        return c;
    }

    static bool ageOf(const bson_t* doc, const std::string& field, Id* out) {
        bson_iter_t it;
        if (!bson::findDotted(doc, field, &it)) return false;
        *out = makeId(*bson_iter_value(&it));
        return true;
    }

    asio::awaitable<Status> batch() {
        Tiers& t = ctx_.tiers;
        auto started = Clock::now();
        const int64_t cutoff = nowMillis() - p_.horizon.count();
        const int limit = std::max(1, std::min(batchSize_, ctx_.cfg.warmerBatchSize));
        // The epoch is read before the archive: CONSISTENCY.md, Promotion.
        step_ = "read epoch";
        auto epoch = co_await readEpoch(t, p_.ns);
        if (!epoch.isOK()) co_return epoch.getStatus();
        step_ = "read archive";
        bson::Doc q = batchQuery(cutoff, limit);
        auto docs = co_await t.archive.collect(q.get());
        if (!docs.isOK()) {
            if (docs.getStatus().code() != ErrorCode::NamespaceNotFound) co_return docs.getStatus();
            docs = std::vector<bson::Doc>{};
        }
        auto& batch = docs.getValue();
        if (!ctx_.leading(gen_)) co_return Status::OK();
        if (!batch.empty()) {
            step_ = "promote";
            auto n = co_await promoteDocs(t, p_.ns, epoch.getValue(), batch);
            if (!n.isOK()) {
                ErrorCode code = n.getStatus().code();
                bool conflict = code == ErrorCode::WriteConflict ||
                                code == ErrorCode::NoSuchTransaction ||
                                n.getStatus().codeNumber() == 244;  // TransactionAborted
                if (!conflict) co_return n.getStatus();
                // The epoch moved (an eviction or a tombstone removal raced us) or
                // a cold write finished on a document of the batch:
                // re-read the epoch and the batch; shrink it if this keeps happening.
                if (++conflicts_ >= 3) batchSize_ = std::max(1, limit / 2);
                co_await ctx_.sleep(milliseconds(10 * std::min(conflicts_, 20)));
                co_return Status::OK();
            }
            conflicts_ = 0;
            batchSize_ = ctx_.cfg.warmerBatchSize;
            warmed_ += n.getValue();
            // The new low: the last document's age. Every document above it
            // that the query could return has been handled.
            Id last;
            if (!ageOf(batch.back().get(), p_.ageField, &last)) {
                co_return Status(ErrorCode::InternalError, "archive document without its age");
            }
            bson_iter_t it;
            const bson_value_t* lastVal = idValue(last, &it);
            auto lastMs = lastVal ? ageMillis(*lastVal) : std::nullopt;
            if (!lastMs)
                co_return Status(ErrorCode::InternalError, "archive document with an invalid age");
            if (idIsAge_) {
                lowInclusive_ = false;
                ties_.clear();
            } else {
                bool sameLow = lowKey_ && lowInclusive_ && [&] {
                    bson_iter_t a;
                    const bson_value_t* prev = idValue(*lowKey_, &a);
                    return prev && prev->value_type == BSON_TYPE_DATE_TIME &&
                           prev->value.v_datetime == *lastMs;
                }();
                if (!sameLow) ties_.clear();
                for (auto& d : batch) {
                    Id age, id;
                    bson_iter_t ai;
                    if (!ageOf(d.get(), p_.ageField, &age) || !idOf(d.get(), &id)) continue;
                    const bson_value_t* av = idValue(age, &ai);
                    if (av && av->value_type == BSON_TYPE_DATE_TIME &&
                        av->value.v_datetime == *lastMs)
                        ties_.push_back(std::move(id));
                }
                lowInclusive_ = true;
            }
            lowKey_ = std::move(last);
            lowMs_ = *lastMs;
        }
        if (static_cast<int>(batch.size()) < limit) {
            // The pass reached now - horizon: the fast tier holds everything above it.
            done_ = true;
            lowMs_ = std::min(lowMs_, cutoff);
        }
        step_ = "save state";
        bson::Doc f;
        BSON_APPEND_DATE_TIME(f.mut(), "pass", pass_);
        BSON_APPEND_BOOL(f.mut(), "done", done_);
        BSON_APPEND_INT64(f.mut(), "warmed", warmed_);
        if (lowMs_ != kNone) BSON_APPEND_DATE_TIME(f.mut(), "low", lowMs_);
        if (lowKey_) {
            bson_iter_t it;
            if (const bson_value_t* v = idValue(*lowKey_, &it))
                bson_append_value(f.mut(), "lowKey", -1, v);
        }
        if (!ctx_.leading(gen_)) co_return Status::OK();
        Status st = co_await saveStateDoc(t.fast, t.meta, stateId_, f.get());
        if (!st.isOK()) co_return st;
        publish();
        if (done_) {
            log::info("tiering", 8210044, "Warmer finished its pass",
                      fmt::format(R"({{"ns":{},"warmed":{},"lowMillis":{}}})", log::quote(p_.ns),
                                  warmed_, lowMs_));
            co_return Status::OK();
        }
        // Rate limit: this batch may take batch.size() / maxDocsPerSecond seconds.
        if (ctx_.cfg.warmerMaxDocsPerSecond > 0) {
            auto budget = milliseconds(static_cast<int64_t>(batch.size()) * 1000 /
                                       ctx_.cfg.warmerMaxDocsPerSecond);
            auto spent = std::chrono::duration_cast<milliseconds>(Clock::now() - started);
            if (budget > spent) co_await ctx_.sleep(budget - spent);
        }
        co_return Status::OK();
    }

    static constexpr int64_t kNone = std::numeric_limits<int64_t>::max();

    WorkerContext& ctx_;
    const uint64_t gen_;
    const CollectionPolicy& p_;
    const bool idIsAge_;
    CollectionProgress* progress_;
    const std::string stateId_;
    const std::vector<std::string> stateIds_{stateId_};
    FailureLog flog_;
    const char* step_ = "start";

    bool loaded_ = false;
    bool done_ = false;
    int64_t pass_ = 0;
    int64_t warmed_ = 0;
    int64_t lowMs_ = kNone;      // every document with a greater age is handled
    std::optional<Id> lowKey_;   // the age value of the last document handled
    bool lowInclusive_ = false;  // re-read lowKey itself (ties) next time
    std::vector<Id> ties_;       // ids handled whose age == lowKey
    int conflicts_ = 0;
    int batchSize_ = std::numeric_limits<int>::max();
};

}  // namespace

asio::awaitable<void> runWarmer(WorkerContext& ctx, uint64_t gen, const CollectionPolicy& policy) {
    Warmer w(ctx, gen, policy);
    co_await w.run();
}

}  // namespace halo::tiering::workers
