#pragma once
// The background workers of docs/CONSISTENCY.md: the feeder (fast tier's change
// stream -> archive), the evictor (old documents out of the fast tier once the
// archive provably holds them) and the warmer (recent archive documents up
// into the fast tier), run by whichever proxy holds the worker lease; plus the
// setup every proxy runs before serving. Only standard MongoDB commands reach
// the tiers.
#include <asio.hpp>
#include <memory>
#include <string>

#include "common/status.h"
#include "tiering/config.h"
#include "tiering/protocol.h"
#include "tiering/state.h"

namespace halo::tiering {

/// Runs the worker lease and, while this proxy holds it, the feeder, the
/// evictor and one warmer per tiered collection, as coroutines on one strand
/// of `io`. Without the lease (or with workers disabled) it refreshes `state`
/// from the durable documents in the fast tier every ~250 ms instead.
///
/// Contracts: nothing here blocks a thread; a tier that is down is logged and
/// retried with backoff, never fatal. `tiers` and `state` must outlive every
/// run of `io` after start(); the configuration is copied. stop() does not
/// block: each worker ends after its current step, and the lease is released
/// once they all have (if `io` still runs), otherwise it simply expires.
class Workers {
  public:
    Workers(asio::io_context& io, const ProxyConfig& cfg, Tiers& tiers, SharedState& state,
            std::string ownerId);
    ~Workers();
    Workers(const Workers&) = delete;
    Workers& operator=(const Workers&) = delete;

    void start();
    void stop();

  private:
    struct Context;
    std::shared_ptr<Context> ctx_;
};

/// CONSISTENCY.md, Names: creates the metadata collections and each tiered
/// collection in the fast tier (with the archive collection's collation),
/// copies the archive's secondary indexes onto it (without TTL) and makes sure
/// the fast tier has an ascending index on each age field. Idempotent; every
/// proxy runs it before serving.
asio::awaitable<Status> ensureSetup(const ProxyConfig& cfg, Tiers& tiers);
/// The name of the age index ensureSetup creates when the fast tier has none.
inline std::string ageIndexName(const CollectionPolicy& p) {
    return "halocline_age_" + p.ageField;
}

/// Whether `p` can work on the archive's data: samples the documents at both
/// ends of the `_id` order and returns what is wrong with the age field (most
/// sampled documents lack it, or hold no date there; for `_id`, no ObjectId),
/// or an empty string when nothing is (an empty collection included).
asio::awaitable<StatusWith<std::string>> checkAgeField(Tier& archive, const CollectionPolicy& p);

}  // namespace halo::tiering
