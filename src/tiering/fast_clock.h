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
// A lazy feeder (CONSISTENCY.md, The feeder, Lazy mode) writes what it gathered
// when a proxy demands it: then the probe is that demand, an update of
// <meta>.state {_id: "feederDemand"}, whose operationTime serves the same way
// (every write acknowledged before it is earlier) and whose change event tells
// the feeder to write.
//
// Thread-safe; now() may be awaited from any thread of the io_context.
#include <asio.hpp>
#include <memory>
#include <mutex>

#include "bson/doc.h"
#include "common/status.h"
#include "tiering/protocol.h"
#include "tiering/state.h"
#include "tiering/tier.h"

namespace halo::tiering {

class FastClock {
  public:
    /// Probes with {ping: 1}.
    explicit FastClock(Tier& fast);
    /// Probes with the lazy feeder's demand (see above).
    FastClock(Tier& fast, const Metadata& meta);

    /// The operationTime of a probe sent after this call began.
    asio::awaitable<StatusWith<OpTime>> now();

  private:
    struct Round;
    asio::awaitable<void> run(std::shared_ptr<Round> round);

    Tier& fast_;
    bson::Doc probe_;
    std::mutex mu_;
    bool inFlight_ = false;
    std::shared_ptr<Round> next_;  // callers waiting for the ping after the one in flight
};

}  // namespace halo::tiering
