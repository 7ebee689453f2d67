#pragma once
// Users and authentication in the store: user documents in admin.system.users
// (mongod's shape), the SASL commands (SCRAM-SHA-1, SCRAM-SHA-256), the user
// management commands, and hello's saslSupportedMechs/speculativeAuthenticate.
// User documents are read and written through internal commands
// (Store::runInternal), so they are indexed, journaled and replicated like any
// other collection; the admin database never appears in change streams.
#include <optional>
#include <string_view>
#include <vector>

#include "bson/doc.h"
#include "store/authz/authorization.h"

namespace halo::store {

class Store;
struct OperationContext;

/// The user document for user `user` of database `db`, if there is one.
std::optional<bson::Doc> findUserDoc(Store& store, std::string_view db, std::string_view user);
/// The roles of a user document.
std::vector<authz::RoleName> rolesOf(const bson_t* userDoc);
/// Whether admin.system.users holds any user (no user: the localhost exception applies).
bool anyUserExists(Store& store);
/// hello: `saslSupportedMechs: "db.user"` and `speculativeAuthenticate` (a
/// saslStart folded into the handshake). Never fails the hello.
void appendHelloAuth(OperationContext& op, bson_t* reply);
/// Whether listDatabases shows `db` to this connection (with --auth, a user
/// without a cluster-wide role sees only the databases it has a role on).
bool mayListDatabase(const OperationContext& op, std::string_view db);

}  // namespace halo::store
