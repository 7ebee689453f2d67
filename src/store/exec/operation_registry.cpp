#include "store/exec/operation_registry.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

namespace halo::store {
namespace {

/// "2024-05-01T12:34:56.789+00:00", as mongod prints currentOpTime.
std::string isoNow() {
    auto now = std::chrono::system_clock::now();
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
    return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03d}+00:00",
                       std::chrono::floor<std::chrono::seconds>(now), ms.count());
}

void appendClient(bson_t* d, uint64_t connectionId, const std::string& remote,
                  const bson::Doc* metadata, const std::string& host) {
    BSON_APPEND_UTF8(d, "type", "op");
    BSON_APPEND_UTF8(d, "host", host.c_str());
    std::string desc = fmt::format("conn{}", connectionId);
    BSON_APPEND_UTF8(d, "desc", desc.c_str());
    bson::appendNumber(d, "connectionId", static_cast<int64_t>(connectionId));
    BSON_APPEND_UTF8(d, "client", remote.c_str());
    if (metadata && !metadata->empty()) BSON_APPEND_DOCUMENT(d, "clientMetadata", metadata->get());
}

}  // namespace

std::pair<std::string, std::string> describeCommand(std::string_view db, const bson_t* command) {
    bson_iter_t it;
    std::string name;
    std::string coll;
    if (bson_iter_init(&it, command) && bson_iter_next(&it)) {
        name = bson_iter_key(&it);
        if (BSON_ITER_HOLDS_UTF8(&it)) coll = bson_iter_utf8(&it, nullptr);
    }
    std::string op = name == "find"          ? "query"
                     : name == "getMore"     ? "getmore"
                     : name == "insert"      ? "insert"
                     : name == "update"      ? "update"
                     : name == "delete"      ? "remove"
                     : name == "killCursors" ? "killcursors"
                                             : "command";
    if (name == "getMore" && bson_iter_init_find(&it, command, "collection") &&
        BSON_ITER_HOLDS_UTF8(&it))
        coll = bson_iter_utf8(&it, nullptr);
    std::string ns = std::string(db) + ".";
    if (!coll.empty())
        ns += coll;
    else if (name == "aggregate")
        ns += "$cmd.aggregate";
    else
        ns += "$cmd";
    return {op, ns};
}

void OperationRegistry::addClient(uint64_t connectionId, std::string remote) {
    std::lock_guard lk(mu_);
    clients_[connectionId] = Client{std::move(remote), bson::Doc()};
}

void OperationRegistry::removeClient(uint64_t connectionId) {
    std::lock_guard lk(mu_);
    clients_.erase(connectionId);
}

void OperationRegistry::setClientMetadata(uint64_t connectionId, const bson_t* metadata) {
    std::lock_guard lk(mu_);
    auto it = clients_.find(connectionId);
    if (it != clients_.end()) it->second.metadata = bson::Doc::copyOf(metadata);
}

std::shared_ptr<ActiveOperation> OperationRegistry::begin(uint64_t connectionId) {
    auto op = std::make_shared<ActiveOperation>();
    op->opid_ = nextOpid_++;
    op->connectionId_ = connectionId;
    op->started_ = std::chrono::steady_clock::now();
    std::lock_guard lk(mu_);
    ops_[op->opid_] = op;
    return op;
}

void OperationRegistry::end(const ActiveOperation& op) {
    std::lock_guard lk(mu_);
    ops_.erase(op.opid_);
}

void OperationRegistry::describe(ActiveOperation& op, std::string kind, std::string ns,
                                 const bson_t* command,
                                 std::optional<std::pair<std::string, std::string>> user) {
    std::lock_guard lk(mu_);
    op.described_ = true;
    op.op_ = std::move(kind);
    op.ns_ = std::move(ns);
    op.command_ = command;
    op.user_ = std::move(user);
}

void OperationRegistry::detachCommand(ActiveOperation& op, bool keepCopy) {
    std::lock_guard lk(mu_);
    if (keepCopy && op.command_) op.ownCommand_ = bson::Doc::copyOf(op.command_);
    op.command_ = nullptr;
}

bool OperationRegistry::waitOn(ActiveOperation& op, std::weak_ptr<asio::steady_timer> timer) {
    std::lock_guard lk(mu_);
    op.waitTimer_ = std::move(timer);
    return !op.killed_.load();
}

bool OperationRegistry::kill(int64_t opid,
                             const std::optional<std::pair<std::string, std::string>>& onlyUser) {
    std::lock_guard lk(mu_);
    auto it = ops_.find(opid);
    if (it == ops_.end()) return false;
    ActiveOperation& op = *it->second;
    if (onlyUser && op.user_ != onlyUser) return false;
    killLocked(op);
    return true;
}

void OperationRegistry::killLocked(ActiveOperation& op) {
    op.killed_ = true;
    if (auto t = op.waitTimer_.lock()) {
        // The timer belongs to the waiting connection's coroutine: cancel it
        // on its executor, not from this thread.
        asio::post(t->get_executor(), [w = op.waitTimer_] {
            if (auto t2 = w.lock()) t2->cancel();
        });
    }
}

size_t OperationRegistry::killSessions(const std::function<bool(const std::string&)>& match,
                                       int64_t exceptOpid) {
    std::lock_guard lk(mu_);
    size_t n = 0;
    for (auto& [opid, op] : ops_) {
        if (opid == exceptOpid) continue;
        const bson_t* command = op->command_ ? op->command_ : op->ownCommand_.get();
        if (!command) continue;
        const std::string id = bson::lsidIdBytes(command);
        if (id.empty() || !match(id)) continue;
        killLocked(*op);
        ++n;
    }
    return n;
}

std::vector<bson::Doc> OperationRegistry::report(const ReportOptions& options) const {
    std::vector<bson::Doc> out;
    const std::string now = isoNow();
    const auto steadyNow = std::chrono::steady_clock::now();
    std::lock_guard lk(mu_);
    std::map<uint64_t, bool> busy;
    for (const auto& [opid, op] : ops_) {
        if (!op->described_) continue;  // not yet read its command
        if (options.onlyUser && op->user_ != options.onlyUser) continue;
        busy[op->connectionId_] = true;
        auto client = clients_.find(op->connectionId_);
        bson::Doc d;
        appendClient(d.mut(), op->connectionId_,
                     client != clients_.end() ? client->second.remote : std::string(),
                     client != clients_.end() ? &client->second.metadata : nullptr, options.host);
        BSON_APPEND_BOOL(d.mut(), "active", true);
        BSON_APPEND_UTF8(d.mut(), "currentOpTime", now.c_str());
        if (op->user_) {
            bson_t users, u;
            BSON_APPEND_ARRAY_BEGIN(d.mut(), "effectiveUsers", &users);
            BSON_APPEND_DOCUMENT_BEGIN(&users, "0", &u);
            BSON_APPEND_UTF8(&u, "user", op->user_->first.c_str());
            BSON_APPEND_UTF8(&u, "db", op->user_->second.c_str());
            bson_append_document_end(&users, &u);
            bson_append_array_end(d.mut(), &users);
        }
        BSON_APPEND_BOOL(d.mut(), "threaded", true);
        bson::appendNumber(d.mut(), "opid", opid);
        const bson_t* command = op->command_ ? op->command_ : op->ownCommand_.get();
        bson_t lsid;
        if (bson::subDocument(command, "lsid", &lsid)) BSON_APPEND_DOCUMENT(d.mut(), "lsid", &lsid);
        auto micros =
            std::chrono::duration_cast<std::chrono::microseconds>(steadyNow - op->started_).count();
        BSON_APPEND_INT64(d.mut(), "secs_running", micros / 1000000);
        BSON_APPEND_INT64(d.mut(), "microsecs_running", micros);
        BSON_APPEND_UTF8(d.mut(), "op", op->op_.c_str());
        BSON_APPEND_UTF8(d.mut(), "ns", op->ns_.c_str());
        BSON_APPEND_BOOL(d.mut(), "redacted", false);
        BSON_APPEND_DOCUMENT(d.mut(), "command", command);
        BSON_APPEND_INT32(d.mut(), "numYields", 0);
        BSON_APPEND_BOOL(d.mut(), "killPending", op->killed_.load());
        bson_t empty;
        BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "locks", &empty);
        bson_append_document_end(d.mut(), &empty);
        BSON_APPEND_BOOL(d.mut(), "waitingForLock", false);
        BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "lockStats", &empty);
        bson_append_document_end(d.mut(), &empty);
        BSON_APPEND_BOOL(d.mut(), "waitingForFlowControl", false);
        BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "flowControlStats", &empty);
        bson_append_document_end(d.mut(), &empty);
        out.push_back(std::move(d));
    }
    if (options.idleConnections && !options.onlyUser) {
        for (const auto& [id, client] : clients_) {
            if (busy.count(id)) continue;
            bson::Doc d;
            appendClient(d.mut(), id, client.remote, &client.metadata, options.host);
            BSON_APPEND_BOOL(d.mut(), "active", false);
            BSON_APPEND_UTF8(d.mut(), "currentOpTime", now.c_str());
            out.push_back(std::move(d));
        }
    }
    return out;
}

}  // namespace halo::store
