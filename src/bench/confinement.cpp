#include "bench/confinement.h"

#include <dirent.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace halo::bench {
namespace {

constexpr const char* kCgroupRoot = "/sys/fs/cgroup";

std::string readFile(const std::string& path) {
    std::ifstream f(path);
    if (!f) return {};
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

/// Writes `value` to a kernel control file; the error names the file and errno.
Status writeControl(const std::string& path, const std::string& value) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f)
        return Status(ErrorCode::OperationFailed,
                      fmt::format("cannot open {}: {}", path, std::strerror(errno)));
    bool ok = std::fputs(value.c_str(), f) >= 0;
    ok = (std::fclose(f) == 0) && ok;  // the kernel reports a rejected value at close
    if (!ok)
        return Status(ErrorCode::OperationFailed, fmt::format("cannot write '{}' to {}: {}", value,
                                                              path, std::strerror(errno)));
    return Status::OK();
}

std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

/// Removes halocline-bench-<pid>-* cgroups left by runs whose process is gone.
void removeStaleCgroups(const std::string& parent) {
    DIR* d = ::opendir(parent.c_str());
    if (!d) return;
    while (dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        const std::string prefix = "halocline-bench-";
        if (n.rfind(prefix, 0) != 0) continue;
        long pid = std::atol(n.c_str() + prefix.size());
        if (pid <= 0 || pid == ::getpid()) continue;
        if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) continue;  // alive
        ::rmdir((parent + "/" + n).c_str());
    }
    ::closedir(d);
}

/// Creates <controller root><own cgroup>/halocline-bench-<pid>-<name>; the path or an error.
StatusWith<std::string> makeCgroup(const std::string& controller, const std::string& name) {
    std::string mount = fmt::format("{}/{}", kCgroupRoot, controller);
    struct stat st {};
    if (::stat(mount.c_str(), &st) != 0)
        return Status(
            ErrorCode::OperationFailed,
            fmt::format("the cgroup v1 '{}' controller is not mounted at {}", controller, mount));
    std::string own = cgroupPathOf(readFile("/proc/self/cgroup"), controller);
    std::string parent = mount + (own == "/" ? "" : own);
    removeStaleCgroups(parent);
    std::string dir = fmt::format("{}/halocline-bench-{}-{}", parent, ::getpid(), name);
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
        return Status(ErrorCode::OperationFailed,
                      fmt::format("cannot create cgroup {}: {}", dir, std::strerror(errno)));
    return dir;
}

}  // namespace

std::string cgroupPathOf(std::string_view text, std::string_view controller) {
    std::istringstream in{std::string(text)};
    std::string line;
    while (std::getline(in, line)) {
        // hierarchy-ID:controller-list:path
        auto a = line.find(':');
        auto b = line.find(':', a == std::string::npos ? 0 : a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        std::string list = line.substr(a + 1, b - a - 1);
        std::istringstream ls(list);
        std::string c;
        while (std::getline(ls, c, ','))
            if (c == controller) return line.substr(b + 1);
    }
    return "/";
}

int64_t parseIoServiced(std::string_view text, std::string_view device, std::string_view op) {
    std::istringstream in{std::string(text)};
    std::string dev, kind;
    long long n;
    while (in >> dev) {
        if (dev == "Total") {
            in >> n;
            continue;
        }
        if (!(in >> kind >> n)) break;
        if (dev == device && kind == op) return n;
    }
    return -1;
}

StatusWith<std::string> diskDeviceOf(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        return Status(ErrorCode::OperationFailed,
                      fmt::format("stat {}: {}", path, std::strerror(errno)));
    std::string dev = fmt::format("{}:{}", major(st.st_dev), minor(st.st_dev));
    std::string sys = "/sys/dev/block/" + dev;
    std::error_code ec;
    if (!std::filesystem::exists(sys, ec)) {
        // Not a block device of its own (btrfs, overlay): use the mount's source device.
        std::string real = std::filesystem::canonical(path, ec).string();
        std::istringstream in(readFile("/proc/self/mountinfo"));
        std::string line, bestSource;
        size_t bestLen = 0;
        while (std::getline(in, line)) {
            std::istringstream ls(line);
            std::string id, parent, majmin, root, mountPoint;
            ls >> id >> parent >> majmin >> root >> mountPoint;
            auto sep = line.find(" - ");
            if (sep == std::string::npos) continue;
            std::istringstream rest(line.substr(sep + 3));
            std::string fstype, source;
            rest >> fstype >> source;
            bool under =
                real == mountPoint || mountPoint == "/" || real.rfind(mountPoint + "/", 0) == 0;
            if (under && mountPoint.size() >= bestLen) {
                bestLen = mountPoint.size();
                bestSource = source;
            }
        }
        struct stat src {};
        if (bestSource.empty() || ::stat(bestSource.c_str(), &src) != 0 || !S_ISBLK(src.st_mode))
            return Status(ErrorCode::OperationFailed,
                          fmt::format("{} is on device {}, which is not a block device (source "
                                      "'{}')",
                                      path, dev, bestSource));
        dev = fmt::format("{}:{}", major(src.st_rdev), minor(src.st_rdev));
        sys = "/sys/dev/block/" + dev;
    }
    if (std::filesystem::exists(sys + "/partition", ec)) {
        std::string disk = trim(readFile(sys + "/../dev"));
        if (disk.empty())
            return Status(ErrorCode::OperationFailed,
                          fmt::format("cannot find the disk of partition {}", dev));
        dev = disk;
    }
    return dev;
}

std::unique_ptr<ArchiveConfinement> ArchiveConfinement::create(const Request& req) {
    std::unique_ptr<ArchiveConfinement> c(new ArchiveConfinement(req));
    auto dev = diskDeviceOf(req.dataDir);
    if (!dev.isOK()) {
        c->problems_.push_back("no read-IOPS cap: " + dev.getStatus().reason());
    } else {
        c->device_ = dev.getValue();
        auto dir = makeCgroup("blkio", req.name);
        if (!dir.isOK()) {
            c->problems_.push_back("no read-IOPS cap: " + dir.getStatus().reason());
        } else {
            std::string rule = fmt::format("{} {}", c->device_, req.readIops);
            Status s = writeControl(dir.getValue() + "/blkio.throttle.read_iops_device", rule);
            std::string back = readFile(dir.getValue() + "/blkio.throttle.read_iops_device");
            if (s.isOK() && back.find(rule) == std::string::npos)
                s = Status(ErrorCode::OperationFailed,
                           fmt::format("the kernel did not keep '{}' (reads back '{}')", rule,
                                       trim(back)));
            if (s.isOK()) {
                c->blkioDir_ = dir.getValue();
            } else {
                ::rmdir(dir.getValue().c_str());
                c->problems_.push_back("no read-IOPS cap: " + s.reason());
            }
        }
    }
    if (req.memoryBytes > 0) {
        auto dir = makeCgroup("memory", req.name);
        if (!dir.isOK()) {
            c->problems_.push_back("no memory limit: " + dir.getStatus().reason());
        } else {
            Status s = writeControl(dir.getValue() + "/memory.limit_in_bytes",
                                    std::to_string(req.memoryBytes));
            if (s.isOK()) {
                c->memoryDir_ = dir.getValue();
            } else {
                ::rmdir(dir.getValue().c_str());
                c->problems_.push_back("no memory limit: " + s.reason());
            }
        }
    }
    return c;
}

ArchiveConfinement::~ArchiveConfinement() {
    for (const auto& d : {blkioDir_, memoryDir_})
        if (!d.empty()) ::rmdir(d.c_str());
}

std::vector<std::string> ArchiveConfinement::procsFiles() const {
    std::vector<std::string> out;
    if (!blkioDir_.empty()) out.push_back(blkioDir_ + "/cgroup.procs");
    if (!memoryDir_.empty()) out.push_back(memoryDir_ + "/cgroup.procs");
    return out;
}

std::string ArchiveConfinement::describe() const {
    std::string out;
    if (iopsCapped())
        out = fmt::format("{} read IOPS on disk {} (cgroup v1 blkio)", req_.readIops, device_);
    else
        out = "UNCONFINED (no read-IOPS cap)";
    if (memoryLimited())
        out += fmt::format(", memory limit {} MB (cgroup v1 memory)", req_.memoryBytes >> 20);
    else if (req_.memoryBytes > 0)
        out += ", no memory limit";
    return out;
}

int64_t ArchiveConfinement::diskReads() const {
    if (!iopsCapped()) return -1;
    return parseIoServiced(readFile(blkioDir_ + "/blkio.throttle.io_serviced"), device_, "Read");
}

Status dropPageCache() {
    ::sync();
    return writeControl("/proc/sys/vm/drop_caches", "1");
}

}  // namespace halo::bench
