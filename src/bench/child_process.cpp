#include "bench/child_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>

#include "bench/cost.h"

namespace halo::bench {
namespace {

constexpr size_t kTailLines = 60;

/// This executable's path when it still names the very file we run (so the children show
/// as `halocline` in top), else /proc/self/exe (always this file, even if replaced since).
/// Checked at every spawn: a rebuild during a long run must not change the children.
std::string selfPath() {
    std::string fallback = "/proc/self/exe";
    char buf[4096];
    ssize_t n = ::readlink(fallback.c_str(), buf, sizeof buf - 1);
    if (n <= 0) return fallback;
    std::string real(buf, static_cast<size_t>(n));
    struct stat a {};
    struct stat b {};
    if (::stat(real.c_str(), &a) != 0 || ::stat(fallback.c_str(), &b) != 0 ||
        a.st_dev != b.st_dev || a.st_ino != b.st_ino)
        return fallback;
    return real;
}

std::string describeExit(int status) {
    if (WIFEXITED(status)) return fmt::format("exit code {}", WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return fmt::format("signal {}", WTERMSIG(status));
    return "unknown status";
}

/// fork + exec of this executable. Between fork and exec the child only makes
/// async-signal-safe calls: prctl, getppid, write, dup2, open, execv, _exit.
StatusWith<pid_t> spawnSelf(const std::vector<std::string>& args, int outFd,
                            const std::vector<std::string>& cgroupProcs) {
    std::vector<int> cgFds;
    auto closeAll = [&] {
        for (int fd : cgFds) ::close(fd);
    };
    for (const auto& p : cgroupProcs) {
        int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0) {
            int err = errno;
            closeAll();
            return Status(ErrorCode::OperationFailed,
                          fmt::format("cannot open {}: {}", p, std::strerror(err)));
        }
        cgFds.push_back(fd);
    }
    std::vector<std::string> argvStore;
    argvStore.emplace_back("halocline");
    argvStore.insert(argvStore.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argvStore) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    const std::string self = selfPath();

    pid_t pid = ::fork();
    if (pid < 0) {
        int err = errno;
        closeAll();
        return Status(ErrorCode::OperationFailed, fmt::format("fork: {}", std::strerror(err)));
    }
    if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (::getppid() != parent) ::_exit(125);
        for (int fd : cgFds)
            if (::write(fd, "0", 1) != 1) ::_exit(126);  // never run unconfined by mistake
        int devnull = ::open("/dev/null", O_RDONLY);
        if (devnull >= 0) ::dup2(devnull, 0);
        ::dup2(outFd, 1);
        ::dup2(outFd, 2);
        // Restore the default action for signals the parent may ignore (SIGPIPE).
        ::signal(SIGPIPE, SIG_DFL);
        ::execv(self.c_str(), argv.data());
        ::_exit(127);
    }
    closeAll();
    return pid;
}

}  // namespace

std::optional<int> parseListeningPort(std::string_view line) {
    // {"msg":"Waiting for connections", ..., "attr":{"port":N, ...}}, any JSON spacing.
    auto skip = [&](size_t i) {
        while (i < line.size() && (line[i] == ' ' || line[i] == ':' || line[i] == '\t')) ++i;
        return i;
    };
    auto m = line.find("\"msg\"");
    if (m == std::string_view::npos) return std::nullopt;
    if (line.substr(skip(m + 5)).rfind("\"Waiting for connections\"", 0) != 0) return std::nullopt;
    auto a = line.find("\"attr\"", m);
    if (a == std::string_view::npos) return std::nullopt;
    auto p = line.find("\"port\"", a);
    if (p == std::string_view::npos) return std::nullopt;
    p = skip(p + 6);
    int port = 0;
    auto [ptr, ec] = std::from_chars(line.data() + p, line.data() + line.size(), port);
    if (ec != std::errc() || port <= 0 || port > 65535) return std::nullopt;
    return port;
}

StatusWith<std::unique_ptr<ChildProcess>> ChildProcess::start(Options opts) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
        return Status(ErrorCode::OperationFailed, fmt::format("pipe: {}", std::strerror(errno)));
    std::unique_ptr<ChildProcess> c(new ChildProcess(std::move(opts)));
    auto pid = spawnSelf(c->opts_.args, fds[1], c->opts_.cgroupProcs);
    ::close(fds[1]);
    if (!pid.isOK()) {
        ::close(fds[0]);
        return pid.getStatus();
    }
    c->pid_ = pid.getValue();
    int rfd = fds[0];
    c->reader_ = std::thread([raw = c.get(), rfd] { raw->readLoop(rfd); });
    return c;
}

void ChildProcess::readLoop(int fd) {
    std::ofstream log(opts_.logPath, std::ios::app);
    std::string pending;
    char buf[8192];
    while (true) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        pending.append(buf, static_cast<size_t>(n));
        size_t start = 0, nl;
        while ((nl = pending.find('\n', start)) != std::string::npos) {
            std::string_view line(pending.data() + start, nl - start);
            if (log) log << line << '\n';
            {
                std::lock_guard lk(mu_);
                tail_.emplace_back(line);
                if (tail_.size() > kTailLines) tail_.pop_front();
                if (!port_)
                    if (auto p = parseListeningPort(line)) {
                        port_ = p;
                        cv_.notify_all();
                    }
            }
            start = nl + 1;
        }
        pending.erase(0, start);
    }
    if (log && !pending.empty()) log << pending << '\n';
    ::close(fd);
    std::lock_guard lk(mu_);
    eof_ = true;
    cv_.notify_all();
}

StatusWith<int> ChildProcess::waitForPort(std::chrono::milliseconds timeout) {
    std::unique_lock lk(mu_);
    cv_.wait_for(lk, timeout, [&] { return port_.has_value() || eof_; });
    if (port_) return *port_;
    bool exited = eof_;
    lk.unlock();
    if (exited) {
        reap(true);
        std::string why = describeExit(exitStatus_);
        if (WIFEXITED(exitStatus_) && WEXITSTATUS(exitStatus_) == 126)
            why += " (it could not join its cgroup)";
        return Status(ErrorCode::OperationFailed,
                      fmt::format("{} exited before listening ({}); log {}:\n{}", opts_.name, why,
                                  opts_.logPath, tail()));
    }
    return Status(ErrorCode::MaxTimeMSExpired,
                  fmt::format("{} did not start listening within {} ms; log {}:\n{}", opts_.name,
                              timeout.count(), opts_.logPath, tail()));
}

bool ChildProcess::reap(bool block) {
    if (reaped_) return true;
    int st = 0;
    pid_t r;
    do {
        r = ::waitpid(pid_, &st, block ? 0 : WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == pid_) {
        reaped_ = true;
        exitStatus_ = st;
    }
    return reaped_;
}

bool ChildProcess::running() {
    return pid_ > 0 && !reap(false);
}

void ChildProcess::pause() {
    if (running()) ::kill(pid_, SIGSTOP);
}

void ChildProcess::resume() {
    if (running()) ::kill(pid_, SIGCONT);
}

Status ChildProcess::stop(std::chrono::milliseconds timeout) {
    Status result = Status::OK();
    if (running()) {
        ::kill(pid_, SIGTERM);
        ::kill(pid_, SIGCONT);  // a paused child would keep SIGTERM pending
        auto deadline = std::chrono::steady_clock::now() + timeout;
        while (!reap(false) && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling waitpid
        if (!reaped_) {
            ::kill(pid_, SIGKILL);
            reap(true);
            result = Status(ErrorCode::OperationFailed,
                            fmt::format("{} did not exit within {} ms of SIGTERM; killed",
                                        opts_.name, timeout.count()));
        } else if (!(WIFEXITED(exitStatus_) && WEXITSTATUS(exitStatus_) == 0)) {
            result = Status(ErrorCode::OperationFailed,
                            fmt::format("{} stopped with {}; log {}", opts_.name,
                                        describeExit(exitStatus_), opts_.logPath));
        }
    } else if (pid_ > 0) {
        reap(true);
        result = Status(ErrorCode::OperationFailed,
                        fmt::format("{} had already exited ({}); log {}:\n{}", opts_.name,
                                    describeExit(exitStatus_), opts_.logPath, tail()));
    }
    if (reader_.joinable()) reader_.join();
    return result;
}

ChildProcess::~ChildProcess() {
    if (pid_ > 0 && !reaped_) (void)stop(std::chrono::seconds(30));
    if (reader_.joinable()) reader_.join();
}

std::string ChildProcess::tail() const {
    std::lock_guard lk(mu_);
    std::string out;
    for (const auto& l : tail_) out += l + "\n";
    return out;
}

double ChildProcess::cpuSeconds() const {
    int64_t ticks = processCpuTicks(pid_);
    return ticks < 0 ? -1 : static_cast<double>(ticks) / static_cast<double>(clockTicksPerSecond());
}

}  // namespace halo::bench
