#pragma once
// Why a document fails a collection validator, in the shape mongod 5.0+ puts
// in a DocumentValidationFailure's errInfo.details: the failing operators with
// the operator name, how it was specified and the values considered, e.g.
//   {operatorName: "$and", clausesNotSatisfied: [{index: 1, details:
//     {operatorName: "$gt", specifiedAs: {qty: {$gt: 0}}, reason: "comparison failed",
//      consideredValue: -1}}]}
// Logical operators list the clauses that (did not) hold; $not/$nor/$ne/$nin
// report in the inverted sense ("comparison succeeded"); $jsonSchema delegates
// to JsonSchema::explain. The filter must have been parsed with annotations.
// Pure and const: no storage, no throwing (an $expr that throws is reported).
#include <bson/bson.h>

#include "bson/doc.h"

namespace halo::query {

class Matcher;

/// The `details` for `doc`, which does not match `validator`.
bson::Doc validationErrorDetails(const Matcher& validator, const bson_t* doc);

}  // namespace halo::query
