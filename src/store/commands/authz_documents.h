#pragma once
// The documents access control lives in: users in admin.system.users and
// user-defined roles in admin.system.roles, in mongod's shapes. Read and
// written through internal commands (Store::runInternal), so they are indexed,
// journaled and in the oplog like any collection. Every write bumps the
// store's authorization generation, so connections re-resolve their privileges.
// Functions throw DBException on storage errors.
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "bson/doc.h"
#include "store/authz/privilege.h"
#include "store/authz/role_graph.h"

namespace halo::store {

class Store;

inline constexpr const char* kUsersCollection = "system.users";
inline constexpr const char* kRolesCollection = "system.roles";

/// Every document of admin.<collection> matching `filter`, sorted by `sort`
/// (nullptr: by _id). One batch: these collections are small.
std::vector<bson::Doc> findAuthzDocuments(Store& store, const char* collection,
                                          const bson_t* filter, const bson_t* sort = nullptr);

/// The user document for user `user` of database `db`, if there is one.
std::optional<bson::Doc> findUserDoc(Store& store, std::string_view db, std::string_view user);
/// The roles of a user (or role) document's `roles` array.
std::vector<authz::RoleName> rolesOf(const bson_t* doc);
/// Inserts `doc` into admin.<collection>; a DuplicateKey becomes `duplicate`.
void insertAuthzDocument(Store& store, const char* collection, const bson_t* doc,
                         const Status& duplicate);
/// Whether admin.system.users holds any user or admin.system.roles any role
/// (neither: the localhost exception applies).
bool anyUserOrRoleExists(Store& store);

/// Looks user-defined roles up in admin.system.roles (one query per call).
authz::RoleLookup roleLookup(Store& store);
/// Resolves roles through the built-in definitions and admin.system.roles.
authz::ResolvedRoles resolveRoles(Store& store, const std::vector<authz::RoleName>& roles);
/// The privileges of a user holding `roles` directly.
std::shared_ptr<const authz::PrivilegeSet> privilegesOf(Store& store,
                                                        const std::vector<authz::RoleName>& roles);

/// The `roles` array of a command: names ("r", a role of `db`) or {role, db}
/// documents, duplicates dropped. Their existence is not checked.
std::vector<authz::RoleName> parseRoleNames(const bson_t* cmd, std::string_view cmdName,
                                            std::string_view db);
/// The user-defined roles among `roles` that do not exist, in the order given.
std::vector<authz::RoleName> missingRoles(Store& store, const std::vector<authz::RoleName>& roles);
/// mongod's RoleNotFound (31) for `missing` ("Could not find role: r@db").
[[noreturn]] void throwRoleNotFound(const std::vector<authz::RoleName>& missing,
                                    std::string_view context = {});

/// Throws the error of an internal write's reply (ok:0 or the first writeError);
/// a DuplicateKey becomes `duplicate` when given.
void checkWriteReply(const bson_t* reply, const Status* duplicate = nullptr);
/// The `n` of an internal write's reply.
int64_t writeCount(const bson_t* reply);

}  // namespace halo::store
