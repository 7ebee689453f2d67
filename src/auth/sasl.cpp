#include "auth/sasl.h"

#include <fmt/format.h>

namespace halo::auth {

StatusWith<std::string> SaslConversation::start(std::string_view mechanism,
                                                std::string_view payload, std::string db,
                                                bool skipEmptyExchange) {
    auto mech = mechanismFromName(mechanism);
    if (!mech)
        return Status(ErrorCode::MechanismUnavailable,
                      fmt::format("Received authentication for mechanism {} which is unknown or "
                                  "not enabled",
                                  mechanism));
    scram_ = std::make_unique<ScramServer>(*mech);
    db_ = std::move(db);
    skipEmptyExchange_ = skipEmptyExchange;
    auto user = scram_->start(payload);
    if (!user.isOK()) return user.getStatus();
    user_ = user.getValue();
    return user_;
}

StatusWith<SaslConversation::Step> SaslConversation::step(std::string_view payload) {
    if (finished_ || !scram_)
        return Status(ErrorCode::ProtocolError, "No SASL session state found");
    if (awaitingEmptyStep_) {
        finished_ = true;
        return Step{"", true};
    }
    auto final = scram_->finish(payload);
    if (!final.isOK()) {
        finished_ = true;
        return final.getStatus();
    }
    if (skipEmptyExchange_) {
        finished_ = true;
        return Step{final.getValue(), true};
    }
    awaitingEmptyStep_ = true;
    return Step{final.getValue(), false};
}

}  // namespace halo::auth
