// Which built-in roles may run which commands: a table of (roles, db, command) -> allowed.
#include "store/authz/authorization.h"

#include <gtest/gtest.h>

#include "bson/doc.h"

namespace halo::store::authz {
namespace {

struct Case {
    std::vector<RoleName> roles;
    const char* db;
    const char* cmd;  // extended JSON
    bool allowed;
};

bool allowed(const std::vector<RoleName>& roles, const char* db, const char* json) {
    bson::Doc cmd = bson::Doc::fromJsonOrDie(json);
    bson_iter_t it;
    bson_iter_init(&it, cmd.get());
    bson_iter_next(&it);
    Identity self{"me", "app"};
    CommandAccess a = commandAccess(bson_iter_key(&it), db, cmd.get(), &self);
    return !a.requiresAuth || satisfiesAll(roles, a.needs);
}

TEST(Authorization, BuiltinRolesAgainstCommands) {
    const RoleName read{"read", "app"}, readWrite{"readWrite", "app"}, dbAdmin{"dbAdmin", "app"},
        userAdmin{"userAdmin", "app"}, rwAny{"readWriteAnyDatabase", "admin"},
        readAny{"readAnyDatabase", "admin"}, monitor{"clusterMonitor", "admin"},
        root{"root", "admin"}, dbOwner{"dbOwner", "app"};
    const Case cases[] = {
        {{}, "app", R"({"ping": 1})", true},
        {{}, "admin", R"({"saslStart": 1})", true},
        {{}, "app", R"({"find": "c"})", false},
        {{read}, "app", R"({"find": "c"})", true},
        {{read}, "other", R"({"find": "c"})", false},
        {{read}, "app", R"({"insert": "c", "documents": []})", false},
        {{read}, "app", R"({"findAndModify": "c"})", false},
        {{readWrite}, "app", R"({"findAndModify": "c"})", true},
        {{readWrite}, "app", R"({"createIndexes": "c"})", true},
        {{readWrite}, "app", R"({"collMod": "c"})", false},
        {{dbAdmin}, "app", R"({"collMod": "c"})", true},
        {{dbAdmin}, "app", R"({"find": "c"})", false},
        {{dbAdmin}, "app", R"({"listCollections": 1})", true},
        {{read}, "app", R"({"aggregate": "c", "pipeline": [{"$out": "d"}]})", false},
        {{readWrite}, "app", R"({"aggregate": "c", "pipeline": [{"$out": "d"}]})", true},
        {{readWrite},
         "app",
         R"({"aggregate": "c", "pipeline": [{"$merge": {"into": {"db": "x", "coll": "d"}}}]})",
         false},
        {{read}, "app", R"({"aggregate": 1, "pipeline": [{"$changeStream": {}}]})", true},
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
        {{monitor}, "admin", R"({"serverStatus": 1})", true},
        {{monitor}, "admin", R"({"replSetGetStatus": 1})", true},
        {{monitor}, "admin", R"({"shutdown": 1})", false},
        {{root}, "admin", R"({"shutdown": 1})", true},
        {{root}, "local", R"({"find": "oplog.rs"})", true},
        {{root}, "admin", R"({"someFutureCommand": 1})", true},
        {{rwAny}, "admin", R"({"someFutureCommand": 1})", false},
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
        {{read}, "app", R"({"usersInfo": "me"})", true},
        {{read}, "app", R"({"usersInfo": "other"})", false},
        {{read}, "app", R"({"usersInfo": {"forAllDBs": true}})", false},
        {{dbOwner}, "app", R"({"dropDatabase": 1})", true},
        {{readWrite}, "app", R"({"dropDatabase": 1})", false},
        {{readWrite}, "admin", R"({"renameCollection": "app.a", "to": "app.b"})", true},
        {{readWrite}, "admin", R"({"renameCollection": "app.a", "to": "other.b"})", false},
        // Admin helpers: currentOp/top/connPoolStats are clusterMonitor, one's own
        // operations are anyone's; validate/compact/profile are dbAdmin; fsync hostManager.
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
        for (const auto& r : c.roles) roles += r.role + "@" + r.db + " ";
        EXPECT_EQ(allowed(c.roles, c.db, c.cmd), c.allowed)
            << roles << "on " << c.db << ": " << c.cmd;
    }
}

TEST(Authorization, BuiltinRoleNamesExistWhereMongodHasThem) {
    EXPECT_TRUE(isBuiltinRole({"read", "anydb"}));
    EXPECT_TRUE(isBuiltinRole({"root", "admin"}));
    EXPECT_FALSE(isBuiltinRole({"root", "app"}));
    EXPECT_FALSE(isBuiltinRole({"readAnyDatabase", "app"}));
    EXPECT_FALSE(isBuiltinRole({"nosuchrole", "admin"}));
    EXPECT_FALSE(isBuiltinRole({"read", ""}));
}

}  // namespace
}  // namespace halo::store::authz
