#pragma once
// cgroup v1 confinement of an archive store for `bench reproduce`: a read-IOPS cap
// on the disk that holds its data (blkio.throttle.read_iops_device) and a memory
// limit (memory.limit_in_bytes, which also caps the page cache it can fill).
//
// It detects what this machine allows and records every control it could not
// apply in problems(); it never pretends: a result measured without the IOPS cap
// must be marked "unconfined". The cgroups are created next to this process's
// own (see /proc/self/cgroup) as halocline-bench-<pid>-<name>, and removed by the
// destructor once their processes are gone; leftovers of dead runs are removed
// when a new one is created. Not thread-safe.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace halo::bench {

class ArchiveConfinement {
  public:
    struct Request {
        std::string name;     // "alone", "tiered": part of the cgroup directory name
        std::string dataDir;  // the IOPS cap goes on the disk holding it
        int readIops = 3000;
        int64_t memoryBytes = 0;  // 0: no memory limit
    };

    /// Never fails: check iopsCapped(), memoryLimited() and problems().
    static std::unique_ptr<ArchiveConfinement> create(const Request& req);
    ~ArchiveConfinement();
    ArchiveConfinement(const ArchiveConfinement&) = delete;
    ArchiveConfinement& operator=(const ArchiveConfinement&) = delete;

    bool iopsCapped() const { return !blkioDir_.empty(); }
    bool memoryLimited() const { return !memoryDir_.empty(); }
    int readIops() const { return req_.readIops; }
    const std::string& device() const { return device_; }  // "254:0", empty if unknown
    /// Every control that could not be applied, with the reason.
    const std::vector<std::string>& problems() const { return problems_; }
    /// The cgroup.procs files a child writes to join (see ChildProcess::Options).
    std::vector<std::string> procsFiles() const;
    /// One line: what is applied, or UNCONFINED and why.
    std::string describe() const;
    /// Read requests its processes issued to the capped disk (blkio.throttle.io_serviced),
    /// -1 when not capped.
    int64_t diskReads() const;

  private:
    explicit ArchiveConfinement(Request r) : req_(std::move(r)) {}
    Request req_;
    std::string device_;
    std::string blkioDir_;
    std::string memoryDir_;
    std::vector<std::string> problems_;
};

/// `sync; echo 1 > /proc/sys/vm/drop_caches`: empties the page cache so the next
/// reads really reach the disk. An error when not permitted.
Status dropPageCache();

/// "major:minor" of the whole disk holding `path` (a partition maps to its disk;
/// the throttle only takes disks).
StatusWith<std::string> diskDeviceOf(const std::string& path);

// Parsers, exposed for tests.
/// The cgroup path of `controller` in /proc/self/cgroup text ("4:memory:/a/b" -> "/a/b").
std::string cgroupPathOf(std::string_view procSelfCgroup, std::string_view controller);
/// The count for `device` and `op` ("Read") in blkio.throttle.io_serviced text; -1 if absent.
int64_t parseIoServiced(std::string_view text, std::string_view device, std::string_view op);

}  // namespace halo::bench
