#pragma once
// The benchmark client: loads and runs a YCSB-style workload through libmongoc
// (a real MongoDB client), closed-loop threads or a fixed target rate. Latency
// is measured from each operation's intended start (no coordinated omission at
// a fixed rate). Failed operations are counted and reported, never hidden.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bench/workload.h"
#include "common/status.h"

namespace halo::bench {

struct RunOptions {
    std::string uri;
    std::string db = "ycsb";
    std::string collection = "usertable";
    int threads = 64;
    double targetOpsPerSec = 0;  // 0: closed loop, as fast as the system answers
    double seconds = 0;          // 0: stop after operationcount operations
    uint64_t seed = 42;
};

struct OpReport {
    int64_t ok = 0;
    int64_t failed = 0;
    double p50us = 0, p95us = 0, p99us = 0, p999us = 0, maxus = 0, meanus = 0;
};

struct RunReport {
    double elapsedSec = 0;
    double opsPerSec = 0;
    int64_t failed = 0;
    std::map<std::string, OpReport> ops;  // by opName
    std::vector<int64_t> perSecond;       // completed operations in each second
    std::string firstError;
};

/// Inserts records [existing, recordcount) in batches of 1,000 (resumable: it
/// continues from the documents already there) and indexes the date field.
Status load(const WorkloadSpec& spec, const RunOptions& opts, bool progress);
StatusWith<RunReport> run(const WorkloadSpec& spec, const RunOptions& opts);

std::string toJson(const RunReport& r, const WorkloadSpec& spec, const RunOptions& opts);
std::string toTable(const RunReport& r);

}  // namespace halo::bench
