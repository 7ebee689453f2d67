#pragma once
// The users the proxy authenticates its clients against: those of the archive
// (the application's replica set), read with the standard usersInfo command
// (showCredentials, showPrivileges) as the proxy's tier user, and cached for
// security.userCacheInvalidationIntervalSecs, as mongos caches them. A changed
// password or role in the archive takes effect through the proxy within that
// interval; a failed login reads the user again at once.
//
// Thread-safe: get() may be awaited from any thread; records are immutable.
#include <asio.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "auth/scram.h"
#include "bson/doc.h"
#include "common/status.h"
#include "tiering/access.h"
#include "tiering/tier.h"

namespace halo::tiering {

/// A user as the archive reports it.
struct UserRecord {
    std::string user;
    std::string db;
    std::map<auth::ScramMechanism, auth::ScramCredentials> credentials;
    bson::Doc roles;                // {roles: [{role, db}...]} as usersInfo returns them
    bson::Doc inheritedPrivileges;  // {privileges: [{resource, actions}...]}
    std::vector<access::Privilege> privileges;  // the same, parsed
    std::chrono::steady_clock::time_point fetched;

    /// "user@db", as mongod names a principal in messages.
    std::string name() const { return user + "@" + db; }
};

class UserCache {
  public:
    UserCache(Tier& archive, std::chrono::milliseconds maxAge)
        : archive_(archive), maxAge_(maxAge) {}

    /// The user's record: cached when younger than the interval (and not
    /// `fresh`), else read from the archive. Null when no such user exists.
    /// Errors are the archive's (unreachable, or the proxy's user may not view users).
    asio::awaitable<StatusWith<std::shared_ptr<const UserRecord>>> get(const std::string& db,
                                                                       const std::string& user,
                                                                       bool fresh = false);
    /// Whether `r` is older than the interval (a connection then asks get() again).
    bool stale(const UserRecord& r) const {
        return std::chrono::steady_clock::now() - r.fetched >= maxAge_;
    }

  private:
    Tier& archive_;
    const std::chrono::milliseconds maxAge_;
    std::mutex mu_;
    std::map<std::string, std::shared_ptr<const UserRecord>> cache_;  // "db\0user"
};

/// Parses one usersInfo user document (credentials, roles, inheritedPrivileges).
StatusWith<UserRecord> parseUserDocument(const bson_t* user);

}  // namespace halo::tiering
