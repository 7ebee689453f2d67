#include "bench/cost.h"

#include <fmt/format.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <iterator>

namespace halo::bench {

int64_t parseProcStatCpuTicks(std::string_view stat) {
    auto close = stat.rfind(')');
    if (close == std::string_view::npos) return -1;
    std::string_view rest = stat.substr(close + 1);
    int64_t utime = -1, stime = -1;
    // Field 3 (state) is the first after the command; utime is 14, stime 15.
    for (int field = 3; field <= 15; ++field) {
        size_t b = rest.find_first_not_of(' ');
        if (b == std::string_view::npos) return -1;
        rest.remove_prefix(b);
        size_t e = std::min(rest.find(' '), rest.size());
        std::string_view word = rest.substr(0, e);
        if (field == 14 || field == 15) {
            int64_t v = 0;
            auto [p, ec] = std::from_chars(word.data(), word.data() + word.size(), v);
            if (ec != std::errc() || p != word.data() + word.size() || v < 0) return -1;
            (field == 14 ? utime : stime) = v;
        }
        rest.remove_prefix(e);
    }
    return utime + stime;
}

int64_t processCpuTicks(pid_t pid) {
    std::ifstream f(fmt::format("/proc/{}/stat", pid));
    if (!f) return -1;
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return parseProcStatCpuTicks(s);
}

long clockTicksPerSecond() {
    static const long ticks = ::sysconf(_SC_CLK_TCK);
    return ticks;
}

double perOp(int64_t before, int64_t after, int64_t ops) {
    if (before < 0 || after < before || ops <= 0) return std::nan("");
    return static_cast<double>(after - before) / static_cast<double>(ops);
}

double cpuMicrosPerOp(int64_t ticksBefore, int64_t ticksAfter, int64_t ops, long ticksPerSecond) {
    if (ticksPerSecond <= 0) return std::nan("");
    return perOp(ticksBefore, ticksAfter, ops) * 1e6 / static_cast<double>(ticksPerSecond);
}

std::string joinPerOp(const std::vector<double>& values, int decimals, std::string_view missing) {
    std::string out;
    for (size_t i = 0; i < values.size(); ++i) {
        if (i) out += '|';
        out += std::isfinite(values[i]) ? fmt::format("{:.{}f}", values[i], decimals)
                                        : std::string(missing);
    }
    return out;
}

OpCost costBetween(const CostSample& before, const CostSample& after, int64_t ops, bool viaProxy,
                   long ticksPerSecond) {
    OpCost c;
    c.ops = ops;
    for (size_t i = 0; i < c.cpuUsPerOp.size(); ++i)
        c.cpuUsPerOp[i] =
            cpuMicrosPerOp(before.cpuTicks[i], after.cpuTicks[i], ops, ticksPerSecond);
    c.viaProxy = viaProxy;
    auto trips = [&](const std::optional<int64_t>& a, const std::optional<int64_t>& b) {
        return a && b ? perOp(*a, *b, ops) : OpCost::kNaN;
    };
    if (viaProxy) {
        c.roundTripsPerOp[0] = trips(before.fastRoundTrips, after.fastRoundTrips);
        c.roundTripsPerOp[1] = trips(before.archiveRoundTrips, after.archiveRoundTrips);
    }
    return c;
}

double totalCpuUsPerOp(const OpCost& c) {
    double sum = 0;
    bool any = false;
    for (double v : c.cpuUsPerOp)
        if (std::isfinite(v)) {
            sum += v;
            any = true;
        }
    return any ? sum : OpCost::kNaN;
}

std::string cpuText(const OpCost& c) {
    return joinPerOp({c.cpuUsPerOp.begin(), c.cpuUsPerOp.end()}, 0, "-");
}

std::string roundTripsText(const OpCost& c) {
    if (!c.viaProxy) return "-|-";
    return joinPerOp({c.roundTripsPerOp.begin(), c.roundTripsPerOp.end()}, 2, "n/a");
}

std::string costJsonFields(const OpCost& c) {
    auto num = [](double v) { return std::isfinite(v) ? fmt::format("{:.3f}", v) : "null"; };
    std::string cpu;
    for (size_t i = 0; i < c.cpuUsPerOp.size(); ++i)
        cpu += fmt::format(R"({}"{}":{})", i ? "," : "", kCostProcesses[i], num(c.cpuUsPerOp[i]));
    std::string trips = c.viaProxy
                            ? fmt::format(R"({{"fast":{},"archive":{}}})",
                                          num(c.roundTripsPerOp[0]), num(c.roundTripsPerOp[1]))
                            : "null";
    return fmt::format(R"("measured_ops":{},"cpu_us_per_op":{{{}}},"round_trips_per_op":{})", c.ops,
                       cpu, trips);
}

}  // namespace halo::bench
