#include "store/authz/authorization.h"

#include <algorithm>
#include <array>

#include "bson/doc.h"

namespace halo::store::authz {

namespace {

using Scope = Need::Scope;

struct Grant {
    Scope scope;
    std::string db;    // Scope::Database
    uint32_t actions;  //
    bool systemDbs;    // AnyDatabase grants: also local and config
};

constexpr uint32_t kAllDb = kRead | kWrite | kDbAdmin | kUserAdmin;
constexpr uint32_t kAllCluster = kClusterMonitor | kClusterManager | kHostManager;

constexpr std::array<std::string_view, 5> kDatabaseRoles = {"read", "readWrite", "dbAdmin",
                                                            "userAdmin", "dbOwner"};
constexpr std::array<std::string_view, 11> kAdminRoles = {"readAnyDatabase",
                                                          "readWriteAnyDatabase",
                                                          "userAdminAnyDatabase",
                                                          "dbAdminAnyDatabase",
                                                          "clusterMonitor",
                                                          "clusterManager",
                                                          "hostManager",
                                                          "clusterAdmin",
                                                          "backup",
                                                          "restore",
                                                          "root"};

std::vector<Grant> grantsOf(const RoleName& r) {
    const std::string& n = r.role;
    auto onDb = [&](uint32_t a) { return Grant{Scope::Database, r.db, a, false}; };
    auto anyDb = [](uint32_t a) { return Grant{Scope::AnyDatabase, "", a, false}; };
    auto cluster = [](uint32_t a) { return Grant{Scope::Cluster, "", a, false}; };
    auto systemRead = [] {
        return std::vector<Grant>{{Scope::Database, "local", kRead, false},
                                  {Scope::Database, "config", kRead, false}};
    };
    if (n == "read") return {onDb(kRead)};
    if (n == "readWrite") return {onDb(kRead | kWrite)};
    if (n == "dbAdmin") return {onDb(kDbAdmin | kBypassDocumentValidation)};
    if (n == "userAdmin") return {onDb(kUserAdmin)};
    if (n == "dbOwner") return {onDb(kAllDb | kBypassDocumentValidation)};
    if (r.db != "admin") return {};
    if (n == "readAnyDatabase") return {anyDb(kRead)};
    if (n == "readWriteAnyDatabase") return {anyDb(kRead | kWrite)};
    if (n == "userAdminAnyDatabase") return {anyDb(kUserAdmin)};
    if (n == "dbAdminAnyDatabase") return {anyDb(kDbAdmin | kBypassDocumentValidation)};
    if (n == "clusterMonitor") {
        auto g = systemRead();
        g.push_back(cluster(kClusterMonitor));
        return g;
    }
    if (n == "clusterManager") return {cluster(kClusterManager)};
    if (n == "hostManager") return {cluster(kHostManager)};
    if (n == "clusterAdmin") {
        auto g = systemRead();
        g.push_back(cluster(kAllCluster));
        return g;
    }
    if (n == "backup") return {Grant{Scope::AnyDatabase, "", kRead, true}};
    if (n == "restore") return {anyDb(kWrite | kUserAdmin | kBypassDocumentValidation)};
    if (n == "root")
        return {Grant{Scope::AnyDatabase, "", kAllDb | kRootOnly | kBypassDocumentValidation, true},
                cluster(kAllCluster | kRootOnly)};
    return {};
}

bool isSystemDb(std::string_view db) {
    return db == "local" || db == "config";
}

bool grantCovers(const Grant& g, const Need& need) {
    if ((g.actions & need.anyOf) == 0) return false;
    switch (need.scope) {
        case Scope::Cluster:
            return g.scope == Scope::Cluster;
        case Scope::AnyDatabase:
            return g.scope == Scope::AnyDatabase;
        case Scope::Database:
            if (g.scope == Scope::Database) return g.db == need.db;
            if (g.scope == Scope::AnyDatabase) return g.systemDbs || !isSystemDb(need.db);
            return false;
    }
    return false;
}

std::string firstString(const bson_t* cmd) {
    bson_iter_t it;
    if (bson_iter_init(&it, cmd) && bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, nullptr);
    return {};
}

std::string dbOfNs(std::string_view ns) {
    auto dot = ns.find('.');
    return std::string(dot == std::string_view::npos ? ns : ns.substr(0, dot));
}

bool inList(std::string_view name, std::initializer_list<std::string_view> list) {
    return std::find(list.begin(), list.end(), name) != list.end();
}

/// Databases named by the roles of createUser/updateUser (granting needs userAdmin there).
void roleDbs(const bson_t* cmd, std::string_view db, std::vector<std::string>* out) {
    bson_iter_t it, a;
    if (!bson_iter_init_find(&it, cmd, "roles") || !BSON_ITER_HOLDS_ARRAY(&it)) return;
    bson_iter_recurse(&it, &a);
    while (bson_iter_next(&a)) {
        if (BSON_ITER_HOLDS_UTF8(&a)) {
            out->emplace_back(db);
        } else if (BSON_ITER_HOLDS_DOCUMENT(&a)) {
            bson_iter_t r;
            if (bson_iter_recurse(&a, &r) && bson_iter_find(&r, "db") && BSON_ITER_HOLDS_UTF8(&r))
                out->emplace_back(bson_iter_utf8(&r, nullptr));
        }
    }
}

/// usersInfo naming only the caller: mongod lets every user see itself.
bool usersInfoOnSelf(const bson_t* cmd, std::string_view db, const Identity* self) {
    if (!self) return false;
    bson_iter_t it;
    if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it)) return false;
    auto isSelf = [&](bson_iter_t* v) {
        if (BSON_ITER_HOLDS_UTF8(v))
            return bson_iter_utf8(v, nullptr) == self->user && db == self->db;
        if (BSON_ITER_HOLDS_DOCUMENT(v)) {
            bson_iter_t u, d;
            bson_iter_recurse(v, &u);
            bson_iter_recurse(v, &d);
            return bson_iter_find(&u, "user") && BSON_ITER_HOLDS_UTF8(&u) &&
                   bson_iter_find(&d, "db") && BSON_ITER_HOLDS_UTF8(&d) &&
                   bson_iter_utf8(&u, nullptr) == self->user &&
                   bson_iter_utf8(&d, nullptr) == self->db;
        }
        return false;
    };
    if (BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_iter_t a;
        bson_iter_recurse(&it, &a);
        bool any = false;
        while (bson_iter_next(&a)) {
            if (!isSelf(&a)) return false;
            any = true;
        }
        return any;
    }
    return isSelf(&it);
}

/// A command on <db>.system.profile (readable with dbAdmin, as in mongod).
bool isProfileCollection(const bson_t* cmd) {
    return firstString(cmd) == "system.profile";
}

bool bypassesValidation(const bson_t* cmd) {
    bson_iter_t it;
    return bson_iter_init_find(&it, cmd, "bypassDocumentValidation") && bson_iter_as_bool(&it);
}

void aggregateNeeds(const bson_t* cmd, std::string_view db, CommandAccess* out) {
    bool changeStreamOnCluster = false;
    std::vector<std::string> writeDbs;
    bool currentOp = false, ownOps = false, collStats = false;
    bson_iter_t it, stages;
    if (bson_iter_init_find(&it, cmd, "pipeline") && BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_iter_recurse(&it, &stages);
        while (bson_iter_next(&stages)) {
            bson_iter_t st;
            if (!BSON_ITER_HOLDS_DOCUMENT(&stages) || !bson_iter_recurse(&stages, &st) ||
                !bson_iter_next(&st))
                continue;
            std::string_view name = bson_iter_key(&st);
            if (name == "$changeStream" && BSON_ITER_HOLDS_DOCUMENT(&st)) {
                bson_iter_t o;
                bson_iter_recurse(&st, &o);
                if (bson_iter_find(&o, "allChangesForCluster") && bson_iter_as_bool(&o))
                    changeStreamOnCluster = true;
            } else if (name == "$currentOp") {
                currentOp = true;
                bson_iter_t o;
                ownOps = !BSON_ITER_HOLDS_DOCUMENT(&st) || !bson_iter_recurse(&st, &o) ||
                         !bson_iter_find(&o, "allUsers") || !bson_iter_as_bool(&o);
            } else if (name == "$collStats") {
                collStats = true;
            } else if (name == "$out" || name == "$merge") {
                std::string target(db);
                bson_iter_t v = st;
                if (name == "$merge" && BSON_ITER_HOLDS_DOCUMENT(&st)) {
                    bson_iter_t into;
                    bson_iter_recurse(&st, &into);
                    if (bson_iter_find(&into, "into")) v = into;
                }
                if (BSON_ITER_HOLDS_DOCUMENT(&v)) {
                    bson_iter_t d;
                    bson_iter_recurse(&v, &d);
                    if (bson_iter_find(&d, "db") && BSON_ITER_HOLDS_UTF8(&d))
                        target = bson_iter_utf8(&d, nullptr);
                }
                writeDbs.push_back(target);
            }
        }
    }
    if (changeStreamOnCluster)
        out->needs.push_back({Scope::AnyDatabase, "", kRead});
    else if (currentOp) {
        // Anyone may see their own operations; all users' need clusterMonitor.
        if (!ownOps) out->needs.push_back({Scope::Cluster, "", kClusterMonitor});
    } else if (isProfileCollection(cmd))
        out->needs.push_back({Scope::Database, std::string(db), kDbAdmin});
    else if (collStats)
        out->needs.push_back({Scope::Database, std::string(db), kRead | kDbAdmin});
    else
        out->needs.push_back({Scope::Database, std::string(db), kRead});
    for (auto& w : writeDbs) out->needs.push_back({Scope::Database, w, kWrite});
}

}  // namespace

bool isBuiltinRole(const RoleName& r) {
    if (r.db.empty()) return false;
    for (auto n : kDatabaseRoles)
        if (n == r.role) return true;
    if (r.db != "admin") return false;
    for (auto n : kAdminRoles)
        if (n == r.role) return true;
    return false;
}

std::vector<std::string> builtinRoleNames() {
    std::vector<std::string> out(kDatabaseRoles.begin(), kDatabaseRoles.end());
    out.insert(out.end(), kAdminRoles.begin(), kAdminRoles.end());
    return out;
}

CommandAccess commandAccess(std::string_view name, std::string_view db, const bson_t* cmd,
                            const Identity* self) {
    CommandAccess a;
    auto onDb = [&](uint32_t actions) {
        a.needs.push_back({Scope::Database, std::string(db), actions});
    };
    auto onCluster = [&](uint32_t actions) { a.needs.push_back({Scope::Cluster, "", actions}); };

    if (inList(name, {"hello", "isMaster", "ismaster", "saslStart", "saslContinue", "ping",
                      "buildInfo", "buildinfo", "connectionStatus", "logout", "_isSelf"})) {
        a.requiresAuth = false;
        return a;
    }
    // Any authenticated user: session plumbing, own cursors, listDatabases
    // (which then lists only the databases the user has a role on).
    if (inList(name, {"endSessions", "startSession", "refreshSessions", "killSessions",
                      "commitTransaction", "abortTransaction", "killCursors", "listCommands",
                      "whatsmyuri", "listDatabases"}))
        return a;

    // Direct access to the user documents: reading needs userAdmin on admin,
    // writing is for root (user commands keep credentials consistent).
    if (db == "admin" && firstString(cmd) == "system.users" &&
        inList(name, {"find", "count", "distinct", "aggregate", "listIndexes", "collStats"})) {
        onDb(kUserAdmin);
        return a;
    }
    if (db == "admin" && firstString(cmd) == "system.users") {
        onCluster(kRootOnly);
        return a;
    }

    if (inList(name, {"find", "count", "distinct"}) && isProfileCollection(cmd)) {
        onDb(kDbAdmin);
    } else if (inList(name, {"find", "count", "distinct", "getMore"})) {
        onDb(kRead);
    } else if (inList(name, {"listCollections", "listIndexes", "collStats", "dbStats"})) {
        onDb(kRead | kDbAdmin);
    } else if (inList(name, {"insert", "update", "delete"})) {
        onDb(kWrite);
        if (bypassesValidation(cmd)) onDb(kBypassDocumentValidation);
    } else if (inList(name, {"findAndModify", "findandmodify"})) {
        onDb(kRead);
        onDb(kWrite);
        if (bypassesValidation(cmd)) onDb(kBypassDocumentValidation);
    } else if (inList(name, {"create", "drop", "createIndexes", "dropIndexes", "deleteIndexes"})) {
        onDb(kWrite | kDbAdmin);
    } else if (inList(name, {"collMod", "dropDatabase", "validate", "compact", "profile"})) {
        onDb(kDbAdmin);
    } else if (name == "renameCollection") {
        std::string from = firstString(cmd);
        bson_iter_t it;
        std::string to;
        if (bson_iter_init_find(&it, cmd, "to") && BSON_ITER_HOLDS_UTF8(&it))
            to = bson_iter_utf8(&it, nullptr);
        a.needs.push_back({Scope::Database, dbOfNs(from), kWrite | kDbAdmin});
        a.needs.push_back({Scope::Database, dbOfNs(to), kWrite | kDbAdmin});
    } else if (name == "aggregate") {
        aggregateNeeds(cmd, db, &a);
    } else if (name == "explain") {
        bson_iter_t it;
        if (bson_iter_init_find(&it, cmd, "explain") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&it, &len, &data);
            bson_t inner;
            bson_iter_t first;
            if (bson_init_static(&inner, data, len) && bson_iter_init(&first, &inner) &&
                bson_iter_next(&first) && std::string_view(bson_iter_key(&first)) != "explain")
                return commandAccess(bson_iter_key(&first), db, &inner, self);
        }
        onDb(kRead);
    } else if (inList(name, {"createUser", "updateUser", "grantRolesToUser"})) {
        onDb(kUserAdmin);
        std::vector<std::string> dbs;
        roleDbs(cmd, db, &dbs);
        for (auto& d : dbs)
            if (d != db) a.needs.push_back({Scope::Database, d, kUserAdmin});
    } else if (name == "usersInfo") {
        bson_iter_t it;
        if (usersInfoOnSelf(cmd, db, self)) return a;
        bson_iter_t f;
        if (bson_iter_init(&it, cmd) && bson_iter_next(&it) && BSON_ITER_HOLDS_DOCUMENT(&it) &&
            bson_iter_recurse(&it, &f) && bson_iter_find(&f, "forAllDBs") && bson_iter_as_bool(&f))
            a.needs.push_back({Scope::AnyDatabase, "", kUserAdmin});
        else
            onDb(kUserAdmin);
    } else if (inList(name, {"dropUser", "dropAllUsersFromDatabase", "revokeRolesFromUser"})) {
        onDb(kUserAdmin);
    } else if (inList(name, {"serverStatus", "hostInfo", "getLog", "getCmdLineOpts",
                             "replSetGetStatus", "replSetGetConfig", "getParameter",
                             "getFreeMonitoringStatus", "top", "connPoolStats"})) {
        onCluster(kClusterMonitor);
    } else if (name == "currentOp") {
        bson_iter_t it;
        bool own = bson_iter_init_find(&it, cmd, "$ownOps") && bson_iter_as_bool(&it);
        if (!own) onCluster(kClusterMonitor);
    } else if (name == "killOp") {
        return a;  // any authenticated user: the command checks whose operation it is
    } else if (name == "fsync") {
        onCluster(kHostManager);
    } else if (inList(name, {"replSetInitiate", "killAllSessions"})) {
        onCluster(kClusterManager);
    } else if (name == "shutdown") {
        onCluster(kHostManager);
    } else {
        onCluster(kRootOnly);
    }
    return a;
}

bool satisfies(const std::vector<RoleName>& roles, const Need& need) {
    for (const auto& r : roles)
        for (const auto& g : grantsOf(r))
            if (grantCovers(g, need)) return true;
    return false;
}

bool satisfiesAll(const std::vector<RoleName>& roles, const std::vector<Need>& needs) {
    for (const auto& n : needs)
        if (!satisfies(roles, n)) return false;
    return true;
}

bool anyAccessTo(const std::vector<RoleName>& roles, std::string_view db) {
    return satisfies(roles, Need{Scope::Database, std::string(db), kAllDb});
}

}  // namespace halo::store::authz
