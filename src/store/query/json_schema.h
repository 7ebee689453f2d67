#pragma once
// $jsonSchema: MongoDB's JSON Schema (draft 4 subset plus bsonType), as mongod
// 3.6+ evaluates it in queries and collection validators.
//
//  - parse() refuses what mongod refuses, with its codes and messages:
//    unsupported keywords ($ref, $schema, default, definitions, format, id)
//    "is not currently supported" (FailedToParse), unknown keywords, duplicate
//    keywords, wrongly typed arguments (TypeMismatch), empty required/enum, ...
//    title and description must be strings and do not affect matching.
//  - A keyword about one type (minimum for numbers, minLength for strings,
//    items for arrays, properties for objects, ...) passes values of other
//    types; `bsonType`/`type` restricts the type. Property values are never
//    traversed as arrays (JSON semantics, unlike query paths).
//  - explain() describes why a document fails in mongod 5.0+'s errInfo shape:
//    {operatorName: "$jsonSchema", schemaRulesNotSatisfied: [{operatorName:
//    "properties", propertiesNotSatisfied: [{propertyName, details: [...]}]},
//    {operatorName: "required", specifiedAs, missingProperties}, ...]}.
//
// A parsed schema is immutable; matches() and explain() are const and may run
// concurrently. No method throws except parse errors, returned as Status.
#include <bson/bson.h>

#include <memory>

#include "bson/doc.h"
#include "common/status.h"

namespace halo::query {

struct SchemaNode;  // internal (json_schema.cpp)

class JsonSchema {
  public:
    ~JsonSchema();
    JsonSchema(JsonSchema&&) noexcept;

    /// Parses the argument of $jsonSchema.
    static StatusWith<std::unique_ptr<JsonSchema>> parse(const bson_t* schema);

    /// True when the document satisfies the schema.
    bool matches(const bson_t* doc) const;

    /// The error details for a document that does not match:
    /// {operatorName: "$jsonSchema", [title], [description], schemaRulesNotSatisfied: [...]}.
    bson::Doc explain(const bson_t* doc) const;

  private:
    JsonSchema() = default;
    std::unique_ptr<SchemaNode> root_;
};

}  // namespace halo::query
