#pragma once
// The server side of one SASL conversation as mongod runs SCRAM over saslStart
// and saslContinue: the mechanism, the conversation id, the client's user name,
// and the optional empty last step (saslStart's options.skipEmptyExchange).
// No I/O: the caller looks the user's credentials up between start() and
// serverFirst() (the tiering proxy reads them from the archive).
// Not thread-safe; one object per conversation.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "auth/scram.h"
#include "common/status.h"

namespace halo::auth {

class SaslConversation {
  public:
    /// saslStart: the mechanism name and the client-first payload. Returns the
    /// user name to look up. MechanismUnavailable (334, mongod's text) for a
    /// mechanism other than SCRAM-SHA-1/SCRAM-SHA-256; AuthenticationFailed for
    /// a malformed first message (the reason is for the log).
    StatusWith<std::string> start(std::string_view mechanism, std::string_view payload,
                                  std::string db, bool skipEmptyExchange);
    /// The payload of saslStart's reply, for the user's stored credentials.
    std::string serverFirst(const ScramCredentials& creds) { return scram_->serverFirst(creds); }

    struct Step {
        std::string payload;
        bool done = false;  // true: the client is authenticated as user()@db()
    };
    /// saslContinue's payload. AuthenticationFailed (reason for the log) on a
    /// wrong proof; ProtocolError for a step after the end.
    StatusWith<Step> step(std::string_view payload);

    int32_t id() const { return id_; }
    const std::string& user() const { return user_; }
    const std::string& db() const { return db_; }
    ScramMechanism mechanism() const { return scram_->mechanism(); }

  private:
    int32_t id_ = 1;
    std::string user_;
    std::string db_;
    bool skipEmptyExchange_ = false;
    bool awaitingEmptyStep_ = false;
    bool finished_ = false;
    std::unique_ptr<ScramServer> scram_;
};

}  // namespace halo::auth
