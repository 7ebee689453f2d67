#include "store/query/projection.h"

#include <gtest/gtest.h>

#include <vector>

#include "test_util.h"

namespace halo::query {
namespace {

struct Case {
    const char* spec;
    const char* doc;
    const char* expected;
    const char* query = nullptr;  // for positional projections
};

std::string project(const Case& c) {
    auto spec = bson::Doc::fromJsonOrDie(c.spec);
    std::unique_ptr<Matcher> m;
    if (c.query) {
        auto q = bson::Doc::fromJsonOrDie(c.query);
        m = uassertStatusOK(Matcher::parse(q.get()));
    }
    auto p = uassertStatusOK(Projection::parse(spec.get(), m.get()));
    auto doc = bson::Doc::fromJsonOrDie(c.doc);
    MatchDetails details;
    if (m) {
        EXPECT_TRUE(m->matches(doc.get(), &details)) << c.spec;
    }
    return test::canonical(p.apply(doc.get(), m ? &details : nullptr).get());
}

TEST(ProjectionTest, InclusionExclusion) {
    std::vector<Case> cases = {
        {R"({"a": 1})", R"({"_id": 1, "a": 2, "b": 3})", R"({"_id": 1, "a": 2})"},
        {R"({"a": true, "_id": 0})", R"({"_id": 1, "a": 2, "b": 3})", R"({"a": 2})"},
        {R"({"b": 1, "a": 1})", R"({"_id": 1, "a": 2, "b": 3})", R"({"_id": 1, "a": 2, "b": 3})"},
        {R"({"a": 0})", R"({"_id": 1, "a": 2, "b": 3})", R"({"_id": 1, "b": 3})"},
        {R"({"a": false, "_id": 0})", R"({"_id": 1, "a": 2, "b": 3})", R"({"b": 3})"},
        {R"({"_id": 0})", R"({"_id": 1, "a": 2})", R"({"a": 2})"},
        {R"({"_id": 1})", R"({"_id": 1, "a": 2})", R"({"_id": 1})"},
        {R"({"a": {"$numberDecimal": "0.5"}})", R"({"_id": 1, "a": 2, "b": 3})",
         R"({"_id": 1, "a": 2})"},
        {R"({"x": 1})", R"({"_id": 1, "a": 2})", R"({"_id": 1})"},
        {R"({"a.b": 1})", R"({"_id": 1, "a": {"b": 1, "c": 2}, "d": 1})",
         R"({"_id": 1, "a": {"b": 1}})"},
        {R"({"a": {"b": 1}})", R"({"_id": 1, "a": {"b": 1, "c": 2}})",
         R"({"_id": 1, "a": {"b": 1}})"},
        {R"({"a.b": 1})", R"({"_id": 1, "a": {"c": 2}})", R"({"_id": 1, "a": {}})"},
        {R"({"a.b": 1})", R"({"_id": 1, "a": 5})", R"({"_id": 1})"},
        {R"({"a.b": 1})", R"({"_id": 1, "a": [{"b": 1, "c": 2}, 3, {"c": 1}, [{"b": 2}]]})",
         R"({"_id": 1, "a": [{"b": 1}, {}, [{"b": 2}]]})"},
        {R"({"a.b": 0})", R"({"_id": 1, "a": [{"b": 1, "c": 2}, 3]})",
         R"({"_id": 1, "a": [{"c": 2}, 3]})"},
        {R"({"a.b": 0})", R"({"_id": 1, "a": {"b": 1, "c": 2}})", R"({"_id": 1, "a": {"c": 2}})"},
    };
    for (const auto& c : cases) EXPECT_EQ(project(c), test::canonical(c.expected)) << c.spec;
}

TEST(ProjectionTest, SliceElemMatchPositional) {
    std::vector<Case> cases = {
        {R"({"a": {"$slice": 2}})", R"({"_id": 1, "a": [1, 2, 3], "b": 1})",
         R"({"_id": 1, "a": [1, 2], "b": 1})"},
        {R"({"a": {"$slice": -2}})", R"({"_id": 1, "a": [1, 2, 3]})", R"({"_id": 1, "a": [2, 3]})"},
        {R"({"a": {"$slice": [1, 1]}})", R"({"_id": 1, "a": [1, 2, 3]})",
         R"({"_id": 1, "a": [2]})"},
        {R"({"a": {"$slice": [-2, 5]}})", R"({"_id": 1, "a": [1, 2, 3]})",
         R"({"_id": 1, "a": [2, 3]})"},
        {R"({"a": {"$slice": 1}})", R"({"_id": 1, "a": 5})", R"({"_id": 1, "a": 5})"},
        {R"({"a": {"$slice": 1}, "b": 1})", R"({"_id": 1, "a": [1, 2], "b": 1, "c": 1})",
         R"({"_id": 1, "a": [1], "b": 1})"},
        {R"({"a.b": {"$slice": 1}})", R"({"_id": 1, "a": [{"b": [1, 2]}, {"b": [3, 4]}]})",
         R"({"_id": 1, "a": [{"b": [1]}, {"b": [3]}]})"},
        {R"({"a": {"$elemMatch": {"x": {"$gt": 1}}}})",
         R"({"_id": 1, "a": [{"x": 1}, {"x": 2}, {"x": 3}], "b": 1})",
         R"({"_id": 1, "b": 1, "a": [{"x": 2}]})"},
        {R"({"a": {"$elemMatch": {"x": 9}}, "b": 1})", R"({"_id": 1, "a": [{"x": 1}], "b": 1})",
         R"({"_id": 1, "b": 1})"},
        {R"({"a.$": 1})", R"({"_id": 1, "a": [1, 5, 7], "b": 1})", R"({"_id": 1, "a": [5]})",
         R"({"a": {"$gt": 3}})"},
        {R"({"a.$": 1})", R"({"_id": 1, "a": [{"x": 1}, {"x": 2}]})",
         R"({"_id": 1, "a": [{"x": 2}]})", R"({"a.x": 2})"},
        {R"({"a.b.$": 1})", R"({"_id": 1, "a": [{"b": 1, "c": 1}, {"b": 2, "c": 2}]})",
         R"({"_id": 1, "a": [{"b": 2}]})", R"({"a.b": 2})"},
    };
    for (const auto& c : cases) EXPECT_EQ(project(c), test::canonical(c.expected)) << c.spec;
}

TEST(ProjectionTest, ComputedFields) {
    std::vector<Case> cases = {
        {R"({"x": {"$add": ["$a", 1]}})", R"({"_id": 1, "a": 2})", R"({"_id": 1, "x": 3})"},
        {R"({"x": "$a", "_id": 0})", R"({"_id": 1, "a": 2})", R"({"x": 2})"},
        {R"({"x": "$missing"})", R"({"_id": 1})", R"({"_id": 1})"},
        {R"({"x": "lit", "y": null, "z": [1, "$a"]})", R"({"_id": 1, "a": 2})",
         R"({"_id": 1, "x": "lit", "y": null, "z": [1, 2]})"},
        {R"({"x": {"$literal": 1}})", R"({"_id": 1})", R"({"_id": 1, "x": 1})"},
        {R"({"a": {"$literal": 0}, "b": 1})", R"({"_id": 1, "b": 2, "a": 3})",
         R"({"_id": 1, "b": 2, "a": 0})"},
        {R"({"a.b": {"$literal": 5}})", R"({"_id": 1, "a": [{"c": 1}, 2]})",
         R"({"_id": 1, "a": [{"b": 5}, {"b": 5}]})"},
        {R"({"n.x": "$a"})", R"({"_id": 1, "a": 2})", R"({"_id": 1, "n": {"x": 2}})"},
    };
    for (const auto& c : cases) EXPECT_EQ(project(c), test::canonical(c.expected)) << c.spec;
}

TEST(ProjectionTest, IsInclusion) {
    struct IncCase {
        const char* spec;
        bool inclusion;
    };
    std::vector<IncCase> cases = {
        {R"({"a": 1})", true},
        {R"({"a": 0})", false},
        {R"({"_id": 0})", false},
        {R"({"_id": 1})", true},
        {R"({"a": {"$slice": 1}})", false},
        {R"({"x": "$a"})", true},
        {R"({"a": 1, "_id": 0})", true},
        {R"({"a": 0, "_id": 1})", false},
    };
    for (const auto& c : cases) {
        auto spec = bson::Doc::fromJsonOrDie(c.spec);
        EXPECT_EQ(uassertStatusOK(Projection::parse(spec.get(), nullptr)).isInclusion(),
                  c.inclusion)
            << c.spec;
    }
}

TEST(ProjectionTest, Errors) {
    struct ErrCase {
        const char* spec;
        int code;
        const char* message;
        const char* query = nullptr;
    };
    std::vector<ErrCase> cases = {
        {R"({"a": 1, "b": 0})", 31254, "Cannot do exclusion on field b in inclusion projection"},
        {R"({"a": 0, "b": 1})", 31253, "Cannot do inclusion on field b in exclusion projection"},
        {R"({"a": 0, "b": "$x"})", 31252, nullptr},
        {R"({"a": 1, "a.b": 1})", 31249, "Path collision at a.b remaining portion b"},
        {R"({"a.b": 1, "a": 1})", 31250, "Path collision at a"},
        {R"({"a.b": {"$elemMatch": {"x": 1}}})", 31275, nullptr},
        {R"({"a.$": 1, "b.$": 1})", 31276, nullptr, R"({"a": 1, "b": 1})"},
        {R"({"a.$": 0})", 31395, nullptr, R"({"a": 1})"},
        {R"({"a.$": 1})", 51050, nullptr, R"({"b": 1})"},
        {R"({"a": {"$foo": 1}})", 168, nullptr},
        {R"({"a": {}})", 51270, nullptr},
        {R"({"$a": 1})", 16410, nullptr},
    };
    for (const auto& c : cases) {
        auto spec = bson::Doc::fromJsonOrDie(c.spec);
        std::unique_ptr<Matcher> m;
        if (c.query) {
            auto q = bson::Doc::fromJsonOrDie(c.query);
            m = uassertStatusOK(Matcher::parse(q.get()));
        }
        auto sw = Projection::parse(spec.get(), m.get());
        ASSERT_FALSE(sw.isOK()) << c.spec;
        EXPECT_EQ(sw.getStatus().codeNumber(), c.code) << c.spec << ": " << sw.getStatus().reason();
        if (c.message) {
            EXPECT_EQ(sw.getStatus().reason(), c.message);
        }
    }
}

TEST(ProjectionTest, PositionalWithoutMatchFails) {
    auto spec = bson::Doc::fromJsonOrDie(R"({"a.$": 1})");
    auto q = bson::Doc::fromJsonOrDie(R"({"a": 1})");
    auto m = uassertStatusOK(Matcher::parse(q.get()));
    auto p = uassertStatusOK(Projection::parse(spec.get(), m.get()));
    EXPECT_TRUE(p.requiresMatchDetails());
    auto doc = bson::Doc::fromJsonOrDie(R"({"a": [2, 3]})");
    MatchDetails none;
    try {
        p.apply(doc.get(), &none);
        FAIL() << "expected 51246";
    } catch (const DBException& e) {
        EXPECT_EQ(static_cast<int>(e.code()), 51246);
    }
}

}  // namespace
}  // namespace halo::query
