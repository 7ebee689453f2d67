#include "store/exec/cursor_manager.h"

#include <openssl/rand.h>

namespace halo::store {

int64_t CursorManager::add(std::unique_ptr<ClientCursor> c) {
    std::lock_guard lk(mu_);
    if (cursors_.size() + checkedOut_.size() >= max_)
        uasserted(ErrorCode::OperationFailed, "too many open cursors");
    int64_t id = 0;
    do {
        RAND_bytes(reinterpret_cast<unsigned char*>(&id), sizeof id);
        id &= 0x7FFFFFFFFFFFFFFFLL;
    } while (id == 0 || cursors_.count(id) || checkedOut_.count(id));
    c->id = id;
    c->lastUsed = std::chrono::steady_clock::now();
    cursors_[id] = std::move(c);
    return id;
}

std::unique_ptr<ClientCursor> CursorManager::checkout(int64_t id, bool* inUse) {
    std::lock_guard lk(mu_);
    *inUse = checkedOut_.count(id) > 0;
    auto it = cursors_.find(id);
    if (it == cursors_.end()) return nullptr;
    auto c = std::move(it->second);
    cursors_.erase(it);
    checkedOut_[id] = CheckedOut{false, c->ns, c->auth, c->lsid};
    return c;
}

void CursorManager::checkin(std::unique_ptr<ClientCursor> c) {
    std::lock_guard lk(mu_);
    auto it = checkedOut_.find(c->id);
    bool killed = it != checkedOut_.end() && it->second.killed;
    if (it != checkedOut_.end()) checkedOut_.erase(it);
    if (killed) return;
    c->lastUsed = std::chrono::steady_clock::now();
    cursors_[c->id] = std::move(c);
}

void CursorManager::wakeOnKill(int64_t id, std::weak_ptr<asio::steady_timer> timer) {
    std::lock_guard lk(mu_);
    std::erase_if(killWaiters_, [](const auto& kv) { return kv.second.expired(); });
    killWaiters_.emplace(id, std::move(timer));
}

size_t CursorManager::killSessions(const std::function<bool(const std::string&)>& match) {
    std::vector<int64_t> ids;
    {
        std::lock_guard lk(mu_);
        for (const auto& [id, c] : cursors_)
            if (!c->lsid.empty() && match(c->lsid)) ids.push_back(id);
        for (const auto& [id, c] : checkedOut_)
            if (!c.lsid.empty() && match(c.lsid)) ids.push_back(id);
    }
    size_t n = 0;
    for (int64_t id : ids) n += kill(id) ? 1 : 0;
    return n;
}

bool CursorManager::kill(int64_t id) {
    std::lock_guard lk(mu_);
    auto [b, e] = killWaiters_.equal_range(id);
    for (auto it = b; it != e; ++it) {
        if (auto t = it->second.lock()) {
            asio::post(t->get_executor(), [w = it->second] {
                if (auto t2 = w.lock()) t2->cancel();
            });
        }
    }
    killWaiters_.erase(b, e);
    if (cursors_.erase(id)) return true;
    auto it = checkedOut_.find(id);
    if (it != checkedOut_.end()) {
        it->second.killed = true;  // dropped at checkin
        return true;
    }
    return false;
}

bool CursorManager::describe(int64_t id, std::string* ns,
                             std::shared_ptr<const authz::CursorAuth>* auth) const {
    std::lock_guard lk(mu_);
    if (auto it = cursors_.find(id); it != cursors_.end()) {
        *ns = it->second->ns;
        *auth = it->second->auth;
        return true;
    }
    if (auto it = checkedOut_.find(id); it != checkedOut_.end() && !it->second.killed) {
        *ns = it->second.ns;
        *auth = it->second.auth;
        return true;
    }
    return false;
}

void CursorManager::reapIdle() {
    auto now = std::chrono::steady_clock::now();
    std::lock_guard lk(mu_);
    for (auto it = cursors_.begin(); it != cursors_.end();) {
        if (!it->second->noTimeout && now - it->second->lastUsed > timeout_) {
            it = cursors_.erase(it);
            ++timedOut_;
        } else {
            ++it;
        }
    }
}

size_t CursorManager::open() const {
    std::lock_guard lk(mu_);
    return cursors_.size() + checkedOut_.size();
}

}  // namespace halo::store
