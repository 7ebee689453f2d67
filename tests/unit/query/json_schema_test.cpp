#include "store/query/json_schema.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "store/query/matcher.h"

namespace halo::query {
namespace {

struct SchemaCase {
    const char* schema;
    const char* doc;
    bool expected;
};

bool schemaMatches(const char* schema, const char* doc) {
    auto s = bson::Doc::fromJsonOrDie(schema);
    auto sw = JsonSchema::parse(s.get());
    EXPECT_TRUE(sw.isOK()) << schema << ": " << sw.getStatus().toString();
    if (!sw.isOK()) return false;
    auto d = bson::Doc::fromJsonOrDie(doc);
    return sw.getValue()->matches(d.get());
}

void runTable(const std::vector<SchemaCase>& cases) {
    for (const auto& c : cases)
        EXPECT_EQ(schemaMatches(c.schema, c.doc), c.expected)
            << "schema " << c.schema << " doc " << c.doc;
}

TEST(JsonSchemaTest, TypesAndRequired) {
    runTable({
        {R"({"bsonType": "object"})", R"({"a": 1})", true},
        {R"({"bsonType": "string"})", R"({"a": 1})", false},  // documents are objects
        {R"({"required": ["a", "b"]})", R"({"a": 1, "b": null})", true},
        {R"({"required": ["a", "b"]})", R"({"a": 1})", false},
        {R"({"properties": {"a": {"bsonType": "int"}}})", R"({"a": 1})", true},
        {R"({"properties": {"a": {"bsonType": "int"}}})", R"({"a": 1.5})", false},
        {R"({"properties": {"a": {"bsonType": "int"}}})", R"({"b": "x"})", true},  // absent
        {R"({"properties": {"a": {"bsonType": ["int", "string"]}}})", R"({"a": "x"})", true},
        {R"({"properties": {"a": {"bsonType": "number"}}})", R"({"a": {"$numberLong": "5"}})",
         true},
        {R"({"properties": {"a": {"type": "number"}}})", R"({"a": 2.5})", true},
        {R"({"properties": {"a": {"type": "boolean"}}})", R"({"a": true})", true},
        {R"({"properties": {"a": {"type": "array"}}})", R"({"a": [1]})", true},
        {R"({"properties": {"a": {"type": "null"}}})", R"({"a": null})", true},
        // JSON semantics: an array property is not traversed.
        {R"({"properties": {"a": {"bsonType": "int"}}})", R"({"a": [1, 2]})", false},
        {R"({"properties": {"a": {"properties": {"b": {"bsonType": "string"}}}}})",
         R"({"a": {"b": "x"}})", true},
        {R"({"properties": {"a": {"properties": {"b": {"bsonType": "string"}}}}})",
         R"({"a": {"b": 1}})", false},
        {R"({"properties": {"a": {"required": ["b"]}}})", R"({"a": 5})", true},  // not an object
        {R"({"properties": {"a": {"required": ["b"]}}})", R"({"a": {}})", false},
    });
}

TEST(JsonSchemaTest, ScalarKeywords) {
    runTable({
        {R"({"properties": {"n": {"minimum": 5}}})", R"({"n": 5})", true},
        {R"({"properties": {"n": {"minimum": 5}}})", R"({"n": 4.9})", false},
        {R"({"properties": {"n": {"minimum": 5, "exclusiveMinimum": true}}})", R"({"n": 5})",
         false},
        {R"({"properties": {"n": {"maximum": 5}}})", R"({"n": {"$numberLong": "5"}})", true},
        {R"({"properties": {"n": {"maximum": 5, "exclusiveMaximum": true}}})", R"({"n": 5})",
         false},
        {R"({"properties": {"n": {"minimum": 5}}})", R"({"n": "str"})", true},  // other type
        {R"({"properties": {"n": {"multipleOf": 3}}})", R"({"n": 9})", true},
        {R"({"properties": {"n": {"multipleOf": 3}}})", R"({"n": 10})", false},
        {R"({"properties": {"s": {"minLength": 2, "maxLength": 3}}})", R"({"s": "ab"})", true},
        {R"({"properties": {"s": {"minLength": 2}}})", R"({"s": "a"})", false},
        {R"({"properties": {"s": {"maxLength": 3}}})", R"({"s": "abcd"})", false},
        // Length counts code points, not bytes.
        {R"({"properties": {"s": {"maxLength": 2}}})", R"({"s": "\u00e9\u00e9"})", true},
        {R"({"properties": {"s": {"pattern": "^a+$"}}})", R"({"s": "aaa"})", true},
        {R"({"properties": {"s": {"pattern": "^a+$"}}})", R"({"s": "aab"})", false},
        {R"({"properties": {"s": {"pattern": "b"}}})", R"({"s": "abc"})", true},  // unanchored
        {R"({"properties": {"e": {"enum": ["x", 2, {"a": 1, "b": 2}]}}})", R"({"e": 2.0})", true},
        {R"({"properties": {"e": {"enum": ["x", 2, {"a": 1, "b": 2}]}}})",
         R"({"e": {"b": 2, "a": 1}})", true},  // field order ignored
        {R"({"properties": {"e": {"enum": ["x", 2]}}})", R"({"e": "y"})", false},
    });
}

TEST(JsonSchemaTest, ArrayKeywords) {
    runTable({
        {R"({"properties": {"a": {"minItems": 2, "maxItems": 3}}})", R"({"a": [1, 2]})", true},
        {R"({"properties": {"a": {"minItems": 2}}})", R"({"a": [1]})", false},
        {R"({"properties": {"a": {"maxItems": 1}}})", R"({"a": [1, 2]})", false},
        {R"({"properties": {"a": {"uniqueItems": true}}})", R"({"a": [1, 2]})", true},
        {R"({"properties": {"a": {"uniqueItems": true}}})", R"({"a": [1, 1.0]})", false},
        {R"({"properties": {"a": {"items": {"bsonType": "int"}}}})", R"({"a": [1, 2]})", true},
        {R"({"properties": {"a": {"items": {"bsonType": "int"}}}})", R"({"a": [1, "x"]})", false},
        {R"({"properties": {"a": {"items": [{"bsonType": "int"}, {"bsonType": "string"}]}}})",
         R"({"a": [1, "x", true]})", true},
        {R"({"properties": {"a": {"items": [{"bsonType": "int"}], "additionalItems": false}}})",
         R"({"a": [1, 2]})", false},
        {R"({"properties": {"a": {"items": [{"bsonType": "int"}],
              "additionalItems": {"bsonType": "string"}}}})",
         R"({"a": [1, "x", "y"]})", true},
    });
}

TEST(JsonSchemaTest, ObjectKeywords) {
    runTable({
        {R"({"properties": {"_id": {}, "a": {}}, "additionalProperties": false})",
         R"({"_id": 1, "a": 2})", true},
        // _id counts as an additional property unless listed.
        {R"({"properties": {"a": {}}, "additionalProperties": false})", R"({"_id": 1, "a": 2})",
         false},
        {R"({"additionalProperties": {"bsonType": "int"}})", R"({"a": 1, "b": 2})", true},
        {R"({"additionalProperties": {"bsonType": "int"}})", R"({"a": 1, "b": "x"})", false},
        {R"({"patternProperties": {"^x_": {"bsonType": "string"}}})", R"({"x_a": "s", "y": 1})",
         true},
        {R"({"patternProperties": {"^x_": {"bsonType": "string"}}})", R"({"x_a": 1})", false},
        {R"({"patternProperties": {"^x_": {}}, "additionalProperties": false})", R"({"x_a": 1})",
         true},
        {R"({"minProperties": 2})", R"({"a": 1})", false},
        {R"({"maxProperties": 1})", R"({"a": 1, "b": 2})", false},
        {R"({"dependencies": {"card": ["billing"]}})", R"({"card": 1, "billing": 2})", true},
        {R"({"dependencies": {"card": ["billing"]}})", R"({"card": 1})", false},
        {R"({"dependencies": {"card": ["billing"]}})", R"({"billing": 1})", true},
        {R"({"dependencies": {"card": {"required": ["billing"]}}})", R"({"card": 1})", false},
    });
}

TEST(JsonSchemaTest, LogicalKeywords) {
    runTable({
        {R"({"properties": {"a": {"allOf": [{"minimum": 1}, {"maximum": 3}]}}})", R"({"a": 2})",
         true},
        {R"({"properties": {"a": {"allOf": [{"minimum": 1}, {"maximum": 3}]}}})", R"({"a": 4})",
         false},
        {R"({"properties": {"a": {"anyOf": [{"bsonType": "int"}, {"bsonType": "string"}]}}})",
         R"({"a": true})", false},
        {R"({"properties": {"a": {"oneOf": [{"minimum": 1}, {"minimum": 2}]}}})", R"({"a": 1})",
         true},
        {R"({"properties": {"a": {"oneOf": [{"minimum": 1}, {"minimum": 2}]}}})", R"({"a": 3})",
         false},  // both
        {R"({"properties": {"a": {"not": {"bsonType": "string"}}}})", R"({"a": "x"})", false},
        {R"({"title": "t", "description": "d", "properties": {"a": {"description": "x"}}})",
         R"({"a": 1})", true},
    });
}

void expectParseError(const char* schema, ErrorCode code, const std::string& reason = "") {
    auto s = bson::Doc::fromJsonOrDie(schema);
    auto sw = JsonSchema::parse(s.get());
    ASSERT_FALSE(sw.isOK()) << schema;
    EXPECT_EQ(sw.getStatus().code(), code) << schema << ": " << sw.getStatus().toString();
    if (!reason.empty()) {
        EXPECT_EQ(sw.getStatus().reason(), reason) << schema;
    }
}

TEST(JsonSchemaTest, ParseErrors) {
    expectParseError(R"({"$ref": "#/a"})", ErrorCode::FailedToParse,
                     "$jsonSchema keyword '$ref' is not currently supported");
    expectParseError(R"({"properties": {"a": {"format": "email"}}})", ErrorCode::FailedToParse,
                     "$jsonSchema keyword 'format' is not currently supported");
    expectParseError(R"({"foo": 1})", ErrorCode::FailedToParse, "Unknown $jsonSchema keyword: foo");
    expectParseError(R"({"type": "integer"})", ErrorCode::FailedToParse);
    expectParseError(R"({"type": "object", "bsonType": "object"})", ErrorCode::FailedToParse);
    expectParseError(R"({"bsonType": "nope"})", ErrorCode::BadValue,
                     "Unknown type name alias: nope");
    expectParseError(R"({"bsonType": 3})", ErrorCode::TypeMismatch);
    expectParseError(R"({"required": []})", ErrorCode::FailedToParse);
    expectParseError(R"({"required": ["a", "a"]})", ErrorCode::FailedToParse);
    expectParseError(R"({"required": "a"})", ErrorCode::TypeMismatch);
    expectParseError(R"({"properties": {"a": 1}})", ErrorCode::TypeMismatch);
    expectParseError(R"({"minimum": "x"})", ErrorCode::TypeMismatch);
    expectParseError(R"({"exclusiveMinimum": true})", ErrorCode::FailedToParse);
    expectParseError(R"({"minLength": -1})", ErrorCode::FailedToParse);
    expectParseError(R"({"minLength": 1.5})", ErrorCode::FailedToParse);
    expectParseError(R"({"enum": []})", ErrorCode::FailedToParse);
    expectParseError(R"({"enum": [1, 1]})", ErrorCode::FailedToParse);
    expectParseError(R"({"anyOf": []})", ErrorCode::BadValue);
    expectParseError(R"({"title": 5})", ErrorCode::TypeMismatch);
    expectParseError(R"({"multipleOf": 0})", ErrorCode::FailedToParse);
    expectParseError(R"({"pattern": "("})", ErrorCode::Location51091);
}

std::string explainOf(const char* schema, const char* doc) {
    auto s = bson::Doc::fromJsonOrDie(schema);
    auto parsed = JsonSchema::parse(s.get());
    EXPECT_TRUE(parsed.isOK());
    auto d = bson::Doc::fromJsonOrDie(doc);
    EXPECT_FALSE(parsed.getValue()->matches(d.get()));
    return parsed.getValue()->explain(d.get()).toJson();
}

std::string json(const char* s) {
    return bson::Doc::fromJsonOrDie(s).toJson();
}

TEST(JsonSchemaTest, ExplainShapes) {
    EXPECT_EQ(explainOf(R"({"required": ["name", "age"], "properties": {"age": {"bsonType": "int",
                     "minimum": 0, "description": "a whole number"}}})",
                        R"({"_id": 1, "age": {"$numberDouble": "-1.5"}})"),
              json(R"({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
            {"operatorName": "properties", "propertiesNotSatisfied": [
               {"propertyName": "age", "description": "a whole number", "details": [
                 {"operatorName": "minimum", "specifiedAs": {"minimum": 0},
                  "reason": "comparison failed", "consideredValue": {"$numberDouble": "-1.5"}},
                 {"operatorName": "bsonType", "specifiedAs": {"bsonType": "int"},
                  "reason": "type did not match", "consideredValue": {"$numberDouble": "-1.5"},
                  "consideredType": "double"}]}]},
            {"operatorName": "required", "specifiedAs": {"required": ["name", "age"]},
             "missingProperties": ["name"]}]})"));
    EXPECT_EQ(explainOf(R"({"properties": {"_id": {}}, "additionalProperties": false})",
                        R"({"_id": 1, "x": 2})"),
              json(R"({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                  {"operatorName": "additionalProperties",
                   "specifiedAs": {"additionalProperties": false},
                   "additionalProperties": ["x"]}]})"));
    EXPECT_EQ(explainOf(R"({"properties": {"t": {"enum": ["a", "b"]}}})", R"({"t": "c"})"),
              json(R"({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                  {"operatorName": "properties", "propertiesNotSatisfied": [
                     {"propertyName": "t", "details": [
                       {"operatorName": "enum", "specifiedAs": {"enum": ["a", "b"]},
                        "reason": "value was not found in enum", "consideredValue": "c"}]}]}]})"));
    EXPECT_EQ(explainOf(R"({"anyOf": [{"required": ["a"]}, {"required": ["b"]}]})", R"({})"),
              json(R"({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                  {"operatorName": "anyOf", "schemasNotSatisfied": [
                    {"index": 0, "details": [{"operatorName": "required",
                      "specifiedAs": {"required": ["a"]}, "missingProperties": ["a"]}]},
                    {"index": 1, "details": [{"operatorName": "required",
                      "specifiedAs": {"required": ["b"]}, "missingProperties": ["b"]}]}]}]})"));
}

TEST(JsonSchemaTest, ExplainArraysPatternsAndOneOf) {
    EXPECT_EQ(
        explainOf(R"({"properties": {"a": {"items": {"bsonType": "int"}}}})", R"({"a": [1, "x"]})"),
        json(R"({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                  {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                      {"operatorName": "items",
                       "reason": "At least one item did not match the sub-schema",
                       "itemIndex": 1, "details": [
                         {"operatorName": "bsonType", "specifiedAs": {"bsonType": "int"},
                          "reason": "type did not match", "consideredValue": "x",
                          "consideredType": "string"}]}]}]}]})"));
    EXPECT_EQ(explainOf(R"({"patternProperties": {"^n_": {"minimum": 0}}})",
                        R"({"n_a": 1, "n_b": -1, "n_c": -2})"),
              json(R"({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                  {"operatorName": "patternProperties", "details": [
                    {"propertyName": "n_b", "regexMatched": "^n_", "details": [
                      {"operatorName": "minimum", "specifiedAs": {"minimum": 0},
                       "reason": "comparison failed", "consideredValue": -1}]}]}]})"));
    EXPECT_EQ(explainOf(R"({"oneOf": [{"required": ["a"]}, {"minProperties": 1}]})", R"({"a": 1})"),
              json(R"({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                  {"operatorName": "oneOf", "reason": "more than one subschema matched",
                   "matchingSchemaIndexes": [0, 1]}]})"));
    EXPECT_EQ(explainOf(R"({"properties": {"a": {"items": [{}, {"bsonType": "string"}],
                           "additionalItems": false}}})",
                        R"({"a": [1, 2, 3]})"),
              json(R"({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                  {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                      {"operatorName": "items", "details": [{"itemIndex": 1, "details": [
                        {"operatorName": "bsonType", "specifiedAs": {"bsonType": "string"},
                         "reason": "type did not match", "consideredValue": 2,
                         "consideredType": "int"}]}]},
                      {"operatorName": "additionalItems", "specifiedAs": {"additionalItems": false},
                       "reason": "found additional items", "additionalItems": [3]}]}]}]})"));
}

TEST(JsonSchemaTest, InsideQueries) {
    auto f = bson::Doc::fromJsonOrDie(R"({"$jsonSchema": {"required": ["a"]}, "b": {"$gt": 1}})");
    auto m = Matcher::parse(f.get());
    ASSERT_TRUE(m.isOK()) << m.getStatus().toString();
    EXPECT_TRUE(m.getValue()->matches(bson::Doc::fromJsonOrDie(R"({"a": 1, "b": 2})").get()));
    EXPECT_FALSE(m.getValue()->matches(bson::Doc::fromJsonOrDie(R"({"b": 2})").get()));
    auto bad = bson::Doc::fromJsonOrDie(R"({"$jsonSchema": 1})");
    auto e = Matcher::parse(bad.get());
    ASSERT_FALSE(e.isOK());
    EXPECT_EQ(e.getStatus().code(), ErrorCode::TypeMismatch);
}

}  // namespace
}  // namespace halo::query
