#include "bench/ramp.h"

#include <fmt/format.h>

#include <algorithm>

namespace halo::bench {

std::vector<int> rampSchedule(const RampOptions& o) {
    std::vector<int> out;
    int t = std::max(1, o.startThreads);
    while (t <= o.maxThreads) {
        out.push_back(t);
        int next = o.addThreads > 0 ? t + o.addThreads : t * 2;
        if (next <= t) break;
        t = next;
    }
    return out;
}

double rampP95us(const RunReport& r, const std::string& p95Of) {
    if (p95Of != "ALL") {
        auto it = r.ops.find(p95Of);
        if (it != r.ops.end() && it->second.ok > 0) return it->second.p95us;
    }
    return r.overall.p95us;
}

StatusWith<RampResult> runRamp(const RampOptions& o, const StepRunner& step,
                               const std::function<void(const RampStep&)>& onStep,
                               const std::function<std::string(const RunReport&, int)>& toJson) {
    if (o.p95Ms <= 0) return Status(ErrorCode::BadValue, "--p95-ms must be positive");
    auto schedule = rampSchedule(o);
    if (schedule.empty())
        return Status(ErrorCode::BadValue, "--start-threads is above --max-threads");
    RampResult res;
    res.stopReason = fmt::format("reached --max-threads {}", o.maxThreads);
    for (int threads : schedule) {
        auto r = step(threads);
        if (!r.isOK()) return r.getStatus();
        RampStep s;
        s.threads = threads;
        s.report = std::move(r.getValue());
        s.p95us = rampP95us(s.report, o.p95Of);
        s.under = s.p95us <= o.p95Ms * 1000 && exitStatus(s.report, o.expectMisses) == 0;
        if (toJson) s.json = toJson(s.report, threads);
        res.steps.push_back(std::move(s));
        const RampStep& last = res.steps.back();
        if (onStep) onStep(last);
        if (last.under &&
            (res.best < 0 ||
             last.report.opsPerSec > res.steps[static_cast<size_t>(res.best)].report.opsPerSec))
            res.best = static_cast<int>(res.steps.size() - 1);
        if (last.report.failed > 0) {
            res.stopReason =
                fmt::format("{} operations failed at {} threads", last.report.failed, threads);
            break;
        }
        if (last.report.notFound > 0 && !o.expectMisses) {
            res.stopReason = fmt::format(
                "{} operations found no document (NOT_FOUND: {}) at {} threads: the keys do not "
                "match the data",
                last.report.notFound, notFoundByOperation(last.report), threads);
            break;
        }
        if (!last.under) {
            res.stopReason = fmt::format("p95 {:.2f} ms exceeded {} ms at {} threads",
                                         last.p95us / 1000, o.p95Ms, threads);
            break;
        }
    }
    return res;
}

std::string rampStepLine(const RampStep& s, const RampOptions& o) {
    return fmt::format("threads {:>4}  {:>9.0f} ops/s  {} p95 {:>8.2f} ms  p99 {:>8.2f} ms  {}{}{}",
                       s.threads, s.report.opsPerSec, o.p95Of, s.p95us / 1000,
                       s.report.overall.p99us / 1000, s.under ? "under" : "OVER",
                       s.report.failed ? fmt::format(" ({} failed)", s.report.failed) : "",
                       s.report.notFound ? fmt::format(" ({} NOT_FOUND{})", s.report.notFound,
                                                       o.expectMisses ? ", expected" : "")
                                         : "");
}

int rampExitStatus(const RampResult& r, const RampOptions& o) {
    int worst = 0;
    for (const auto& s : r.steps) {
        int st = exitStatus(s.report, o.expectMisses);
        if (st == kExitFailedOperations) return st;
        if (st != 0) worst = st;
    }
    return worst;
}

std::string rampSummary(const RampResult& r, const RampOptions& o) {
    std::string out = fmt::format("ramp stopped: {}\n", r.stopReason);
    if (r.best < 0)
        return out + fmt::format("no step kept {} p95 within {} ms\n", o.p95Of, o.p95Ms);
    const RampStep& b = r.steps[static_cast<size_t>(r.best)];
    return out +
           fmt::format("best under {} p95 {} ms: {:.0f} ops/s at {} threads (p95 {:.2f} ms)\n",
                       o.p95Of, o.p95Ms, b.report.opsPerSec, b.threads, b.p95us / 1000);
}

std::string rampToJson(const RampResult& r, const RampOptions& o, const WorkloadSpec& spec) {
    std::string steps;
    for (const auto& s : r.steps) {
        if (!steps.empty()) steps += ",";
        steps += fmt::format(
            R"({{"threads":{},"ops_per_sec":{:.1f},"p95_us":{},"under":{},"failed":{},"not_found":{},"run":{}}})",
            s.threads, s.report.opsPerSec, s.p95us, s.under ? "true" : "false", s.report.failed,
            s.report.notFound, s.json.empty() ? "null" : s.json);
    }
    std::string best = "null";
    if (r.best >= 0) {
        const RampStep& b = r.steps[static_cast<size_t>(r.best)];
        best = fmt::format(R"({{"threads":{},"ops_per_sec":{:.1f},"p95_us":{}}})", b.threads,
                           b.report.opsPerSec, b.p95us);
    }
    return fmt::format(
        R"({{"mode":"ramp","workload":{},"p95_of":{},"p95_ms":{},"step_seconds":{},"expect_misses":{},"stop_reason":{},"best":{},"steps":[{}]}})",
        jsonString(spec.name), jsonString(o.p95Of), o.p95Ms, o.stepSeconds, o.expectMisses,
        jsonString(r.stopReason), best, steps);
}

}  // namespace halo::bench
