#pragma once
// `halocline bench reproduce`: the published experiment (../shared/MISSION.md) scaled
// to one machine, archive alone vs tiered in the same invocation, alternating
// A B A B. It starts every process itself (this executable: `store`, `proxy`),
// confines the archive stores with cgroup v1 (read-IOPS cap + memory limit) when
// the machine allows it and says loudly when it does not, runs the scenarios,
// and writes a table of ratios beside the published figures plus an HTML report.
// docs/BENCHMARKS.md explains the scenarios and how to read the output.
//
// Blocking; one per process (it owns child processes and cgroups).
#include <cstdint>
#include <string>
#include <vector>

#include "common/fast_tier.h"

namespace halo::bench {

struct ReproduceOptions {
    std::string dataDir = "./bench-data";  // loaded datasets (reused) and working copies
    std::string outDir;                    // default: <dataDir>/results/<UTC time>
    bool quick = false;                    // small data, short runs: a smoke test
    bool skipTiered = false;               // only the archive-alone and direct sides
    bool haveProxy = false;  // this executable has a `proxy` subcommand (set by the CLI layer)
    std::string scenarios = "mixes,fixed,pause,cold,overhead";
    std::string workload = "shop";  // for fixed load, cold start and proxy overhead
    int threads = 64;
    int rounds = 2;  // A B pairs per scenario
    int readIops = 3000;
    std::string horizon = "30d";  // the tiering age of ycsb.usertable
    bool coldWrites = true;       // the proxy's tiering.coldWrites (an A/B switch)
    std::string feederMode;       // workers.feeder.mode; empty: the proxy's default
    // workers.feeder.lazyDelay with a lazy feeder: shorter than a run, so that its
    // writes fall inside the measured runs rather than after them.
    std::string feederLazyDelay = "10s";
    int warmerRate = 0;  // workers.warmer.maxDocsPerSecond; 0: the proxy's default
    // The fast store's --wiredTigerEngineConfigString: what `halocline up` gives
    // it (an A/B switch: --fast-engine-config "" runs the store's defaults).
    std::string fastEngineConfig = kFastTierEngineConfig;
    int fieldCount = 10;
    int fieldLength = 26;  // ~415-byte documents: 10 M of them are 16x a 256 MB cache
    // Zero: the mode's default (resolveDefaults).
    int64_t recordCount = 0;        // full 10,000,000; quick 200,000
    double archiveCacheGB = 0;      // full 0.25; quick 0.01
    int fastThreads = 0;            // the fast store's --threads; 0: the store's default
    int64_t archiveMemoryMB = 0;    // cache + 512 MB
    double seconds = 0;             // measured seconds per run: full 30; quick 4
    double warmupSeconds = 0;       // full 10; quick 1
    double coldSeconds = 0;         // cold-start run length: full 90; quick 8
    int64_t memoryRecordCount = 0;  // proxy-overhead dataset: full 500,000; quick 20,000
    double warmTimeoutSeconds = 0;  // waiting for the warmer: full 240; quick 20
};

/// What the archive's memory-cgroup limit leaves the store beyond its cache.
/// A sanitizer build needs several times the memory.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr int64_t kArchiveStoreOverheadMB = 4096;
#else
inline constexpr int64_t kArchiveStoreOverheadMB = 1024;
#endif

ReproduceOptions resolveDefaults(ReproduceOptions o);

/// Runs the reproduction. Exit status: 0 done, 1 failed, 2 bad options, 3 operations
/// failed, 4 the tiered side needs `halocline proxy` and this binary has none, 5 operations
/// were NOT_FOUND (3 and 5 only once every output is written).
int reproduce(const ReproduceOptions& opts);

// Pieces exposed for tests.

/// Mean of several per-second timelines, as long as the shortest.
std::vector<double> meanTimeline(const std::vector<std::vector<int64_t>>& runs);
/// The first second from which `tiered`'s `window`-second moving average stays above
/// `alone`'s for `hold` seconds (or to the end); -1 if never.
int passingSecond(const std::vector<double>& alone, const std::vector<double>& tiered,
                  int window = 5, int hold = 10);
/// "30d", "12h", "90m", "45s" -> milliseconds; -1 if malformed.
int64_t parseHorizonMillis(const std::string& h);
/// The proxy's YAML: ycsb.usertable tiered on `date` (or no tiered collection at all,
/// a pure pass-through to the archive), workers on or off, and the feeder's
/// mode when `feederMode` is not empty (with `lazyDelay` when it is lazy), and the
/// warmer's workers.warmer.maxDocsPerSecond when `warmerRate` is positive.
std::string proxyConfigYaml(const std::string& fastUri, const std::string& archiveUri,
                            const std::string& horizon, bool tiered, bool coldWrites = true,
                            const std::string& feederMode = "",
                            const std::string& lazyDelay = "10s", int warmerRate = 0);

}  // namespace halo::bench
