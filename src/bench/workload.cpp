#include "bench/workload.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <mutex>

namespace halo::bench {

const char* opName(Op op) {
    switch (op) {
        case Op::Read:
            return "READ";
        case Op::Update:
            return "UPDATE";
        case Op::Insert:
            return "INSERT";
        case Op::Scan:
            return "SCAN";
        case Op::ReadModifyWrite:
            return "READ-MODIFY-WRITE";
    }
    return "?";
}

StatusWith<WorkloadSpec> WorkloadSpec::preset(const std::string& name) {
    WorkloadSpec w;
    if (name == "shop") {  // 85% reads favouring recent documents, 10% updates, 5% inserts
        w.readProportion = 0.85;
        w.updateProportion = 0.10;
        w.insertProportion = 0.05;
        w.requestDistribution = "latest";
    } else if (name == "readheavy") {  // 95/5, same recency
        w.readProportion = 0.95;
        w.updateProportion = 0.05;
        w.requestDistribution = "latest";
    } else if (name == "concentrated") {  // 95/5, 99% of operations on the newest 9% of records
        w.readProportion = 0.95;
        w.updateProportion = 0.05;
        w.requestDistribution = "exponential";
        w.exponentialPercentile = 99;
        w.exponentialFrac = 0.09;
    } else {
        return Status(
            ErrorCode::BadValue,
            fmt::format("unknown workload '{}': use shop, readheavy or concentrated", name));
    }
    w.name = name;
    return w;
}

Status WorkloadSpec::set(const std::string& key, const std::string& value) {
    try {
        if (key == "recordcount")
            recordCount = std::stoll(value);
        else if (key == "operationcount")
            operationCount = std::stoll(value);
        else if (key == "readproportion")
            readProportion = std::stod(value);
        else if (key == "updateproportion")
            updateProportion = std::stod(value);
        else if (key == "insertproportion")
            insertProportion = std::stod(value);
        else if (key == "scanproportion")
            scanProportion = std::stod(value);
        else if (key == "readmodifywriteproportion")
            readModifyWriteProportion = std::stod(value);
        else if (key == "fieldcount")
            fieldCount = std::stoi(value);
        else if (key == "fieldlength")
            fieldLength = std::stoi(value);
        else if (key == "maxscanlength")
            maxScanLength = std::stoi(value);
        else if (key == "requestdistribution")
            requestDistribution = value;
        else if (key == "hotspotdatafraction")
            hotspotDataFraction = std::stod(value);
        else if (key == "hotspotopnfraction")
            hotspotOpnFraction = std::stod(value);
        else if (key == "exponential.percentile")
            exponentialPercentile = std::stod(value);
        else if (key == "exponential.frac")
            exponentialFrac = std::stod(value);
        else
            return Status(ErrorCode::BadValue, fmt::format("unknown workload property '{}'", key));
    } catch (const std::exception&) {
        return Status(ErrorCode::BadValue, fmt::format("bad value '{}' for '{}'", value, key));
    }
    static const char* kDists[] = {"uniform", "zipfian", "latest", "hotspot", "exponential"};
    bool ok = false;
    for (auto d : kDists) ok = ok || requestDistribution == d;
    if (!ok)
        return Status(ErrorCode::BadValue,
                      fmt::format("unknown requestdistribution '{}'", requestDistribution));
    return Status::OK();
}

double zeta(int64_t n, double theta) {
    // Shared by every worker thread: the first one computes, the others wait for it.
    static std::mutex mu;
    static std::map<std::pair<double, int64_t>, double> cache;
    std::lock_guard lk(mu);
    auto key = std::make_pair(theta, n);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    // Extend the largest cached sum below n rather than starting over.
    int64_t from = 0;
    double z = 0;
    auto it = cache.lower_bound(key);
    if (it != cache.begin() && (--it)->first.first == theta) {
        from = it->first.second;
        z = it->second;
    }
    for (int64_t i = from + 1; i <= n; ++i) z += 1.0 / std::pow(static_cast<double>(i), theta);
    cache[key] = z;
    return z;
}

KeyChooser::KeyChooser(const WorkloadSpec& spec, uint64_t seed) : spec_(spec), rng_(seed) {}

int64_t KeyChooser::zipfian(int64_t n) {
    if (n != zipfN_) {
        // zeta(n) is O(n) to compute: done once per size (inserts grow n slowly; refresh on
        // change).
        if (zipfN_ == 0 || n < zipfN_ || n > zipfN_ * 101 / 100) {
            zetan_ = zeta(n, theta_);
            zipfN_ = n;
        }
        zeta2_ = 1 + 1.0 / std::pow(2.0, theta_);
        alpha_ = 1.0 / (1.0 - theta_);
        eta_ =
            (1 - std::pow(2.0 / static_cast<double>(zipfN_), 1 - theta_)) / (1 - zeta2_ / zetan_);
    }
    std::uniform_real_distribution<double> u(0, 1);
    double x = u(rng_);
    double uz = x * zetan_;
    if (uz < 1.0) return 0;
    if (uz < 1.0 + std::pow(0.5, theta_)) return 1;
    auto r =
        static_cast<int64_t>(static_cast<double>(zipfN_) * std::pow(eta_ * x - eta_ + 1, alpha_));
    return std::min<int64_t>(r, n - 1);
}

int64_t KeyChooser::next(int64_t n) {
    if (n <= 0) return 0;
    const std::string& d = spec_.requestDistribution;
    if (d == "uniform") return std::uniform_int_distribution<int64_t>(0, n - 1)(rng_);
    if (d == "zipfian") {
        // YCSB scrambles zipfian so popular items spread over the key space.
        uint64_t z = static_cast<uint64_t>(zipfian(n));
        z = (z * 0x9E3779B97F4A7C15ull) ^ (z >> 29);
        return static_cast<int64_t>(z % static_cast<uint64_t>(n));
    }
    if (d == "latest") return n - 1 - zipfian(n);  // the newest records are the most popular
    if (d == "hotspot") {
        // YCSB puts its hot set on the lowest (oldest) records.
        auto hot = std::max<int64_t>(
            1, static_cast<int64_t>(static_cast<double>(n) * spec_.hotspotDataFraction));
        std::uniform_real_distribution<double> u(0, 1);
        if (u(rng_) < spec_.hotspotOpnFraction || hot == n)
            return std::uniform_int_distribution<int64_t>(0, hot - 1)(rng_);
        return std::uniform_int_distribution<int64_t>(hot, n - 1)(rng_);
    }
    // exponential: percentile% of operations fall on the newest frac of records.
    double gamma = -std::log(1.0 - spec_.exponentialPercentile / 100.0) /
                   (static_cast<double>(n) * spec_.exponentialFrac);
    std::exponential_distribution<double> e(gamma);
    auto back = static_cast<int64_t>(e(rng_));
    if (back >= n) back = n - 1;
    return n - 1 - back;
}

OpChooser::OpChooser(const WorkloadSpec& spec, uint64_t seed) : spec_(spec), rng_(seed) {}

Op OpChooser::next() {
    double total = spec_.readProportion + spec_.updateProportion + spec_.insertProportion +
                   spec_.scanProportion + spec_.readModifyWriteProportion;
    std::uniform_real_distribution<double> u(0, total > 0 ? total : 1);
    double x = u(rng_);
    if ((x -= spec_.readProportion) < 0) return Op::Read;
    if ((x -= spec_.updateProportion) < 0) return Op::Update;
    if ((x -= spec_.insertProportion) < 0) return Op::Insert;
    if ((x -= spec_.scanProportion) < 0) return Op::Scan;
    return Op::ReadModifyWrite;
}

void InsertSequence::acknowledge(int64_t record) {
    std::lock_guard lk(mu_);
    int64_t limit = acked_.load(std::memory_order_relaxed);
    if (record < limit) return;
    if (record > limit) {
        early_.insert(record);
        return;
    }
    ++limit;
    while (!early_.empty() && *early_.begin() == limit) {
        early_.erase(early_.begin());
        ++limit;
    }
    acked_.store(limit, std::memory_order_release);
}

std::string keyFor(int64_t record) {
    return fmt::format("user{:012d}", record);
}

int64_t dateFor(int64_t record, int64_t recordCount, int64_t nowMillis, int64_t spanMillis) {
    if (recordCount <= 0 || record >= recordCount) return nowMillis;
    return nowMillis - spanMillis +
           static_cast<int64_t>(static_cast<double>(spanMillis) * static_cast<double>(record) /
                                static_cast<double>(recordCount));
}

}  // namespace halo::bench
