#pragma once
// What the workers publish and the router reads, in memory. In the proxy that
// holds the worker lease the workers update it directly; other proxies refresh
// it from the durable documents in halocline.state (the feeder's in the
// archive, the others in the fast tier).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bson/doc.h"
#include "tiering/config.h"

namespace halo::tiering {

/// A BSON Timestamp as one ordered integer: (seconds << 32) | increment.
using OpTime = uint64_t;

/// A document the archive refused to store (CONSISTENCY.md, Refused documents):
/// it stays in the fast tier, and archive reads that could include it fail.
struct Refusal {
    bson::Doc id;  // {v: <_id>}
    int code = 0;  // the archive's error
    std::string errmsg;
    int64_t sinceMs = 0;
};
using Refusals = std::vector<Refusal>;

/// Holds one count of a gate (CollectionProgress::writers or ::drops) until
/// destroyed.
class GateHold {
  public:
    GateHold() = default;
    explicit GateHold(std::atomic<int>* count) : count_(count) { count_->fetch_add(1); }
    GateHold(GateHold&& o) noexcept : count_(std::exchange(o.count_, nullptr)) {}
    GateHold& operator=(GateHold&& o) noexcept {
        if (this != &o) {
            release();
            count_ = std::exchange(o.count_, nullptr);
        }
        return *this;
    }
    GateHold(const GateHold&) = delete;
    GateHold& operator=(const GateHold&) = delete;
    ~GateHold() { release(); }
    void release() {
        if (count_) count_->fetch_sub(1);
        count_ = nullptr;
    }

  private:
    std::atomic<int>* count_ = nullptr;
};

struct CollectionProgress {
    /// This proxy's tiered writes in flight, and its drops of the collection
    /// in progress: a drop waits for the writes begun before it and holds new
    /// ones until it is done (CONSISTENCY.md, Drops; Proxy::beginWrite).
    std::atomic<int> writers{0};
    std::atomic<int> drops{0};
    /// The fast tier holds every document whose age is greater than this
    /// (milliseconds since the epoch). INT64_MAX: nothing proven yet.
    std::atomic<int64_t> warmLowMs{std::numeric_limits<int64_t>::max()};
    std::atomic<bool> warmDone{false};
    std::atomic<int64_t> warmed{0};        // documents copied up by the warmer
    std::atomic<int64_t> evicted{0};       // documents removed by the evictor
    std::atomic<int64_t> evictBacklog{0};  // documents past the horizon still in the fast tier
    // Routing counters.
    std::atomic<int64_t> routedFast{0};
    std::atomic<int64_t> routedArchive{0};
    std::atomic<int64_t> idLookupHits{0};    // exact _id finds answered by the fast tier
    std::atomic<int64_t> idLookupMisses{0};  // ... that had to go to the archive
    std::atomic<int64_t> mergedReads{0};     // archive-routed finds merged, no feeder wait
    std::atomic<int64_t> coldWrites{0};      // writes run in the archive (cold_write.h)
    std::atomic<int64_t> promoted{0};        // documents copied up for writes and reads

    /// What the check of the policy against the archive's data found wrong
    /// (workers.h, checkAgeField); empty when nothing (or not checked yet).
    std::string policyProblem() const {
        std::lock_guard lk(mu_);
        return policyProblem_;
    }
    void setPolicyProblem(std::string p) {
        std::lock_guard lk(mu_);
        policyProblem_ = std::move(p);
    }

    /// The documents of this collection the archive refuses (null: none).
    std::shared_ptr<const Refusals> refusals() const {
        if (refusedCount.load() == 0) return nullptr;
        std::lock_guard lk(mu_);
        return refusals_;
    }
    void setRefusals(std::shared_ptr<const Refusals> r) {
        std::lock_guard lk(mu_);
        refusedCount = r ? r->size() : 0;
        refusals_ = std::move(r);
    }
    std::atomic<size_t> refusedCount{0};

  private:
    mutable std::mutex mu_;
    std::string policyProblem_;
    std::shared_ptr<const Refusals> refusals_;
};

enum class WorkerRole : int { Disabled = 0, Standby = 1, Leader = 2 };

struct SharedState {
    explicit SharedState(const ProxyConfig& cfg) {
        for (const auto& c : cfg.collections)
            collections.emplace(c.ns, std::make_unique<CollectionProgress>());
    }
    /// The archive reflects every fast-tier write at or before this time.
    std::atomic<OpTime> feederApplied{0};
    std::atomic<int64_t> feederLagOps{0};
    std::atomic<int64_t> feederLagMillis{0};
    std::atomic<int64_t> feederApplies{0};  // archive writes the feeder issued
    std::atomic<int64_t> feederEvents{0};   // change events it consumed
    /// Every fast-tier event up to this time has reached the leader's feeder
    /// (applied, or gathered by a lazy feeder).
    std::atomic<OpTime> feederReceived{0};
    /// Documents a lazy feeder gathered and has not written yet.
    std::atomic<int64_t> feederPending{0};
    /// Until when (ms since the epoch) an operator paused the feeder, as the
    /// leader's feeder last read it (haloclinePauseFeeder); 0: not paused.
    std::atomic<int64_t> feederPausedUntil{0};
    std::atomic<int> role{static_cast<int>(WorkerRole::Disabled)};
    /// The latest cluster time seen from the fast tier (the clock clients see).
    std::atomic<OpTime> fastClusterTime{0};
    std::map<std::string, std::unique_ptr<CollectionProgress>> collections;  // fixed at start

    CollectionProgress* progress(const std::string& ns) {
        auto it = collections.find(ns);
        return it == collections.end() ? nullptr : it->second.get();
    }
    void noteFastTime(OpTime t) {
        OpTime cur = fastClusterTime.load();
        while (t > cur && !fastClusterTime.compare_exchange_weak(cur, t)) {
        }
    }
    /// Whether this caller should re-read the feeder's progress from the
    /// archive now: at most one reader per kFeederRefreshMicros.
    bool claimFeederRefresh() {
        int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
        int64_t last = feederRefreshedAt.load();
        return now - last >= kFeederRefreshMicros &&
               feederRefreshedAt.compare_exchange_strong(last, now);
    }
    static constexpr int64_t kFeederRefreshMicros = 2000;
    std::atomic<int64_t> feederRefreshedAt{0};  // steady clock, microseconds

    void noteApplied(OpTime t) {
        OpTime cur = feederApplied.load();
        while (t > cur && !feederApplied.compare_exchange_weak(cur, t)) {
        }
    }
};

}  // namespace halo::tiering
