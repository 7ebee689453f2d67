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
#include "store/commands/authz_documents.h"

namespace halo::store {

class Store;
struct OperationContext;

/// hello: `saslSupportedMechs: "db.user"` and `speculativeAuthenticate` (a
/// saslStart folded into the handshake). Never fails the hello.
void appendHelloAuth(OperationContext& op, bson_t* reply);
/// Whether listDatabases shows `db` to this connection (with --auth, a user
/// without the listDatabases action sees only the databases it holds a
/// privilege in, as mongod's authorizedDatabases).
bool mayListDatabase(const OperationContext& op, std::string_view db);

}  // namespace halo::store
