#pragma once
// Authorization in the store: MongoDB's built-in roles reduced to coarse
// action classes, and which class each command needs on which database.
// Pure functions over the command document: no storage, no I/O, thread-safe.
//
// The model (coarser than mongod's per-action privileges, never looser for the
// commands this store has):
//   read        find/aggregate/count/distinct/listCollections/listIndexes/stats on a db
//   write       insert/update/delete and collection/index create and drop on a db
//   dbAdmin     collMod, dropDatabase, validate, compact, profile (and system.profile),
//               the DDL and stats commands (not the data)
//   userAdmin   createUser/updateUser/dropUser/usersInfo on a db, and granting roles of it
//   cluster     clusterMonitor (serverStatus, replSetGetStatus, getLog, getParameter, top,
//               connPoolStats, currentOp of all users...), clusterManager (replSetInitiate,
//               killAllSessions), hostManager (shutdown, fsync, killOp of others' operations)
//   bypass      bypassDocumentValidation on writes: dbAdmin, dbOwner, restore, root
// Every authenticated user may see and kill its own operations (currentOp with
// $ownOps, $currentOp with allUsers: false, killOp checks the owner itself).
// "AnyDatabase" roles hold their class on every database except local and
// config; a whole-cluster change stream needs read on every database.
#include <bson/bson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace halo::store::authz {

enum Action : uint32_t {
    kRead = 1,
    kWrite = 2,
    kDbAdmin = 4,
    kUserAdmin = 8,
    kClusterMonitor = 16,
    kClusterManager = 32,
    kHostManager = 64,
    kRootOnly = 128,                  // commands without a rule: only root may run them
    kBypassDocumentValidation = 256,  // writes with bypassDocumentValidation: true
};

struct RoleName {
    std::string role;
    std::string db;
    bool operator==(const RoleName&) const = default;
};

/// Whether `role` is a built-in role that exists on `db` (the AnyDatabase and
/// cluster roles exist only on admin), as createUser checks (RoleNotFound 31).
bool isBuiltinRole(const RoleName& r);
/// The built-in role names, for error messages and docs.
std::vector<std::string> builtinRoleNames();

/// One thing a command needs: an action class on a database, on every
/// database, or on the cluster. Satisfied when any role grants any of `anyOf`.
struct Need {
    enum class Scope { Database, AnyDatabase, Cluster } scope = Scope::Database;
    std::string db;  // Scope::Database only
    uint32_t anyOf = 0;
};

/// What a command needs before it may run.
struct CommandAccess {
    bool requiresAuth = true;  // false: hello, saslStart, ping, buildInfo...
    std::vector<Need> needs;   // empty with requiresAuth: any authenticated user
};

/// The authenticated user running the command (usersInfo on oneself needs no role).
struct Identity {
    std::string user;
    std::string db;
};

/// The access rule for command `name` run on `db` with document `cmd`.
CommandAccess commandAccess(std::string_view name, std::string_view db, const bson_t* cmd,
                            const Identity* self);

/// Whether the roles satisfy one need / every need.
bool satisfies(const std::vector<RoleName>& roles, const Need& need);
bool satisfiesAll(const std::vector<RoleName>& roles, const std::vector<Need>& needs);
/// Whether the roles grant anything at all on `db` (listDatabases filtering).
bool anyAccessTo(const std::vector<RoleName>& roles, std::string_view db);

}  // namespace halo::store::authz
