#pragma once
// Placeholder until the workers land: setup only.
#include <asio.hpp>
#include <string>

#include "tiering/config.h"
#include "tiering/protocol.h"
#include "tiering/state.h"

namespace halo::tiering {

asio::awaitable<Status> ensureSetup(const ProxyConfig& cfg, Tiers& t);

class Workers {
  public:
    Workers(asio::io_context& io, const ProxyConfig& cfg, Tiers& t, SharedState& s,
            std::string ownerId)
        : state_(s) {}
    void start() {}
    void stop() {}

  private:
    SharedState& state_;
};

}  // namespace halo::tiering
