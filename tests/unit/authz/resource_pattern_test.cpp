// Resource patterns parse from mongod's documents with its rules, print back in
// the same shape, and reach targets as mongod's resource search list does.
#include "store/authz/resource_pattern.h"

#include <gtest/gtest.h>

#include "bson/doc.h"

namespace halo::store::authz {
namespace {

StatusWith<ResourcePattern> parse(const char* json) {
    return ResourcePattern::parse(bson::Doc::fromJsonOrDie(json).get());
}

std::string shape(const ResourcePattern& p) {
    bson::Doc d;
    p.appendTo(d.mut(), "r");
    return d.toJson();
}

TEST(ResourcePattern, ParsesEveryShapeAndPrintsItBack) {
    struct Case {
        const char* json;
        ResourcePattern want;
    } cases[] = {
        {R"({"cluster": true})", ResourcePattern::cluster()},
        {R"({"anyResource": true})", ResourcePattern::anyResource()},
        {R"({"db": "", "collection": ""})", ResourcePattern::anyNormal()},
        {R"({"db": "app", "collection": ""})", ResourcePattern::database("app")},
        {R"({"db": "", "collection": "c"})", ResourcePattern::collectionName("c")},
        {R"({"db": "app", "collection": "c"})", ResourcePattern::exact("app", "c")},
        {R"({"collection": "c", "db": "app"})", ResourcePattern::exact("app", "c")},
    };
    for (const auto& c : cases) {
        auto p = parse(c.json);
        ASSERT_TRUE(p.isOK()) << c.json << ": " << p.getStatus().reason();
        EXPECT_EQ(p.getValue(), c.want) << c.json;
        bson::Doc printed;
        c.want.appendTo(printed.mut(), "r");
        bson_t inner;
        ASSERT_TRUE(bson::subDocument(printed.get(), "r", &inner));
        auto again = ResourcePattern::parse(&inner);
        ASSERT_TRUE(again.isOK()) << c.json;
        EXPECT_EQ(again.getValue(), c.want) << c.json;
    }
    EXPECT_EQ(shape(ResourcePattern::cluster()), R"({ "r" : { "cluster" : true } })");
    EXPECT_EQ(shape(ResourcePattern::database("app")),
              R"({ "r" : { "db" : "app", "collection" : "" } })");
}

TEST(ResourcePattern, RefusesWhatMongodRefuses) {
    struct Case {
        const char* json;
        ErrorCode code;
    } cases[] = {
        {R"({"cluster": false})", ErrorCode::BadValue},
        {R"({"cluster": true, "db": "app"})", ErrorCode::BadValue},
        {R"({"anyResource": true, "collection": ""})", ErrorCode::BadValue},
        {R"({"db": "app"})", ErrorCode::BadValue},
        {R"({"collection": "c"})", ErrorCode::BadValue},
        {R"({"db": "app", "collection": "$cmd"})", ErrorCode::BadValue},
        {R"({"db": "app", "collection": 3})", ErrorCode::TypeMismatch},
        {R"({"db": "app", "collection": "c", "x": 1})", ErrorCode::Location40415},
        {R"({"db": "app", "system_buckets": "b"})", ErrorCode::BadValue},
        {R"({})", ErrorCode::BadValue},
    };
    for (const auto& c : cases) {
        auto p = parse(c.json);
        ASSERT_FALSE(p.isOK()) << c.json;
        EXPECT_EQ(p.getStatus().code(), c.code) << c.json << ": " << p.getStatus().reason();
    }
}

TEST(ResourcePattern, SearchListFollowsMongod) {
    using RP = ResourcePattern;
    auto has = [](const RP& target, const RP& p) {
        auto l = target.searchList();
        return std::find(l.begin(), l.end(), p) != l.end();
    };
    RP normal = RP::exact("app", "c");
    EXPECT_TRUE(has(normal, RP::anyResource()));
    EXPECT_TRUE(has(normal, RP::anyNormal()));
    EXPECT_TRUE(has(normal, RP::database("app")));
    EXPECT_TRUE(has(normal, RP::collectionName("c")));
    EXPECT_TRUE(has(normal, normal));
    EXPECT_FALSE(has(normal, RP::database("other")));
    EXPECT_FALSE(has(normal, RP::cluster()));
    // System collections: only patterns that name them.
    RP users = RP::exact("admin", "system.users");
    EXPECT_FALSE(has(users, RP::anyNormal()));
    EXPECT_FALSE(has(users, RP::database("admin")));
    EXPECT_TRUE(has(users, RP::collectionName("system.users")));
    EXPECT_TRUE(has(users, RP::anyResource()));
    EXPECT_FALSE(has(RP::exact("local", "replset.minvalid"), RP::database("local")));
    // local and config are never "any normal".
    EXPECT_FALSE(has(RP::exact("local", "oplog.rs"), RP::anyNormal()));
    EXPECT_TRUE(has(RP::exact("local", "oplog.rs"), RP::database("local")));
    EXPECT_FALSE(has(RP::database("config"), RP::anyNormal()));
    EXPECT_TRUE(has(RP::database("app"), RP::anyNormal()));
    // The cluster and the any-normal target.
    EXPECT_EQ(RP::cluster().searchList(), (std::vector<RP>{RP::anyResource(), RP::cluster()}));
    EXPECT_EQ(RP::anyNormal().searchList(), (std::vector<RP>{RP::anyResource(), RP::anyNormal()}));
}

}  // namespace
}  // namespace halo::store::authz
