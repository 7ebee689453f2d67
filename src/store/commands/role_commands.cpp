// User-defined roles, stored as mongod stores them in admin.system.roles
// ({_id: "db.role", role, db, privileges, roles}): createRole, updateRole,
// dropRole, dropAllRolesFromDatabase, grantPrivilegesToRole,
// revokePrivilegesFromRole, grantRolesToRole, revokeRolesFromRole and
// rolesInfo, with mongod 7.0's replies, checks and error codes. Every change
// bumps the authorization generation: connections holding the role pick up
// the change on their next command.
#include <fmt/format.h>

#include <algorithm>

#include "common/log.h"
#include "store/authz/builtin_roles.h"
#include "store/commands/authz_documents.h"
#include "store/commands/command.h"
#include "store/server/store.h"

namespace halo::store {

namespace {

using authz::PrivilegeVector;
using authz::RoleName;

/// The command's `privileges` array (required unless `optional`).
std::optional<PrivilegeVector> privilegesArg(const OperationContext& op, bool optional) {
    bson_iter_t it;
    if (!bson::find(op.cmd, "privileges", &it)) {
        if (optional) return std::nullopt;
        uasserted(
            ErrorCode::Location40414,
            fmt::format("BSON field '{}.privileges' is missing but a required field", op.name));
    }
    if (!BSON_ITER_HOLDS_ARRAY(&it))
        uasserted(ErrorCode::TypeMismatch,
                  fmt::format("BSON field '{}.privileges' is the wrong type '{}', expected type "
                              "'array'",
                              op.name, bson::typeName(bson_iter_type(&it))));
    bson_t arr;
    bson::subDocument(op.cmd, "privileges", &arr);
    auto parsed = authz::parsePrivileges(&arr, fmt::format("{}.privileges", op.name));
    if (!parsed.isOK()) throw DBException(parsed.getStatus());
    PrivilegeVector merged;  // duplicates of a resource merge, as mongod stores them
    authz::addPrivileges(&merged, parsed.getValue());
    return merged;
}

/// authenticationRestrictions are accepted only when empty: silently ignoring
/// them would leave a role less restricted than its creator asked.
void refuseRestrictions(const OperationContext& op) {
    bson_t arr;
    if (!bson_has_field(op.cmd, "authenticationRestrictions")) return;
    if (bson::subDocument(op.cmd, "authenticationRestrictions", &arr) && bson_count_keys(&arr) == 0)
        return;
    uasserted(ErrorCode::BadValue,
              "authenticationRestrictions (clientSource, serverAddress) are not supported by this "
              "store");
}

void refuseBuiltin(const RoleName& role) {
    if (authz::isBuiltinRole(role))
        uasserted(ErrorCode::BadValue,
                  fmt::format("{} is a built-in role and cannot be modified", role.toString()));
}

/// mongod's checkOkayToGrantRolesToRole: no self-grant, no roles of other
/// databases (except into admin), every role exists, and no cycle.
void checkOkayToGrantRoles(Store& store, const RoleName& role, const std::vector<RoleName>& add) {
    for (const auto& r : add) {
        if (r == role)
            uasserted(ErrorCode::InvalidRoleModification,
                      fmt::format("Cannot grant role {} to itself.", role.toString()));
        if (role.db != "admin" && r.db != role.db)
            uasserted(ErrorCode::InvalidRoleModification,
                      fmt::format("Roles on the '{}' database cannot be granted roles from other "
                                  "databases",
                                  role.db));
    }
    if (auto missing = missingRoles(store, add); !missing.empty())
        throwRoleNotFound(missing, fmt::format("Cannot grant roles to '{}': ", role.toString()));
    auto reached = resolveRoles(store, add).roles;
    if (std::find(reached.begin(), reached.end(), role) != reached.end())
        uasserted(ErrorCode::InvalidRoleModification,
                  fmt::format("Granting roles to {} would introduce a cycle in the role graph",
                              role.toString()));
}

/// A role of a database other than admin may only hold privileges on its database.
void checkOkayToGrantPrivileges(const RoleName& role, const PrivilegeVector& privileges) {
    if (role.db == "admin") return;
    for (const auto& p : privileges) {
        if (p.resource.namesDatabase() && p.resource.db() == role.db) continue;
        uasserted(ErrorCode::InvalidRoleModification,
                  fmt::format("Roles on the '{}' database cannot be granted privileges that "
                              "target other databases or the cluster",
                              role.db));
    }
}

/// The stored definition of a user-defined role, or RoleNotFound as mongod's
/// role resolution reports it.
authz::RoleDefinition storedRole(Store& store, const RoleName& role) {
    auto found = roleLookup(store)({role});
    if (found.empty())
        uasserted(ErrorCode::RoleNotFound,
                  fmt::format("Role '{}' does not exist", role.toString()));
    return std::move(found.front());
}

void checkRoleExists(Store& store, const RoleName& role) {
    if (auto missing = missingRoles(store, {role}); !missing.empty()) throwRoleNotFound(missing);
}

// --- writes -------------------------------------------------------------------

bson::Doc roleSelector(const RoleName& role) {
    bson::Doc q;
    BSON_APPEND_UTF8(q.mut(), "role", role.role.c_str());
    BSON_APPEND_UTF8(q.mut(), "db", role.db.c_str());
    return q;
}

/// Runs an internal update on admin.<collection>; returns how many documents matched.
int64_t updateAuthz(Store& store, const char* collection, const bson_t* q, const bson_t* u,
                    bool multi) {
    bson::Doc cmd;
    BSON_APPEND_UTF8(cmd.mut(), "update", collection);
    bson_t ups, u0;
    BSON_APPEND_ARRAY_BEGIN(cmd.mut(), "updates", &ups);
    BSON_APPEND_DOCUMENT_BEGIN(&ups, "0", &u0);
    BSON_APPEND_DOCUMENT(&u0, "q", q);
    BSON_APPEND_DOCUMENT(&u0, "u", u);
    BSON_APPEND_BOOL(&u0, "multi", multi);
    bson_append_document_end(&ups, &u0);
    bson_append_array_end(cmd.mut(), &ups);
    bson::Doc reply = store.runInternal("admin", cmd.get());
    store.bumpAuthzGeneration();
    checkWriteReply(reply.get());
    return writeCount(reply.get());
}

int64_t deleteAuthz(Store& store, const char* collection, const bson_t* q) {
    bson::Doc cmd;
    BSON_APPEND_UTF8(cmd.mut(), "delete", collection);
    bson_t dels, d0;
    BSON_APPEND_ARRAY_BEGIN(cmd.mut(), "deletes", &dels);
    BSON_APPEND_DOCUMENT_BEGIN(&dels, "0", &d0);
    BSON_APPEND_DOCUMENT(&d0, "q", q);
    BSON_APPEND_INT32(&d0, "limit", 0);
    bson_append_document_end(&dels, &d0);
    bson_append_array_end(cmd.mut(), &dels);
    bson::Doc reply = store.runInternal("admin", cmd.get());
    store.bumpAuthzGeneration();
    checkWriteReply(reply.get());
    return writeCount(reply.get());
}

/// {$set: {<field>: ...}} on the role's document (RoleNotFound when it is gone).
void setRoleField(Store& store, const RoleName& role, const bson_t* set) {
    bson::Doc u;
    BSON_APPEND_DOCUMENT(u.mut(), "$set", set);
    bson::Doc q = roleSelector(role);
    if (updateAuthz(store, kRolesCollection, q.get(), u.get(), false) == 0)
        uasserted(ErrorCode::RoleNotFound, fmt::format("Role {} not found", role.toString()));
}

void setPrivileges(Store& store, const RoleName& role, const PrivilegeVector& privileges) {
    bson::Doc set;
    authz::appendPrivileges(set.mut(), "privileges", privileges);
    setRoleField(store, role, set.get());
}

void setRoles(Store& store, const RoleName& role, const std::vector<RoleName>& roles) {
    bson::Doc set;
    authz::appendRoleNames(set.mut(), "roles", roles);
    setRoleField(store, role, set.get());
}

/// Removes every reference matching `match` ({role, db} or {db}) from the
/// `roles` of users and of roles (dropRole, dropAllRolesFromDatabase).
void pullRoleReferences(Store& store, const bson_t* match) {
    bson::Doc q, pull;
    bson_t elem, p;
    BSON_APPEND_DOCUMENT_BEGIN(q.mut(), "roles", &elem);
    BSON_APPEND_DOCUMENT(&elem, "$elemMatch", match);
    bson_append_document_end(q.mut(), &elem);
    BSON_APPEND_DOCUMENT_BEGIN(pull.mut(), "$pull", &p);
    BSON_APPEND_DOCUMENT(&p, "roles", match);
    bson_append_document_end(pull.mut(), &p);
    updateAuthz(store, kUsersCollection, q.get(), pull.get(), true);
    updateAuthz(store, kRolesCollection, q.get(), pull.get(), true);
}

void logRoleChange(std::string_view what, const RoleName& role) {
    log::info("access", 20259, std::string(what),
              fmt::format(R"({{"role":{},"db":{}}})", log::quote(role.role), log::quote(role.db)));
}

// --- commands -------------------------------------------------------------------

void runCreateRole(OperationContext& op, bson_t*) {
    cmdarg::checkFields(op, {"privileges", "roles", "authenticationRestrictions"});
    std::string name = cmdarg::stringArgument(op);
    auto privileges = *privilegesArg(op, false);
    auto roles = parseRoleNames(op.cmd, op.name, op.db);
    if (name.empty()) uasserted(ErrorCode::BadValue, "Role name must be non-empty");
    RoleName role{name, op.db};
    if (op.db == "local")
        uasserted(ErrorCode::BadValue, "Cannot create roles in the local database");
    if (op.db == "$external")
        uasserted(ErrorCode::BadValue, "Cannot create roles in the $external database");
    if (authz::isBuiltinRole(role))
        uasserted(ErrorCode::BadValue, "Cannot create roles with the same name as a built-in role");
    refuseRestrictions(op);
    checkOkayToGrantRoles(op.store, role, roles);
    checkOkayToGrantPrivileges(role, privileges);

    bson::Doc doc;
    BSON_APPEND_UTF8(doc.mut(), "_id", role.id().c_str());
    BSON_APPEND_UTF8(doc.mut(), "role", role.role.c_str());
    BSON_APPEND_UTF8(doc.mut(), "db", role.db.c_str());
    authz::appendPrivileges(doc.mut(), "privileges", privileges);
    authz::appendRoleNames(doc.mut(), "roles", roles);
    insertAuthzDocument(op.store, kRolesCollection, doc.get(),
                        Status(ErrorCode::Location51002,
                               fmt::format("Role \"{}\" already exists", role.toString())));
    logRoleChange("Created role", role);
}

void runUpdateRole(OperationContext& op, bson_t*) {
    cmdarg::checkFields(op, {"privileges", "roles", "authenticationRestrictions"});
    RoleName role{cmdarg::stringArgument(op), op.db};
    auto privileges = privilegesArg(op, true);
    std::optional<std::vector<RoleName>> roles;
    if (bson_has_field(op.cmd, "roles")) roles = parseRoleNames(op.cmd, op.name, op.db);
    if (!privileges && !roles && !bson_has_field(op.cmd, "authenticationRestrictions"))
        uasserted(ErrorCode::BadValue, "Must specify at least one field to update in updateRole");
    refuseRestrictions(op);
    refuseBuiltin(role);
    checkRoleExists(op.store, role);
    if (roles) checkOkayToGrantRoles(op.store, role, *roles);
    if (privileges) checkOkayToGrantPrivileges(role, *privileges);
    bson::Doc set;
    if (privileges) authz::appendPrivileges(set.mut(), "privileges", *privileges);
    if (roles) authz::appendRoleNames(set.mut(), "roles", *roles);
    if (!set.empty()) setRoleField(op.store, role, set.get());
    logRoleChange("Updated role", role);
}

void runDropRole(OperationContext& op, bson_t*) {
    cmdarg::checkFields(op, {});
    RoleName role{cmdarg::stringArgument(op), op.db};
    refuseBuiltin(role);
    checkRoleExists(op.store, role);
    // As mongod: first from every user and role, then the role itself.
    bson::Doc match = roleSelector(role);
    pullRoleReferences(op.store, match.get());
    deleteAuthz(op.store, kRolesCollection, match.get());
    logRoleChange("Dropped role", role);
}

void runDropAllRolesFromDatabase(OperationContext& op, bson_t* reply) {
    cmdarg::checkFields(op, {});
    bson::Doc match;
    BSON_APPEND_UTF8(match.mut(), "db", op.db.c_str());
    pullRoleReferences(op.store, match.get());
    BSON_APPEND_INT64(reply, "n", deleteAuthz(op.store, kRolesCollection, match.get()));
}

/// grantPrivilegesToRole / revokePrivilegesFromRole: the role's privileges
/// plus or minus the actions of `privileges`, merged per resource.
void changeRolePrivileges(OperationContext& op, bool grant) {
    cmdarg::checkFields(op, {"privileges"});
    RoleName role{cmdarg::stringArgument(op), op.db};
    auto change = *privilegesArg(op, false);
    if (change.empty())
        uasserted(ErrorCode::BadValue,
                  fmt::format("{} command requires a non-empty \"privileges\" array", op.name));
    refuseBuiltin(role);
    if (grant) checkOkayToGrantPrivileges(role, change);
    auto def = storedRole(op.store, role);
    if (grant) {
        authz::addPrivileges(&def.privileges, change);
    } else {
        for (const auto& revoke : change) {
            auto it = std::find_if(def.privileges.begin(), def.privileges.end(),
                                   [&](const auto& p) { return p.resource == revoke.resource; });
            if (it == def.privileges.end()) continue;
            it->actions.removeAll(revoke.actions);
            if (it->actions.empty()) def.privileges.erase(it);
        }
    }
    setPrivileges(op.store, role, def.privileges);
}

/// grantRolesToRole / revokeRolesFromRole: the role's roles plus or minus `roles`.
void changeRoleRoles(OperationContext& op, bool grant) {
    cmdarg::checkFields(op, {"roles"});
    RoleName role{cmdarg::stringArgument(op), op.db};
    auto change = parseRoleNames(op.cmd, op.name, op.db);
    if (change.empty())
        uasserted(ErrorCode::BadValue,
                  fmt::format("{} command requires a non-empty \"roles\" array", op.name));
    refuseBuiltin(role);
    if (grant) checkOkayToGrantRoles(op.store, role, change);
    auto def = storedRole(op.store, role);
    for (const auto& r : change) {
        auto at = std::find(def.roles.begin(), def.roles.end(), r);
        if (grant && at == def.roles.end()) def.roles.push_back(r);
        if (!grant && at != def.roles.end()) def.roles.erase(at);
    }
    setRoles(op.store, role, def.roles);
}

// --- rolesInfo -------------------------------------------------------------------

struct RolesInfoOptions {
    bool privileges = false;
    bool asUserFragment = false;
    bool restrictions = false;
};

void appendEmptyArray(bson_t* d, const char* key) {
    bson_t a;
    BSON_APPEND_ARRAY_BEGIN(d, key, &a);
    bson_append_array_end(d, &a);
}

/// One role as rolesInfo describes it (mongod's getRolesDescription): its
/// document (built-in roles: {db, role, roles: [], privileges}), then the roles
/// it inherits and, with showPrivileges, its own privileges followed by those
/// of every role it inherits, then isBuiltin.
void appendRoleDescription(Store& store, bson_t* d, const RoleName& role, const bson::Doc* stored,
                           const RolesInfoOptions& show) {
    PrivilegeVector own;
    std::vector<RoleName> subRoles;
    if (!stored) {
        own = authz::builtinRolePrivileges(role);
        BSON_APPEND_UTF8(d, "db", role.db.c_str());
        BSON_APPEND_UTF8(d, "role", role.role.c_str());
        appendEmptyArray(d, "roles");
        if (show.privileges) authz::appendPrivileges(d, "privileges", own);
    } else {
        bson_iter_t f;
        bson_iter_init(&f, stored->get());
        while (bson_iter_next(&f)) {
            std::string_view k = bson_iter_key(&f);
            if (k == "privileges" && !show.privileges) continue;
            if (k == "authenticationRestrictions") continue;
            bson::appendIter(d, k, f);
        }
        auto def = authz::parseRoleDocument(stored->get());
        if (!def.isOK()) throw DBException(def.getStatus());
        own = std::move(def.getValue().privileges);
        subRoles = std::move(def.getValue().roles);
    }
    if (show.restrictions) appendEmptyArray(d, "authenticationRestrictions");
    auto inherited = resolveRoles(store, subRoles);
    authz::appendRoleNames(d, "inheritedRoles", inherited.roles);
    if (show.privileges) {
        PrivilegeVector all = own;
        all.insert(all.end(), inherited.privileges.begin(), inherited.privileges.end());
        authz::appendPrivileges(d, "inheritedPrivileges", all);
    }
    if (show.restrictions) appendEmptyArray(d, "inheritedAuthenticationRestrictions");
    BSON_APPEND_BOOL(d, "isBuiltin", stored == nullptr);
}

std::vector<RoleName> rolesInfoNames(const OperationContext& op, bson_iter_t* arg) {
    std::vector<RoleName> out;
    auto one = [&](bson_iter_t* v) {
        if (BSON_ITER_HOLDS_UTF8(v)) {
            out.push_back({bson_iter_utf8(v, nullptr), op.db});
        } else if (BSON_ITER_HOLDS_DOCUMENT(v)) {
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(v, &len, &data);
            bson::View d(data, len);
            bson_iter_t r, db;
            if (!bson_iter_init_find(&r, d.get(), "role") || !BSON_ITER_HOLDS_UTF8(&r) ||
                !bson_iter_init_find(&db, d.get(), "db") || !BSON_ITER_HOLDS_UTF8(&db))
                uasserted(ErrorCode::BadValue, "Role name must contain 'role' and 'db' fields");
            out.push_back({bson_iter_utf8(&r, nullptr), bson_iter_utf8(&db, nullptr)});
        } else {
            uasserted(ErrorCode::BadValue,
                      "rolesInfo takes 1, a role name, a {role, db} document, or an array of them");
        }
    };
    if (BSON_ITER_HOLDS_ARRAY(arg)) {
        bson_iter_t a;
        bson_iter_recurse(arg, &a);
        while (bson_iter_next(&a)) one(&a);
    } else {
        one(arg);
    }
    return out;
}

void runRolesInfo(OperationContext& op, bson_t* reply) {
    cmdarg::checkFields(op,
                        {"showPrivileges", "showBuiltinRoles", "showAuthenticationRestrictions"});
    RolesInfoOptions show;
    bson_iter_t sp;
    if (bson::find(op.cmd, "showPrivileges", &sp)) {
        if (BSON_ITER_HOLDS_UTF8(&sp)) {
            if (std::string_view(bson_iter_utf8(&sp, nullptr)) != "asUserFragment")
                uasserted(ErrorCode::BadValue,
                          "showPrivileges must be a boolean or the string 'asUserFragment'");
            show.asUserFragment = show.privileges = true;
        } else {
            show.privileges = bson_iter_as_bool(&sp);
        }
    }
    show.restrictions = cmdarg::getBool(op.cmd, "showAuthenticationRestrictions", false);
    bool showBuiltin = cmdarg::getBool(op.cmd, "showBuiltinRoles", false);
    bson_iter_t arg;
    bson_iter_init(&arg, op.cmd);
    bson_iter_next(&arg);

    bson_t roles;
    if (BSON_ITER_HOLDS_NUMBER(&arg) || BSON_ITER_HOLDS_BOOL(&arg)) {
        // Every role of this database (built-in ones first when asked for).
        if (show.asUserFragment)
            uasserted(ErrorCode::IllegalOperation,
                      "Cannot get user fragment for all roles in a database");
        BSON_APPEND_ARRAY_BEGIN(reply, "roles", &roles);
        int i = 0;
        auto appendOne = [&](const RoleName& r, const bson::Doc* stored) {
            std::string k = std::to_string(i++);
            bson_t d;
            BSON_APPEND_DOCUMENT_BEGIN(&roles, k.c_str(), &d);
            appendRoleDescription(op.store, &d, r, stored, show);
            bson_append_document_end(&roles, &d);
        };
        if (showBuiltin)
            for (const auto& name : authz::builtinRoleNames(op.db))
                appendOne({name, op.db}, nullptr);
        bson::Doc filter;
        BSON_APPEND_UTF8(filter.mut(), "db", op.db.c_str());
        for (const auto& doc : findAuthzDocuments(op.store, kRolesCollection, filter.get())) {
            auto def = authz::parseRoleDocument(doc.get());
            if (!def.isOK()) throw DBException(def.getStatus());
            appendOne(def.getValue().name, &doc);
        }
        bson_append_array_end(reply, &roles);
        return;
    }

    std::vector<RoleName> names = rolesInfoNames(op, &arg);
    if (show.asUserFragment) {
        // As if a user held exactly these roles.
        if (auto missing = missingRoles(op.store, names); !missing.empty())
            uasserted(ErrorCode::RoleNotFound,
                      fmt::format("Role '{}' does not exist", missing.front().toString()));
        auto resolved = resolveRoles(op.store, names);
        bson_t fragment;
        BSON_APPEND_DOCUMENT_BEGIN(reply, "userFragment", &fragment);
        authz::appendRoleNames(&fragment, "roles", names);
        authz::appendRoleNames(&fragment, "inheritedRoles", resolved.roles);
        authz::appendPrivileges(&fragment, "inheritedPrivileges", resolved.privileges);
        if (show.restrictions) appendEmptyArray(&fragment, "inheritedAuthenticationRestrictions");
        bson_append_document_end(reply, &fragment);
        return;
    }
    BSON_APPEND_ARRAY_BEGIN(reply, "roles", &roles);
    int i = 0;
    for (const auto& r : names) {
        std::optional<bson::Doc> stored;
        if (!authz::isBuiltinRole(r)) {
            bson::Doc q = roleSelector(r);
            auto found = findAuthzDocuments(op.store, kRolesCollection, q.get());
            if (found.empty()) continue;  // as mongod: an unknown role is left out
            stored = std::move(found.front());
        }
        std::string k = std::to_string(i++);
        bson_t d;
        BSON_APPEND_DOCUMENT_BEGIN(&roles, k.c_str(), &d);
        appendRoleDescription(op.store, &d, r, stored ? &*stored : nullptr, show);
        bson_append_document_end(&roles, &d);
    }
    bson_append_array_end(reply, &roles);
}

HALO_REGISTER_COMMAND(CommandSpec{{"createRole"}, runCreateRole});
HALO_REGISTER_COMMAND(CommandSpec{{"updateRole"}, runUpdateRole});
HALO_REGISTER_COMMAND(CommandSpec{{"dropRole"}, runDropRole});
HALO_REGISTER_COMMAND(CommandSpec{{"dropAllRolesFromDatabase"}, runDropAllRolesFromDatabase});
HALO_REGISTER_COMMAND(CommandSpec{{"grantPrivilegesToRole"}, [](OperationContext& op, bson_t*) {
                                      changeRolePrivileges(op, true);
                                  }});
HALO_REGISTER_COMMAND(CommandSpec{{"revokePrivilegesFromRole"}, [](OperationContext& op, bson_t*) {
                                      changeRolePrivileges(op, false);
                                  }});
HALO_REGISTER_COMMAND(CommandSpec{
    {"grantRolesToRole"}, [](OperationContext& op, bson_t*) { changeRoleRoles(op, true); }});
HALO_REGISTER_COMMAND(CommandSpec{
    {"revokeRolesFromRole"}, [](OperationContext& op, bson_t*) { changeRoleRoles(op, false); }});
HALO_REGISTER_COMMAND(CommandSpec{{"rolesInfo"}, runRolesInfo});

}  // namespace

}  // namespace halo::store
