#pragma once
// The fast tier's current time, as archive reads need it for read-your-writes
// (docs/CONSISTENCY.md, Reads): the operationTime of a ping sent to the fast
// tier's primary after the read arrived. One ping is in flight per proxy at a
// time (group commit): every caller that arrived before a ping was sent is
// answered by it, and callers that arrive while it is in flight are answered by
// the next one, which is sent as soon as the current one returns. So a caller's
// answer always comes from a ping sent after it arrived, and a busy proxy sends
// one ping per round trip instead of one per read.
//
// Thread-safe; now() may be awaited from any thread of the io_context.
#include <asio.hpp>
#include <memory>
#include <mutex>

#include "common/status.h"
#include "tiering/state.h"
#include "tiering/tier.h"

namespace halo::tiering {

class FastClock {
  public:
    explicit FastClock(Tier& fast) : fast_(fast) {}

    /// The fast tier's time from a ping sent after this call began.
    asio::awaitable<StatusWith<OpTime>> now();

  private:
    struct Round;
    asio::awaitable<void> run(std::shared_ptr<Round> round);

    Tier& fast_;
    std::mutex mu_;
    bool inFlight_ = false;
    std::shared_ptr<Round> next_;  // callers waiting for the ping after the one in flight
};

}  // namespace halo::tiering
