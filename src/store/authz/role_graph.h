#pragma once
// Resolving roles: from a set of roles (a user's, or a role's subordinates) to
// every role they reach and the union of their privileges, as mongod's
// resolveRoles does. User-defined roles come from a lookup the caller provides
// (the store reads admin.system.roles), one call per level of the graph.
// Cycles cannot loop (each role is visited once). Pure apart from the lookup.
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "store/authz/privilege.h"
#include "store/authz/role_name.h"

namespace halo::store::authz {

/// A user-defined role as stored in admin.system.roles
/// ({_id: "db.role", role, db, privileges, roles}).
struct RoleDefinition {
    RoleName name;
    PrivilegeVector privileges;   // its own, as stored
    std::vector<RoleName> roles;  // the roles it inherits directly
};

/// Parses a role document; BadValue on a malformed one.
StatusWith<RoleDefinition> parseRoleDocument(const bson_t* doc);

/// Returns the stored definitions of the named user-defined roles that exist
/// (in any order; absent ones are simply not returned).
using RoleLookup = std::function<std::vector<RoleDefinition>(const std::vector<RoleName>&)>;

struct ResolvedRoles {
    std::vector<RoleName>
        roles;  // every role reached that exists, the starting ones included, sorted
    PrivilegeVector privileges;      // all their privileges, merged per resource
    std::vector<RoleName> notFound;  // user-defined roles reached that do not exist
};

/// Resolves `start` through built-in definitions and `lookup`.
ResolvedRoles resolveRoles(const std::vector<RoleName>& start, const RoleLookup& lookup);

/// The role names of a `roles` array: {role, db} documents, and strings as
/// roles of `db` (skipped when `db` is empty). Other elements are skipped.
std::vector<RoleName> roleNamesIn(const bson_t* array, std::string_view db);
/// Appends [{role, db}, ...] under `key`.
void appendRoleNames(bson_t* parent, const char* key, const std::vector<RoleName>& roles);

}  // namespace halo::store::authz
