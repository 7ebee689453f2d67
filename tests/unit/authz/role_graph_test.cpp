// Resolving roles through built-in definitions and stored user-defined roles:
// nested roles, cycles, missing roles, and the lookup asked once per level.
#include "store/authz/role_graph.h"

#include <gtest/gtest.h>

#include <map>

#include "bson/doc.h"
#include "store/authz/builtin_roles.h"

namespace halo::store::authz {
namespace {

using A = ActionType;
using RP = ResourcePattern;

struct FakeRoles {
    std::map<RoleName, RoleDefinition> stored;
    int lookups = 0;
    RoleLookup lookup() {
        return [this](const std::vector<RoleName>& names) {
            ++lookups;
            std::vector<RoleDefinition> out;
            for (const auto& n : names)
                if (auto it = stored.find(n); it != stored.end()) out.push_back(it->second);
            return out;
        };
    }
    void add(RoleName name, PrivilegeVector privs, std::vector<RoleName> roles) {
        stored[name] = RoleDefinition{name, std::move(privs), std::move(roles)};
    }
};

TEST(RoleGraph, BuiltinRolesNeedNoLookup) {
    FakeRoles f;
    auto r = resolveRoles({{"read", "app"}, {"clusterMonitor", "admin"}}, f.lookup());
    EXPECT_EQ(f.lookups, 0);
    EXPECT_EQ(r.roles, (std::vector<RoleName>{{"clusterMonitor", "admin"}, {"read", "app"}}));
    PrivilegeSet s(r.privileges);
    EXPECT_TRUE(s.isAuthorized(RP::exact("app", "c"), A::find));
    EXPECT_TRUE(s.isAuthorized(RP::cluster(), A::serverStatus));
}

TEST(RoleGraph, NestedUserDefinedRolesAddUp) {
    FakeRoles f;
    f.add({"ordersReader", "app"}, {{RP::exact("app", "orders"), {A::find}}}, {});
    f.add({"auditor", "app"}, {{RP::database("app"), {A::dbStats}}},
          {{"ordersReader", "app"}, {"read", "reports"}});
    f.add({"ops", "admin"}, {{RP::cluster(), {A::serverStatus}}}, {{"auditor", "app"}});
    auto r = resolveRoles({{"ops", "admin"}}, f.lookup());
    EXPECT_EQ(
        r.roles,
        (std::vector<RoleName>{
            {"auditor", "app"}, {"ops", "admin"}, {"ordersReader", "app"}, {"read", "reports"}}));
    EXPECT_EQ(f.lookups, 3);  // one per level
    PrivilegeSet s(r.privileges);
    EXPECT_TRUE(s.isAuthorized(RP::exact("app", "orders"), A::find));
    EXPECT_FALSE(s.isAuthorized(RP::exact("app", "users"), A::find));
    EXPECT_TRUE(s.isAuthorized(RP::exact("reports", "daily"), A::find));
    EXPECT_TRUE(s.isAuthorized(RP::database("app"), A::dbStats));
    EXPECT_TRUE(s.isAuthorized(RP::cluster(), A::serverStatus));
    EXPECT_FALSE(s.isAuthorized(RP::cluster(), A::shutdown));
}

TEST(RoleGraph, CyclesEndAndMissingRolesGrantNothing) {
    FakeRoles f;
    f.add({"a", "app"}, {{RP::exact("app", "a"), {A::find}}}, {{"b", "app"}});
    f.add({"b", "app"}, {{RP::exact("app", "b"), {A::find}}}, {{"a", "app"}, {"gone", "app"}});
    auto r = resolveRoles({{"a", "app"}}, f.lookup());
    EXPECT_EQ(r.roles, (std::vector<RoleName>{{"a", "app"}, {"b", "app"}}));
    PrivilegeSet s(r.privileges);
    EXPECT_TRUE(s.isAuthorized(RP::exact("app", "a"), A::find));
    EXPECT_TRUE(s.isAuthorized(RP::exact("app", "b"), A::find));
    auto none = resolveRoles({{"gone", "app"}}, f.lookup());
    EXPECT_TRUE(none.roles.empty());
    EXPECT_TRUE(none.privileges.empty());
}

TEST(RoleGraph, ParsesStoredRoleDocuments) {
    bson::Doc d = bson::Doc::fromJsonOrDie(
        R"({"_id": "app.r", "role": "r", "db": "app",
            "privileges": [{"resource": {"db": "app", "collection": "c"}, "actions": ["find"]}],
            "roles": [{"role": "read", "db": "app"}]})");
    auto def = parseRoleDocument(d.get());
    ASSERT_TRUE(def.isOK()) << def.getStatus().reason();
    EXPECT_EQ(def.getValue().name, (RoleName{"r", "app"}));
    ASSERT_EQ(def.getValue().privileges.size(), 1u);
    EXPECT_EQ(def.getValue().roles, (std::vector<RoleName>{{"read", "app"}}));
    EXPECT_FALSE(parseRoleDocument(bson::Doc::fromJsonOrDie(R"({"role": "r"})").get()).isOK());
}

}  // namespace
}  // namespace halo::store::authz
