#include "tiering/operations.h"

#include <fmt/format.h>

#include <string_view>

#include "tiering/router.h"

namespace halo::tiering {

OperationSlot::OperationSlot(Operations& ops, uint64_t connectionId, std::string client)
    : ops_(ops), connectionId_(connectionId), client_(std::move(client)) {
    std::lock_guard lk(ops_.mu_);
    ops_.slots_.insert(this);
}

OperationSlot::~OperationSlot() {
    std::lock_guard lk(ops_.mu_);
    ops_.slots_.erase(this);
}

void OperationSlot::begin(const bson_t* cmd, const std::string& db, std::string principal) {
    int64_t id = ops_.nextOpId_.fetch_add(1, std::memory_order_relaxed);
    tier_.store(nullptr, std::memory_order_relaxed);
    killed_.store(false, std::memory_order_relaxed);
    std::lock_guard lk(mu_);
    opid_ = id;
    cmd_ = cmd;
    db_ = db;
    principal_ = std::move(principal);
    started_ = std::chrono::steady_clock::now();
}

void OperationSlot::end() {
    std::lock_guard lk(mu_);
    opid_ = 0;
    cmd_ = nullptr;
}

namespace {

/// mongod's `op` for a command: query, getmore, insert, update, remove or command.
const char* opKind(std::string_view name) {
    if (name == "find") return "query";
    if (name == "getMore") return "getmore";
    if (name == "insert") return "insert";
    if (name == "update") return "update";
    if (name == "delete") return "remove";
    return "command";
}

}  // namespace

std::vector<bson::Doc> Operations::current(bool includeIdle, const std::string* onlyOf) const {
    std::vector<bson::Doc> out;
    auto now = std::chrono::steady_clock::now();
    std::string when = isoDate(nowMillis());
    std::lock_guard lk(mu_);
    for (OperationSlot* s : slots_) {
        std::lock_guard sl(s->mu_);
        if (!s->opid_ && !includeIdle) continue;
        if (onlyOf && s->principal_ != *onlyOf) continue;
        bson::Doc d;
        BSON_APPEND_UTF8(d.mut(), "type", "op");
        std::string desc = fmt::format("conn{}", s->connectionId_);
        BSON_APPEND_UTF8(d.mut(), "desc", desc.c_str());
        BSON_APPEND_INT64(d.mut(), "connectionId", static_cast<int64_t>(s->connectionId_));
        BSON_APPEND_UTF8(d.mut(), "client", s->client_.c_str());
        if (!s->principal_.empty()) {
            auto at = s->principal_.rfind('@');
            bson_t users, u;
            BSON_APPEND_ARRAY_BEGIN(d.mut(), "effectiveUsers", &users);
            BSON_APPEND_DOCUMENT_BEGIN(&users, "0", &u);
            BSON_APPEND_UTF8(&u, "user", s->principal_.substr(0, at).c_str());
            BSON_APPEND_UTF8(&u, "db", s->principal_.substr(at + 1).c_str());
            bson_append_document_end(&users, &u);
            bson_append_array_end(d.mut(), &users);
        }
        BSON_APPEND_BOOL(d.mut(), "active", s->opid_ != 0);
        BSON_APPEND_UTF8(d.mut(), "currentOpTime", when.c_str());
        if (s->opid_) {
            BSON_APPEND_INT64(d.mut(), "opid", s->opid_);
            auto us =
                std::chrono::duration_cast<std::chrono::microseconds>(now - s->started_).count();
            BSON_APPEND_INT64(d.mut(), "secs_running", us / 1'000'000);
            BSON_APPEND_INT64(d.mut(), "microsecs_running", us);
            bson_iter_t it;
            std::string name, ns = s->db_ + ".$cmd";
            if (s->cmd_ && bson_iter_init(&it, s->cmd_) && bson_iter_next(&it)) {
                name = bson_iter_key(&it);
                if (BSON_ITER_HOLDS_UTF8(&it)) ns = s->db_ + "." + bson_iter_utf8(&it, nullptr);
            }
            BSON_APPEND_UTF8(d.mut(), "op", opKind(name));
            BSON_APPEND_UTF8(d.mut(), "ns", ns.c_str());
            if (s->cmd_) BSON_APPEND_DOCUMENT(d.mut(), "command", s->cmd_);
            BSON_APPEND_BOOL(d.mut(), "killPending", s->killed_.load());
            bson_t h;
            BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "halocline", &h);
            const char* tier = s->tier_.load();
            BSON_APPEND_UTF8(&h, "tier", tier ? tier : "proxy");
            bson_append_document_end(d.mut(), &h);
        } else {
            BSON_APPEND_UTF8(d.mut(), "op", "none");
        }
        out.push_back(std::move(d));
    }
    return out;
}

bool Operations::kill(int64_t opid, const std::string* onlyOf) {
    std::lock_guard lk(mu_);
    for (OperationSlot* s : slots_) {
        std::lock_guard sl(s->mu_);
        if (s->opid_ == opid && (!onlyOf || s->principal_ == *onlyOf)) {
            s->killed_ = true;
            return true;
        }
    }
    return false;
}

size_t Operations::killSessions(const std::set<std::string>& ids, const OperationSlot* except) {
    size_t n = 0;
    std::lock_guard lk(mu_);
    for (OperationSlot* s : slots_) {
        if (s == except) continue;
        std::lock_guard sl(s->mu_);
        if (s->cmd_ && ids.count(bson::lsidIdBytes(s->cmd_))) {
            s->killed_ = true;
            ++n;
        }
    }
    return n;
}

}  // namespace halo::tiering
