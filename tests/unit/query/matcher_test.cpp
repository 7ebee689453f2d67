#include "store/query/matcher.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace halo::query {
namespace {

struct MatchCase {
    const char* filter;
    const char* doc;
    bool expected;
};

bool runMatch(const char* filter, const char* doc, MatchDetails* details = nullptr) {
    auto f = bson::Doc::fromJsonOrDie(filter);
    auto sw = Matcher::parse(f.get());
    EXPECT_TRUE(sw.isOK()) << filter << ": " << sw.getStatus().toString();
    if (!sw.isOK()) return false;
    auto d = bson::Doc::fromJsonOrDie(doc);
    return sw.getValue()->matches(d.get(), details);
}

void runTable(const std::vector<MatchCase>& cases) {
    for (const auto& c : cases) {
        EXPECT_EQ(runMatch(c.filter, c.doc), c.expected)
            << "filter " << c.filter << " doc " << c.doc;
    }
}

TEST(MatcherTest, Equality) {
    runTable({
        {R"({})", R"({"a": 1})", true},
        {R"({"a": 1})", R"({"a": 1})", true},
        {R"({"a": 1})", R"({"a": 1.0})", true},
        {R"({"a": 1})", R"({"a": {"$numberLong": "1"}})", true},
        {R"({"a": 1})", R"({"a": {"$numberDecimal": "1.00"}})", true},
        {R"({"a": 1})", R"({"a": "1"})", false},
        {R"({"a": 1})", R"({"b": 1})", false},
        {R"({"a": "x", "b": 2})", R"({"a": "x", "b": 2})", true},
        {R"({"a": "x", "b": 2})", R"({"a": "x", "b": 3})", false},
        {R"({"a": {"$eq": 2}})", R"({"a": 2})", true},
        {R"({"a": {"b": 1, "c": 2}})", R"({"a": {"b": 1, "c": 2}})", true},
        // Field order matters for embedded document equality.
        {R"({"a": {"b": 1, "c": 2}})", R"({"a": {"c": 2, "b": 1}})", false},
        {R"({"a": {"b": 1}})", R"({"a": {"b": 1, "c": 2}})", false},
        {R"({"a.b": 1})", R"({"a": {"b": 1}})", true},
        {R"({"a.b.c": 1})", R"({"a": {"b": {"c": 1}}})", true},
        {R"({"a.b": 1})", R"({"a": 5})", false},
        // DBRef-shaped objects are values, not operators.
        {R"({"r": {"$ref": "c", "$id": 1}})", R"({"r": {"$ref": "c", "$id": 1}})", true},
        {R"({"a": {"$eq": {"$regex": "x"}}})", R"({"a": "x"})", false},
    });
}

TEST(MatcherTest, NullAndMissing) {
    runTable({
        {R"({"a": null})", R"({"a": null})", true},
        {R"({"a": null})", R"({})", true},
        {R"({"a": null})", R"({"a": 0})", false},
        {R"({"a": null})", R"({"a": {"$undefined": true}})", false},
        {R"({"a": {"$eq": null}})", R"({"b": 1})", true},
        {R"({"a": {"$ne": null}})", R"({"b": 1})", false},
        {R"({"a": {"$ne": null}})", R"({"a": 1})", true},
        {R"({"a": {"$gte": null}})", R"({})", true},
        {R"({"a": {"$lte": null}})", R"({"a": null})", true},
        {R"({"a": {"$gt": null}})", R"({"a": null})", false},
        {R"({"a": {"$lt": null}})", R"({})", false},
        {R"({"a.b": null})", R"({"a": 5})", true},
        {R"({"a.b": null})", R"({"a": [{"b": 1}, {"c": 1}]})", true},
        {R"({"a.b": null})", R"({"a": [{"b": 1}]})", false},
        {R"({"a.b": null})", R"({"a": [1, 2]})", false},
        {R"({"a": null})", R"({"a": [1, null]})", true},
        {R"({"a": null})", R"({"a": []})", false},
        {R"({"a": {"$in": [null, 5]}})", R"({})", true},
        {R"({"a": {"$nin": [null]}})", R"({})", false},
        {R"({"a": {"$exists": true}})", R"({"a": null})", true},
        {R"({"a": {"$exists": false}})", R"({"a": null})", false},
        {R"({"a": {"$exists": false}})", R"({})", true},
        {R"({"a": {"$exists": 0}})", R"({"b": 1})", true},
        {R"({"a.b": {"$exists": true}})", R"({"a": [{"c": 1}, {"b": 2}]})", true},
        {R"({"a.b": {"$exists": true}})", R"({"a": [1, 2]})", false},
        {R"({"a.b": {"$exists": false}})", R"({"a": []})", true},
        {R"({"a": {"$exists": true}})", R"({"a": []})", true},
    });
}

TEST(MatcherTest, ComparisonTypeBracketing) {
    runTable({
        {R"({"a": {"$gt": 5}})", R"({"a": 6})", true},
        {R"({"a": {"$gt": 5}})", R"({"a": 5})", false},
        {R"({"a": {"$gte": 5}})", R"({"a": 5.0})", true},
        {R"({"a": {"$gt": 5}})", R"({"a": "6"})", false},
        {R"({"a": {"$lt": 5}})", R"({"a": "1"})", false},
        {R"({"a": {"$lt": 5}})", R"({"a": null})", false},
        {R"({"a": {"$lt": 5}})", R"({})", false},
        {R"({"a": {"$gt": "a"}})", R"({"a": "b"})", true},
        {R"({"a": {"$gt": "a"}})", R"({"a": 100})", false},
        {R"({"a": {"$lt": {"$numberDecimal": "2.5"}}})", R"({"a": 2})", true},
        {R"({"a": {"$lt": {"$numberLong": "9007199254740993"}}})",
         R"({"a": {"$numberLong": "9007199254740992"}})", true},
        {R"({"a": {"$gt": {"$date": "2020-01-01T00:00:00Z"}}})",
         R"({"a": {"$date": "2021-01-01T00:00:00Z"}})", true},
        {R"({"a": {"$gt": {"$date": "2020-01-01T00:00:00Z"}}})", R"({"a": 99999999999999})", false},
        {R"({"a": {"$gt": false}})", R"({"a": true})", true},
        {R"({"a": {"$gt": false}})", R"({"a": 1})", false},
        {R"({"a": {"$gt": {"$minKey": 1}}})", R"({"a": "x"})", true},
        {R"({"a": {"$gt": {"$minKey": 1}}})", R"({"a": null})", true},
        {R"({"a": {"$lt": {"$maxKey": 1}}})", R"({"a": {"b": 1}})", true},
        {R"({"a": {"$lt": {"$minKey": 1}}})", R"({"a": 1})", false},
        {R"({"a": {"$eq": {"$maxKey": 1}}})", R"({"a": {"$maxKey": 1}})", true},
        {R"({"a": {"$gt": {"$numberDouble": "NaN"}}})", R"({"a": 1})", false},
        {R"({"a": {"$lt": 1}})", R"({"a": {"$numberDouble": "NaN"}})", false},
        {R"({"a": {"$eq": {"$numberDouble": "NaN"}}})", R"({"a": {"$numberDouble": "NaN"}})", true},
        {R"({"a": {"$gte": {"$numberDouble": "NaN"}}})", R"({"a": {"$numberDouble": "NaN"}})",
         true},
        {R"({"a": {"$gt": {"$numberDouble": "-Infinity"}}})", R"({"a": -1e300})", true},
        {R"({"a": {"$gt": {"b": 1}}})", R"({"a": {"b": 2}})", true},
        {R"({"a": {"$gt": {"b": 1}}})", R"({"a": {"c": 0}})", true},
        {R"({"a": {"$gt": [1, 2]}})", R"({"a": [1, 3]})", true},
        {R"({"a": {"$gt": 1, "$lt": 5}})", R"({"a": 3})", true},
        {R"({"a": {"$gt": 1, "$lt": 5}})", R"({"a": 7})", false},
        // Separate predicates may be satisfied by different array elements.
        {R"({"a": {"$gt": 1, "$lt": 5}})", R"({"a": [0, 10]})", true},
        {R"({"a": {"$elemMatch": {"$gt": 1, "$lt": 5}}})", R"({"a": [0, 10]})", false},
        {R"({"a": {"$elemMatch": {"$gt": 1, "$lt": 5}}})", R"({"a": [0, 3]})", true},
    });
}

TEST(MatcherTest, ArraySemantics) {
    runTable({
        {R"({"a": 2})", R"({"a": [1, 2, 3]})", true},
        {R"({"a": 4})", R"({"a": [1, 2, 3]})", false},
        {R"({"a": [1, 2]})", R"({"a": [1, 2]})", true},
        {R"({"a": [1, 2]})", R"({"a": [2, 1]})", false},
        {R"({"a": [1, 2]})", R"({"a": [[1, 2], 3]})", true},
        {R"({"a": 1})", R"({"a": [[1, 2], 3]})", false},
        {R"({"a": []})", R"({"a": []})", true},
        {R"({"a": []})", R"({"a": [[]]})", true},
        {R"({"a.b": 2})", R"({"a": [{"b": 1}, {"b": 2}]})", true},
        {R"({"a.b": 2})", R"({"a": [{"b": [1, 2]}]})", true},
        {R"({"a.b": [1, 2]})", R"({"a": [{"b": [1, 2]}]})", true},
        {R"({"a.b.c": 3})", R"({"a": [{"b": [{"c": 1}, {"c": 3}]}]})", true},
        {R"({"a.b": 1})", R"({"a": [[{"b": 1}]]})", false},
        {R"({"a.0": 5})", R"({"a": [5, 6]})", true},
        {R"({"a.1": 5})", R"({"a": [5, 6]})", false},
        {R"({"a.0.b": 1})", R"({"a": [{"b": 1}]})", true},
        {R"({"a.0.b": 1})", R"({"a": [{"b": 2}, {"b": 1}]})", false},
        {R"({"a.0": 1})", R"({"a": [[1, 2]]})", true},
        {R"({"a.0": {"$exists": true}})", R"({"a": []})", false},
        {R"({"a.1": "x"})", R"({"a": {"1": "x"}})", true},
        {R"({"a.0.0": 7})", R"({"a": [[7]]})", true},
        {R"({"a": {"$gt": 2}})", R"({"a": [1, 3]})", true},
        {R"({"a": {"$lt": 1}})", R"({"a": [1, 3]})", false},
        {R"({"a": {"$ne": 2}})", R"({"a": [1, 2]})", false},
        {R"({"a": {"$ne": 5}})", R"({"a": [1, 2]})", true},
        {R"({"a": {"$nin": [1, 7]}})", R"({"a": [1, 2]})", false},
        {R"({"a": {"$nin": [5, 7]}})", R"({"a": [1, 2]})", true},
        {R"({"a": {"$nin": [5, 7]}})", R"({})", true},
        {R"({"a.b": {"$ne": 1}})", R"({"a": [{"b": 1}, {"b": 2}]})", false},
    });
}

TEST(MatcherTest, InAllSizeMod) {
    runTable({
        {R"({"a": {"$in": [1, 2]}})", R"({"a": 2})", true},
        {R"({"a": {"$in": [1, 2]}})", R"({"a": 3})", false},
        {R"({"a": {"$in": []}})", R"({"a": 3})", false},
        {R"({"a": {"$in": [1, 2]}})", R"({"a": [3, 2]})", true},
        {R"({"a": {"$in": [[3, 2]]}})", R"({"a": [3, 2]})", true},
        {R"({"a": {"$in": [{"$regularExpression": {"pattern": "^x", "options": ""}}, 5]}})",
         R"({"a": "xyz"})", true},
        {R"({"a": {"$in": [{"$regularExpression": {"pattern": "^x", "options": ""}}, 5]}})",
         R"({"a": "yx"})", false},
        {R"({"a": {"$in": [1, "1"]}})", R"({"a": 1.0})", true},
        {R"({"a": {"$all": [1, 2]}})", R"({"a": [2, 3, 1]})", true},
        {R"({"a": {"$all": [1, 2]}})", R"({"a": [2, 3]})", false},
        {R"({"a": {"$all": [1]}})", R"({"a": 1})", true},
        {R"({"a": {"$all": []}})", R"({"a": [1]})", false},
        {R"({"a": {"$all": [[1, 2]]}})", R"({"a": [1, 2]})", true},
        {R"({"a": {"$all": [{"$regularExpression": {"pattern": "b", "options": ""}}]}})",
         R"({"a": ["abc"]})", true},
        {R"({"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"c": 2}}]}})",
         R"({"a": [{"b": 1}, {"c": 2}]})", true},
        {R"({"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"c": 3}}]}})",
         R"({"a": [{"b": 1}, {"c": 2}]})", false},
        {R"({"a": {"$size": 2}})", R"({"a": [1, 2]})", true},
        {R"({"a": {"$size": 2}})", R"({"a": [1]})", false},
        {R"({"a": {"$size": 0}})", R"({"a": []})", true},
        {R"({"a": {"$size": 0}})", R"({})", false},
        {R"({"a": {"$size": 1}})", R"({"a": "x"})", false},
        {R"({"a": {"$size": 2}})", R"({"a": [[1, 2]]})", false},
        {R"({"a.b": {"$size": 2}})", R"({"a": [{"b": [1, 2]}]})", true},
        {R"({"a": {"$size": 2.0}})", R"({"a": [1, 2]})", true},
        {R"({"a": {"$mod": [4, 1]}})", R"({"a": 5})", true},
        {R"({"a": {"$mod": [4, 1]}})", R"({"a": 6})", false},
        {R"({"a": {"$mod": [4, 1]}})", R"({"a": 5.9})", true},
        {R"({"a": {"$mod": [4, -1]}})", R"({"a": -5})", true},
        {R"({"a": {"$mod": [4, 0]}})", R"({"a": [3, 8]})", true},
        {R"({"a": {"$mod": [4, 0]}})", R"({"a": "8"})", false},
        {R"({"a": {"$mod": [2.9, 0]}})", R"({"a": 4})", true},
    });
}

// libbson reads {"$type": <x>} as legacy binary syntax, so $type filters are built here.
bson::Doc typeFilter(const char* argJson) {
    auto arg = bson::Doc::fromJsonOrDie(std::string(R"({"v": )") + argJson + "}");
    bson_iter_t it;
    bson::find(arg.get(), "v", &it);
    bson::Doc f;
    bson_t sub;
    BSON_APPEND_DOCUMENT_BEGIN(f.mut(), "a", &sub);
    bson::appendIter(&sub, "$type", it);
    bson_append_document_end(f.mut(), &sub);
    return f;
}

TEST(MatcherTest, TypeOperator) {
    struct Case {
        const char* arg;
        const char* doc;
        bool expected;
    };
    std::vector<Case> cases = {
        {R"("string")", R"({"a": "x"})", true},
        {R"(2)", R"({"a": "x"})", true},
        {R"("number")", R"({"a": 1.5})", true},
        {R"("number")", R"({"a": {"$numberDecimal": "1"}})", true},
        {R"("number")", R"({"a": "1"})", false},
        {R"("int")", R"({"a": 1})", true},
        {R"("long")", R"({"a": 1})", false},
        {R"("array")", R"({"a": [1]})", true},
        {R"("array")", R"({"a": []})", true},
        {R"("array")", R"({"a": 1})", false},
        {R"("string")", R"({"a": [1, "x"]})", true},
        {R"(["bool", "null"])", R"({"a": null})", true},
        {R"("null")", R"({})", false},
        {R"("minKey")", R"({"a": {"$minKey": 1}})", true},
        {R"(-1)", R"({"a": {"$minKey": 1}})", true},
        {R"(127)", R"({"a": {"$maxKey": 1}})", true},
        {R"("objectId")", R"({"a": {"$oid": "000000000000000000000001"}})", true},
        {R"("date")", R"({"a": {"$date": "2020-01-01T00:00:00Z"}})", true},
        {R"(1.0)", R"({"a": 1.5})", true},
    };
    for (const auto& c : cases) {
        auto f = typeFilter(c.arg);
        auto m = uassertStatusOK(Matcher::parse(f.get()));
        auto d = bson::Doc::fromJsonOrDie(c.doc);
        EXPECT_EQ(m->matches(d.get()), c.expected) << c.arg << " doc " << c.doc;
    }
    struct ErrorCase {
        const char* arg;
        int code;
        const char* message;
    };
    std::vector<ErrorCase> errors = {
        {R"("foo")", 2, "Unknown type name alias: foo"},
        {R"(100)", 2, "Invalid numerical type code: 100"},
        {R"({})", 14, "type must be represented as a number or a string"},
    };
    for (const auto& c : errors) {
        auto f = typeFilter(c.arg);
        auto sw = Matcher::parse(f.get());
        ASSERT_FALSE(sw.isOK()) << c.arg;
        EXPECT_EQ(sw.getStatus().codeNumber(), c.code);
        EXPECT_EQ(sw.getStatus().reason(), c.message);
    }
}

TEST(MatcherTest, RegexOperator) {
    runTable({
        {R"({"a": {"$regex": "^ab"}})", R"({"a": "abc"})", true},
        {R"({"a": {"$regex": "^ab"}})", R"({"a": "cab"})", false},
        {R"({"a": {"$regex": "^AB", "$options": "i"}})", R"({"a": "abc"})", true},
        {R"({"a": {"$regularExpression": {"pattern": "^AB", "options": "i"}}})", R"({"a": "abc"})",
         true},
        {R"({"a": {"$regex": "^b", "$options": "m"}})", R"({"a": "a\nb"})", true},
        {R"({"a": {"$regex": "^b"}})", R"({"a": "a\nb"})", false},
        {R"({"a": {"$regex": "a.b", "$options": "s"}})", R"({"a": "a\nb"})", true},
        {R"({"a": {"$regex": "a b # comment", "$options": "x"}})", R"({"a": "ab"})", true},
        {R"({"a": {"$regex": "x"}})", R"({"a": ["q", "zx"]})", true},
        {R"({"a": {"$regex": "1"}})", R"({"a": 1})", false},
        {R"({"a": {"$regex": "^é"}})", R"({"a": "été"})", true},
        {R"({"a": {"$regex": "^.$"}})", R"({"a": "é"})", true},
        {R"({"a": {"$regex": "x"}})", R"({"a": {"$symbol": "xyz"}})", true},
        // A regex value matches an equal regex value.
        {R"({"a": {"$regularExpression": {"pattern": "x", "options": "i"}}})",
         R"({"a": {"$regularExpression": {"pattern": "x", "options": "i"}}})", true},
        {R"({"a": {"$eq": {"$regularExpression": {"pattern": "x", "options": ""}}}})",
         R"({"a": "x"})", false},
        {R"({"a": {"$not": {"$regularExpression": {"pattern": "^a", "options": ""}}}})",
         R"({"a": "b"})", true},
        {R"({"a": {"$not": {"$regex": "^a"}}})", R"({"a": "abc"})", false},
    });
}

TEST(MatcherTest, LogicalOperators) {
    runTable({
        {R"({"$and": [{"a": 1}, {"b": 2}]})", R"({"a": 1, "b": 2})", true},
        {R"({"$and": [{"a": 1}, {"b": 2}]})", R"({"a": 1, "b": 3})", false},
        {R"({"$or": [{"a": 1}, {"b": 2}]})", R"({"a": 0, "b": 2})", true},
        {R"({"$or": [{"a": 1}, {"b": 2}]})", R"({"a": 0, "b": 0})", false},
        {R"({"$nor": [{"a": 1}, {"b": 2}]})", R"({"a": 0, "b": 0})", true},
        {R"({"$nor": [{"a": 1}, {"b": 2}]})", R"({"a": 1})", false},
        {R"({"a": {"$not": {"$gt": 5}}})", R"({"a": 3})", true},
        {R"({"a": {"$not": {"$gt": 5}}})", R"({"a": 7})", false},
        {R"({"a": {"$not": {"$gt": 5}}})", R"({})", true},
        {R"({"a": {"$not": {"$gt": 5}}})", R"({"a": "x"})", true},
        {R"({"a": {"$not": {"$gt": 1, "$lt": 5}}})", R"({"a": 3})", false},
        {R"({"a": {"$not": {"$gt": 1, "$lt": 5}}})", R"({"a": 6})", true},
        {R"({"$alwaysTrue": 1})", R"({})", true},
        {R"({"$alwaysFalse": 1})", R"({})", false},
        {R"({"a": 1, "$comment": "hello"})", R"({"a": 1})", true},
        {R"({"$and": [{"$or": [{"a": 1}, {"a": 2}]}, {"$nor": [{"b": 1}]}]})",
         R"({"a": 2, "b": 2})", true},
    });
}

TEST(MatcherTest, ElemMatch) {
    runTable({
        {R"({"a": {"$elemMatch": {"b": 1, "c": 2}}})", R"({"a": [{"b": 1, "c": 2}]})", true},
        {R"({"a": {"$elemMatch": {"b": 1, "c": 2}}})", R"({"a": [{"b": 1}, {"c": 2}]})", false},
        {R"({"a.b": 1, "a.c": 2})", R"({"a": [{"b": 1}, {"c": 2}]})", true},
        {R"({"a": {"$elemMatch": {"b": {"$gt": 1}}}})", R"({"a": [{"b": 0}, {"b": 5}]})", true},
        {R"({"a": {"$elemMatch": {"b": 1}}})", R"({"a": {"b": 1}})", false},
        {R"({"a": {"$elemMatch": {"$eq": 3}}})", R"({"a": [1, 3]})", true},
        {R"({"a": {"$elemMatch": {"$not": {"$gt": 2}}}})", R"({"a": [3, 4]})", false},
        {R"({"a": {"$elemMatch": {"$not": {"$gt": 2}}}})", R"({"a": [3, 1]})", true},
        {R"({"a": {"$elemMatch": {"$in": [7]}}})", R"({"a": [1, 7]})", true},
        {R"({"a": {"$elemMatch": {"$or": [{"b": 1}, {"c": 1}]}}})", R"({"a": [{"c": 1}]})", true},
        {R"({"a": {"$elemMatch": {}}})", R"({"a": [1]})", false},
        {R"({"a": {"$elemMatch": {}}})", R"({"a": [{}]})", true},
        {R"({"a": {"$elemMatch": {"$elemMatch": {"$eq": 1}}}})", R"({"a": [[2], [1]]})", true},
        {R"({"a.b": {"$elemMatch": {"c": 1}}})", R"({"a": [{"b": [{"c": 1}]}]})", true},
        {R"({"a": {"$elemMatch": {"0": 1}}})", R"({"a": [[1]]})", true},
    });
}

TEST(MatcherTest, ElemMatchKeyForPositional) {
    struct Case {
        const char* filter;
        const char* doc;
        const char* key;  // null: none
    };
    std::vector<Case> cases = {
        {R"({"a": 2})", R"({"a": [1, 2, 3]})", "1"},
        {R"({"a.b": 5})", R"({"a": [{"b": 1}, {"b": 5}]})", "1"},
        {R"({"a.b": 6})", R"({"a": [{"b": [5]}, {"b": [5, 6]}]})", "1"},
        {R"({"a": {"$elemMatch": {"b": 2}}})", R"({"a": [{"b": 1}, {"b": 2}]})", "1"},
        {R"({"a": {"$gt": 2}})", R"({"a": [1, 5]})", "1"},
        {R"({"a": 1})", R"({"a": 1})", nullptr},
        {R"({"a": [1, 2]})", R"({"a": [1, 2]})", nullptr},
        {R"({"$or": [{"x": 1}, {"a": 3}]})", R"({"a": [1, 3]})", "1"},
    };
    for (const auto& c : cases) {
        MatchDetails d;
        EXPECT_TRUE(runMatch(c.filter, c.doc, &d)) << c.filter;
        if (c.key) {
            EXPECT_EQ(d.elemMatchKey.value_or("<none>"), c.key) << c.filter;
        } else {
            EXPECT_FALSE(d.elemMatchKey.has_value()) << c.filter;
        }
    }
}

TEST(MatcherTest, ParseErrors) {
    struct Case {
        const char* filter;
        int code;
        const char* message;  // exact when non-null
    };
    std::vector<Case> cases = {
        {R"({"a": {"$foo": 1}})", 2, "unknown operator: $foo"},
        {R"({"$foo": 1})", 2, "unknown top level operator: $foo"},
        {R"({"a": {"$regex": "("}})", 51091, nullptr},
        {R"({"a": {"$in": 5}})", 2, "$in needs an array"},
        {R"({"a": {"$nin": 5}})", 2, "$nin needs an array"},
        {R"({"a": {"$in": [{"$gt": 1}]}})", 2, "cannot nest $ under $in"},
        {R"({"a": {"$size": "x"}})", 2, "$size needs a number"},
        {R"({"a": {"$size": 1.5}})", 2, nullptr},
        {R"({"a": {"$size": -1}})", 2, nullptr},
        {R"({"a": {"$mod": 5}})", 2, "malformed mod, needs to be an array"},
        {R"({"a": {"$mod": [5]}})", 2, "malformed mod, not enough elements"},
        {R"({"a": {"$mod": [5, 1, 2]}})", 2, "malformed mod, too many elements"},
        {R"({"a": {"$mod": ["x", 1]}})", 2, "malformed mod, divisor not a number"},
        {R"({"a": {"$mod": [0, 1]}})", 2, "divisor cannot be 0"},
        {R"({"a": {"$not": 5}})", 2, "$not needs a regex or a document"},
        {R"({"a": {"$not": {}}})", 2, "$not cannot be empty"},
        {R"({"a": {"$elemMatch": 5}})", 2, "$elemMatch needs an Object"},
        {R"({"$and": []})", 2, "$and/$or/$nor must be a nonempty array"},
        {R"({"$or": []})", 2, "$and/$or/$nor must be a nonempty array"},
        {R"({"$nor": 1})", 2, "$nor must be an array"},
        {R"({"$or": [1]})", 2, "$or/$and/$nor entries need to be full objects"},
        {R"({"a": {"$all": 1}})", 2, "$all needs an array"},
        {R"({"a": {"$all": [{"$elemMatch": {"b": 1}}, 2]}})", 2,
         "$all/$elemMatch has to be consistent"},
        {R"({"a": {"$gt": {"$regularExpression": {"pattern": "x", "options": ""}}}})", 2, nullptr},
        {R"({"a": {"$ne": {"$regularExpression": {"pattern": "x", "options": ""}}}})", 2, nullptr},
        {R"({"a": {"$gt": 1, "b": 2}})", 2, "unknown operator: b"},
        {R"({"a": {"$eq": {"$undefined": true}}})", 2, nullptr},
        {R"({"$expr": {"$foo": 1}})", 168, nullptr},
    };
    for (const auto& c : cases) {
        auto f = bson::Doc::fromJsonOrDie(c.filter);
        auto sw = Matcher::parse(f.get());
        ASSERT_FALSE(sw.isOK()) << c.filter;
        EXPECT_EQ(sw.getStatus().codeNumber(), c.code)
            << c.filter << ": " << sw.getStatus().reason();
        if (c.message) {
            EXPECT_EQ(sw.getStatus().reason(), c.message) << c.filter;
        }
    }
}

TEST(MatcherTest, RegexOptionErrors) {
    // Built by hand: libbson's JSON reader folds {$regex, $options} into a regex value.
    bson::Doc f;
    bson_t sub;
    BSON_APPEND_DOCUMENT_BEGIN(f.mut(), "a", &sub);
    BSON_APPEND_UTF8(&sub, "$regex", "x");
    BSON_APPEND_UTF8(&sub, "$options", "z");
    bson_append_document_end(f.mut(), &sub);
    auto sw = Matcher::parse(f.get());
    ASSERT_FALSE(sw.isOK());
    EXPECT_EQ(sw.getStatus().codeNumber(), 51108);
    EXPECT_EQ(sw.getStatus().reason(), "invalid flag in regex options: z");

    bson::Doc g;
    BSON_APPEND_DOCUMENT_BEGIN(g.mut(), "a", &sub);
    BSON_APPEND_UTF8(&sub, "$regex", "^AB");
    BSON_APPEND_UTF8(&sub, "$options", "i");
    bson_append_document_end(g.mut(), &sub);
    auto m = uassertStatusOK(Matcher::parse(g.get()));
    auto d = bson::Doc::fromJsonOrDie(R"({"a": "abc"})");
    EXPECT_TRUE(m->matches(d.get()));

    bson::Doc h;
    BSON_APPEND_DOCUMENT_BEGIN(h.mut(), "a", &sub);
    BSON_APPEND_UTF8(&sub, "$options", "i");
    bson_append_document_end(h.mut(), &sub);
    auto hw = Matcher::parse(h.get());
    ASSERT_FALSE(hw.isOK());
    EXPECT_EQ(hw.getStatus().reason(), "$options needs a $regex");
}

TEST(MatcherTest, Expr) {
    runTable({
        {R"({"$expr": {"$gt": ["$a", "$b"]}})", R"({"a": 5, "b": 3})", true},
        {R"({"$expr": {"$gt": ["$a", "$b"]}})", R"({"a": 1, "b": 3})", false},
        {R"({"$expr": {"$eq": ["$a", 1]}, "b": 2})", R"({"a": 1, "b": 2})", true},
        {R"({"$expr": "$flag"})", R"({"flag": 1})", true},
        {R"({"$expr": "$flag"})", R"({"flag": 0})", false},
        {R"({"$expr": "$flag"})", R"({})", false},
        {R"({"$expr": {"$lt": [{"$size": "$arr"}, 3]}})", R"({"arr": [1, 2]})", true},
    });
}

TEST(MatcherTest, EqualityFields) {
    auto f = bson::Doc::fromJsonOrDie(
        R"({"a": 5, "b.c": "x", "d": {"$gt": 1}, "$and": [{"e": {"$eq": 2}}, {"f": {"$in": [3]}}],
            "g": {"$regularExpression": {"pattern": "x", "options": ""}}, "$or": [{"h": 1}, {"h": 2}]})");
    auto m = uassertStatusOK(Matcher::parse(f.get()));
    EXPECT_EQ(m->equalityFields().toJson(),
              bson::Doc::fromJsonOrDie(R"({"a": 5, "b.c": "x", "e": 2, "f": 3})").toJson());
    EXPECT_TRUE(m->upsertSeedFields().isOK());

    auto twice = bson::Doc::fromJsonOrDie(R"({"a": 1, "$and": [{"a": 2}]})");
    auto m2 = uassertStatusOK(Matcher::parse(twice.get()));
    auto sw = m2->upsertSeedFields();
    ASSERT_FALSE(sw.isOK());
    EXPECT_EQ(sw.getStatus().code(), ErrorCode::NotSingleValueField);
}

TEST(MatcherTest, IndexablePredicates) {
    auto f = bson::Doc::fromJsonOrDie(
        R"({"a": 5, "b": {"$gt": 1, "$lte": 9}, "c": {"$in": [3, 1, 3]}, "d": {"$ne": 1},
            "$or": [{"e": 1}], "f": [1, 2], "$and": [{"g": {"$lt": "z"}}]})");
    auto m = uassertStatusOK(Matcher::parse(f.get()));
    auto preds = m->indexablePredicates();
    ASSERT_EQ(preds.size(), 5u);
    EXPECT_EQ(preds[0].path, "a");
    EXPECT_EQ(preds[0].kind, PathPredicate::Kind::kEquality);
    EXPECT_EQ(preds[0].values[0].toString(), "5");
    EXPECT_EQ(preds[1].path, "b");
    EXPECT_EQ(preds[1].kind, PathPredicate::Kind::kRange);
    ASSERT_TRUE(preds[1].lower.has_value());
    EXPECT_FALSE(preds[1].lowerInclusive);
    EXPECT_FALSE(preds[1].upper.has_value());
    EXPECT_EQ(preds[2].path, "b");
    ASSERT_TRUE(preds[2].upper.has_value());
    EXPECT_TRUE(preds[2].upperInclusive);
    EXPECT_EQ(preds[3].path, "c");
    EXPECT_EQ(preds[3].kind, PathPredicate::Kind::kIn);
    ASSERT_EQ(preds[3].values.size(), 2u);
    EXPECT_EQ(preds[3].values[0].toString(), "1");
    EXPECT_EQ(preds[4].path, "g");
}

}  // namespace
}  // namespace halo::query

namespace halo::query {
namespace {

TEST(MatcherTest, SampleRateKeepsAboutThatShare) {
    EXPECT_TRUE(runMatch(R"({"$sampleRate": 1})", "{}"));
    EXPECT_FALSE(runMatch(R"({"$sampleRate": 0})", "{}"));
    int kept = 0;
    auto f = bson::Doc::fromJsonOrDie(R"({"$sampleRate": 0.5})");
    auto m = Matcher::parse(f.get());
    ASSERT_TRUE(m.isOK());
    auto d = bson::Doc::fromJsonOrDie("{}");
    for (int i = 0; i < 2000; ++i) kept += m.getValue()->matches(d.get()) ? 1 : 0;
    EXPECT_GT(kept, 800);
    EXPECT_LT(kept, 1200);
    for (const char* bad :
         {R"({"$sampleRate": 1.5})", R"({"$sampleRate": "x"})", R"({"$sampleRate": -0.1})"}) {
        auto b = bson::Doc::fromJsonOrDie(bad);
        auto sw = Matcher::parse(b.get());
        ASSERT_FALSE(sw.isOK()) << bad;
        EXPECT_EQ(sw.getStatus().code(), ErrorCode::BadValue) << bad;
    }
}

}  // namespace
}  // namespace halo::query
