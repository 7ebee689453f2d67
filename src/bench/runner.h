#pragma once
// The benchmark client: loads and runs a YCSB-style workload through libmongoc
// (a real MongoDB client), closed-loop threads or a fixed target rate. Latency
// is measured from each operation's intended start (no coordinated omission at
// a fixed rate). Failed operations are counted and reported, never hidden; so is
// NOT_FOUND (YCSB's status for a read or update of a key that does not exist).
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "bench/workload.h"
#include "common/status.h"

namespace halo::bench {

struct RunOptions {
    std::string label;  // names the system measured in reports ("archive alone", "tiered")
    std::string uri;
    std::string db = "ycsb";
    std::string collection = "usertable";
    int threads = 64;
    double targetOpsPerSec = 0;  // 0: closed loop, as fast as the system answers
    double seconds = 0;          // 0: stop after operationcount operations
    double warmupSeconds = 0;    // run the workload this long first, unmeasured
    int64_t insertStart = -1;    // record number of the first insert (-1: recordcount)
    uint64_t seed = 42;
    // The workload is meant to look up keys that may not exist: NOT_FOUND is still
    // counted and shown, but no longer fails the run (exitStatus).
    bool expectMisses = false;
    // Called on the calling thread when the measured phase begins (after the warm-up) and
    // once every operation has ended: the window whose operations the report counts.
    std::function<void()> onMeasureStart, onMeasureEnd;
};

struct OpReport {
    int64_t ok = 0;
    int64_t failed = 0;
    // Completed without error but found no document: a read that returned nothing, an
    // update that matched nothing (YCSB's NOT_FOUND). Not in `ok` nor in the latencies,
    // as YCSB keeps every status but OK out of the operation's histogram.
    int64_t notFound = 0;
    double p50us = 0, p95us = 0, p99us = 0, p999us = 0, maxus = 0, meanus = 0;
};

struct RunReport {
    double elapsedSec = 0;  // measured phase only
    double opsPerSec = 0;
    int64_t failed = 0;
    int64_t notFound = 0;
    std::map<std::string, OpReport> ops;  // by opName
    OpReport overall;                     // every operation together
    std::vector<int64_t> perSecond;       // completed operations in each measured second
    int64_t nextInsert = 0;  // record number the next insert would use (warm-up included)
    std::string firstError;
};

/// Inserts records [0, recordcount) in batches of 1,000 and indexes the date field.
/// Resumable: it restarts a little below the documents already there (batches
/// commit out of order) and ignores the duplicates. On a replica set each batch
/// is one transaction (one durable commit instead of 1,000).
Status load(const WorkloadSpec& spec, const RunOptions& opts, bool progress);
StatusWith<RunReport> run(const WorkloadSpec& spec, const RunOptions& opts);

/// The `bench run --json` document: label, workload, per-operation percentiles,
/// `overall`, and the per-second timeline. `extraFields` (`"name":value` pairs joined by
/// commas, or empty) are added to the top-level object.
std::string toJson(const RunReport& r, const WorkloadSpec& spec, const RunOptions& opts,
                   std::string_view extraFields = {});
std::string toTable(const RunReport& r, bool expectMisses = false);

/// Exit statuses of `bench run` and `bench ramp` (and `bench reproduce`) besides 0, 1, 2.
inline constexpr int kExitFailedOperations = 3;
inline constexpr int kExitNotFound = 5;
/// 3 if any operation failed, else 5 if any found no document and misses were not
/// expected, else 0.
int exitStatus(const RunReport& r, bool expectMisses);
/// Operations that found no document, per operation: "READ 12, UPDATE 3" ("" if none).
std::string notFoundByOperation(const RunReport& r);
/// `s` as a JSON string literal (quotes included); '<' is escaped so the text can sit
/// inside an HTML <script> element.
std::string jsonString(std::string_view s);
/// Percentile of sorted microsecond samples (nearest rank below), 0 when empty.
double percentile(const std::vector<uint32_t>& sorted, double p);

}  // namespace halo::bench
