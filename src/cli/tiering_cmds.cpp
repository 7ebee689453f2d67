#include "cli/tiering_cmds.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include "common/fast_tier.h"
#include "common/log.h"
#include "tiering/proxy.h"

extern char** environ;

namespace halo::cli {

namespace {

std::atomic<tiering::Proxy*> g_proxy{nullptr};

void onSignal(int) {
    if (auto* p = g_proxy.load()) p->requestShutdown();
}

int runProxy(tiering::ProxyConfig cfg) {
    log::init(cfg.logPath, cfg.verbose);
    std::signal(SIGPIPE, SIG_IGN);
    tiering::Proxy proxy(cfg);
    g_proxy = &proxy;
    std::signal(SIGINT, onSignal);
    std::signal(SIGTERM, onSignal);
    Status s = proxy.start();
    if (!s.isOK()) {
        log::error("control", 20568, "Error during startup",
                   "{\"error\":" + log::quote(s.toString()) + "}");
        g_proxy = nullptr;
        proxy.stop();
        return 1;
    }
    proxy.waitForShutdown();
    g_proxy = nullptr;
    proxy.stop();
    return 0;
}

/// A child `halocline store` whose stdout goes to a log file; its port is read
/// back from the "Waiting for connections" line.
struct Child {
    pid_t pid = -1;
    int port = 0;
};

Child spawnStore(const char* self, const std::string& dbpath, const std::string& replSet,
                 const std::string& logFile, int port) {
    std::filesystem::create_directories(dbpath);
    std::ofstream(logFile, std::ios::trunc).close();
    std::vector<std::string> args = {self,        "store", "--dbpath", dbpath,
                                     "--replSet", replSet, "--port",   std::to_string(port),
                                     "--logpath", logFile};
    if (replSet == "fast")
        args.insert(args.end(), {"--wiredTigerEngineConfigString", kFastTierEngineConfig});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    Child c;
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // Own process group: Ctrl-C reaches only us; we stop the stores in order.
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    if (posix_spawn(&c.pid, self, nullptr, &attr, argv.data(), environ) != 0) c.pid = -1;
    posix_spawnattr_destroy(&attr);
    if (c.pid < 0) return c;
    std::regex re(R"("Waiting for connections".*"port":(\d+))");
    for (int i = 0; i < 600 && c.port == 0; ++i) {
        std::ifstream in(logFile);
        std::string line;
        while (std::getline(in, line)) {
            std::smatch m;
            if (std::regex_search(line, m, re)) c.port = std::stoi(m[1]);
        }
        int status;
        if (c.port == 0 && waitpid(c.pid, &status, WNOHANG) == c.pid) {
            c.pid = -1;
            return c;
        }
        if (c.port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return c;
}

void stopChild(Child& c) {
    if (c.pid <= 0) return;
    kill(c.pid, SIGTERM);
    int status;
    waitpid(c.pid, &status, 0);
    c.pid = -1;
}

int runUp(TieringCommands& t, const char* self) {
    namespace fs = std::filesystem;
    fs::path root = fs::absolute(t.dataDir);
    fs::create_directories(root / "logs");
    // Stores keep their ports across restarts when they can (the proxy config names them).
    auto portFile = root / "ports";
    int archivePort = 0, fastPort = 0;
    {
        std::ifstream in(portFile);
        in >> archivePort >> fastPort;
    }
    Child archive = spawnStore(self, (root / "archive").string(), "archive",
                               (root / "logs" / "archive.log").string(), archivePort);
    if (archive.pid < 0 || archive.port == 0)
        archive = spawnStore(self, (root / "archive").string(), "archive",
                             (root / "logs" / "archive.log").string(), 0);
    Child fast = spawnStore(self, (root / "fast").string(), "fast",
                            (root / "logs" / "fast.log").string(), fastPort);
    if (fast.pid < 0 || fast.port == 0)
        fast = spawnStore(self, (root / "fast").string(), "fast",
                          (root / "logs" / "fast.log").string(), 0);
    if (archive.port == 0 || fast.port == 0) {
        std::fprintf(stderr, "halocline up: a store failed to start; see %s\n",
                     (root / "logs").c_str());
        stopChild(archive);
        stopChild(fast);
        return 1;
    }
    std::ofstream(portFile, std::ios::trunc) << archive.port << " " << fast.port << "\n";

    std::string yaml = fmt::format(
        "net: {{bindIp: 127.0.0.1, port: {}}}\n"
        "tiers:\n"
        "  fast: {{uri: \"mongodb://127.0.0.1:{}/?replicaSet=fast\"}}\n"
        "  archive: {{uri: \"mongodb://127.0.0.1:{}/?replicaSet=archive\"}}\n"
        "tiering:\n"
        "  collections:\n"
        "    - {{namespace: {}, ageField: \"{}\", horizon: {}}}\n"
        "systemLog: {{destination: file, path: \"{}\"}}\n",
        t.upPort, fast.port, archive.port, t.demoNs, t.ageField, t.horizon,
        (root / "logs" / "proxy.log").string());
    std::ofstream(root / "halocline.yaml", std::ios::trunc) << yaml;
    auto cfg = tiering::parseProxyConfig(yaml);
    if (!cfg.isOK()) {
        std::fprintf(stderr, "halocline up: %s\n", cfg.getStatus().reason().c_str());
        stopChild(fast);
        stopChild(archive);
        return 1;
    }
    log::init(cfg.getValue().logPath, false);
    std::signal(SIGPIPE, SIG_IGN);
    int rc = 0;
    {
        tiering::Proxy proxy(cfg.getValue());
        g_proxy = &proxy;
        std::signal(SIGINT, onSignal);
        std::signal(SIGTERM, onSignal);
        Status s = proxy.start();
        if (!s.isOK()) {
            std::fprintf(stderr, "halocline up: the proxy failed to start: %s\n",
                         s.toString().c_str());
            rc = 1;
        } else {
            std::printf(
                "Halocline is up.\n"
                "  archive store: mongodb://127.0.0.1:%d/?replicaSet=archive (data %s)\n"
                "  fast store:    mongodb://127.0.0.1:%d/?replicaSet=fast (data %s)\n"
                "  tiered collection: %s (age field '%s', horizon %s)\n"
                "  config: %s   logs: %s\n"
                "Connect your application to:\n"
                "  mongodb://127.0.0.1:%d/\n"
                "Press Ctrl-C to stop.\n",
                archive.port, (root / "archive").c_str(), fast.port, (root / "fast").c_str(),
                t.demoNs.c_str(), t.ageField.c_str(), t.horizon.c_str(),
                (root / "halocline.yaml").c_str(), (root / "logs").c_str(), proxy.port());
            std::fflush(stdout);
            proxy.waitForShutdown();
            std::printf("halocline up: shutting down\n");
        }
        g_proxy = nullptr;
        proxy.stop();
    }
    stopChild(fast);
    stopChild(archive);
    return rc;
}

}  // namespace

void addTieringCommands(CLI::App& app, TieringCommands& t) {
    t.proxy = app.add_subcommand(
        "proxy", "Run the tiering proxy (and its workers) in front of a fast tier and an archive");
    t.proxy->add_option("--config,-f", t.config, "YAML configuration file")->required();
    t.proxy->add_option("--port", t.port, "Listen port (overrides net.port; 0 picks a free one)");
    t.up = app.add_subcommand("up",
                              "Start an archive store, a fast store and the proxy under one data "
                              "directory, with a demo policy; Ctrl-C stops everything");
    t.up->add_option("--dbpath", t.dataDir, "Data directory")->capture_default_str();
    t.up->add_option("--port", t.upPort, "Proxy port")->capture_default_str();
    t.up->add_option("--horizon", t.horizon, "Horizon of the demo collection")
        ->capture_default_str();
    t.up->add_option("--namespace", t.demoNs, "The demo tiered collection")->capture_default_str();
    t.up->add_option("--age-field", t.ageField,
                     "The demo collection's age field: a date field, or _id for ObjectIds")
        ->capture_default_str();
}

int runTieringCommands(TieringCommands& t, const char* argv0) {
    if (t.proxy && t.proxy->parsed()) {
        auto cfg = tiering::loadProxyConfig(t.config);
        if (!cfg.isOK()) {
            std::fprintf(stderr, "Error in config file %s: %s\n", t.config.c_str(),
                         cfg.getStatus().reason().c_str());
            return 2;
        }
        if (t.port >= 0) cfg.getValue().port = t.port;
        return runProxy(std::move(cfg.getValue()));
    }
    if (t.up && t.up->parsed()) {
        std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
        return runUp(t, self.c_str());
    }
    return -1;
}

}  // namespace halo::cli
