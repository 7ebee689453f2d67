#pragma once
// Internal to the workers (workers.cpp, feeder.cpp, evictor.cpp, warmer.cpp,
// setup.cpp): what they share, and small command builders. Everything in a
// WorkerContext except the atomics is touched only on its strand.
#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bson/doc.h"
#include "common/status.h"
#include "tiering/change_events.h"
#include "tiering/config.h"
#include "tiering/protocol.h"
#include "tiering/state.h"

namespace halo::tiering::workers {

using Clock = std::chrono::steady_clock;

/// How long the evictor leaves a document alone after the feeder saw it
/// written (RecentWrites). Covers a proxy's step from promotion to write.
constexpr int64_t kRecentWriteGraceMillis = 10'000;

/// Milliseconds since the Unix epoch, from the system clock.
int64_t nowMillis();

/// The documents the feeder saw written in the fast tier recently (by local
/// time of processing), so the evictor leaves them alone for a grace period:
/// a proxy promotes a document and then writes it, and an eviction between
/// the two would make the write miss the document (see evictor.cpp). Only the
/// leader's own feeder fills it, from its session start (`since`).
///
/// `pending` holds the documents whose events the feeder has received but not
/// yet applied to the archive (a lazy feeder's gathering, or an eager one's
/// batch while it is applied): the evictor leaves them alone, since the feeder
/// will write a version it reads later (CONSISTENCY.md, The feeder, Lazy mode).
struct RecentWrites {
    uint64_t gen = 0;        // the lease acquisition the feeder session belongs to
    int64_t since = 0;       // local ms when that session began recording
    OpTime seenThrough = 0;  // every event up to this cluster time is recorded
    std::unordered_map<std::string, int64_t> at;  // ns + '\0' + idKey -> local ms
    std::deque<std::pair<int64_t, std::string>> order;
    std::unordered_set<std::string> pending;  // ns + '\0' + idKey

    static std::string key(const std::string& ns, const Id& id) { return ns + '\0' + idKey(id); }
    void reset(uint64_t g, int64_t now) {
        gen = g;
        since = now;
        seenThrough = 0;
        at.clear();
        order.clear();
        pending.clear();
    }
    void note(std::string k, int64_t now) {
        at[k] = now;
        order.emplace_back(now, std::move(k));
    }
    void prune(int64_t now, int64_t graceMs) {
        while (!order.empty() && order.front().first < now - graceMs) {
            auto it = at.find(order.front().second);
            if (it != at.end() && it->second == order.front().first) at.erase(it);
            order.pop_front();
        }
    }
    bool recent(const std::string& k, int64_t now, int64_t graceMs) const {
        auto it = at.find(k);
        return it != at.end() && it->second >= now - graceMs;
    }
};

struct WorkerContext {
    WorkerContext(asio::io_context& io, const ProxyConfig& cfg, Tiers& tiers, SharedState& state,
                  std::string owner);

    asio::strand<asio::io_context::executor_type> strand;
    const ProxyConfig cfg;
    Tiers& tiers;
    SharedState& state;
    const std::string owner;
    std::atomic<bool> started{false};
    std::atomic<bool> stopping{false};

    // Strand only. `gen` counts lease acquisitions: a worker session started
    // for one acquisition never continues into the next.
    uint64_t gen = 0;
    bool leader = false;
    Clock::time_point workUntil{};  // no worker step may start after this
    int activeSessions = 0;
    std::set<asio::steady_timer*> timers;
    RecentWrites recentWrites;

    /// Whether a session started for acquisition `g` may take another step.
    /// Once the work window has closed the acquisition is over for every
    /// session (leader turns false here, on the strand): a renewal after that
    /// starts a new one with all sessions anew. Otherwise a session that saw
    /// the window closed (this process was paused longer than half the lease)
    /// would end while a timely renewal kept the others, and the old
    /// acquisition, going without it.
    bool leading(uint64_t g) {
        if (stopping.load() || !leader || gen != g) return false;
        if (Clock::now() < workUntil) return true;
        leader = false;
        return false;
    }
    /// Waits `d` on the strand (returns early when stop() is called).
    asio::awaitable<void> sleep(std::chrono::milliseconds d);
    void cancelTimers();
};

/// Logs a worker's failures without flooding: the first one, then at most one
/// every 30 s while it keeps failing (log id `logId`), and once when it
/// recovers (`logId` + 100). Also yields the retry backoff (250 ms doubling
/// to 5 s).
class FailureLog {
  public:
    FailureLog(std::string worker, int logId) : worker_(std::move(worker)), logId_(logId) {}
    void failed(const Status& s, std::string_view what, std::string_view ns = {});
    void succeeded();
    std::chrono::milliseconds backoff() const { return backoff_; }

  private:
    std::string worker_;
    int logId_;
    int64_t failures_ = 0;
    Clock::time_point lastLog_{};
    std::chrono::milliseconds backoff_{250};
};

/// {key: {_id: {$in: [ids]}}}
/// {key: {_id: {$in: [{ns, id}...]}}}: the tombstones of `ids`.
/// The tombstone _id {ns, id} of a tombstone document, as (ns, Id).
bool tombstoneTarget(const bson_t* tombstone, std::string* ns, Id* id);

bool sameBytes(const bson_t* a, const bson_t* b);

/// An `update` statement on halocline.state: {q: {_id: "epoch:<ns>"}, u: {$inc: {n: 1}}, upsert}.
void appendEpochBump(bson_t* updates, const char* key, const std::string& ns);

/// Upserts <meta>.state {_id: id} with {$set: fields} in `tier` (w: majority).
/// The reply's operationTime when `opTime` is given. Every state document lives
/// in the fast tier except the feeder's, which describes the archive and lives
/// there (CONSISTENCY.md, The feeder).
asio::awaitable<Status> saveStateDoc(Tier& tier, const Metadata& meta, const std::string& id,
                                     const bson_t* fields, OpTime* opTime = nullptr);
/// Reads <meta>.state documents of `tier` by _id.
asio::awaitable<StatusWith<std::map<std::string, bson::Doc>>> loadStateDocs(
    Tier& tier, const Metadata& meta, const std::vector<std::string>& ids);

/// Reads the feeder's progress from the archive (<meta>.state {_id: "feeder"}):
/// its applied time, lag and counters, into `s`.
asio::awaitable<Status> refreshFeederProgress(Tiers& t, SharedState& s);

/// CONSISTENCY.md, Refused documents: <meta>.refused in the fast tier holds
/// {_id: {ns, id}, code, errmsg, since} per document the archive refused.
/// loadRefusals reads them all (ns -> refusals); publishRefusals puts them in
/// `s` (every tiered collection not in `byNs` gets none).
asio::awaitable<StatusWith<std::map<std::string, Refusals>>> loadRefusals(Tiers& t);
void publishRefusals(SharedState& s, std::map<std::string, Refusals> byNs);

/// Runs a find/aggregate and calls `fn` with each batch of documents, following
/// the cursor (the cursor is killed when `fn` fails).
using BatchFn = std::function<asio::awaitable<Status>(std::vector<bson::Doc>&)>;
asio::awaitable<Status> forEachBatch(Tier& tier, const bson_t* cmd, BatchFn fn);

/// Reads fields from state documents.
int64_t intField(const bson_t* d, const char* key, int64_t dflt = 0);
bool boolField(const bson_t* d, const char* key);
std::optional<int64_t> dateField(const bson_t* d, const char* key);

/// The id the state documents use for a concern of a collection: "warm:db.c".
inline std::string stateId(const char* concern, const std::string& ns) {
    return std::string(concern) + ":" + ns;
}

// The worker coroutines (one file each). Each runs while ctx.leading(gen).
asio::awaitable<void> runFeeder(WorkerContext& ctx, uint64_t gen);
asio::awaitable<void> runEvictor(WorkerContext& ctx, uint64_t gen);
asio::awaitable<void> runWarmer(WorkerContext& ctx, uint64_t gen, const CollectionPolicy& policy);

}  // namespace halo::tiering::workers
