#include "store/storage/engine.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "common/log.h"

namespace halo::store {

Status wtStatus(int ret, std::string_view context) {
    if (ret == 0) return Status::OK();
    if (ret == WT_ROLLBACK) return WriteConflictException().status();
    return {ErrorCode::InternalError,
            fmt::format("{}: WiredTiger error {}: {}", context, ret, wiredtiger_strerror(ret))};
}

void wtCheck(int ret, std::string_view context) {
    if (ret == 0) return;
    if (ret == WT_ROLLBACK) throw WriteConflictException();
    throw DBException(wtStatus(ret, context));
}

Session::~Session() {
    if (s_) s_->close(s_, nullptr);
}

Cursor Session::open(const std::string& uri, const char* config) {
    WT_CURSOR* c = nullptr;
    int ret = s_->open_cursor(s_, uri.c_str(), nullptr, config, &c);
    if (ret != 0) wtCheck(ret, "open_cursor " + uri);  // the message only when it failed
    return Cursor(c);
}

void Session::begin(const char* config) {
    // Without a configuration string WiredTiger skips checking and parsing
    // one (several microseconds a call); the session's default isolation is
    // snapshot (Engine::newSession).
    wtCheck(s_->begin_transaction(s_, config), "begin_transaction");
    inTxn_ = true;
}

void Session::commit(bool durable) {
    inTxn_ = false;
    // The connection does not sync commits by default (transaction_sync is
    // disabled in Engine::open), so a commit without a configuration string
    // is sync=off without the cost of parsing one.
    wtCheck(s_->commit_transaction(s_, durable ? "sync=on" : nullptr), "commit_transaction");
}

void Session::commitThenSync() {
    commit(false);
    wtCheck(s_->log_flush(s_, "sync=on"), "log_flush");
}

std::chrono::microseconds writeConflictDelay(int attempt) {
    using std::chrono::microseconds;
    return attempt < 4     ? microseconds(0)
           : attempt < 10  ? microseconds(100)
           : attempt < 100 ? microseconds(1000)
           : attempt < 200 ? microseconds(5000)
                           : microseconds(10000);
}

void writeConflictBackoff(int attempt) {
    auto wait = writeConflictDelay(attempt);
    if (wait.count() == 0)
        std::this_thread::yield();
    else
        std::this_thread::sleep_for(wait);
}

void Session::setCommitTimestamp(uint64_t ts) {
    char cfg[64];
    std::snprintf(cfg, sizeof cfg, "commit_timestamp=%llx", static_cast<unsigned long long>(ts));
    wtCheck(s_->timestamp_transaction(s_, cfg), "timestamp_transaction");
}

void Session::rollback() {
    inTxn_ = false;
    s_->rollback_transaction(s_, nullptr);
}

namespace {

// WiredTiger's errors and messages go to the server log as mongod's do. A panic
// (a failed write to the disk: no space left, an I/O error) leaves the library
// refusing every call; as mongod (fatal assertion 50853) the process ends then,
// so that a supervisor restarts it and recovery from the journal brings back
// every acknowledged write, instead of a server that answers every command
// with an error forever.
int onWtError(WT_EVENT_HANDLER*, WT_SESSION*, int error, const char* message) {
    log::error("storage", 22435, "WiredTiger error",
               fmt::format(R"({{"error":{},"message":{}}})", error, log::quote(message)));
    if (error == WT_PANIC) {
        log::write(log::Severity::Fatal, "assert", 23089, "Fatal assertion",
                   R"({"msgid":50853,"reason":"WiredTiger panic"})");
        log::write(log::Severity::Fatal, "assert", 23090,
                   "\n\n***aborting after fassert() failure\n\n");
        std::abort();
    }
    return 0;
}

int onWtMessage(WT_EVENT_HANDLER*, WT_SESSION*, const char* message) {
    log::info("storage", 22430, "WiredTiger message",
              fmt::format(R"({{"message":{}}})", log::quote(message)));
    return 0;
}

WT_EVENT_HANDLER wtEvents = {onWtError, onWtMessage, nullptr, nullptr};

}  // namespace

StatusWith<std::unique_ptr<Engine>> Engine::open(const StoreOptions& opts) {
    std::error_code ec;
    std::filesystem::create_directories(opts.dbPath, ec);
    if (ec)
        return Status(ErrorCode::InternalError,
                      fmt::format("cannot create dbpath {}: {}", opts.dbPath, ec.message()));
    std::string compressor = opts.blockCompressor;
    if (compressor != "snappy" && compressor != "zlib" && compressor != "none")
        return Status(
            ErrorCode::BadValue,
            fmt::format("unsupported block compressor '{}'; use snappy, zlib or none", compressor));
    auto cacheMB = static_cast<int64_t>(opts.cacheSizeGB * 1024);
    if (cacheMB < 1) cacheMB = 1;
    std::string config = fmt::format(
        "create,cache_size={}M,session_max=20000,eviction=(threads_min=1,threads_max=4),"
        "log=(enabled=true,archive=true,path=journal,compressor=snappy),"
        // Commits sync only when asked (Session::commit(true), or
        // commitThenSync's log_flush): the default commit then needs no
        // configuration string.
        "transaction_sync=(enabled=false,method=fsync),"
        "checkpoint=(wait=60),statistics=(fast),"
        "extensions=[{},{}],file_manager=(close_idle_time=100000)",
        cacheMB, HALO_WT_SNAPPY_EXT, HALO_WT_ZLIB_EXT);
    if (opts.directIO) config += ",direct_io=[data]";
    if (!opts.wtEngineConfigString.empty()) config += "," + opts.wtEngineConfigString;
    std::filesystem::create_directories(std::filesystem::path(opts.dbPath) / "journal", ec);
    WT_CONNECTION* conn = nullptr;
    int ret = wiredtiger_open(opts.dbPath.c_str(), &wtEvents, config.c_str(), &conn);
    if (ret != 0) return wtStatus(ret, "wiredtiger_open " + opts.dbPath);
    std::string tableConfig = compressor == "none" ? "" : "block_compressor=" + compressor;
    return std::unique_ptr<Engine>(new Engine(conn, tableConfig));
}

Engine::~Engine() {
    if (conn_) conn_->close(conn_, nullptr);
}

std::unique_ptr<Session> Engine::newSession() {
    WT_SESSION* s = nullptr;
    wtCheck(conn_->open_session(conn_, nullptr, "isolation=snapshot", &s), "open_session");
    return std::make_unique<Session>(s);
}

Status Engine::createTable(Session& s, const std::string& uri, const char* keyFormat,
                           const char* valueFormat) {
    std::string cfg =
        fmt::format("key_format={},value_format={},{}", keyFormat, valueFormat, tableConfig_);
    return wtStatus(s.get()->create(s.get(), uri.c_str(), cfg.c_str()), "create " + uri);
}

Status Engine::dropTable(Session& s, const std::string& uri) {
    int ret = s.get()->drop(s.get(), uri.c_str(), "force=true");
    return wtStatus(ret, "drop " + uri);
}

namespace {
/// One statistic from a statistics cursor; 0 when it cannot be read.
int64_t readStat(WT_CURSOR* c, int key) {
    c->set_key(c, key);
    if (c->search(c) != 0) return 0;
    const char* desc;
    const char* pvalue;
    int64_t value = 0;
    if (c->get_value(c, &desc, &pvalue, &value) != 0) return 0;
    return value;
}
}  // namespace

int64_t Engine::connStat(int key) {
    auto s = newSession();
    WT_CURSOR* c = nullptr;
    if (s->get()->open_cursor(s->get(), "statistics:", nullptr, nullptr, &c) != 0) return 0;
    Cursor cur(c);
    return readStat(c, key);
}

Engine::TableSizes Engine::tableSizes(const std::string& uri) {
    TableSizes out;
    auto s = newSession();
    WT_CURSOR* c = nullptr;
    std::string statsUri = "statistics:" + uri;
    if (s->get()->open_cursor(s->get(), statsUri.c_str(), nullptr, "statistics=(fast)", &c) != 0)
        return out;
    Cursor cur(c);
    out.fileBytes = readStat(c, WT_STAT_DSRC_BLOCK_SIZE);
    out.reusableBytes = readStat(c, WT_STAT_DSRC_BLOCK_REUSE_BYTES);
    return out;
}

std::string Engine::creationString(const std::string& uri) {
    auto s = newSession();
    WT_CURSOR* c = nullptr;
    if (s->get()->open_cursor(s->get(), "metadata:", nullptr, nullptr, &c) != 0) return {};
    Cursor cur(c);
    // A simple table's data lives in one file, whose entry has the full configuration.
    std::string key = uri;
    if (key.rfind("table:", 0) == 0) key = "file:" + key.substr(6) + ".wt";
    const char* value = nullptr;
    for (const std::string& k : {key, uri}) {
        c->set_key(c, k.c_str());
        if (c->search(c) == 0 && c->get_value(c, &value) == 0 && value) return value;
    }
    return {};
}

Status Engine::compact(const std::string& uri) {
    auto s = newSession();
    return wtStatus(s->get()->compact(s->get(), uri.c_str(), nullptr), "compact " + uri);
}

void Engine::advanceTimestamps(uint64_t stable, uint64_t oldest) {
    if (stable == 0) return;
    if (oldest > stable) oldest = stable;
    char cfg[96];
    // Stable first: oldest may not pass it. Both only ever move forward (WiredTiger
    // ignores older values); stable has no effect on checkpoints of logged tables.
    std::snprintf(cfg, sizeof cfg, "stable_timestamp=%llx",
                  static_cast<unsigned long long>(stable));
    int ret = conn_->set_timestamp(conn_, cfg);
    if (ret == 0 && oldest != 0) {
        std::snprintf(cfg, sizeof cfg, "oldest_timestamp=%llx",
                      static_cast<unsigned long long>(oldest));
        ret = conn_->set_timestamp(conn_, cfg);
    }
    if (ret != 0)
        log::warning("storage", 9140003, "set_timestamp failed",
                     fmt::format(R"({{"error":{}}})", log::quote(wiredtiger_strerror(ret))));
}

void Engine::checkpoint() {
    auto s = newSession();
    int ret = s->get()->checkpoint(s->get(), nullptr);
    if (ret != 0)
        log::warning("storage", 9140031, "Checkpoint failed",
                     fmt::format(R"({{"error":{}}})", log::quote(wiredtiger_strerror(ret))));
}

}  // namespace halo::store
