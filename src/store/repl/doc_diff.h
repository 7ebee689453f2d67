#pragma once
// The difference between two versions of a document as a change stream's
// updateDescription reports it: updatedFields (dotted path -> new value; nested
// documents present in both versions are compared field by field), removedFields
// and truncatedArrays (arrays that only lost trailing elements).
#include "bson/doc.h"

namespace halo::store {

/// Returns {u: {path: value, ...}, d: {path: false, ...}, t: [{field, newSize}],
/// p: {path: [field, ...]}}, the body stored as an update's oplog `diff` (empty
/// sections omitted). `p` spells out the paths a dotted string reads two ways (a
/// numeric field name, a dot inside a field name).
bson::Doc diffDocuments(const bson_t* before, const bson_t* after);

/// Turns a stored diff into {updatedFields, removedFields, truncatedArrays} and,
/// with `disambiguatedPaths` (showExpandedEvents, as mongod 6.1+), disambiguatedPaths.
void appendUpdateDescription(bson_t* out, const bson_t* diff, bool disambiguatedPaths = false);

}  // namespace halo::store
