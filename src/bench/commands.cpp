#include "bench/commands.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>

#include "bench/html_report.h"
#include "bench/ramp.h"
#include "bench/reproduce.h"
#include "bench/runner.h"
#include "bench/workload.h"

namespace halo::bench {

struct BenchCommand::Flags {
    CLI::App* bench = nullptr;
    CLI::App *load = nullptr, *run = nullptr, *ramp = nullptr, *report = nullptr,
             *reproduce = nullptr;
    std::string workload = "shop";
    std::vector<std::string> props;
    std::string jsonOut;
    RunOptions ro;
    RampOptions rampOpts;
    std::string htmlOut;
    std::string title = "Halocline benchmark report";
    std::vector<std::string> inputs;
    ReproduceOptions rep;
    CLI::App* root = nullptr;
};

BenchCommand::BenchCommand() : f_(std::make_unique<Flags>()) {}
BenchCommand::~BenchCommand() = default;

std::unique_ptr<BenchCommand> BenchCommand::add(CLI::App& app) {
    std::unique_ptr<BenchCommand> cmd(new BenchCommand());
    Flags& f = *cmd->f_;
    f.root = &app;
    f.bench = app.add_subcommand("bench", "YCSB-style workload generator (a real MongoDB client)");
    f.bench->require_subcommand(1);
    auto addCommon = [&f](CLI::App* sub) {
        sub->add_option("--uri", f.ro.uri, "MongoDB connection string")->required();
        sub->add_option("--workload", f.workload, "Preset: shop, readheavy, concentrated")
            ->capture_default_str();
        sub->add_option("-p", f.props,
                        "YCSB property key=value (recordcount, operationcount, readproportion, "
                        "requestdistribution, fieldcount, fieldlength, ...)");
        sub->add_option("--threads", f.ro.threads, "Client threads")->capture_default_str();
        sub->add_option("--db", f.ro.db)->capture_default_str();
        sub->add_option("--collection", f.ro.collection)->capture_default_str();
        sub->add_option("--seed", f.ro.seed)->capture_default_str();
    };
    f.load = f.bench->add_subcommand(
        "load", "Load recordcount documents (resumable), index the date field");
    addCommon(f.load);

    f.run = f.bench->add_subcommand(
        "run", "Run the workload and report throughput and latency percentiles");
    addCommon(f.run);
    f.run->add_option("--target", f.ro.targetOpsPerSec,
                      "Fixed total rate in ops/s (0: closed loop)");
    f.run->add_option("--seconds", f.ro.seconds,
                      "Run for this long instead of operationcount operations");
    f.run->add_option("--warmup", f.ro.warmupSeconds,
                      "Run the workload this many seconds first, unmeasured");
    f.run->add_option("--label", f.ro.label, "Name of the system measured (in reports)");
    f.run->add_option("--json", f.jsonOut, "Write the report as JSON to this file");
    const char* expectMisses =
        "The workload looks up keys that may not exist: NOT_FOUND is counted and shown but "
        "does not fail the run (exit status 5 otherwise)";
    f.run->add_flag("--expect-misses", f.ro.expectMisses, expectMisses);

    f.ramp = f.bench->add_subcommand(
        "ramp",
        "Raise client threads step by step until p95 exceeds a threshold; report the "
        "highest throughput under it");
    addCommon(f.ramp);
    f.ramp->add_option("--start-threads", f.rampOpts.startThreads)->capture_default_str();
    f.ramp->add_option("--max-threads", f.rampOpts.maxThreads)->capture_default_str();
    f.ramp
        ->add_option("--step-add", f.rampOpts.addThreads,
                     "Add this many threads per step (0: double each step)")
        ->capture_default_str();
    f.ramp->add_option("--step-seconds", f.rampOpts.stepSeconds, "Measured seconds per step")
        ->capture_default_str();
    f.ramp->add_option("--warmup", f.ro.warmupSeconds, "Unmeasured seconds before each step");
    f.ramp->add_option("--p95-ms", f.rampOpts.p95Ms, "p95 threshold in milliseconds")
        ->capture_default_str();
    f.ramp
        ->add_option("--p95-of", f.rampOpts.p95Of,
                     "Whose p95: READ (default, as published), UPDATE, INSERT, SCAN or ALL")
        ->check(CLI::IsMember({"READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE", "ALL"}))
        ->capture_default_str();
    f.ramp->add_option("--label", f.ro.label, "Name of the system measured (in reports)");
    f.ramp->add_option("--json", f.jsonOut, "Write the ramp (every step) as JSON to this file");
    f.ramp->add_flag("--expect-misses", f.ro.expectMisses, expectMisses);

    f.report = f.bench->add_subcommand(
        "report", "Write a self-contained HTML report plotting `bench run --json` files");
    f.report->add_option("--out", f.htmlOut, "HTML file to write")->required();
    f.report->add_option("--title", f.title)->capture_default_str();
    f.report->add_option("runs", f.inputs, "`bench run --json` files, one per system/run")
        ->required()
        ->check(CLI::ExistingFile);

    ReproduceOptions& r = f.rep;
    f.reproduce = f.bench->add_subcommand(
        "reproduce",
        "The published experiment on this machine: archive alone vs tiered, "
        "A B A B (see docs/BENCHMARKS.md)");
    f.reproduce->add_flag("--quick", r.quick, "Small data and short runs (a smoke test, < 5 min)");
    f.reproduce->add_option("--data-dir", r.dataDir, "Loaded datasets (kept and reused)")
        ->capture_default_str();
    f.reproduce->add_option("--out", r.outDir,
                            "Results directory (default <data-dir>/results/<time>)");
    f.reproduce
        ->add_option("--scenarios", r.scenarios, "Comma list: mixes,fixed,pause,cold,overhead")
        ->capture_default_str();
    f.reproduce->add_flag("--skip-tiered", r.skipTiered,
                          "Run only the archive-alone and direct sides (no proxy needed)");
    f.reproduce->add_option("--workload", r.workload, "Mix for fixed load, cold start, overhead")
        ->capture_default_str();
    f.reproduce->add_option("--threads", r.threads)->capture_default_str();
    f.reproduce->add_option("--rounds", r.rounds, "A B pairs per scenario")->capture_default_str();
    f.reproduce->add_option("--read-iops", r.readIops, "The archive disk's read-IOPS cap")
        ->capture_default_str();
    f.reproduce->add_option("--horizon", r.horizon, "Tiering age of ycsb.usertable")
        ->capture_default_str();
    f.reproduce->add_flag("!--no-cold-writes", r.coldWrites,
                          "The proxy copies old documents up to write them (tiering.coldWrites: "
                          "false; for A/B)");
    f.reproduce
        ->add_option("--feeder-mode", r.feederMode,
                     "The proxy's workers.feeder.mode (eager or lazy; default: the proxy's)")
        ->check(CLI::IsMember({"eager", "lazy"}));
    f.reproduce
        ->add_option("--feeder-lazy-delay", r.feederLazyDelay,
                     "workers.feeder.lazyDelay with --feeder-mode lazy (shorter than a run, so "
                     "that its writes fall inside the measured runs)")
        ->capture_default_str();
    f.reproduce->add_option("--warmer-rate", r.warmerRate,
                            "The proxy's workers.warmer.maxDocsPerSecond (default: the proxy's)");
    f.reproduce->add_option("--recordcount", r.recordCount,
                            "Archive documents (default 10,000,000; quick 200,000)");
    f.reproduce->add_option("--archive-cache-gb", r.archiveCacheGB,
                            "Archive WiredTiger cache (default 0.25; quick 0.01)");
    f.reproduce->add_option("--fast-threads", r.fastThreads,
                            "The fast store's command threads (default: the store's)");
    f.reproduce
        ->add_option("--fast-engine-config", r.fastEngineConfig,
                     "The fast store's --wiredTigerEngineConfigString (default: what "
                     "`halocline up` gives it; \"\" for the store's defaults)")
        ->capture_default_str();
    f.reproduce->add_option(
        "--archive-memory-mb", r.archiveMemoryMB,
        "Archive memory-cgroup limit (default cache + 1024; + 4096 in sanitizer builds)");
    f.reproduce->add_option("--seconds", r.seconds, "Measured seconds per run (30; quick 4)");
    f.reproduce->add_option("--warmup", r.warmupSeconds, "Warm-up seconds per run (10; quick 1)");
    f.reproduce->add_option("--cold-seconds", r.coldSeconds, "Cold-start run length (90; quick 8)");
    f.reproduce->add_option("--memory-recordcount", r.memoryRecordCount,
                            "Proxy-overhead dataset (500,000; quick 20,000)");
    f.reproduce->add_option("--warm-timeout", r.warmTimeoutSeconds,
                            "Longest wait for the warmer before the steady-state runs (240; "
                            "quick 20)");
    f.reproduce->add_option("--fieldcount", r.fieldCount)->capture_default_str();
    f.reproduce->add_option("--fieldlength", r.fieldLength)->capture_default_str();
    return cmd;
}

bool BenchCommand::parsed() const {
    return f_->bench->parsed();
}

namespace {

bool writeFile(const std::string& path, const std::string& text) {
    std::ofstream f(path);
    f << text;
    if (!f) std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return static_cast<bool>(f);
}

}  // namespace

int BenchCommand::run() {
    Flags& f = *f_;
    if (f.reproduce->parsed()) {
        f.rep.haveProxy =
            !f.root->get_subcommands([](const CLI::App* a) { return a->get_name() == "proxy"; })
                 .empty();
        return reproduce(f.rep);
    }
    if (f.report->parsed()) {
        ReportPage page;
        page.title = f.title;
        ReportSection sec;
        sec.title = "Runs compared";
        for (const auto& in : f.inputs) {
            auto r = readRunFile(in);
            if (!r.isOK()) {
                std::fprintf(stderr, "%s\n", r.getStatus().reason().c_str());
                return 2;
            }
            sec.runs.push_back(std::move(r.getValue()));
        }
        page.sections.push_back(std::move(sec));
        if (!writeFile(f.htmlOut, renderHtml(page))) return 1;
        std::printf("wrote %s (%zu runs)\n", f.htmlOut.c_str(), f.inputs.size());
        return 0;
    }

    auto spec = WorkloadSpec::preset(f.workload);
    if (!spec.isOK()) {
        std::fprintf(stderr, "%s\n", spec.getStatus().reason().c_str());
        return 2;
    }
    for (const auto& p : f.props) {
        auto eq = p.find('=');
        Status st = eq == std::string::npos
                        ? Status(ErrorCode::BadValue, "property must be key=value: " + p)
                        : spec.getValue().set(p.substr(0, eq), p.substr(eq + 1));
        if (!st.isOK()) {
            std::fprintf(stderr, "%s\n", st.reason().c_str());
            return 2;
        }
    }
    const WorkloadSpec& w = spec.getValue();
    if (f.load->parsed()) {
        Status st = load(w, f.ro, true);
        if (!st.isOK()) {
            std::fprintf(stderr, "%s\n", st.reason().c_str());
            return 1;
        }
        std::printf("loaded %lld records\n", static_cast<long long>(w.recordCount));
        return 0;
    }
    if (f.ramp->parsed()) {
        RunOptions base = f.ro;
        base.seconds = f.rampOpts.stepSeconds;
        f.rampOpts.expectMisses = f.ro.expectMisses;
        int64_t nextInsert = -1;
        auto step = [&](int threads) -> StatusWith<RunReport> {
            RunOptions ro = base;
            ro.threads = threads;
            ro.insertStart = nextInsert;  // later steps insert after the earlier steps' inserts
            auto r = halo::bench::run(w, ro);
            if (r.isOK()) nextInsert = r.getValue().nextInsert;
            return r;
        };
        auto toJsonAt = [&](const RunReport& r, int threads) {
            RunOptions ro = base;
            ro.threads = threads;
            return toJson(r, w, ro);
        };
        std::printf("ramp: %s p95 threshold %.2f ms, %g s per step\n", f.rampOpts.p95Of.c_str(),
                    f.rampOpts.p95Ms, f.rampOpts.stepSeconds);
        auto res = runRamp(
            f.rampOpts, step,
            [&](const RampStep& s) {
                std::printf("%s\n", rampStepLine(s, f.rampOpts).c_str());
                std::fflush(stdout);
            },
            toJsonAt);
        if (!res.isOK()) {
            std::fprintf(stderr, "%s\n", res.getStatus().reason().c_str());
            return 1;
        }
        std::fputs(rampSummary(res.getValue(), f.rampOpts).c_str(), stdout);
        if (!f.jsonOut.empty() &&
            !writeFile(f.jsonOut, rampToJson(res.getValue(), f.rampOpts, w) + "\n"))
            return 1;
        return rampExitStatus(res.getValue(), f.rampOpts);
    }
    auto r = halo::bench::run(w, f.ro);
    if (!r.isOK()) {
        std::fprintf(stderr, "%s\n", r.getStatus().reason().c_str());
        return 1;
    }
    std::fputs(toTable(r.getValue(), f.ro.expectMisses).c_str(), stdout);
    if (!f.jsonOut.empty() && !writeFile(f.jsonOut, toJson(r.getValue(), w, f.ro) + "\n")) return 1;
    return exitStatus(r.getValue(), f.ro.expectMisses);
}

}  // namespace halo::bench
