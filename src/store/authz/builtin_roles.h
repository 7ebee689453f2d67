#pragma once
// mongod's built-in roles with the privileges mongod 7.0 gives them
// (src/mongo/db/auth/builtin_roles.yml): read, readWrite, dbAdmin, dbOwner,
// userAdmin and enableSharding on every database; readAnyDatabase,
// readWriteAnyDatabase, userAdminAnyDatabase, dbAdminAnyDatabase,
// clusterMonitor, clusterManager, hostManager, clusterAdmin, backup, restore,
// root (and backup's __queryableBackup) on admin only. A built-in role is
// flattened: its privileges include those of the roles it is made of, and it
// has no subordinate roles (rolesInfo shows roles: [] and inheritedRoles: []).
// Not modelled: __system, directShardOperations, and privileges on time-series
// buckets (the store has no time-series collections). Pure, thread-safe.
#include <string>
#include <string_view>
#include <vector>

#include "store/authz/privilege.h"
#include "store/authz/role_name.h"

namespace halo::store::authz {

/// Whether `r` is a built-in role that exists on r.db.
bool isBuiltinRole(const RoleName& r);
/// Whether a role of this name may not be created on `db` (it is built in there).
bool isBuiltinRoleName(std::string_view role, std::string_view db);
/// The privileges of built-in role `r` (empty when it is not one).
PrivilegeVector builtinRolePrivileges(const RoleName& r);
/// The built-in roles that exist on `db`, in ASCII order.
std::vector<std::string> builtinRoleNames(std::string_view db);

}  // namespace halo::store::authz
