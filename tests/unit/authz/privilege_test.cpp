// Privilege arrays parse with mongod's errors; a PrivilegeSet answers checks as
// the union of the actions of every pattern that reaches the target.
#include "store/authz/privilege.h"

#include <gtest/gtest.h>

#include "bson/doc.h"

namespace halo::store::authz {
namespace {

using A = ActionType;
using RP = ResourcePattern;

StatusWith<PrivilegeVector> parse(const char* json) {
    bson::Doc d = bson::Doc::fromJsonOrDie(json);
    bson_t arr;
    EXPECT_TRUE(bson::subDocument(d.get(), "p", &arr));
    return parsePrivileges(&arr, "privileges");
}

TEST(Privilege, ParsesAndPrintsMongodsShape) {
    auto p = parse(R"({"p": [{"resource": {"db": "app", "collection": "c"},
                               "actions": ["insert", "find"]},
                              {"resource": {"cluster": true}, "actions": ["serverStatus"]}]})");
    ASSERT_TRUE(p.isOK()) << p.getStatus().reason();
    ASSERT_EQ(p.getValue().size(), 2u);
    EXPECT_EQ(p.getValue()[0].resource, RP::exact("app", "c"));
    EXPECT_EQ(p.getValue()[0].actions, (ActionSet{A::find, A::insert}));
    bson::Doc out;
    appendPrivileges(out.mut(), "p", p.getValue());
    EXPECT_EQ(out.toJson(),
              R"({ "p" : [ { "resource" : { "db" : "app", "collection" : "c" }, "actions" : )"
              R"([ "find", "insert" ] }, { "resource" : { "cluster" : true }, "actions" : )"
              R"([ "serverStatus" ] } ] })");
}

TEST(Privilege, RefusesMalformedPrivilegesWithMongodsErrors) {
    auto unknown = parse(R"({"p": [{"resource": {"db": "app", "collection": ""},
                                     "actions": ["find", "fakeAction", "nope"]}]})");
    ASSERT_FALSE(unknown.isOK());
    EXPECT_EQ(unknown.getStatus().code(), ErrorCode::BadValue);
    EXPECT_EQ(unknown.getStatus().reason(),
              "Unrecognized action privilege strings: fakeAction, nope");
    struct Case {
        const char* json;
        ErrorCode code;
    } cases[] = {
        {R"({"p": [{"resource": {"db": "app", "collection": ""}, "actions": []}]})",
         ErrorCode::BadValue},
        {R"({"p": [{"actions": ["find"]}]})", ErrorCode::Location40414},
        {R"({"p": [{"resource": {"db": "app", "collection": ""}}]})", ErrorCode::Location40414},
        {R"({"p": [{"resource": {"db": "app", "collection": ""}, "actions": "find"}]})",
         ErrorCode::TypeMismatch},
        {R"({"p": [{"resource": {"db": "app", "collection": ""}, "actions": [1]}]})",
         ErrorCode::TypeMismatch},
        {R"({"p": ["find"]})", ErrorCode::TypeMismatch},
        {R"({"p": [{"resource": {"db": "app"}, "actions": ["find"]}]})", ErrorCode::BadValue},
        {R"({"p": [{"resource": {"db": "a", "collection": ""}, "actions": ["find"], "x": 1}]})",
         ErrorCode::Location40415},
    };
    for (const auto& c : cases) {
        auto p = parse(c.json);
        ASSERT_FALSE(p.isOK()) << c.json;
        EXPECT_EQ(p.getStatus().code(), c.code) << c.json << ": " << p.getStatus().reason();
    }
}

TEST(Privilege, AddPrivilegeMergesActionsPerResourceInFirstSeenOrder) {
    PrivilegeVector v;
    addPrivilege(&v, {RP::database("app"), {A::find}});
    addPrivilege(&v, {RP::cluster(), {A::top}});
    addPrivilege(&v, {RP::database("app"), {A::insert}});
    ASSERT_EQ(v.size(), 2u);
    EXPECT_EQ(v[0].resource, RP::database("app"));
    EXPECT_EQ(v[0].actions, (ActionSet{A::find, A::insert}));
}

TEST(PrivilegeSet, ActionsOfDifferentPatternsAddUp) {
    PrivilegeSet s({{RP::database("app"), {A::insert}}, {RP::collectionName("c"), {A::find}}});
    EXPECT_TRUE(s.isAuthorized(RP::exact("app", "c"), {A::find, A::insert}));
    EXPECT_FALSE(s.isAuthorized(RP::exact("app", "d"), {A::find, A::insert}));
    EXPECT_TRUE(s.isAuthorized(RP::exact("other", "c"), A::find));
    EXPECT_FALSE(s.isAuthorized(RP::exact("app", "system.users"), A::insert));
    EXPECT_FALSE(s.isAuthorized(RP::cluster(), A::insert));
    EXPECT_TRUE(s.isAuthorized(RP::cluster(), ActionSet{}));
}

TEST(PrivilegeSet, OneCollectionOnlyReachesThatCollection) {
    PrivilegeSet s({{RP::exact("app", "orders"), {A::find}}});
    EXPECT_TRUE(s.isAuthorized(RP::exact("app", "orders"), A::find));
    EXPECT_FALSE(s.isAuthorized(RP::exact("app", "users"), A::find));
    EXPECT_FALSE(s.isAuthorized(RP::database("app"), A::find));
    EXPECT_TRUE(s.anyOnDatabase("app"));
    EXPECT_FALSE(s.anyOnDatabase("other"));
    EXPECT_TRUE(s.anyOnCollection("app", "orders"));
    EXPECT_FALSE(s.anyOnCollection("app", "users"));
}

TEST(PrivilegeSet, AnyNormalSkipsLocalAndConfig) {
    PrivilegeSet s({{RP::anyNormal(), {A::find}}});
    EXPECT_TRUE(s.isAuthorized(RP::exact("shop", "orders"), A::find));
    EXPECT_FALSE(s.isAuthorized(RP::exact("local", "oplog.rs"), A::find));
    EXPECT_FALSE(s.isAuthorized(RP::exact("config", "x"), A::find));
    EXPECT_FALSE(s.isAuthorized(RP::exact("shop", "system.profile"), A::find));
    EXPECT_TRUE(s.anyOnDatabase("shop"));
    EXPECT_FALSE(s.anyOnDatabase("local"));
}

TEST(PrivilegeSet, AnyResourceAnyActionIsEverything) {
    PrivilegeSet s({{RP::anyResource(), {A::anyAction}}});
    EXPECT_TRUE(s.isAuthorized(RP::cluster(), A::shutdown));
    EXPECT_TRUE(s.isAuthorized(RP::exact("admin", "system.users"), {A::insert, A::remove}));
    EXPECT_TRUE(s.anyOnDatabase("local"));
}

}  // namespace
}  // namespace halo::store::authz
