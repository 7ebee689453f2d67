#pragma once
// The benchmark client: loads and runs a YCSB-style workload through libmongoc
// (a real MongoDB client), closed-loop threads or a fixed target rate. Latency
// is measured from each operation's intended start (no coordinated omission at
// a fixed rate). Failed operations are counted and reported, never hidden.
#include <cstdint>
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
};

struct OpReport {
    int64_t ok = 0;
    int64_t failed = 0;
    double p50us = 0, p95us = 0, p99us = 0, p999us = 0, maxus = 0, meanus = 0;
};

struct RunReport {
    double elapsedSec = 0;  // measured phase only
    double opsPerSec = 0;
    int64_t failed = 0;
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
/// `overall`, and the per-second timeline.
std::string toJson(const RunReport& r, const WorkloadSpec& spec, const RunOptions& opts);
std::string toTable(const RunReport& r);
/// `s` as a JSON string literal (quotes included); '<' is escaped so the text can sit
/// inside an HTML <script> element.
std::string jsonString(std::string_view s);
/// Percentile of sorted microsecond samples (nearest rank below), 0 when empty.
double percentile(const std::vector<uint32_t>& sorted, double p);

}  // namespace halo::bench
