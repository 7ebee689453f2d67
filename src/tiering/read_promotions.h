#pragma once
// Background copies of documents the archive answered `_id` reads of
// (docs/CONSISTENCY.md, Reads 2): a read that missed the fast tier queues the
// document it got, with the epoch read before its archive read, and returns.
// One promotion runs per proxy at a time (group commit): the documents queued
// while it is in flight go together in the next one, one transaction per epoch
// value (promoteDocs), so a burst of misses, a cold start's, costs a promotion
// transaction per round trip instead of one per document. A read that could not
// read the epoch first queues its id, promoted the same way (promoteIds).
//
// Best effort, as before: a failed promotion is dropped (the next read of the
// document queues it again), and beyond kMaxQueued documents new ones are not
// queued. Thread-safe; add() may be called from any thread.
#include <asio.hpp>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "bson/doc.h"
#include "tiering/protocol.h"
#include "tiering/state.h"

namespace halo::tiering {

class ReadPromotions {
  public:
    static constexpr size_t kMaxQueued = 10'000;

    ReadPromotions(asio::io_context& io, Tiers& tiers, SharedState& state)
        : io_(io), tiers_(tiers), state_(state) {}

    /// `doc` of `ns`, read from the archive after `epoch` was read.
    void add(const std::string& ns, const Epoch& epoch, bson::Doc doc);
    /// The document of `ns` with this id, to be read from the archive again.
    void addId(const std::string& ns, Id id);

  private:
    struct Queued {
        std::vector<std::pair<Epoch, bson::Doc>> docs;
        std::vector<Id> ids;
    };
    /// Takes the lock; starts a drain unless one runs.
    void startLocked();
    asio::awaitable<void> drain();
    asio::awaitable<void> promote(const std::string& ns, Queued q);

    asio::io_context& io_;
    Tiers& tiers_;
    SharedState& state_;
    std::mutex mu_;
    std::map<std::string, Queued> queued_;
    size_t count_ = 0;
    bool running_ = false;
};

}  // namespace halo::tiering
