#include "store/query/document_validator.h"

#include <gtest/gtest.h>

#include <string>

namespace halo::query {
namespace {

std::unique_ptr<DocumentValidator> parse(const char* validator) {
    auto v = bson::Doc::fromJsonOrDie(validator);
    auto sw = DocumentValidator::parse(v.get());
    EXPECT_TRUE(sw.isOK()) << validator << ": " << sw.getStatus().toString();
    return sw.isOK() ? std::move(sw.getValue()) : nullptr;
}

std::string json(const char* s) {
    return bson::Doc::fromJsonOrDie(s).toJson();
}

/// The errInfo for a document that must fail the validator.
std::string errInfo(const char* validator, const char* doc) {
    auto v = parse(validator);
    if (!v) return "";
    auto d = bson::Doc::fromJsonOrDie(doc);
    EXPECT_FALSE(v->matches(d.get())) << validator << " " << doc;
    return v->errInfo(d.get()).toJson();
}

TEST(DocumentValidatorTest, LeafOperators) {
    EXPECT_EQ(errInfo(R"({"qty": {"$gt": 0}})", R"({"_id": 1, "qty": -1})"),
              json(R"({"failingDocumentId": 1, "details": {"operatorName": "$gt",
                  "specifiedAs": {"qty": {"$gt": 0}}, "reason": "comparison failed",
                  "consideredValue": -1}})"));
    EXPECT_EQ(errInfo(R"({"qty": {"$gt": 0}})", R"({"_id": 1})"),
              json(R"({"failingDocumentId": 1, "details": {"operatorName": "$gt",
                  "specifiedAs": {"qty": {"$gt": 0}}, "reason": "field was missing"}})"));
    EXPECT_EQ(errInfo(R"({"a": 1})", R"({"_id": "x", "a": [2, 3]})"),
              json(R"({"failingDocumentId": "x", "details": {"operatorName": "$eq",
                  "specifiedAs": {"a": 1}, "reason": "comparison failed",
                  "consideredValues": [2, 3]}})"));
    EXPECT_EQ(errInfo(R"({"s": {"$type": "string"}})", R"({"_id": 1, "s": 5})"),
              json(R"({"failingDocumentId": 1, "details": {"operatorName": "$type",
                  "specifiedAs": {"s": {"$type": "string"}}, "reason": "type did not match",
                  "consideredValue": 5, "consideredType": "int"}})"));
    EXPECT_EQ(errInfo(R"({"e": {"$regex": "^a"}})", R"({"_id": 1, "e": 5})"),
              json(R"({"failingDocumentId": 1, "details": {"operatorName": "$regex",
                  "specifiedAs": {"e": {"$regex": "^a"}}, "reason": "type did not match",
                  "consideredType": "int", "expectedTypes": ["regex", "string", "symbol"],
                  "consideredValue": 5}})"));
    EXPECT_EQ(errInfo(R"({"a": {"$ne": 1}})", R"({"_id": 1, "a": 1})"),
              json(R"({"failingDocumentId": 1, "details": {"operatorName": "$ne",
                  "specifiedAs": {"a": {"$ne": 1}}, "reason": "comparison succeeded",
                  "consideredValue": 1}})"));
    EXPECT_EQ(errInfo(R"({"a": {"$exists": false}})", R"({"_id": 1, "a": 1})"),
              json(R"({"failingDocumentId": 1, "details": {"operatorName": "$exists",
                  "specifiedAs": {"a": {"$exists": false}}, "reason": "path does exist"}})"));
}

TEST(DocumentValidatorTest, LogicalOperators) {
    EXPECT_EQ(errInfo(R"({"a": 1, "b": {"$lt": 5}})", R"({"_id": 1, "a": 1, "b": 7})"),
              json(R"({"failingDocumentId": 1, "details": {"operatorName": "$and",
                  "clausesNotSatisfied": [{"index": 1, "details": {"operatorName": "$lt",
                    "specifiedAs": {"b": {"$lt": 5}}, "reason": "comparison failed",
                    "consideredValue": 7}}]}})"));
    EXPECT_EQ(errInfo(R"({"$or": [{"a": {"$exists": true}}, {"b": {"$in": [1, 2]}}]})",
                      R"({"_id": 1, "b": 3})"),
              json(R"({"failingDocumentId": 1, "details": {"operatorName": "$or",
            "clausesNotSatisfied": [
              {"index": 0, "details": {"operatorName": "$exists",
                "specifiedAs": {"a": {"$exists": true}}, "reason": "path does not exist"}},
              {"index": 1, "details": {"operatorName": "$in", "specifiedAs": {"b": {"$in": [1, 2]}},
                "reason": "no matching value found in array", "consideredValue": 3}}]}})"));
    EXPECT_EQ(errInfo(R"({"a": {"$not": {"$gt": 5}}})", R"({"_id": 1, "a": 7})"),
              json(R"({"failingDocumentId": 1, "details": {"operatorName": "$not",
                  "specifiedAs": {"a": {"$not": {"$gt": 5}}}, "details": {"operatorName": "$gt",
                    "specifiedAs": {"a": {"$gt": 5}}, "reason": "comparison succeeded",
                    "consideredValue": 7}}})"));
    EXPECT_EQ(errInfo(R"({"$nor": [{"a": 1}, {"b": 1}]})", R"({"_id": 1, "a": 1, "b": 2})"),
              json(R"({"failingDocumentId": 1, "details": {"operatorName": "$nor",
                  "clausesSatisfied": [{"index": 0, "details": {"operatorName": "$eq",
                    "specifiedAs": {"a": 1}, "reason": "comparison succeeded",
                    "consideredValue": 1}}]}})"));
    EXPECT_EQ(errInfo(R"({"$expr": {"$gt": ["$a", "$b"]}})", R"({"_id": 1, "a": 1, "b": 2})"),
              json(R"({"failingDocumentId": 1, "details": {"operatorName": "$expr",
                  "specifiedAs": {"$expr": {"$gt": ["$a", "$b"]}},
                  "reason": "expression did not match", "expressionResult": false}})"));
}

TEST(DocumentValidatorTest, JsonSchemaInsideAValidator) {
    EXPECT_EQ(errInfo(R"({"$jsonSchema": {"required": ["a"]}})", R"({"_id": 1})"),
              json(R"({"failingDocumentId": 1, "details": {"operatorName": "$jsonSchema",
                  "schemaRulesNotSatisfied": [{"operatorName": "required",
                    "specifiedAs": {"required": ["a"]}, "missingProperties": ["a"]}]}})"));
}

TEST(DocumentValidatorTest, ValidatorsRefuseWhatMongodRefuses) {
    struct Bad {
        const char* validator;
        ErrorCode code;
    };
    for (const auto& b : std::vector<Bad>{
             {R"({"$where": "this.a"})", ErrorCode::BadValue},
             {R"({"$text": {"$search": "x"}})", ErrorCode::BadValue},
             {R"({"loc": {"$near": [0, 0]}})", ErrorCode::BadValue},
             {R"({"a": {"$foo": 1}})", ErrorCode::BadValue},
             {R"({"a": {"$elemMatch": {"$expr": {"$eq": [1, 1]}}}})", ErrorCode::BadValue},
             {R"({"$jsonSchema": {"properties": {"a": {"$ref": "#"}}}})", ErrorCode::FailedToParse},
         }) {
        auto v = bson::Doc::fromJsonOrDie(b.validator);
        auto sw = DocumentValidator::parse(v.get());
        ASSERT_FALSE(sw.isOK()) << b.validator;
        EXPECT_EQ(sw.getStatus().code(), b.code) << b.validator << sw.getStatus().toString();
        EXPECT_NE(sw.getStatus().reason().find("Parsing of collection validator failed"),
                  std::string::npos);
    }
}

TEST(DocumentValidatorTest, Options) {
    auto opts = bson::Doc::fromJsonOrDie(
        R"({"validator": {"a": 1}, "validationLevel": "moderate", "validationAction": "warn"})");
    auto cv = CollectionValidation::fromOptions(opts.get(), "create");
    ASSERT_TRUE(cv.isOK());
    EXPECT_EQ(cv.getValue().level, ValidationLevel::kModerate);
    EXPECT_EQ(cv.getValue().action, ValidationAction::kWarn);
    EXPECT_TRUE(cv.getValue().active());

    auto empty = bson::Doc::fromJsonOrDie(R"({"validator": {}})");
    EXPECT_FALSE(CollectionValidation::fromOptions(empty.get(), "collMod").getValue().active());

    auto badLevel = bson::Doc::fromJsonOrDie(R"({"validationLevel": "sometimes"})");
    auto e = CollectionValidation::fromOptions(badLevel.get(), "collMod");
    ASSERT_FALSE(e.isOK());
    EXPECT_EQ(e.getStatus().code(), ErrorCode::BadValue);
    EXPECT_EQ(e.getStatus().reason(),
              "Enumeration value 'sometimes' for field 'collMod.validationLevel' is not a valid "
              "value.");
    auto badType = bson::Doc::fromJsonOrDie(R"({"validator": 5})");
    EXPECT_EQ(CollectionValidation::fromOptions(badType.get(), "create").getStatus().code(),
              ErrorCode::TypeMismatch);
}

}  // namespace
}  // namespace halo::query
