#pragma once
// Per-collection usage statistics, as mongod's Top keeps them: time and count
// per kind of operation (the `top` command) and latency histograms of reads,
// writes and commands ($collStats latencyStats). Recorded by the dispatcher
// after every command that names a collection.
//
// Thread-safety: record() and the readers may run concurrently; a shared
// mutex guards the table (exclusive only to add or drop a namespace), the
// counters are atomics.
#include <bson/bson.h>

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>

namespace halo::store {

class Top {
  public:
    /// The `top` categories an operation counts in (besides total).
    enum class Kind { kQuery, kGetMore, kInsert, kUpdate, kRemove, kCommand };
    /// The lock an operation held (readLock / writeLock) and the latency class.
    enum class Access { kRead, kWrite, kCommand };

    /// Classifies a command by name, as mongod's commands declare themselves.
    static void classify(std::string_view commandName, Kind* kind, Access* access);

    void record(const std::string& ns, Kind kind, Access access, int64_t micros);
    /// Forgets a dropped (or renamed) collection's statistics.
    void collectionDropped(const std::string& ns);

    /// {"db.coll": {total: {time, count}, readLock, writeLock, queries, getmore,
    /// insert, update, remove, commands}, ...} into `totals`.
    void appendTotals(bson_t* totals) const;
    /// {reads: {latency, ops[, histogram]}, writes, commands, transactions}.
    void appendLatencyStats(const std::string& ns, bool histograms, bson_t* out) const;

  private:
    static constexpr int kBuckets = 40;  // power-of-two microsecond buckets
    struct Counter {
        std::atomic<int64_t> time{0}, count{0};
    };
    struct Latency {
        std::atomic<int64_t> micros{0}, ops{0};
        std::array<std::atomic<int64_t>, kBuckets> histogram{};
    };
    struct Usage {
        Counter total, readLock, writeLock;
        std::array<Counter, 6> byKind;   // indexed by Kind
        std::array<Latency, 3> latency;  // indexed by Access
    };
    /// Shared: a record() in progress keeps the entry a concurrent drop removes.
    std::shared_ptr<Usage> usage(const std::string& ns);

    mutable std::shared_mutex mu_;
    std::map<std::string, std::shared_ptr<Usage>, std::less<>> table_;
};

}  // namespace halo::store
