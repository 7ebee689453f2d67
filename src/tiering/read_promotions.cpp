#include "tiering/read_promotions.h"

#include <fmt/format.h>

#include <set>
#include <utility>

#include "common/log.h"

namespace halo::tiering {

namespace {

/// Documents per promotion transaction, as the warmer's default batch.
constexpr size_t kMaxPerTransaction = 500;

}  // namespace

void ReadPromotions::add(const std::string& ns, const Epoch& epoch, bson::Doc doc) {
    std::lock_guard lk(mu_);
    if (count_ >= kMaxQueued) return;
    queued_[ns].docs.emplace_back(epoch, std::move(doc));
    ++count_;
    startLocked();
}

void ReadPromotions::addId(const std::string& ns, Id id) {
    std::lock_guard lk(mu_);
    if (count_ >= kMaxQueued) return;
    queued_[ns].ids.push_back(std::move(id));
    ++count_;
    startLocked();
}

void ReadPromotions::startLocked() {
    if (running_) return;
    running_ = true;
    asio::co_spawn(io_, drain(), asio::detached);
}

asio::awaitable<void> ReadPromotions::drain() {
    while (true) {
        std::map<std::string, Queued> batch;
        {
            std::lock_guard lk(mu_);
            if (queued_.empty()) {
                running_ = false;
                co_return;
            }
            batch.swap(queued_);
            count_ = 0;
        }
        for (auto& [ns, q] : batch) {
            try {
                co_await promote(ns, std::move(q));
            } catch (const std::exception& e) {
                log::warning(
                    "tiering", 8210091, "Copying up documents read from the archive failed",
                    fmt::format(R"({{"ns":{},"error":{}}})", log::quote(ns), log::quote(e.what())));
            }
        }
    }
}

asio::awaitable<void> ReadPromotions::promote(const std::string& ns, Queued q) {
    // One transaction per epoch value (a departure between two reads moved it),
    // each with the earliest time its value was read (Promotion's 30 s bound);
    // an id once, whichever read queued it first.
    struct Group {
        Epoch epoch;
        std::vector<bson::Doc> docs;
    };
    std::map<std::pair<int64_t, int64_t>, Group> groups;
    std::set<std::string> seen;
    for (auto& [epoch, doc] : q.docs) {
        Id id;
        if (!idOf(doc.get(), &id) || !seen.insert(idKey(id)).second) continue;
        auto [it, fresh] = groups.try_emplace({epoch.departures, epoch.cold});
        if (fresh || epoch.readAt < it->second.epoch.readAt) it->second.epoch = epoch;
        it->second.docs.push_back(std::move(doc));
    }
    int64_t copied = 0;
    for (auto& [value, g] : groups) {
        for (size_t begin = 0; begin < g.docs.size(); begin += kMaxPerTransaction) {
            const size_t end = std::min(g.docs.size(), begin + kMaxPerTransaction);
            std::vector<bson::Doc> chunk(std::make_move_iterator(g.docs.begin() + begin),
                                         std::make_move_iterator(g.docs.begin() + end));
            auto r = co_await promoteDocs(tiers_, ns, g.epoch, chunk);
            if (r.isOK()) copied += r.getValue();
        }
    }
    std::vector<Id> ids;
    for (auto& id : q.ids)
        if (seen.insert(idKey(id)).second) ids.push_back(std::move(id));
    if (!ids.empty()) {
        auto r = co_await promoteIds(tiers_, ns, ids);
        if (r.isOK()) copied += r.getValue();
    }
    if (copied > 0)
        if (auto* pr = state_.progress(ns)) pr->promoted += copied;
}

}  // namespace halo::tiering
