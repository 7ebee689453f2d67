// Which privileges run which commands: a table of (roles or privileges, db,
// command) -> allowed, following the privileges mongod 7.0 asks for.
#include "store/authz/authorization.h"

#include <gtest/gtest.h>

#include "bson/doc.h"
#include "store/authz/role_graph.h"

namespace halo::store::authz {
namespace {

using A = ActionType;
using RP = ResourcePattern;

bool allowed(const PrivilegeSet& held, const char* db, const char* json,
             const std::vector<RoleName>& roles = {}) {
    bson::Doc cmd = bson::Doc::fromJsonOrDie(json);
    bson_iter_t it;
    bson_iter_init(&it, cmd.get());
    bson_iter_next(&it);
    Identity self{"me", "app", roles};
    CommandAccess a = commandAccess(bson_iter_key(&it), db, cmd.get(), &self);
    return !a.requiresAuth || isAuthorized(held, a.anyOf);
}

PrivilegeSet fromRoles(const std::vector<RoleName>& roles) {
    return PrivilegeSet(
        resolveRoles(roles, [](const auto&) { return std::vector<RoleDefinition>{}; }).privileges);
}

struct Case {
    std::vector<RoleName> roles;
    const char* db;
    const char* cmd;  // extended JSON
    bool allowed;
};

TEST(Authorization, BuiltinRolesAgainstCommands) {
    const RoleName read{"read", "app"}, readWrite{"readWrite", "app"}, dbAdmin{"dbAdmin", "app"},
        userAdmin{"userAdmin", "app"}, rwAny{"readWriteAnyDatabase", "admin"},
        readAny{"readAnyDatabase", "admin"}, monitor{"clusterMonitor", "admin"},
        root{"root", "admin"}, dbOwner{"dbOwner", "app"}, hostManager{"hostManager", "admin"},
        userAdminAny{"userAdminAnyDatabase", "admin"};
    const Case cases[] = {
        {{}, "app", R"({"ping": 1})", true},
        {{}, "admin", R"({"saslStart": 1})", true},
        {{}, "app", R"({"find": "c"})", false},
        {{}, "app", R"({"getMore": 1, "collection": "c"})", true},  // the command checks the cursor
        {{read}, "app", R"({"find": "c"})", true},
        {{read}, "other", R"({"find": "c"})", false},
        {{read}, "app", R"({"insert": "c", "documents": []})", false},
        {{read}, "app", R"({"findAndModify": "c"})", false},
        {{readWrite}, "app", R"({"findAndModify": "c"})", true},
        {{readWrite}, "app", R"({"findAndModify": "c", "remove": true})", true},
        {{readWrite},
         "app",
         R"({"update": "c", "updates": [{"q": {}, "u": {}, "upsert": true}]})",
         true},
        {{readWrite}, "app", R"({"createIndexes": "c"})", true},
        {{readWrite}, "app", R"({"create": "c"})", true},
        {{readWrite}, "app", R"({"create": "c", "capped": true})", true},
        {{readWrite}, "app", R"({"collMod": "c"})", false},
        {{dbAdmin}, "app", R"({"collMod": "c"})", true},
        {{dbAdmin}, "app", R"({"find": "c"})", false},
        {{dbAdmin}, "app", R"({"listCollections": 1})", true},
        {{dbAdmin}, "app", R"({"dbStats": 1})", true},
        {{read}, "app", R"({"aggregate": "c", "pipeline": [{"$out": "d"}]})", false},
        {{readWrite}, "app", R"({"aggregate": "c", "pipeline": [{"$out": "d"}]})", true},
        {{readWrite},
         "app",
         R"({"aggregate": "c", "pipeline": [{"$merge": {"into": {"db": "x", "coll": "d"}}}]})",
         false},
        {{readWrite, RoleName{"readWrite", "x"}},
         "app",
         R"({"aggregate": "c", "pipeline": [{"$merge": {"into": {"db": "x", "coll": "d"}}}]})",
         true},
        {{read}, "app", R"({"aggregate": "c", "pipeline": [{"$lookup": {"from": "d"}}]})", true},
        {{read}, "app", R"({"aggregate": 1, "pipeline": [{"$changeStream": {}}]})", true},
        {{read}, "app", R"({"aggregate": "c", "pipeline": [{"$changeStream": {}}]})", true},
        {{read},
         "admin",
         R"({"aggregate": 1, "pipeline": [{"$changeStream": {"allChangesForCluster": true}}]})",
         false},
        {{readAny},
         "admin",
         R"({"aggregate": 1, "pipeline": [{"$changeStream": {"allChangesForCluster": true}}]})",
         true},
        {{rwAny}, "shop", R"({"insert": "orders"})", true},
        {{rwAny}, "local", R"({"find": "oplog.rs"})", false},
        {{rwAny}, "admin", R"({"find": "system.users"})", false},
        {{rwAny}, "admin", R"({"serverStatus": 1})", false},
        {{userAdminAny}, "admin", R"({"find": "system.users"})", true},
        {{userAdminAny}, "admin", R"({"insert": "system.users"})", false},
        {{monitor}, "admin", R"({"serverStatus": 1})", true},
        {{monitor}, "admin", R"({"replSetGetStatus": 1})", true},
        {{monitor}, "admin", R"({"shutdown": 1})", false},
        {{root}, "admin", R"({"shutdown": 1})", true},
        {{root}, "local", R"({"find": "oplog.rs"})", true},
        {{root}, "admin", R"({"someFutureCommand": 1})", true},
        {{rwAny}, "admin", R"({"someFutureCommand": 1})", false},
        {{RoleName{"clusterAdmin", "admin"}, userAdminAny, rwAny},
         "admin",
         R"({"someFutureCommand": 1})",
         false},
        {{read}, "app", R"({"explain": {"find": "c"}})", true},
        {{read}, "app", R"({"explain": {"delete": "c", "deletes": []}})", false},
        {{userAdmin}, "app", R"({"createUser": "u", "roles": ["read"]})", true},
        {{userAdmin},
         "app",
         R"({"createUser": "u", "roles": [{"role": "root", "db": "admin"}]})",
         false},
        {{userAdmin}, "app", R"({"grantRolesToUser": "u", "roles": ["readWrite"]})", true},
        {{userAdmin},
         "app",
         R"({"grantRolesToUser": "u", "roles": [{"role": "root", "db": "admin"}]})",
         false},
        {{userAdmin}, "app", R"({"revokeRolesFromUser": "u", "roles": ["read"]})", true},
        {{userAdmin}, "app", R"({"updateUser": "u", "pwd": "x"})", true},
        // Setting a user's roles can revoke anything: mongod asks for revokeRole everywhere.
        {{userAdmin}, "app", R"({"updateUser": "u", "roles": ["read"]})", false},
        {{userAdminAny}, "app", R"({"updateUser": "u", "roles": ["read"]})", true},
        {{read}, "app", R"({"updateUser": "me", "pwd": "x"})", false},
        {{read}, "app", R"({"usersInfo": "me"})", true},
        {{read}, "app", R"({"usersInfo": {"user": "me", "db": "app"}})", true},
        {{read}, "app", R"({"usersInfo": "other"})", false},
        {{read}, "app", R"({"usersInfo": ["me", "other"]})", false},
        {{read}, "app", R"({"usersInfo": 1})", false},
        {{read}, "app", R"({"usersInfo": {"forAllDBs": true}})", false},
        {{userAdmin}, "app", R"({"usersInfo": 1})", true},
        {{userAdmin}, "app", R"({"usersInfo": {"user": "x", "db": "other"}})", false},
        {{userAdmin}, "app", R"({"usersInfo": {"forAllDBs": true}})", false},
        {{userAdminAny}, "app", R"({"usersInfo": {"forAllDBs": true}})", true},
        {{read}, "app", R"({"rolesInfo": "read"})", true},  // a role one holds
        {{read}, "app", R"({"rolesInfo": "readWrite"})", false},
        {{userAdmin}, "app", R"({"rolesInfo": 1, "showBuiltinRoles": true})", true},
        {{userAdmin}, "app", R"({"createRole": "r", "privileges": [], "roles": ["read"]})", true},
        {{userAdmin},
         "app",
         R"({"createRole": "r", "privileges": [{"resource": {"db": "app", "collection": "c"},
                                               "actions": ["find"]}], "roles": []})",
         true},
        {{userAdmin},
         "app",
         R"({"createRole": "r", "privileges": [{"resource": {"cluster": true},
                                               "actions": ["shutdown"]}], "roles": []})",
         false},
        {{readWrite}, "app", R"({"createRole": "r", "privileges": [], "roles": []})", false},
        {{userAdmin}, "app", R"({"dropRole": "r"})", true},
        {{userAdmin}, "app", R"({"updateRole": "r", "roles": []})", false},
        {{userAdmin}, "app", R"({"grantRolesToRole": "r", "roles": ["read"]})", true},
        {{userAdmin},
         "app",
         R"({"revokePrivilegesFromRole": "r", "privileges": [
              {"resource": {"db": "app", "collection": ""}, "actions": ["find"]}]})",
         true},
        {{dbOwner}, "app", R"({"dropDatabase": 1})", true},
        {{readWrite}, "app", R"({"dropDatabase": 1})", false},
        {{readWrite}, "admin", R"({"renameCollection": "app.a", "to": "app.b"})", true},
        {{readWrite}, "admin", R"({"renameCollection": "app.a", "to": "other.b"})", false},
        {{dbAdmin}, "admin", R"({"renameCollection": "app.a", "to": "app.b"})", true},
        {{monitor}, "admin", R"({"currentOp": 1})", true},
        {{readWrite}, "admin", R"({"currentOp": 1})", false},
        {{readWrite}, "admin", R"({"currentOp": 1, "$ownOps": true})", true},
        {{monitor},
         "admin",
         R"({"aggregate": 1, "pipeline": [{"$currentOp": {"allUsers": true}}]})",
         true},
        {{readWrite},
         "admin",
         R"({"aggregate": 1, "pipeline": [{"$currentOp": {"allUsers": true}}]})",
         false},
        {{readWrite}, "admin", R"({"aggregate": 1, "pipeline": [{"$currentOp": {}}]})", true},
        {{readWrite}, "admin", R"({"killOp": 1, "op": 5})", true},
        {{monitor}, "admin", R"({"top": 1})", true},
        {{rwAny}, "admin", R"({"top": 1})", false},
        {{monitor}, "admin", R"({"connPoolStats": 1})", true},
        {{dbAdmin}, "app", R"({"validate": "c"})", true},
        {{readWrite}, "app", R"({"validate": "c"})", false},
        {{dbAdmin}, "app", R"({"compact": "c"})", true},
        {{readWrite}, "app", R"({"compact": "c"})", false},
        {{dbAdmin}, "app", R"({"profile": 2})", true},
        {{read}, "app", R"({"profile": -1})", false},
        {{dbAdmin}, "app", R"({"find": "system.profile"})", true},
        {{read}, "app", R"({"find": "system.profile"})", false},
        {{read}, "app", R"({"aggregate": "c", "pipeline": [{"$collStats": {"count": {}}}]})", true},
        {{monitor}, "admin", R"({"fsync": 1})", false},
        {{hostManager}, "admin", R"({"fsync": 1})", true},
        {{root}, "admin", R"({"fsync": 1})", true},
        // bypassDocumentValidation needs more than readWrite.
        {{readWrite}, "app", R"({"insert": "c", "bypassDocumentValidation": true})", false},
        {{readWrite}, "app", R"({"insert": "c", "bypassDocumentValidation": false})", true},
        {{readWrite, dbAdmin}, "app", R"({"insert": "c", "bypassDocumentValidation": true})", true},
        {{dbOwner}, "app", R"({"update": "c", "bypassDocumentValidation": true})", true},
        {{readWrite}, "app", R"({"findAndModify": "c", "bypassDocumentValidation": true})", false},
        {{RoleName{"restore", "admin"}},
         "app",
         R"({"insert": "c", "bypassDocumentValidation": true})",
         true},
    };
    for (const auto& c : cases) {
        std::string roles;
        for (const auto& r : c.roles) roles += r.toString() + " ";
        EXPECT_EQ(allowed(fromRoles(c.roles), c.db, c.cmd, c.roles), c.allowed)
            << roles << "on " << c.db << ": " << c.cmd;
    }
}

TEST(Authorization, FindOnOneCollectionReadsOnlyThatCollection) {
    PrivilegeSet s({{RP::exact("app", "orders"), {A::find}}});
    EXPECT_TRUE(allowed(s, "app", R"({"find": "orders"})"));
    EXPECT_TRUE(allowed(s, "app", R"({"count": "orders"})"));
    EXPECT_TRUE(allowed(s, "app", R"({"aggregate": "orders", "pipeline": [{"$match": {}}]})"));
    EXPECT_FALSE(allowed(s, "app", R"({"find": "users"})"));
    EXPECT_FALSE(allowed(s, "other", R"({"find": "orders"})"));
    EXPECT_FALSE(allowed(s, "app", R"({"insert": "orders"})"));
    EXPECT_FALSE(allowed(s, "app", R"({"listCollections": 1})"));
    EXPECT_TRUE(allowed(s, "app", R"({"listCollections": 1, "authorizedCollections": true,
                                       "nameOnly": true})"));
    // Reading another collection through a pipeline needs find on it too.
    const char* lookups[] = {
        R"({"aggregate": "orders", "pipeline": [{"$lookup": {"from": "users", "as": "u"}}]})",
        R"({"aggregate": "orders", "pipeline": [{"$unionWith": "users"}]})",
        R"({"aggregate": "orders", "pipeline": [{"$unionWith": {"coll": "users"}}]})",
        R"({"aggregate": "orders", "pipeline": [{"$graphLookup": {"from": "users"}}]})",
        R"({"aggregate": "orders", "pipeline": [{"$facet": {"a": [{"$lookup": {"from": "users"}}]}}]})",
        R"({"aggregate": "orders", "pipeline": [{"$lookup": {"from": "orders", "as": "x",
              "pipeline": [{"$lookup": {"from": "users", "as": "y"}}]}}]})",
        R"({"aggregate": 1, "pipeline": [{"$documents": []}, {"$lookup": {"from": "users"}}]})",
        R"({"aggregate": 1, "pipeline": [{"$match": {}}]})",
        R"({"explain": {"find": "users"}})",
    };
    for (const char* cmd : lookups) EXPECT_FALSE(allowed(s, "app", cmd)) << cmd;
    EXPECT_TRUE(allowed(
        s, "app", R"({"aggregate": "orders", "pipeline": [{"$lookup": {"from": "orders"}}]})"));
}

TEST(Authorization, RenameWithinADatabaseNeverGainsRead) {
    // renameCollectionSameDB alone: allowed unless the target is readable and the source not.
    PrivilegeSet rename({{RP::database("app"), {A::renameCollectionSameDB}}});
    EXPECT_TRUE(allowed(rename, "admin", R"({"renameCollection": "app.a", "to": "app.b"})"));
    PrivilegeSet readsTarget(
        {{RP::database("app"), {A::renameCollectionSameDB}}, {RP::exact("app", "b"), {A::find}}});
    EXPECT_FALSE(allowed(readsTarget, "admin", R"({"renameCollection": "app.a", "to": "app.b"})"));
    PrivilegeSet readsBoth({{RP::database("app"), {A::renameCollectionSameDB, A::find}}});
    EXPECT_TRUE(allowed(readsBoth, "admin", R"({"renameCollection": "app.a", "to": "app.b"})"));
    EXPECT_FALSE(allowed(readsBoth, "admin",
                         R"({"renameCollection": "app.a", "to": "app.b", "dropTarget": true})"));
}

TEST(Authorization, UnknownCommandsNeedEveryPrivilegeOfRoot) {
    PrivilegeSet everything({{RP::anyResource(), {A::anyAction}}});
    EXPECT_TRUE(allowed(everything, "admin", R"({"someFutureCommand": 1})"));
    PrivilegeVector v{{RP::anyNormal(), {A::anyAction}}, {RP::cluster(), {A::anyAction}}};
    EXPECT_FALSE(allowed(PrivilegeSet(v), "admin", R"({"someFutureCommand": 1})"));
}

}  // namespace
}  // namespace halo::store::authz
