#pragma once
// A `halocline` child process (this very executable) started by
// `bench reproduce`: a store or the proxy. Its stdout and stderr go through a pipe
// to a reader thread that copies every line to a log file, keeps the last lines
// for error messages, and spots the mongod-style "Waiting for connections" line
// that carries the listening port.
//
// Contract: one owner thread calls the methods (the reader thread is internal).
// The child can join cgroups before it execs (it writes "0" to each cgroup.procs
// file it is given and exits with status 126 if any write fails, so it never runs
// outside the confinement it was asked for). It gets SIGTERM if this process
// dies. The destructor stops a child still running.
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/status.h"

namespace halo::bench {

/// The port of a "Waiting for connections" JSON log line, if `line` is one.
std::optional<int> parseListeningPort(std::string_view line);

class ChildProcess {
  public:
    struct Options {
        std::string name;                      // for messages: "archive store (alone)"
        std::vector<std::string> args;         // after argv[0]: {"store", "--port", "0", ...}
        std::string logPath;                   // the child's output is appended here
        std::vector<std::string> cgroupProcs;  // cgroup.procs files to join before exec
    };

    static StatusWith<std::unique_ptr<ChildProcess>> start(Options opts);
    ~ChildProcess();
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;

    /// Blocks until the child logs "Waiting for connections" (returns its port), exits,
    /// or `timeout` passes (both errors carry the tail of its output).
    StatusWith<int> waitForPort(std::chrono::milliseconds timeout);
    /// SIGTERM, then SIGKILL after `timeout`. OK if it exited with status 0 on SIGTERM.
    Status stop(std::chrono::milliseconds timeout = std::chrono::seconds(60));
    bool running();
    /// SIGSTOP / SIGCONT: the side not being measured is paused, as if it ran on
    /// machines of its own (stop() resumes a paused child first).
    void pause();
    void resume();
    pid_t pid() const { return pid_; }
    const std::string& name() const { return opts_.name; }
    /// The last lines of its output.
    std::string tail() const;
    /// CPU seconds (user + system) the child has used so far; -1 if unknown.
    double cpuSeconds() const;

  private:
    explicit ChildProcess(Options opts) : opts_(std::move(opts)) {}
    void readLoop(int fd);
    bool reap(bool block);

    Options opts_;
    pid_t pid_ = -1;
    int exitStatus_ = 0;
    bool reaped_ = false;
    std::thread reader_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::string> tail_;
    std::optional<int> port_;
    bool eof_ = false;
};

}  // namespace halo::bench
