#include "bench/reproduce.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>
#include <thread>

#include "bench/child_process.h"
#include "bench/confinement.h"
#include "bench/cost.h"
#include "bench/html_report.h"
#include "bench/probe.h"
#include "bench/runner.h"
#include "bench/workload.h"

namespace halo::bench {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// ------------------------------------------------------------------ pure pieces

std::vector<double> meanTimeline(const std::vector<std::vector<int64_t>>& runs) {
    if (runs.empty()) return {};
    size_t len = runs.front().size();
    for (const auto& r : runs) len = std::min(len, r.size());
    std::vector<double> out(len, 0);
    for (const auto& r : runs)
        for (size_t i = 0; i < len; ++i) out[i] += static_cast<double>(r[i]);
    for (auto& v : out) v /= static_cast<double>(runs.size());
    return out;
}

int passingSecond(const std::vector<double>& alone, const std::vector<double>& tiered, int window,
                  int hold) {
    size_t n = std::min(alone.size(), tiered.size());
    if (n == 0 || window < 1) return -1;
    auto avg = [&](const std::vector<double>& v, size_t end) {  // mean of [end-window+1, end]
        size_t begin = end + 1 >= static_cast<size_t>(window) ? end + 1 - window : 0;
        double s = 0;
        for (size_t i = begin; i <= end; ++i) s += v[i];
        return s / static_cast<double>(end - begin + 1);
    };
    for (size_t s = 0; s < n; ++s) {
        bool stays = true;
        for (size_t t = s; t < n && t < s + static_cast<size_t>(hold); ++t)
            if (avg(tiered, t) <= avg(alone, t)) {
                stays = false;
                break;
            }
        if (stays) return static_cast<int>(s);
    }
    return -1;
}

int64_t parseHorizonMillis(const std::string& h) {
    if (h.size() < 2) return -1;
    int64_t unit = 0;
    switch (h.back()) {
        case 'd':
            unit = 86400000;
            break;
        case 'h':
            unit = 3600000;
            break;
        case 'm':
            unit = 60000;
            break;
        case 's':
            unit = 1000;
            break;
        default:
            return -1;
    }
    std::string digits = h.substr(0, h.size() - 1);
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
    return std::stoll(digits) * unit;
}

std::string proxyConfigYaml(const std::string& fastUri, const std::string& archiveUri,
                            const std::string& horizon, bool tiered, bool coldWrites,
                            const std::string& feederMode, const std::string& lazyDelay,
                            int warmerRate) {
    std::string out = "net: {bindIp: 127.0.0.1, port: 0}\ntiers:\n";
    out +=
        fmt::format("  fast: {{uri: \"{}\"}}\n  archive: {{uri: \"{}\"}}\n", fastUri, archiveUri);
    std::string workers;  // settings after `enabled`
    if (!feederMode.empty())
        workers = feederMode == "lazy"
                      ? fmt::format(", feeder: {{mode: lazy, lazyDelay: {}}}", lazyDelay)
                      : fmt::format(", feeder: {{mode: {}}}", feederMode);
    if (warmerRate > 0) workers += fmt::format(", warmer: {{maxDocsPerSecond: {}}}", warmerRate);
    if (tiered)
        out += fmt::format(
            "tiering:\n  coldWrites: {}\n  collections:\n    - {{namespace: ycsb.usertable, "
            "ageField: date, horizon: {}}}\nworkers: {{enabled: true{}}}\n",
            coldWrites ? "true" : "false", horizon, workers);
    else
        out += "tiering:\n  collections: []\nworkers: {enabled: false}\n";
    return out;
}

ReproduceOptions resolveDefaults(ReproduceOptions o) {
    auto def = [&](auto& field, auto full, auto quick) {
        if (field <= 0) field = o.quick ? quick : full;
    };
    def(o.recordCount, int64_t{10'000'000}, int64_t{200'000});
    def(o.archiveCacheGB, 0.25, 0.01);
    def(o.seconds, 30.0, 4.0);
    def(o.warmupSeconds, 10.0, 1.0);
    def(o.coldSeconds, 90.0, 8.0);
    def(o.memoryRecordCount, int64_t{500'000}, int64_t{20'000});
    def(o.warmTimeoutSeconds, 240.0, 20.0);
    // The limit keeps the page cache from holding the archive's data (its data
    // files use direct I/O anyway); it must leave the store its own memory, which
    // a sanitizer build multiplies (an OOM kill mid-run looks like a crash).
    if (o.archiveMemoryMB <= 0)
        o.archiveMemoryMB = static_cast<int64_t>(o.archiveCacheGB * 1024) + kArchiveStoreOverheadMB;
    return o;
}

namespace {

// ------------------------------------------------------------------ output helpers

void say(const std::string& s) {
    std::fputs(s.c_str(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
}

/// 12345.6 -> "12,346"
std::string thousands(double v) {
    if (!std::isfinite(v)) return "-";
    auto n = static_cast<long long>(std::llround(v));
    std::string d = std::to_string(n < 0 ? -n : n), out;
    for (size_t i = 0; i < d.size(); ++i) {
        if (i && (d.size() - i) % 3 == 0) out += ',';
        out += d[i];
    }
    return (n < 0 ? "-" : "") + out;
}

std::string msText(double us) {
    return std::isfinite(us) ? fmt::format("{:.2f}", us / 1000) : "-";
}

std::string ratioText(double tiered, double alone) {
    if (!std::isfinite(tiered) || !std::isfinite(alone) || alone <= 0) return "-";
    return fmt::format("{:.2f}x", tiered / alone);
}

std::string utcNow(const char* format) {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, format, &tm);
    return buf;
}

int64_t wallMillis() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

double since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string storeUri(int port) {
    return fmt::format("mongodb://127.0.0.1:{}/?directConnection=true", port);
}

std::string dateFilter(int64_t cutoffMillis) {
    return fmt::format(R"({{"date":{{"$gte":{{"$date":{{"$numberLong":"{}"}}}}}}}})", cutoffMillis);
}

std::string idRangeFilter(int64_t from, int64_t to) {
    return fmt::format(R"({{"_id":{{"$gte":"{}","$lt":"{}"}}}})", keyFor(from), keyFor(to));
}

// ------------------------------------------------------------------ the published figures

struct Figure {
    std::string scenario, metric, alone, tiered, ratio, published;
};

/// One measured run of one side.
struct Measured {
    std::string scenario;  // shop, readheavy, concentrated, fixed, cold, overhead, overhead-1
    std::string side;      // alone, tiered, direct, proxy
    int round = 0;
    std::string label;
    RunReport report;
    std::string json;
    double wallSec = 0;
    double diskReadsPerSec = -1;  // archive disk reads during the run (warm-up included)
    double otherCpuPct = -1;      // CPU the idle side used meanwhile (should be ~0)
    int64_t fastDocs = -1;        // cold start: documents in the fast tier at the end
    double fastReadPct = -1;      // tiered: share of reads the proxy sent to the fast tier
    OpCost cost;                  // CPU and round trips per operation of the measured window
};

/// The processes a run goes through besides this one (the client); null where the side
/// has none (archive alone: no proxy, no fast tier).
struct RunProcesses {
    ChildProcess* proxy = nullptr;
    ChildProcess* fast = nullptr;
    ChildProcess* archive = nullptr;
};

/// A running store or proxy and where it listens.
struct Server {
    std::unique_ptr<ChildProcess> proc;
    int port = 0;
    std::string dbpath;
    std::string uri() const { return storeUri(port); }
};

class Reproduction {
  public:
    explicit Reproduction(ReproduceOptions o) : o_(std::move(o)) {}
    /// Runs everything; stops every child and removes the working copies however it ends.
    int run();

  private:
    int runAll();
    Status stopAll();
    // setup
    Status prepare();
    Status checkProxy();
    Status ensureDataset(const std::string& kind, int64_t records, std::string* dir);
    Status copyDataset(const std::string& from, const std::string& to);
    StatusWith<Server> startStore(const std::string& name, const std::string& dbpath,
                                  const std::string& replSet, double cacheGB, bool directIO,
                                  const ArchiveConfinement* conf);
    StatusWith<Server> startProxy(const std::string& name, const std::string& fastUri,
                                  const std::string& archiveUri, bool tiered);
    Status startTieredSide(bool waitWarm);
    Status stopTieredSide();
    Status restartArchive(bool alone);
    Status waitForWarmer();
    Status waitForFeeder(int64_t from, int64_t to);
    // measuring
    WorkloadSpec spec(const std::string& preset, int64_t records) const;
    StatusWith<Measured> measure(const std::string& scenario, const std::string& side, int round,
                                 const WorkloadSpec& spec, RunOptions ro, int64_t* nextInsert,
                                 const ArchiveConfinement* conf,
                                 const std::vector<ChildProcess*>& idle, const RunProcesses& procs);
    std::vector<ChildProcess*> tieredProcs();
    RunProcesses aloneSide() { return {nullptr, nullptr, archiveAlone_.proc.get()}; }
    RunProcesses tieredSide() {
        return {proxy_.proc.get(), fast_.proc.get(), archiveTiered_.proc.get()};
    }
    // scenarios
    Status scenarioMixes();
    Status scenarioFixed();
    Status scenarioCold();
    Status scenarioOverhead();
    Status scenarioPause();
    Status runAlternating(const std::string& scenario, const WorkloadSpec& spec, RunOptions ro);
    // results
    double mean(const std::string& scenario, const std::string& side,
                const std::function<double(const Measured&)>& f) const;
    std::vector<Figure> figures() const;
    /// Failed and NOT_FOUND operations over every run.
    RunReport totals() const;
    std::string figuresTable(const std::vector<Figure>& f) const;
    Status writeOutputs(const std::vector<Figure>& figs, const std::string& table);
    void section(const std::string& title, const std::vector<std::string>& scenarios,
                 std::string notes);
    void loud(const std::string& what);

    ReproduceOptions o_;
    Clock::time_point started_ = Clock::now();
    std::string work_, logs_, runsDir_;
    std::string archiveDataset_, memoryDataset_;
    std::string loadNote_;
    double loadSeconds_ = 0, copySeconds_ = 0, ratioDataToCache_ = 0, avgDocBytes_ = 0;
    int64_t datasetBytes_ = 0;
    std::unique_ptr<ArchiveConfinement> confAlone_, confTiered_;
    bool confined_ = false, cacheDropped_ = true;
    std::vector<std::string> warnings_;
    Server archiveAlone_, archiveTiered_, fast_, proxy_;
    int fastGeneration_ = 0, logSeq_ = 0;
    int64_t nextAlone_ = 0, nextTiered_ = 0;
    std::string warmNote_;
    std::vector<Measured> results_;
    std::map<std::string, std::string> notes_;  // per scenario: run lines for the report
    std::vector<ReportSection> sections_;
    double fixedTarget_ = 0;
};

void Reproduction::loud(const std::string& what) {
    say("");
    say("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
    say("!!! " + what);
    say("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
    warnings_.push_back(what);
}

// ------------------------------------------------------------------ setup

Status Reproduction::checkProxy() {
    // The children are this executable, so its own subcommand table decides. (An unknown
    // subcommand followed by --help prints the top-level help and exits 0 in CLI11, so
    // probing `halocline proxy --help` cannot tell.)
    if (!o_.haveProxy)
        return Status(ErrorCode::CommandNotFound,
                      "the tiered side needs `halocline proxy`, and this binary has no `proxy` "
                      "subcommand yet. Build a binary with the proxy, or pass --skip-tiered to "
                      "measure only the archive-alone and direct sides.");
    return Status::OK();
}

Status Reproduction::prepare() {
    std::error_code ec;
    fs::create_directories(o_.dataDir, ec);
    if (ec) return Status(ErrorCode::BadValue, "cannot create " + o_.dataDir + ": " + ec.message());
    o_.dataDir = fs::canonical(o_.dataDir).string();
    if (o_.outDir.empty())
        o_.outDir =
            o_.dataDir + "/results/" + utcNow("%Y%m%dT%H%M%SZ") + (o_.quick ? "-quick" : "");
    fs::create_directories(o_.outDir, ec);
    if (ec) return Status(ErrorCode::BadValue, "cannot create " + o_.outDir + ": " + ec.message());
    o_.outDir = fs::canonical(o_.outDir).string();
    logs_ = o_.outDir + "/logs";
    runsDir_ = o_.outDir + "/runs";
    fs::create_directories(logs_);
    fs::create_directories(runsDir_);
    // Working copies of leftover runs whose process is gone.
    for (const auto& e : fs::directory_iterator(o_.dataDir)) {
        std::string n = e.path().filename().string();
        if (n.rfind("work-", 0) != 0) continue;
        long pid = std::atol(n.c_str() + 5);
        if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
            fs::remove_all(e.path(), ec);
    }
    work_ = fmt::format("{}/work-{}", o_.dataDir, ::getpid());
    fs::create_directories(work_);
    return Status::OK();
}

StatusWith<Server> Reproduction::startStore(const std::string& name, const std::string& dbpath,
                                            const std::string& replSet, double cacheGB,
                                            bool directIO, const ArchiveConfinement* conf) {
    std::error_code ec;
    fs::create_directories(dbpath, ec);
    ChildProcess::Options po;
    po.name = name;
    po.args = {"store",
               "--port",
               "0",
               "--dbpath",
               dbpath,
               "--wiredTigerCacheSizeGB",
               fmt::format("{}", cacheGB)};
    if (!replSet.empty()) po.args.insert(po.args.end(), {"--replSet", replSet});
    if (directIO) po.args.emplace_back("--directIO");
    if (replSet == "fast" && o_.fastThreads > 0)
        po.args.insert(po.args.end(), {"--threads", std::to_string(o_.fastThreads)});
    if (replSet == "fast" && !o_.fastEngineConfig.empty())
        po.args.insert(po.args.end(), {"--wiredTigerEngineConfigString", o_.fastEngineConfig});
    po.logPath = fmt::format("{}/{:02d}-{}.log", logs_, ++logSeq_, name);
    if (conf) po.cgroupProcs = conf->procsFiles();
    auto child = ChildProcess::start(po);
    if (!child.isOK()) return child.getStatus();
    Server s;
    s.proc = std::move(child.getValue());
    s.dbpath = dbpath;
    auto port = s.proc->waitForPort(std::chrono::seconds(120));
    if (!port.isOK()) return port.getStatus();
    s.port = port.getValue();
    return s;
}

StatusWith<Server> Reproduction::startProxy(const std::string& name, const std::string& fastUri,
                                            const std::string& archiveUri, bool tiered) {
    std::string cfg = fmt::format("{}/{}.yaml", o_.outDir, name);
    {
        std::ofstream f(cfg);
        f << proxyConfigYaml(fastUri, archiveUri, o_.horizon, tiered, o_.coldWrites, o_.feederMode,
                             o_.feederLazyDelay, o_.warmerRate);
        if (!f) return Status(ErrorCode::OperationFailed, "cannot write " + cfg);
    }
    ChildProcess::Options po;
    po.name = name;
    po.args = {"proxy", "--config", cfg};
    po.logPath = fmt::format("{}/{:02d}-{}.log", logs_, ++logSeq_, name);
    auto child = ChildProcess::start(po);
    if (!child.isOK()) return child.getStatus();
    Server s;
    s.proc = std::move(child.getValue());
    auto port = s.proc->waitForPort(std::chrono::seconds(120));
    if (!port.isOK()) return port.getStatus();
    s.port = port.getValue();
    return s;
}

WorkloadSpec Reproduction::spec(const std::string& preset, int64_t records) const {
    WorkloadSpec w = WorkloadSpec::preset(preset).getValue();
    w.recordCount = records;
    w.fieldCount = o_.fieldCount;
    w.fieldLength = o_.fieldLength;
    return w;
}

/// Loads `records` documents into <dataDir>/<kind>-<records>x<fields>x<length> once; later
/// invocations reuse it (a marker file records that the load finished, and how long it took).
Status Reproduction::ensureDataset(const std::string& kind, int64_t records, std::string* dir) {
    std::string base =
        fmt::format("{}/{}-{}x{}x{}", o_.dataDir, kind, records, o_.fieldCount, o_.fieldLength);
    *dir = base;
    std::string marker = base + ".loaded";
    if (fs::exists(marker)) {
        std::ifstream f(marker);
        std::string line;
        std::getline(f, line);
        say(fmt::format("dataset {}: reused ({})", fs::path(base).filename().string(), line));
        return Status::OK();
    }
    say(fmt::format("dataset {}: loading {} documents (once; later runs reuse it) ...",
                    fs::path(base).filename().string(), thousands(static_cast<double>(records))));
    auto t0 = Clock::now();
    // Loaded unconfined with a larger cache: the constraint applies to the measured runs.
    auto store = startStore("load-" + kind, base, kind, 1.0, false, nullptr);
    if (!store.isOK()) return store.getStatus();
    RunOptions ro;
    ro.uri = store.getValue().uri();
    ro.threads = 8;
    Status s = load(spec("shop", records), ro, true);
    if (!s.isOK()) return s;
    s = store.getValue().proc->stop();
    if (!s.isOK()) return s;
    double secs = since(t0);
    if (kind == "archive") loadSeconds_ = secs;
    std::ofstream(marker) << fmt::format("loaded {} in {:.0f} s, {:.0f} docs/s", utcNow("%F %TZ"),
                                         secs, static_cast<double>(records) / secs)
                          << "\n";
    say(fmt::format("dataset {}: loaded {} documents in {:.0f} s",
                    fs::path(base).filename().string(), thousands(static_cast<double>(records)),
                    secs));
    return Status::OK();
}

Status Reproduction::copyDataset(const std::string& from, const std::string& to) {
    std::error_code ec;
    fs::remove_all(to, ec);
    fs::copy(from, to, fs::copy_options::recursive, ec);
    if (ec) return Status(ErrorCode::OperationFailed, "copy " + from + ": " + ec.message());
    fs::remove(to + "/WiredTiger.lock", ec);
    return Status::OK();
}

std::vector<ChildProcess*> Reproduction::tieredProcs() {
    std::vector<ChildProcess*> out;
    for (Server* s : {&archiveTiered_, &fast_, &proxy_})
        if (s->proc) out.push_back(s->proc.get());
    return out;
}

Status Reproduction::startTieredSide(bool waitWarm) {
    std::string dbpath = fmt::format("{}/fast-{}", work_, ++fastGeneration_);
    auto fast = startStore("fast", dbpath, "fast", 1.0, false, nullptr);
    if (!fast.isOK()) return fast.getStatus();
    fast_ = std::move(fast.getValue());
    auto proxy = startProxy(
        "proxy", fmt::format("mongodb://127.0.0.1:{}/?replicaSet=fast", fast_.port),
        fmt::format("mongodb://127.0.0.1:{}/?replicaSet=archive", archiveTiered_.port), true);
    if (!proxy.isOK()) return proxy.getStatus();
    proxy_ = std::move(proxy.getValue());
    return waitWarm ? waitForWarmer() : Status::OK();
}

Status Reproduction::stopTieredSide() {
    Status result = Status::OK();
    if (proxy_.proc) result = proxy_.proc->stop();
    proxy_ = Server();
    if (fast_.proc) {
        Status s = fast_.proc->stop();
        if (result.isOK()) result = s;
        std::error_code ec;
        fs::remove_all(fast_.dbpath, ec);
    }
    fast_ = Server();
    return result;
}

Status Reproduction::restartArchive(bool alone) {
    Server& s = alone ? archiveAlone_ : archiveTiered_;
    std::string dbpath = s.dbpath;
    if (s.proc) {
        Status st = s.proc->stop();
        if (!st.isOK()) return st;
    }
    auto started =
        startStore(alone ? "archive-alone" : "archive-tiered", dbpath, "archive", o_.archiveCacheGB,
                   true, alone ? confAlone_.get() : confTiered_.get());
    if (!started.isOK()) return started.getStatus();
    s = std::move(started.getValue());
    return Status::OK();
}

/// Waits (bounded) until the fast tier holds what the warmer should copy: the documents
/// newer than the horizon. Reports how far it got; never fails the run for a slow warmer.
Status Reproduction::waitForWarmer() {
    int64_t cutoff = wallMillis() - parseHorizonMillis(o_.horizon);
    std::string filter = dateFilter(cutoff);
    auto want = countDocuments(archiveTiered_.uri(), "ycsb", "usertable", filter);
    if (!want.isOK()) return want.getStatus();
    auto t0 = Clock::now();
    int64_t have = 0;
    double lastPrint = -100;
    while (true) {
        auto n = countDocuments(fast_.uri(), "ycsb", "usertable", filter);
        if (!n.isOK()) return n.getStatus();
        have = n.getValue();
        double secs = since(t0);
        bool done = have >= want.getValue() * 99 / 100;
        if (done || secs - lastPrint >= 10) {
            say(fmt::format(
                "  warming the fast tier: {} of {} documents newer than {} ({:.0f}%) "
                "after {:.0f} s",
                thousands(static_cast<double>(have)),
                thousands(static_cast<double>(want.getValue())), o_.horizon,
                want.getValue()
                    ? 100.0 * static_cast<double>(have) / static_cast<double>(want.getValue())
                    : 100.0,
                secs));
            lastPrint = secs;
        }
        if (done) {
            warmNote_ = fmt::format("fast tier warmed: {} documents in {:.0f} s",
                                    thousands(static_cast<double>(have)), secs);
            return Status::OK();
        }
        if (secs >= o_.warmTimeoutSeconds) {
            warmNote_ = fmt::format(
                "fast tier NOT fully warm: {} of {} documents after {:.0f} s (--warm-timeout)",
                thousands(static_cast<double>(have)),
                thousands(static_cast<double>(want.getValue())), secs);
            loud(warmNote_ + "; the steady-state tiered runs start anyway");
            return Status::OK();
        }
        std::this_thread::sleep_for(std::chrono::seconds(2));  // polling another process
    }
}

/// After a tiered run: waits (bounded) until the archive holds every document the run
/// inserted through the proxy (the feeder caught up), so the next run starts level.
Status Reproduction::waitForFeeder(int64_t from, int64_t to) {
    if (to <= from) return Status::OK();
    if (o_.feederMode == "lazy") {
        // What a lazy feeder still holds gathered: written now, timed, so that the
        // next run starts level and the deferred work shows.
        auto t0 = Clock::now();
        if (Status s = flushFeeder(proxy_.uri(), 120'000); !s.isOK()) return s;
        say(fmt::format("    feeder (lazy): wrote what it gathered in {:.1f} s after the run",
                        since(t0)));
    }
    std::string filter = idRangeFilter(from, to);
    auto inFast = countDocuments(fast_.uri(), "ycsb", "usertable", filter);
    if (!inFast.isOK()) return inFast.getStatus();
    auto t0 = Clock::now();
    double limit = o_.quick ? 30 : 120;
    while (true) {
        auto inArchive = countDocuments(archiveTiered_.uri(), "ycsb", "usertable", filter);
        if (!inArchive.isOK()) return inArchive.getStatus();
        if (inArchive.getValue() >= inFast.getValue()) {
            say(
                fmt::format("    feeder: the archive holds all {} inserted documents ({:.1f} s "
                            "after the run)",
                            thousands(static_cast<double>(inArchive.getValue())), since(t0)));
            return Status::OK();
        }
        if (since(t0) > limit) {
            loud(
                fmt::format("feeder still behind {:.0f} s after the run: archive has {} of {} "
                            "inserted documents",
                            limit, inArchive.getValue(), inFast.getValue()));
            return Status::OK();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(500));  // polling another process
    }
}

// ------------------------------------------------------------------ measuring

StatusWith<Measured> Reproduction::measure(const std::string& scenario, const std::string& side,
                                           int round, const WorkloadSpec& spec, RunOptions ro,
                                           int64_t* nextInsert, const ArchiveConfinement* conf,
                                           const std::vector<ChildProcess*>& idle,
                                           const RunProcesses& procs) {
    Status dropped = dropPageCache();
    if (!dropped.isOK() && cacheDropped_) {
        cacheDropped_ = false;
        loud("cannot drop the page cache (" + dropped.reason() +
             "): archive reads may be served from memory; results are marked as such");
    }
    int64_t reads0 = conf ? conf->diskReads() : -1;
    double cpu0 = 0;
    for (auto* p : idle) cpu0 += std::max(0.0, p->cpuSeconds());
    ro.insertStart = *nextInsert;
    ro.seed = 1000 + static_cast<uint64_t>(round);
    // The measured window (warm-up excluded): CPU of every process and the proxy's
    // counters at both ends.
    CostSample cost0, cost1;
    std::optional<ProxyRouting> routed0, routed1;
    auto sample = [&](CostSample* c, std::optional<ProxyRouting>* routed) {
        auto ticks = [](ChildProcess* p) { return p ? processCpuTicks(p->pid()) : -1; };
        c->cpuTicks = {processCpuTicks(::getpid()), ticks(procs.proxy), ticks(procs.fast),
                       ticks(procs.archive)};
        if (!procs.proxy) return;
        if (auto st = proxyStatus(ro.uri); st.isOK()) {
            c->fastRoundTrips = st.getValue().fastRoundTrips;
            c->archiveRoundTrips = st.getValue().archiveRoundTrips;
            *routed = st.getValue().routing;
        }
    };
    ro.onMeasureStart = [&] { sample(&cost0, &routed0); };
    ro.onMeasureEnd = [&] { sample(&cost1, &routed1); };
    // The other side is paused meanwhile: its background work (a store's
    // checkpoints and cache eviction after its own run, the proxy's workers)
    // would take CPU from this one, which on separate machines it would not.
    for (auto* p : idle) p->pause();
    auto t0 = Clock::now();
    auto r = halo::bench::run(spec, ro);
    for (auto* p : idle) p->resume();
    if (!r.isOK()) return r.getStatus();
    Measured m;
    m.scenario = scenario;
    m.side = side;
    m.round = round;
    m.label = ro.label;
    m.report = std::move(r.getValue());
    m.wallSec = since(t0);
    *nextInsert = m.report.nextInsert;
    if (conf && reads0 >= 0)
        m.diskReadsPerSec = static_cast<double>(conf->diskReads() - reads0) / m.wallSec;
    if (side == "tiered" && routed0 && routed1) {
        int64_t fast = routed1->fast - routed0->fast;
        int64_t all = fast + routed1->archive - routed0->archive;
        if (all > 0) m.fastReadPct = 100.0 * static_cast<double>(fast) / all;
    }
    const OpReport& all = m.report.overall;
    m.cost = costBetween(cost0, cost1, all.ok + all.failed + all.notFound, procs.proxy != nullptr,
                         clockTicksPerSecond());
    if (!idle.empty()) {
        double cpu1 = 0;
        for (auto* p : idle) cpu1 += std::max(0.0, p->cpuSeconds());
        m.otherCpuPct = 100.0 * (cpu1 - cpu0) / m.wallSec;
    }
    m.json = toJson(m.report, spec, ro, costJsonFields(m.cost));
    std::ofstream(fmt::format("{}/{}-{}-{}.json", runsDir_, scenario, side, round))
        << m.json << "\n";
    const RunReport& rep = m.report;
    auto op = [&](const char* name, double OpReport::*f) {
        auto it = rep.ops.find(name);
        return it == rep.ops.end() ? std::string("-") : msText(it->second.*f);
    };
    std::string line = fmt::format(
        "  [{} {}/{}] {:<16} {:>8} ops/s  read p95 {} p99 {} ms  update p99 {} ms  failed {}  "
        "NOT_FOUND {}",
        scenario, round, o_.rounds, m.label, thousands(rep.opsPerSec), op("READ", &OpReport::p95us),
        op("READ", &OpReport::p99us), op("UPDATE", &OpReport::p99us), rep.failed, rep.notFound);
    if (m.diskReadsPerSec >= 0)
        line += fmt::format(
            "  archive disk reads {}/s{}", thousands(m.diskReadsPerSec),
            m.diskReadsPerSec >= 0.9 * o_.readIops
                ? fmt::format(" (IOPS-bound: {:.0f}% of the cap)",
                              100 * m.diskReadsPerSec / o_.readIops)
                : fmt::format(" ({:.0f}% of the cap)", 100 * m.diskReadsPerSec / o_.readIops));
    if (m.fastReadPct >= 0)
        line += fmt::format("  reads from the fast tier {:.0f}%", m.fastReadPct);
    if (m.otherCpuPct >= 0) line += fmt::format("  idle side CPU {:.0f}%", m.otherCpuPct);
    line += fmt::format("  CPU us/op client|proxy|fast|archive {}  round trips/op fast|archive {}",
                        cpuText(m.cost), roundTripsText(m.cost));
    if (!rep.firstError.empty()) line += "\n      first error: " + rep.firstError;
    say(line);
    notes_[scenario] += line.substr(2) + "\n";
    if (rep.notFound > 0)
        loud(fmt::format(
            "NOT_FOUND in {} {} #{} ({}): {} operations found no document ({}). The keys do "
            "not match the data, or a tier lost documents; this run's figures are not valid.",
            scenario, side, round, m.label, rep.notFound, notFoundByOperation(rep)));
    return m;
}

Status Reproduction::runAlternating(const std::string& scenario, const WorkloadSpec& spec,
                                    RunOptions ro) {
    for (int round = 1; round <= o_.rounds; ++round) {
        RunOptions a = ro;
        a.label = fmt::format("archive alone #{}", round);
        a.uri = archiveAlone_.uri();
        auto ma = measure(scenario, "alone", round, spec, a, &nextAlone_, confAlone_.get(),
                          tieredProcs(), aloneSide());
        if (!ma.isOK()) return ma.getStatus();
        results_.push_back(std::move(ma.getValue()));
        if (o_.skipTiered) continue;
        RunOptions b = ro;
        b.label = fmt::format("tiered #{}", round);
        b.uri = proxy_.uri();
        int64_t from = nextTiered_;
        auto mb = measure(scenario, "tiered", round, spec, b, &nextTiered_, confTiered_.get(),
                          {archiveAlone_.proc.get()}, tieredSide());
        if (!mb.isOK()) return mb.getStatus();
        results_.push_back(std::move(mb.getValue()));
        Status s = waitForFeeder(from, nextTiered_);
        if (!s.isOK()) return s;
    }
    return Status::OK();
}

// ------------------------------------------------------------------ scenarios

Status Reproduction::scenarioMixes() {
    for (const char* mix : {"shop", "readheavy", "concentrated"}) {
        say(
            fmt::format("\n== {} mix, {} threads, closed loop: {} s measured after {} s warm-up, "
                        "A B A B",
                        mix, o_.threads, o_.seconds, o_.warmupSeconds));
        RunOptions ro;
        ro.threads = o_.threads;
        ro.seconds = o_.seconds;
        ro.warmupSeconds = o_.warmupSeconds;
        Status s = runAlternating(mix, spec(mix, o_.recordCount), ro);
        if (!s.isOK()) return s;
        section(fmt::format("{} mix, {} threads (closed loop)", mix, o_.threads), {mix}, "");
    }
    return Status::OK();
}

Status Reproduction::scenarioFixed() {
    fixedTarget_ = mean(o_.workload, "alone", [](const Measured& m) { return m.report.opsPerSec; });
    if (!std::isfinite(fixedTarget_)) {
        say(fmt::format("\n== measuring the archive-alone maximum ({} mix, closed loop)",
                        o_.workload));
        RunOptions ro;
        ro.label = "archive alone (calibration)";
        ro.uri = archiveAlone_.uri();
        ro.threads = o_.threads;
        ro.seconds = o_.seconds;
        ro.warmupSeconds = o_.warmupSeconds;
        auto m = measure("calibration", "alone", 1, spec(o_.workload, o_.recordCount), ro,
                         &nextAlone_, confAlone_.get(), tieredProcs(), aloneSide());
        if (!m.isOK()) return m.getStatus();
        fixedTarget_ = m.getValue().report.opsPerSec;
    }
    fixedTarget_ = std::max(1.0, std::floor(fixedTarget_));
    say(
        fmt::format("\n== fixed load at the archive-alone maximum: {} ops/s requested ({} mix, "
                    "{} threads), A B A B",
                    thousands(fixedTarget_), o_.workload, o_.threads));
    RunOptions ro;
    ro.threads = o_.threads;
    ro.seconds = o_.seconds;
    ro.warmupSeconds = o_.warmupSeconds;
    ro.targetOpsPerSec = fixedTarget_;
    Status s = runAlternating("fixed", spec(o_.workload, o_.recordCount), ro);
    if (!s.isOK()) return s;
    section(fmt::format("Fixed load: {} ops/s requested ({} mix)", thousands(fixedTarget_),
                        o_.workload),
            {"fixed"}, "");
    return Status::OK();
}

Status Reproduction::scenarioCold() {
    say(
        fmt::format("\n== cold start: {} mix, {} threads, {} s from a cold archive cache and an "
                    "empty fast tier, A B A B",
                    o_.workload, o_.threads, o_.coldSeconds));
    WorkloadSpec w = spec(o_.workload, o_.recordCount);
    for (int round = 1; round <= o_.rounds; ++round) {
        Status s = restartArchive(true);
        if (!s.isOK()) return s;
        RunOptions ro;
        ro.threads = o_.threads;
        ro.seconds = o_.coldSeconds;
        ro.label = fmt::format("archive alone #{}", round);
        ro.uri = archiveAlone_.uri();
        auto ma = measure("cold", "alone", round, w, ro, &nextAlone_, confAlone_.get(),
                          tieredProcs(), aloneSide());
        if (!ma.isOK()) return ma.getStatus();
        results_.push_back(std::move(ma.getValue()));
        if (o_.skipTiered) continue;
        s = stopTieredSide();
        if (!s.isOK()) return s;
        s = restartArchive(false);
        if (!s.isOK()) return s;
        s = startTieredSide(false);
        if (!s.isOK()) return s;
        ro.label = fmt::format("tiered #{}", round);
        ro.uri = proxy_.uri();
        int64_t from = nextTiered_;
        auto mb = measure("cold", "tiered", round, w, ro, &nextTiered_, confTiered_.get(),
                          {archiveAlone_.proc.get()}, tieredSide());
        if (!mb.isOK()) return mb.getStatus();
        auto docs = countDocuments(fast_.uri(), "ycsb", "usertable", "{}");
        if (docs.isOK()) {
            mb.getValue().fastDocs = docs.getValue();
            say(fmt::format("    fast tier holds {} documents after the run",
                            thousands(static_cast<double>(docs.getValue()))));
        }
        results_.push_back(std::move(mb.getValue()));
        s = waitForFeeder(from, nextTiered_);
        if (!s.isOK()) return s;
    }
    section(fmt::format("Cold start: {} s, {} mix, cold archive cache, empty fast tier",
                        o_.coldSeconds, o_.workload),
            {"cold"}, "");
    return Status::OK();
}

Status Reproduction::scenarioPause() {
    if (o_.skipTiered) return Status::OK();
    say(
        fmt::format("\n== feeder paused: {} mix, {} threads, closed loop, tiered side only: "
                    "feeder running vs paused (haloclinePauseFeeder) for the whole run, A B A B",
                    o_.workload, o_.threads));
    WorkloadSpec w = spec(o_.workload, o_.recordCount);
    for (int round = 1; round <= o_.rounds; ++round) {
        RunOptions ro;
        ro.threads = o_.threads;
        ro.seconds = o_.seconds;
        ro.warmupSeconds = o_.warmupSeconds;
        ro.uri = proxy_.uri();
        for (const char* side : {"running", "paused"}) {
            const bool paused = std::string_view(side) == "paused";
            ro.label = fmt::format("feeder {} #{}", side, round);
            if (paused) {
                // Longer than the run: lifted explicitly below.
                auto ms = static_cast<int64_t>((o_.warmupSeconds + o_.seconds + 60) * 1000);
                if (Status s = pauseFeeder(proxy_.uri(), ms); !s.isOK()) return s;
            }
            int64_t from = nextTiered_;
            auto m = measure("pause", side, round, w, ro, &nextTiered_, confTiered_.get(),
                             {archiveAlone_.proc.get()}, tieredSide());
            if (paused)
                if (Status s = pauseFeeder(proxy_.uri(), 0); !s.isOK()) return s;
            if (!m.isOK()) return m.getStatus();
            results_.push_back(std::move(m.getValue()));
            // After the paused run: how long the feeder takes to catch up.
            if (Status s = waitForFeeder(from, nextTiered_); !s.isOK()) return s;
        }
    }
    section(fmt::format("Feeder paused for a whole run ({} mix, tiered side)", o_.workload),
            {"pause"}, "");
    return Status::OK();
}

Status Reproduction::scenarioOverhead() {
    say(
        fmt::format("\n== proxy overhead, everything in memory: {} documents, {} mix, direct "
                    "store vs proxy to that store (no tiered collection), A B A B",
                    thousands(static_cast<double>(o_.memoryRecordCount)), o_.workload));
    std::string copy = work_ + "/memory";
    Status s = copyDataset(memoryDataset_, copy);
    if (!s.isOK()) return s;
    auto store = startStore("memory-store", copy, "memory", 1.0, false, nullptr);
    if (!store.isOK()) return store.getStatus();
    Server mem = std::move(store.getValue());
    Server emptyFast, passProxy;
    if (!o_.skipTiered) {
        auto f = startStore("memory-fast", work_ + "/memory-fast", "fast", 0.25, false, nullptr);
        if (!f.isOK()) return f.getStatus();
        emptyFast = std::move(f.getValue());
        auto p =
            startProxy("passthrough-proxy",
                       fmt::format("mongodb://127.0.0.1:{}/?replicaSet=fast", emptyFast.port),
                       fmt::format("mongodb://127.0.0.1:{}/?replicaSet=memory", mem.port), false);
        if (!p.isOK()) return p.getStatus();
        passProxy = std::move(p.getValue());
    }
    WorkloadSpec w = spec(o_.workload, o_.memoryRecordCount);
    int64_t next = o_.memoryRecordCount;
    auto pass = [&](const std::string& scenario, int threads, double seconds) -> Status {
        for (int round = 1; round <= o_.rounds; ++round) {
            RunOptions ro;
            ro.threads = threads;
            ro.seconds = seconds;
            ro.warmupSeconds = std::min(o_.warmupSeconds, 5.0);
            ro.label = fmt::format("direct #{}", round);
            ro.uri = mem.uri();
            auto a = measure(scenario, "direct", round, w, ro, &next, nullptr, {},
                             {nullptr, nullptr, mem.proc.get()});
            if (!a.isOK()) return a.getStatus();
            results_.push_back(std::move(a.getValue()));
            if (o_.skipTiered) continue;
            ro.label = fmt::format("proxy #{}", round);
            ro.uri = passProxy.uri();
            auto b = measure(scenario, "proxy", round, w, ro, &next, nullptr, {},
                             {passProxy.proc.get(), emptyFast.proc.get(), mem.proc.get()});
            if (!b.isOK()) return b.getStatus();
            results_.push_back(std::move(b.getValue()));
        }
        return Status::OK();
    };
    // Everything is in memory: shorter runs settle as well as long ones.
    s = pass("overhead", o_.threads, std::max(3.0, o_.seconds / 2));
    if (s.isOK()) s = pass("overhead-1", 1, std::max(2.0, o_.seconds / 3));
    for (Server* srv : {&passProxy, &emptyFast, &mem})
        if (srv->proc) {
            Status st = srv->proc->stop();
            if (s.isOK() && !st.isOK()) s = st;
        }
    if (!s.isOK()) return s;
    section(fmt::format("Proxy overhead, in memory, {} threads ({} mix)", o_.threads, o_.workload),
            {"overhead"}, "");
    section(fmt::format("Proxy overhead, in memory, 1 thread ({} mix)", o_.workload),
            {"overhead-1"}, "");
    return Status::OK();
}

// ------------------------------------------------------------------ results

double Reproduction::mean(const std::string& scenario, const std::string& side,
                          const std::function<double(const Measured&)>& f) const {
    double sum = 0;
    int n = 0;
    for (const auto& m : results_)
        if (m.scenario == scenario && m.side == side) {
            double v = f(m);
            if (!std::isfinite(v) || v < 0) continue;
            sum += v;
            ++n;
        }
    return n ? sum / n : std::nan("");
}

RunReport Reproduction::totals() const {
    RunReport t;
    for (const auto& m : results_) {
        t.failed += m.report.failed;
        t.notFound += m.report.notFound;
    }
    return t;
}

std::vector<Figure> Reproduction::figures() const {
    std::vector<Figure> out;
    auto opField = [](const char* op, double OpReport::*f) {
        return [op, f](const Measured& m) {
            auto it = m.report.ops.find(op);
            return it == m.report.ops.end() ? std::nan("") : it->second.*f;
        };
    };
    auto ops = [](const Measured& m) { return m.report.opsPerSec; };
    auto reads = [](const Measured& m) { return m.diskReadsPerSec; };
    auto row = [&](const std::string& scenario, const std::string& key, const std::string& metric,
                   const std::function<double(const Measured&)>& f, bool latency,
                   const std::string& published, const char* a = "alone",
                   const char* b = "tiered") {
        double va = mean(key, a, f), vb = mean(key, b, f);
        auto show = [&](double v) { return latency ? msText(v) : thousands(v); };
        out.push_back({scenario, metric, show(va), o_.skipTiered ? "skipped" : show(vb),
                       ratioText(vb, va), published});
    };
    // CPU per operation of each process and the proxy's round trips per operation to each
    // tier, each the mean over the rounds; the ratio compares the CPU of all processes.
    auto meanCost = [&](const std::string& key, const char* side) {
        OpCost c;
        for (size_t i = 0; i < c.cpuUsPerOp.size(); ++i)
            c.cpuUsPerOp[i] =
                mean(key, side, [i](const Measured& m) { return m.cost.cpuUsPerOp[i]; });
        for (size_t i = 0; i < c.roundTripsPerOp.size(); ++i)
            c.roundTripsPerOp[i] =
                mean(key, side, [i](const Measured& m) { return m.cost.roundTripsPerOp[i]; });
        for (const auto& m : results_)
            if (m.scenario == key && m.side == side) c.viaProxy = c.viaProxy || m.cost.viaProxy;
        return c;
    };
    auto costRows = [&](const std::string& scenario, const std::string& key,
                        const char* a = "alone", const char* b = "tiered") {
        OpCost ca = meanCost(key, a), cb = meanCost(key, b);
        out.push_back({scenario, "CPU us/op client|proxy|fast|archive", cpuText(ca),
                       o_.skipTiered ? "skipped" : cpuText(cb),
                       ratioText(totalCpuUsPerOp(cb), totalCpuUsPerOp(ca)), "-"});
        out.push_back({scenario, "round trips/op fast|archive", roundTripsText(ca),
                       o_.skipTiered ? "skipped" : roundTripsText(cb), "-", "-"});
    };
    std::string thr = fmt::format("@{} thr", o_.threads);
    const std::map<std::string, std::array<std::string, 3>> published = {
        {"shop", {"1.6x", "-", "-"}},
        {"readheavy", {"between 1.6x and 5.2x", "-", "-"}},
        {"concentrated", {"5.2x (4,447 -> 23,340)", "86 -> 6 (0.07x)", "92 -> 8 (0.09x)"}},
    };
    for (const char* mix : {"shop", "readheavy", "concentrated"}) {
        if (!std::isfinite(mean(mix, "alone", ops))) continue;
        const auto& p = published.at(mix);
        row(fmt::format("{} {}", mix, thr), mix, "ops/s", ops, false, p[0]);
        row(mix, mix, "read p95 ms", opField("READ", &OpReport::p95us), true, p[1]);
        row(mix, mix, "read p99 ms", opField("READ", &OpReport::p99us), true, p[2]);
        row(mix, mix, "update p99 ms", opField("UPDATE", &OpReport::p99us), true, "-");
        row(mix, mix, "archive disk reads/s", reads, false, "-");
        costRows(mix, mix);
    }
    if (std::isfinite(mean("fixed", "alone", ops))) {
        std::string sc = fmt::format("fixed {} req", thousands(fixedTarget_));
        row(sc, "fixed", "ops/s delivered", ops, false, "6,086 vs 6,156-6,159 (6,165 req)");
        row(sc, "fixed", "read p95 ms", opField("READ", &OpReport::p95us), true,
            "70.5 -> 2.1-2.8 (0.03-0.04x)");
        row(sc, "fixed", "read p99 ms", opField("READ", &OpReport::p99us), true,
            "81 -> 7-27 (0.09-0.33x)");
        row(sc, "fixed", "archive disk reads/s", reads, false, "2,704 -> 1,838 (0.68x)");
        costRows(sc, "fixed");
        row("update latency (fixed)", "fixed", "update p50 ms", opField("UPDATE", &OpReport::p50us),
            true, "-");
        row("update latency (fixed)", "fixed", "update p99 ms", opField("UPDATE", &OpReport::p99us),
            true, "104-189 -> 455-472 (2.4-4.5x, regressed); target <= 1x");
        row("update latency (fixed)", "fixed", "update p99.9 ms",
            opField("UPDATE", &OpReport::p999us), true, "-");
    }
    if (std::isfinite(mean("cold", "alone", ops))) {
        std::string sc = fmt::format("cold start {:.0f} s", o_.coldSeconds);
        row(sc, "cold", "avg ops/s", ops, false, "5,803 -> 8,221 (1.42x), 1,800 s run");
        std::vector<std::vector<int64_t>> a, b;
        for (const auto& m : results_)
            if (m.scenario == "cold") (m.side == "alone" ? a : b).push_back(m.report.perSecond);
        auto ma = meanTimeline(a), mb = meanTimeline(b);
        int pass = passingSecond(ma, mb);
        auto fifth = [](const std::vector<double>& v, bool last) {
            size_t n = v.size() / 5;
            if (n == 0) return std::nan("");
            double s = 0;
            for (size_t i = 0; i < n; ++i) s += v[last ? v.size() - n + i : i];
            return s / static_cast<double>(n);
        };
        out.push_back({sc, "tiered passes alone at", "",
                       o_.skipTiered ? "skipped"
                       : pass < 0    ? "never"
                                     : fmt::format("{} s", pass),
                       "", "100 s of 1,800"});
        out.push_back(
            {sc, "first / last fifth ops/s",
             fmt::format("{} / {}", thousands(fifth(ma, false)), thousands(fifth(ma, true))),
             o_.skipTiered
                 ? "skipped"
                 : fmt::format("{} / {}", thousands(fifth(mb, false)), thousands(fifth(mb, true))),
             "", "tiered 6,417 / 9,146"});
        double docs = mean("cold", "tiered", [](const Measured& m) {
            if (m.fastDocs < 0) return std::nan("");
            auto ins = m.report.ops.find("INSERT");
            // Inserts land in the fast tier too; what remains was copied up from the archive.
            return std::max(
                0.0, static_cast<double>(m.fastDocs) -
                         static_cast<double>(ins == m.report.ops.end() ? 0 : ins->second.ok));
        });
        out.push_back({sc, "docs copied up (fast - inserted)", "",
                       o_.skipTiered ? "skipped" : thousands(docs), "", "271,271 warmed"});
        row(sc, "cold", "archive disk reads/s", reads, false, "-");
        costRows(sc, "cold");
    }
    if (std::isfinite(mean("pause", "running", ops))) {
        std::string sc = fmt::format("feeder paused {}", thr);
        const char* target = "issue 18: no 262, no slower reads";
        row(sc, "pause", "ops/s", ops, false, "-", "running", "paused");
        row(sc, "pause", "read p95 ms", opField("READ", &OpReport::p95us), true, target, "running",
            "paused");
        row(sc, "pause", "read p99 ms", opField("READ", &OpReport::p99us), true, "-", "running",
            "paused");
        row(sc, "pause", "update p99 ms", opField("UPDATE", &OpReport::p99us), true, "-", "running",
            "paused");
        row(
            sc, "pause", "failed operations",
            [](const Measured& m) { return static_cast<double>(m.report.failed); }, false, target,
            "running", "paused");
        costRows(sc, "pause", "running", "paused");
    }
    if (std::isfinite(mean("overhead", "direct", ops))) {
        std::string sc = fmt::format("proxy overhead {}", thr);
        row(sc, "overhead", "ops/s", ops, false, "target >= 0.85x", "direct", "proxy");
        row(
            sc, "overhead", "p50 ms (all ops)",
            [](const Measured& m) { return m.report.overall.p50us; }, true, "-", "direct", "proxy");
        row(
            sc, "overhead", "p99 ms (all ops)",
            [](const Measured& m) { return m.report.overall.p99us; }, true, "-", "direct", "proxy");
        costRows(sc, "overhead", "direct", "proxy");
        auto p50 = [](const Measured& m) { return m.report.overall.p50us; };
        auto p99 = [](const Measured& m) { return m.report.overall.p99us; };
        double a50 = mean("overhead-1", "direct", p50), b50 = mean("overhead-1", "proxy", p50);
        double a99 = mean("overhead-1", "direct", p99), b99 = mean("overhead-1", "proxy", p99);
        out.push_back(
            {"proxy overhead @1 thr", "p50 / p99 us",
             fmt::format("{} / {}", thousands(a50), thousands(a99)),
             o_.skipTiered ? "skipped" : fmt::format("{} / {}", thousands(b50), thousands(b99)),
             o_.skipTiered
                 ? "-"
                 : fmt::format("+{} / +{} us", thousands(b50 - a50), thousands(b99 - a99)),
             "target: added p50 <= ~2 loopback round trips"});
        costRows("proxy overhead @1 thr", "overhead-1", "direct", "proxy");
    }
    return out;
}

std::string Reproduction::figuresTable(const std::vector<Figure>& figs) const {
    size_t w[6] = {8, 6, 5, 6, 5, 9};
    auto fit = [&](const Figure& f) {
        const std::string* c[6] = {&f.scenario, &f.metric, &f.alone,
                                   &f.tiered,   &f.ratio,  &f.published};
        for (int i = 0; i < 6; ++i) w[i] = std::max(w[i], c[i]->size());
    };
    Figure head{"scenario", "metric", "alone", "tiered", "ratio", "published (3-node PoC)"};
    fit(head);
    for (const auto& f : figs) fit(f);
    auto line = [&](const Figure& f) {
        return fmt::format("{:<{}}  {:<{}}  {:>{}}  {:>{}}  {:>{}}  {}\n", f.scenario, w[0],
                           f.metric, w[1], f.alone, w[2], f.tiered, w[3], f.ratio, w[4],
                           f.published);
    };
    std::string out = line(head);
    out += std::string(w[0] + w[1] + w[2] + w[3] + w[4] + w[5] + 10, '-') + "\n";
    std::string last;
    for (const auto& f : figs) {
        Figure g = f;
        if (g.scenario == last) g.scenario = "";
        last = f.scenario;
        out += line(g);
    }
    out +=
        "ratio = tiered / alone (proxy / direct for the overhead rows). Alone and direct are "
        "the same store with no proxy in front.\n";
    return out;
}

void Reproduction::section(const std::string& title, const std::vector<std::string>& scenarios,
                           std::string notes) {
    ReportSection sec;
    sec.title = title;
    for (const auto& sc : scenarios) {
        notes += notes_[sc];
        for (const auto& m : results_)
            if (m.scenario == sc) sec.runs.push_back({m.label, m.json});
    }
    sec.notes = std::move(notes);
    sections_.push_back(std::move(sec));
}

Status Reproduction::writeOutputs(const std::vector<Figure>& figs, const std::string& table) {
    std::string header = fmt::format(
        "halocline bench reproduce{} - {}\narchive: {} documents of {:.0f} B ({:.1f}x the {} GB "
        "WiredTiger cache), {}\n{}{}",
        o_.quick ? " --quick" : "", utcNow("%F %TZ"),
        thousands(static_cast<double>(o_.recordCount)), avgDocBytes_, ratioDataToCache_,
        o_.archiveCacheGB, confAlone_ ? confAlone_->describe() : "-",
        warmNote_.empty() ? "" : warmNote_ + "\n", warnings_.empty() ? "" : "WARNINGS:\n  " + [&] {
            std::string w;
            for (const auto& s : warnings_) w += (w.empty() ? "" : "\n  ") + s;
            return w;
        }() + "\n");
    ReportPage page;
    page.title = o_.quick ? "Halocline benchmark reproduction (quick smoke run)"
                          : "Halocline benchmark reproduction";
    page.summary = header + "\n" + table;
    page.sections = sections_;
    std::ofstream(o_.outDir + "/report.html") << renderHtml(page);
    std::ofstream(o_.outDir + "/summary.txt") << page.summary;
    std::string figJson, runJson;
    for (const auto& f : figs) {
        if (!figJson.empty()) figJson += ",";
        figJson += fmt::format(
            R"({{"scenario":{},"metric":{},"alone":{},"tiered":{},"ratio":{},"published":{}}})",
            jsonString(f.scenario), jsonString(f.metric), jsonString(f.alone), jsonString(f.tiered),
            jsonString(f.ratio), jsonString(f.published));
    }
    for (const auto& m : results_) {
        if (!runJson.empty()) runJson += ",";
        runJson += fmt::format(
            R"({{"scenario":{},"side":{},"round":{},"disk_reads_per_sec":{:.1f},"idle_side_cpu_pct":{:.1f},"fast_docs":{},"run":{}}})",
            jsonString(m.scenario), jsonString(m.side), m.round, m.diskReadsPerSec, m.otherCpuPct,
            m.fastDocs, m.json);
    }
    std::string warn;
    for (const auto& s : warnings_) warn += (warn.empty() ? "" : ",") + jsonString(s);
    RunReport all = totals();
    std::ofstream(o_.outDir + "/reproduce.json")
        << fmt::format(
               R"({{"quick":{},"confined":{},"iops_cap":{},"page_cache_dropped":{},"tiered":{},"feeder_mode":{},"cold_writes":{},"recordcount":{},"archive_cache_gb":{},"load_seconds":{:.1f},"copy_seconds":{:.1f},"total_seconds":{:.1f},"fixed_target_ops_per_sec":{},"failed":{},"not_found":{},"warnings":[{}],"figures":[{}],"runs":[{}]}})",
               o_.quick, confined_, o_.readIops, cacheDropped_, !o_.skipTiered,
               jsonString(o_.feederMode.empty() ? "default" : o_.feederMode), o_.coldWrites,
               o_.recordCount, o_.archiveCacheGB, loadSeconds_, copySeconds_, since(started_),
               fixedTarget_, all.failed, all.notFound, warn, figJson, runJson)
        << "\n";
    return Status::OK();
}

// ------------------------------------------------------------------ the whole run

Status Reproduction::stopAll() {
    Status result = stopTieredSide();
    for (Server* s : {&archiveAlone_, &archiveTiered_}) {
        if (s->proc) {
            Status st = s->proc->stop();
            if (result.isOK()) result = st;
        }
        *s = Server();
    }
    return result;
}

int Reproduction::run() {
    int rc = runAll();
    Status s = stopAll();
    if (!s.isOK() && rc == 0) {
        say("reproduce FAILED: " + s.reason());
        rc = 1;
    }
    std::error_code ec;
    if (!work_.empty()) fs::remove_all(work_, ec);
    return rc;
}

int Reproduction::runAll() {
    std::signal(SIGPIPE, SIG_IGN);
    utsname u{};
    ::uname(&u);
    say(fmt::format("halocline bench reproduce{}: {} cores, kernel {}, {}",
                    o_.quick ? " --quick" : "", std::thread::hardware_concurrency(), u.release,
                    utcNow("%F %TZ")));
    std::set<std::string> want;
    {
        std::stringstream ss(o_.scenarios);
        std::string s;
        while (std::getline(ss, s, ',')) {
            if (s != "mixes" && s != "fixed" && s != "cold" && s != "overhead" && s != "pause") {
                say("unknown scenario '" + s + "': use mixes, fixed, cold, overhead, pause");
                return 2;
            }
            want.insert(s);
        }
    }
    if (parseHorizonMillis(o_.horizon) < 0 || !WorkloadSpec::preset(o_.workload).isOK()) {
        say("bad --horizon or --workload");
        return 2;
    }
    auto fail = [&](const Status& s) {
        say("\nreproduce FAILED: " + s.reason());
        return s.code() == ErrorCode::CommandNotFound ? 4 : 1;
    };
    if (o_.skipTiered) {
        loud("--skip-tiered: only the archive-alone and direct sides run; no tiered figures");
    } else if (Status s = checkProxy(); !s.isOK()) {
        return fail(s);
    }
    if (Status s = prepare(); !s.isOK()) return fail(s);
    say("results: " + o_.outDir);

    // The archive's confinement: decided before anything is loaded, printed loudly.
    const bool needArchive =
        want.count("mixes") || want.count("fixed") || want.count("cold") || want.count("pause");
    if (needArchive) {
        ArchiveConfinement::Request req;
        req.dataDir = o_.dataDir;
        req.readIops = o_.readIops;
        req.memoryBytes = o_.archiveMemoryMB << 20;
        req.name = "alone";
        confAlone_ = ArchiveConfinement::create(req);
        req.name = "tiered";
        confTiered_ = ArchiveConfinement::create(req);
        confined_ = confAlone_->iopsCapped() && confTiered_->iopsCapped();
        say("archive confinement: " + confAlone_->describe() + "; WiredTiger direct I/O");
        std::string problems;
        for (const auto& p : confAlone_->problems()) problems += "\n!!!   " + p;
        if (!confined_)
            loud(
                "UNCONFINED: the archive runs WITHOUT the read-IOPS cap; every archive figure "
                "below is marked unconfined and is not comparable to the published ones." +
                problems);
        else if (!problems.empty())
            loud("partial confinement:" + problems);
    }

    auto tLoad = Clock::now();
    if (needArchive) {
        if (Status s = ensureDataset("archive", o_.recordCount, &archiveDataset_); !s.isOK())
            return fail(s);
    }
    if (want.count("overhead")) {
        if (Status s = ensureDataset("memory", o_.memoryRecordCount, &memoryDataset_); !s.isOK())
            return fail(s);
    }
    double loadWall = since(tLoad);

    if (needArchive) {
        auto t0 = Clock::now();
        std::error_code ec;
        uintmax_t bytes = 0;
        for (const auto& e : fs::recursive_directory_iterator(archiveDataset_, ec))
            if (e.is_regular_file()) bytes += e.file_size();
        datasetBytes_ = static_cast<int64_t>(bytes);
        auto space = fs::space(o_.dataDir, ec);
        if (!ec && space.available < 2 * bytes + (1ull << 30))
            return fail(Status(ErrorCode::OperationFailed,
                               fmt::format("not enough disk space under {} for two working copies "
                                           "of the archive ({} MB each)",
                                           o_.dataDir, bytes >> 20)));
        for (const char* side : {"alone", "tiered"}) {
            if (o_.skipTiered && std::string(side) == "tiered") continue;
            if (Status s = copyDataset(archiveDataset_, work_ + "/archive-" + side); !s.isOK())
                return fail(s);
        }
        copySeconds_ = since(t0);
        say(fmt::format("working copies of the archive ({} MB on disk): {:.0f} s", bytes >> 20,
                        copySeconds_));
        archiveAlone_.dbpath = work_ + "/archive-alone";
        archiveTiered_.dbpath = work_ + "/archive-tiered";
        if (Status s = restartArchive(true); !s.isOK()) return fail(s);
        auto size = collectionSize(archiveAlone_.uri(), "ycsb", "usertable");
        if (!size.isOK()) return fail(size.getStatus());
        ratioDataToCache_ = static_cast<double>(size.getValue().dataBytes) /
                            (o_.archiveCacheGB * 1024 * 1024 * 1024);
        avgDocBytes_ = static_cast<double>(size.getValue().dataBytes) /
                       static_cast<double>(std::max<int64_t>(1, size.getValue().count));
        say(fmt::format(
            "archive: {} documents, {} MB of BSON = {:.1f}x its {} GB cache ({} MB on "
            "disk with indexes and oplog)",
            thousands(static_cast<double>(size.getValue().count)), size.getValue().dataBytes >> 20,
            ratioDataToCache_, o_.archiveCacheGB, bytes >> 20));
        nextAlone_ = nextTiered_ = o_.recordCount;
        if (!o_.skipTiered) {
            if (Status s = restartArchive(false); !s.isOK()) return fail(s);
            bool warmFirst = want.count("mixes") || want.count("fixed") || want.count("pause");
            say(warmFirst ? "tiered side: fast tier (empty) + proxy; waiting for the warmer"
                          : "tiered side: started by the cold-start scenario");
            if (warmFirst) {
                if (Status s = startTieredSide(true); !s.isOK()) return fail(s);
            }
        }
    }

    auto tRuns = Clock::now();
    if (want.count("mixes"))
        if (Status s = scenarioMixes(); !s.isOK()) return fail(s);
    if (want.count("fixed"))
        if (Status s = scenarioFixed(); !s.isOK()) return fail(s);
    // Before the cold start, which leaves a fresh, still-warming fast tier behind.
    if (want.count("pause"))
        if (Status s = scenarioPause(); !s.isOK()) return fail(s);
    if (want.count("cold"))
        if (Status s = scenarioCold(); !s.isOK()) return fail(s);
    if (want.count("overhead"))
        if (Status s = scenarioOverhead(); !s.isOK()) return fail(s);
    double runWall = since(tRuns);

    Status stopped = stopAll();

    auto figs = figures();
    std::string table = figuresTable(figs);
    say("");
    if (needArchive && !confined_)
        say("!!! UNCONFINED RUN: archive figures were measured without the read-IOPS cap !!!");
    if (!cacheDropped_) say("!!! the page cache could not be dropped between runs !!!");
    RunReport all = totals();
    if (all.failed > 0)
        say(fmt::format("!!! {} operations FAILED (see the run lines); exit status {} !!!",
                        all.failed, kExitFailedOperations));
    if (all.notFound > 0)
        say(
            fmt::format("!!! {} operations were NOT_FOUND: the figures of those runs are not "
                        "valid (see the warnings); exit status {} !!!",
                        all.notFound, kExitNotFound));
    say(table);
    if (Status s = writeOutputs(figs, table); !s.isOK()) return fail(s);
    say(
        fmt::format("time: {:.0f} s total = load {:.0f} s ({}), copies {:.0f} s, scenarios {:.0f} "
                    "s",
                    since(started_), loadWall,
                    loadWall < 5 ? "datasets reused" : "loaded this time", copySeconds_, runWall));
    say("report: " + o_.outDir + "/report.html");
    say("json:   " + o_.outDir + "/reproduce.json");
    if (!stopped.isOK()) return fail(stopped);
    return exitStatus(all, false);
}

}  // namespace

int reproduce(const ReproduceOptions& opts) {
    Reproduction r(resolveDefaults(opts));
    return r.run();
}

}  // namespace halo::bench
