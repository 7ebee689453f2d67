#pragma once
// Ramp mode: raise the number of client threads step by step (doubling, or +N)
// until the p95 latency exceeds a threshold, and report the highest throughput
// reached under it ("ramp the clients until p95 exceeds 5 ms; report throughput
// there"). The step runner is injected, so the stepping logic is tested without
// a server. Blocking; not thread-safe.
#include <functional>
#include <string>
#include <vector>

#include "bench/runner.h"
#include "common/status.h"

namespace halo::bench {

struct RampOptions {
    int startThreads = 1;
    int maxThreads = 256;
    int addThreads = 0;  // 0: double every step; N > 0: add N every step
    double stepSeconds = 10;
    double p95Ms = 5;
    std::string p95Of = "READ";  // an operation name, or "ALL" for every operation together
    bool expectMisses = false;   // NOT_FOUND neither disqualifies a step nor stops the ramp
};

struct RampStep {
    int threads = 0;
    RunReport report;
    double p95us = 0;    // of the operation(s) named by RampOptions::p95Of
    bool under = false;  // p95 within the threshold, no failed and no unexpected NOT_FOUND
    std::string json;    // the step's `bench run --json` document
};

struct RampResult {
    std::vector<RampStep> steps;
    int best = -1;           // index of the highest throughput step under the threshold, or -1
    std::string stopReason;  // why the ramp ended
};

/// Runs one measured step with `threads` client threads.
using StepRunner = std::function<StatusWith<RunReport>(int threads)>;

/// The thread counts a ramp visits when no step stops it early.
std::vector<int> rampSchedule(const RampOptions& o);
/// The p95 that the threshold applies to (falls back to ALL when there is no such operation).
double rampP95us(const RunReport& r, const std::string& p95Of);

/// Runs steps until one exceeds the threshold (that step is kept and reported), one has
/// failed operations or (unless expected) NOT_FOUND ones, or the schedule ends. `onStep`
/// sees each step as it completes.
StatusWith<RampResult> runRamp(const RampOptions& o, const StepRunner& step,
                               const std::function<void(const RampStep&)>& onStep,
                               const std::function<std::string(const RunReport&, int)>& toJson);

std::string rampToJson(const RampResult& r, const RampOptions& o, const WorkloadSpec& spec);
std::string rampStepLine(const RampStep& s, const RampOptions& o);
std::string rampSummary(const RampResult& r, const RampOptions& o);
/// `bench ramp`'s exit status: exitStatus() of the worst step (3 failed, 5 NOT_FOUND), else 0.
int rampExitStatus(const RampResult& r, const RampOptions& o);

}  // namespace halo::bench
