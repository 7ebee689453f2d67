#pragma once
// YCSB core-workload semantics (property names as YCSB spells them), plus the
// date field every Halocline benchmark document carries as its tiering age
// field. Pure logic: no I/O, deterministic for a given seed.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>

#include "common/status.h"

namespace halo::bench {

enum class Op { Read, Update, Insert, Scan, ReadModifyWrite };
const char* opName(Op op);

struct WorkloadSpec {
    std::string name = "custom";  // the preset it started from (shop, readheavy, concentrated)
    int64_t recordCount = 1000;
    int64_t operationCount = 1000;
    double readProportion = 0.95;
    double updateProportion = 0.05;
    double insertProportion = 0;
    double scanProportion = 0;
    double readModifyWriteProportion = 0;
    int fieldCount = 10;
    int fieldLength = 100;
    int maxScanLength = 100;
    std::string requestDistribution = "zipfian";  // uniform|zipfian|latest|hotspot|exponential
    double hotspotDataFraction = 0.2;
    double hotspotOpnFraction = 0.8;
    double exponentialPercentile = 95;
    double exponentialFrac = 0.8571428571;
    int64_t dateSpanMillis =
        365LL * 24 * 3600 * 1000;  // dates spread over the past year, newest last

    /// Presets from the published experiment: shop, readheavy, concentrated.
    static StatusWith<WorkloadSpec> preset(const std::string& name);
    /// Applies one YCSB property ("readproportion=0.9"); BadValue on unknown keys.
    Status set(const std::string& key, const std::string& value);
};

/// sum_{i=1..n} 1/i^theta, cached process-wide (O(n) once per n; thread-safe).
double zeta(int64_t n, double theta);

/// Chooses keys: record numbers in [0, insertedSoFar) with the configured
/// distribution. "latest" and "exponential" favour the newest records (the
/// highest numbers), as YCSB does. Not thread-safe: one per worker thread.
class KeyChooser {
  public:
    KeyChooser(const WorkloadSpec& spec, uint64_t seed);
    int64_t next(int64_t insertedSoFar);

  private:
    int64_t zipfian(int64_t n);  // 0 is the most popular item
    const WorkloadSpec& spec_;
    std::mt19937_64 rng_;
    // Zipfian constants (Gray et al., as YCSB), computed for n and refreshed when n grows.
    double theta_ = 0.99, zetan_ = 0, zeta2_ = 0, alpha_ = 0, eta_ = 0;
    int64_t zipfN_ = 0;
};

/// Picks operations by proportion.
class OpChooser {
  public:
    OpChooser(const WorkloadSpec& spec, uint64_t seed);
    Op next();

  private:
    const WorkloadSpec& spec_;
    std::mt19937_64 rng_;
};

/// Record numbers for inserts, and how far they have finished: YCSB's
/// AcknowledgedCounterGenerator. Reads and updates choose among records below
/// acknowledged(), so a record whose insert is still in flight is never looked
/// up (with `latest`, the newest record is the most popular one: without this a
/// correct run would count NOT_FOUNDs). An insert is acknowledged when it ends,
/// failed or not, as in YCSB. Thread-safe.
class InsertSequence {
  public:
    /// Records below `start` exist already.
    explicit InsertSequence(int64_t start) : next_(start), acked_(start) {}
    /// The record number the next insert uses.
    int64_t claim() { return next_.fetch_add(1); }
    /// The insert of `record` (a number claim() returned) has ended.
    void acknowledge(int64_t record);
    /// Every record below this has been inserted (or its insert has ended).
    int64_t acknowledged() const { return acked_.load(std::memory_order_acquire); }
    /// The record number claim() would return next.
    int64_t claimed() const { return next_.load(); }

  private:
    std::atomic<int64_t> next_;
    std::atomic<int64_t> acked_;
    std::mutex mu_;
    std::set<int64_t> early_;  // acknowledged above acked_, waiting for the ones below
};

/// Record number -> key ("user" + zero-padded hash, YCSB's ordered=false keys are
/// hashed; we keep them ordered so the newest are the highest keys).
std::string keyFor(int64_t record);
/// The record's age-field date (ms since epoch): spread over the span, newest last.
int64_t dateFor(int64_t record, int64_t recordCount, int64_t nowMillis, int64_t spanMillis);

}  // namespace halo::bench
