#include "tiering/cursors.h"

namespace halo::tiering {

int64_t CursorMap::add(CursorEntry e, std::vector<CursorEntry>* dropped) {
    std::lock_guard lk(mu_);
    while (map_.size() >= max_ && !map_.empty()) {
        auto oldest = map_.begin();
        for (auto it = map_.begin(); it != map_.end(); ++it)
            if (it->second.lastUsed < oldest->second.lastUsed) oldest = it;
        dropped->push_back(oldest->second);
        map_.erase(oldest);
    }
    int64_t id;
    do {
        id = static_cast<int64_t>(rng_() & 0x7fffffffffffffffULL);
    } while (id == 0 || map_.count(id));
    e.created = e.lastUsed = std::chrono::steady_clock::now();
    map_.emplace(id, std::move(e));
    return id;
}

std::optional<CursorEntry> CursorMap::find(int64_t id) {
    std::lock_guard lk(mu_);
    auto it = map_.find(id);
    if (it == map_.end()) return std::nullopt;
    it->second.lastUsed = std::chrono::steady_clock::now();
    return it->second;
}

void CursorMap::touch(int64_t id) {
    std::lock_guard lk(mu_);
    auto it = map_.find(id);
    if (it != map_.end()) it->second.lastUsed = std::chrono::steady_clock::now();
}

void CursorMap::erase(int64_t id) {
    std::lock_guard lk(mu_);
    map_.erase(id);
}

std::vector<CursorEntry> CursorMap::removeIf(const std::function<bool(const CursorEntry&)>& pred) {
    std::vector<CursorEntry> out;
    std::lock_guard lk(mu_);
    for (auto it = map_.begin(); it != map_.end();) {
        if (pred(it->second)) {
            out.push_back(it->second);
            it = map_.erase(it);
        } else {
            ++it;
        }
    }
    return out;
}

std::vector<CursorEntry> CursorMap::reap(std::chrono::milliseconds idle) {
    auto now = std::chrono::steady_clock::now();
    return removeIf([&](const CursorEntry& e) { return now - e.lastUsed > idle; });
}

std::vector<CursorEntry> CursorMap::removeSessions(const std::set<std::string>& ids) {
    return removeIf([&](const CursorEntry& e) { return !e.lsid.empty() && ids.count(e.lsid); });
}

size_t CursorMap::size() const {
    std::lock_guard lk(mu_);
    return map_.size();
}

}  // namespace halo::tiering
