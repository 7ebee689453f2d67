// The built-in roles carry mongod 7.0's privileges: spot checks against
// builtin_roles.yml, and the relations between roles that the yml states
// (dbOwner is readWrite + dbAdmin + userAdmin, root holds every admin role...).
#include "store/authz/builtin_roles.h"

#include <gtest/gtest.h>

namespace halo::store::authz {
namespace {

using A = ActionType;
using RP = ResourcePattern;

PrivilegeSet held(std::initializer_list<RoleName> roles) {
    PrivilegeVector v;
    for (const auto& r : roles) addPrivileges(&v, builtinRolePrivileges(r));
    return PrivilegeSet(v);
}

/// Whether holding `a` gives every privilege of `b`.
bool covers(const RoleName& a, const RoleName& b) {
    PrivilegeSet s = held({a});
    for (const auto& p : builtinRolePrivileges(b))
        if (!s.isAuthorized(p.resource, p.actions)) return false;
    return true;
}

TEST(BuiltinRoles, ReadIsMongodsReadRole) {
    PrivilegeVector read = builtinRolePrivileges({"read", "app"});
    ASSERT_EQ(read.size(), 2u);
    EXPECT_EQ(read[0].resource, RP::database("app"));
    std::vector<std::string_view> want{
        "changeStream", "collStats",       "dbHash",      "dbStats",           "find",
        "killCursors",  "listCollections", "listIndexes", "listSearchIndexes", "planCacheRead"};
    EXPECT_EQ(read[0].actions.names(), want);
    EXPECT_EQ(read[1].resource, RP::exact("app", "system.js"));
    EXPECT_EQ(read[1].actions, read[0].actions);
}

TEST(BuiltinRoles, RolesExistWhereMongodHasThem) {
    EXPECT_TRUE(isBuiltinRole({"read", "anydb"}));
    EXPECT_TRUE(isBuiltinRole({"enableSharding", "anydb"}));
    EXPECT_TRUE(isBuiltinRole({"root", "admin"}));
    EXPECT_FALSE(isBuiltinRole({"root", "app"}));
    EXPECT_FALSE(isBuiltinRole({"readAnyDatabase", "app"}));
    EXPECT_FALSE(isBuiltinRole({"nosuchrole", "admin"}));
    EXPECT_FALSE(isBuiltinRole({"read", ""}));
    EXPECT_FALSE(isBuiltinRole({"Read", "app"}));
    EXPECT_EQ(builtinRoleNames("app"),
              (std::vector<std::string>{"dbAdmin", "dbOwner", "enableSharding", "read", "readWrite",
                                        "userAdmin"}));
    EXPECT_EQ(builtinRoleNames("admin").size(), 18u);
    for (const auto& name : builtinRoleNames("admin"))
        EXPECT_FALSE(builtinRolePrivileges({name, "admin"}).empty()) << name;
}

TEST(BuiltinRoles, RelationsTheYmlStates) {
    const RoleName admin[] = {{"readAnyDatabase", "admin"},
                              {"readWriteAnyDatabase", "admin"},
                              {"userAdminAnyDatabase", "admin"},
                              {"dbAdminAnyDatabase", "admin"},
                              {"clusterMonitor", "admin"},
                              {"clusterManager", "admin"},
                              {"hostManager", "admin"},
                              {"clusterAdmin", "admin"},
                              {"backup", "admin"},
                              {"restore", "admin"},
                              {"read", "app"},
                              {"dbOwner", "app"}};
    for (const auto& r : admin) EXPECT_TRUE(covers({"root", "admin"}, r)) << r.toString();
    for (const char* part : {"read", "readWrite", "dbAdmin", "userAdmin"})
        EXPECT_TRUE(covers({"dbOwner", "app"}, {part, "app"})) << part;
    EXPECT_TRUE(covers({"readWrite", "app"}, {"read", "app"}));
    EXPECT_TRUE(covers({"readWriteAnyDatabase", "admin"}, {"readAnyDatabase", "admin"}));
    EXPECT_TRUE(covers({"readAnyDatabase", "admin"}, {"read", "app"}));
    EXPECT_TRUE(covers({"backup", "admin"}, {"__queryableBackup", "admin"}));
    for (const char* part : {"clusterMonitor", "clusterManager", "hostManager"})
        EXPECT_TRUE(covers({"clusterAdmin", "admin"}, {part, "admin"})) << part;
    EXPECT_FALSE(covers({"readWrite", "app"}, {"dbAdmin", "app"}));
    EXPECT_FALSE(covers({"readAnyDatabase", "admin"}, {"read", "local"}));
    EXPECT_FALSE(covers({"clusterAdmin", "admin"}, {"root", "admin"}));
}

TEST(BuiltinRoles, WhatTheRolesAllowAndDoNot) {
    struct Case {
        RoleName role;
        RP resource;
        A action;
        bool allowed;
    } cases[] = {
        {{"read", "app"}, RP::exact("app", "c"), A::find, true},
        {{"read", "app"}, RP::exact("app", "c"), A::insert, false},
        {{"read", "app"}, RP::exact("app", "system.profile"), A::find, false},
        {{"dbAdmin", "app"}, RP::exact("app", "system.profile"), A::find, true},
        {{"dbAdmin", "app"}, RP::exact("app", "c"), A::find, false},
        {{"dbAdmin", "app"}, RP::exact("app", "c"), A::bypassDocumentValidation, true},
        {{"readWrite", "app"}, RP::exact("app", "c"), A::bypassDocumentValidation, false},
        {{"userAdmin", "app"}, RP::database("app"), A::viewUser, true},
        {{"userAdmin", "app"}, RP::exact("admin", "system.users"), A::find, false},
        {{"userAdminAnyDatabase", "admin"}, RP::exact("admin", "system.users"), A::find, true},
        {{"userAdminAnyDatabase", "admin"}, RP::cluster(), A::viewUser, true},
        {{"readWriteAnyDatabase", "admin"}, RP::exact("shop", "orders"), A::remove, true},
        {{"readWriteAnyDatabase", "admin"}, RP::exact("local", "oplog.rs"), A::find, false},
        {{"readWriteAnyDatabase", "admin"}, RP::cluster(), A::listDatabases, true},
        {{"readWriteAnyDatabase", "admin"}, RP::anyNormal(), A::changeStream, true},
        {{"clusterMonitor", "admin"}, RP::cluster(), A::serverStatus, true},
        {{"clusterMonitor", "admin"}, RP::exact("local", "oplog.rs"), A::find, true},
        {{"clusterMonitor", "admin"}, RP::exact("app", "c"), A::find, false},
        {{"clusterMonitor", "admin"}, RP::cluster(), A::killop, false},
        {{"hostManager", "admin"}, RP::cluster(), A::killAnyCursor, true},
        {{"hostManager", "admin"}, RP::cluster(), A::fsync, true},
        {{"clusterManager", "admin"}, RP::cluster(), A::replSetConfigure, true},
        {{"backup", "admin"}, RP::exact("admin", "system.users"), A::find, true},
        {{"backup", "admin"}, RP::exact("app", "c"), A::insert, false},
        {{"restore", "admin"}, RP::exact("app", "c"), A::insert, true},
        {{"restore", "admin"}, RP::exact("app", "c"), A::find, false},
        {{"root", "admin"}, RP::exact("local", "oplog.rs"), A::find, true},
        {{"root", "admin"}, RP::cluster(), A::shutdown, true},
        {{"root", "admin"}, RP::exact("admin", "system.users"), A::insert, true},
    };
    for (const auto& c : cases)
        EXPECT_EQ(held({c.role}).isAuthorized(c.resource, c.action), c.allowed)
            << c.role.toString() << " " << actionName(c.action) << " on " << c.resource.toString();
}

}  // namespace
}  // namespace halo::store::authz
