#pragma once
// Which privileges each command needs, in mongod's terms: the actions it needs
// on the resource it names (find on db.coll, dbStats on the database,
// serverStatus on the cluster...), as mongod 7.0's checks ask for them. A
// command without a rule needs every privilege the root role has.
// Pure functions over the command document: no storage, no I/O, thread-safe.
//
// A rule is a set of alternatives; an alternative holds when every `needs`
// entry is held and no `without` entry is (mongod's renameCollection rule is
// the one that uses `without`). Some checks depend on state the command reads
// itself, and are made there: whose cursor a getMore/killCursors touches, whose
// operation killOp interrupts, which databases listDatabases and which
// collections listCollections {authorizedCollections: true} show.
#include <bson/bson.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/authz/builtin_roles.h"
#include "store/authz/privilege.h"
#include "store/authz/role_name.h"

namespace halo::store::authz {

/// The actions `actions`, all of them, on `resource`.
struct Need {
    ResourcePattern resource;
    ActionSet actions;
};

struct Alternative {
    std::vector<Need> needs;
    std::vector<Need> without;
};

/// What a command needs before it may run.
struct CommandAccess {
    bool requiresAuth = true;  // false: hello, saslStart, ping, buildInfo...
    /// Allowed when any alternative holds. Empty: nothing beyond authentication.
    std::vector<Alternative> anyOf;
};

/// The authenticated user running the command: users may view themselves and
/// the roles they hold, and change their own password with changeOwnPassword.
struct Identity {
    std::string user;
    std::string db;
    std::vector<RoleName> roles;  // held directly
};

/// The access rule for command `name` run on `db` with document `cmd`.
CommandAccess commandAccess(std::string_view name, std::string_view db, const bson_t* cmd,
                            const Identity* self);

/// Whether `held` satisfies the rule (an empty rule always is).
bool isAuthorized(const PrivilegeSet& held, const std::vector<Alternative>& anyOf);

/// Who may continue or kill a cursor: the user that opened it (none: opened
/// without authentication), who must still hold what the opening command needed.
struct CursorAuth {
    std::optional<std::pair<std::string, std::string>> owner;  // {user, db}
    std::vector<Alternative> privileges;
};

}  // namespace halo::store::authz
