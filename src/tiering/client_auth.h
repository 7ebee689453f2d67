#pragma once
// Authentication of one client connection at the proxy, as mongos does it
// (security.authorization): SCRAM-SHA-256/SHA-1 over saslStart/saslContinue
// (and hello's speculativeAuthenticate and saslSupportedMechs) against the
// archive's users (UserCache), logout, connectionStatus, and the check every
// other command passes before it runs: authenticated, and authorized by the
// user's privileges (access.h). Failed logins are logged as mongod logs them
// (id 20249) and counted.
//
// One object per connection, used by that connection's coroutine only.
#include <asio.hpp>
#include <atomic>
#include <memory>
#include <span>
#include <string>

#include "auth/sasl.h"
#include "bson/doc.h"
#include "tiering/users.h"
#include "wire/message.h"

namespace halo::tiering {

/// Login counters of a proxy, shown in haloclineStatus.
struct AuthCounters {
    std::atomic<int64_t> succeeded{0};
    std::atomic<int64_t> failed{0};
};

class ClientAuth {
  public:
    ClientAuth(bool enabled, UserCache& users, AuthCounters& counters, std::string remote,
               std::string peerSubject)
        : enabled_(enabled),
          users_(users),
          counters_(counters),
          remote_(std::move(remote)),
          peerSubject_(std::move(peerSubject)) {}

    bool enabled() const { return enabled_; }
    /// The authenticated user ("user@db"), empty when none.
    std::string principal() const { return user_ ? user_->name() : std::string(); }

    /// saslStart / saslContinue: the reply's fields (conversationId, done,
    /// payload) or the error (18 "Authentication failed." to the client, the
    /// reason in the log).
    asio::awaitable<StatusWith<bson::Doc>> saslStart(const bson_t* cmd, const std::string& db);
    asio::awaitable<StatusWith<bson::Doc>> saslContinue(const bson_t* cmd, const std::string& db);
    /// hello: saslSupportedMechs for "db.user", and the first SCRAM step of
    /// speculativeAuthenticate, appended to `reply`.
    asio::awaitable<void> appendToHello(const bson_t* cmd, bson_t* reply);
    /// authenticate {mechanism: "MONGODB-X509"} on $external: the user named by
    /// the client certificate's subject (TLS with net.tls.CAFile), as mongod.
    /// Other mechanisms: 334, as mongod refuses them on this command.
    asio::awaitable<Status> authenticate(const bson_t* cmd, const std::string& db,
                                         bool speculative = false);
    void logout() {
        user_.reset();
        sasl_.reset();
    }
    /// connectionStatus's authInfo.
    void appendConnectionStatus(const bson_t* cmd, bson_t* reply) const;

    /// Before any other command: OK, 13 "Command X requires authentication", or
    /// 13 not authorized. Re-reads the user when its record is older than the
    /// cache interval (a dropped user is no longer authenticated).
    asio::awaitable<Status> check(std::string_view name, const std::string& db, const bson_t* cmd,
                                  std::span<const wire::DocumentSequence> sequences);
    /// The authenticated user's privileges (empty when none).
    const std::vector<access::Privilege>& privileges() const {
        static const std::vector<access::Privilege> none;
        return user_ ? user_->privileges : none;
    }

  private:
    Status failed(std::string_view mechanism, const std::string& user, const std::string& db,
                  std::string_view reason, bool speculative);
    asio::awaitable<StatusWith<std::string>> start(std::string_view mechanism,
                                                   std::string_view payload, const std::string& db,
                                                   bool skipEmptyExchange, bool speculative);

    const bool enabled_;
    UserCache& users_;
    AuthCounters& counters_;
    const std::string remote_;
    const std::string peerSubject_;
    std::shared_ptr<const UserRecord> user_;
    std::unique_ptr<auth::SaslConversation> sasl_;
    std::shared_ptr<const UserRecord> saslUser_;  // the record the conversation checks against
};

}  // namespace halo::tiering
