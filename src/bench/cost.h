#pragma once
// What an operation costs, for `bench reproduce`: the CPU time each process used
// (user + system, from /proc/<pid>/stat) and the round trips the proxy made to each
// tier (its own counters), divided by the operations a measured window completed.
// Operators size deployments whose tiers run on their own machines from these.
// Pure parsing and arithmetic, plus one /proc read; thread-safe.
#include <sys/types.h>

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace halo::bench {

/// utime + stime (fields 14 and 15 of proc(5)) of a /proc/<pid>/stat text, in clock
/// ticks; -1 if the text is not one. The command name (field 2) may hold spaces and
/// parentheses, so fields are counted from its last ')'.
int64_t parseProcStatCpuTicks(std::string_view stat);
/// The same for a running process (getpid() for this one); -1 if it cannot be read.
int64_t processCpuTicks(pid_t pid);
/// sysconf(_SC_CLK_TCK): clock ticks per second (100 on Linux).
long clockTicksPerSecond();

/// A cumulative counter's increase per operation; NaN when a sample is missing (< 0), the
/// counter went backwards (a restarted process), or no operation completed.
double perOp(int64_t before, int64_t after, int64_t ops);
/// CPU microseconds per operation from two tick samples: perOp scaled by 10^6 / ticksPerSecond.
double cpuMicrosPerOp(int64_t ticksBefore, int64_t ticksAfter, int64_t ops, long ticksPerSecond);
/// "120|80|-|150": each value with `decimals` digits after the point, `missing` for NaN.
std::string joinPerOp(const std::vector<double>& values, int decimals, std::string_view missing);

/// The processes of a measured run, in the order every cost lists them.
inline constexpr std::array<const char*, 4> kCostProcesses = {"client", "proxy", "fast", "archive"};

/// Counters read at one end of a measured window.
struct CostSample {
    std::array<int64_t, 4> cpuTicks = {-1, -1, -1, -1};        // per kCostProcesses; -1: none
    std::optional<int64_t> fastRoundTrips, archiveRoundTrips;  // the proxy's, if it has them
};

/// What one operation of a measured run cost, per kCostProcesses and per tier.
struct OpCost {
    static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
    int64_t ops = 0;  // operations the window completed (ok, failed and NOT_FOUND)
    std::array<double, 4> cpuUsPerOp = {kNaN, kNaN, kNaN, kNaN};  // NaN: no such process
    bool viaProxy = false;                                        // round trips apply
    std::array<double, 2> roundTripsPerOp = {kNaN, kNaN};  // fast, archive; NaN: not reported
};

/// The cost per operation between two samples of a window that completed `ops` operations.
OpCost costBetween(const CostSample& before, const CostSample& after, int64_t ops, bool viaProxy,
                   long ticksPerSecond);
/// Sum of the processes' CPU per operation (those measured); NaN if none was.
double totalCpuUsPerOp(const OpCost& c);
/// "120|-|-|150": whole microseconds, "-" for a process the run did not have.
std::string cpuText(const OpCost& c);
/// "1.02|0.31"; "n/a" for a tier whose counter the proxy does not report; "-|-" without a proxy.
std::string roundTripsText(const OpCost& c);
/// `"measured_ops":N,"cpu_us_per_op":{"client":..,"proxy":..,"fast":..,"archive":..},
/// "round_trips_per_op":{"fast":..,"archive":..}`: null for what was not measured, and
/// `round_trips_per_op` null as a whole without a proxy. For toJson's extraFields.
std::string costJsonFields(const OpCost& c);

}  // namespace halo::bench
