#pragma once
// Internal: document surgery shared by the stages (dotted-path get/set without
// array traversal, value appends that skip "missing").
#include <bson/bson.h>

#include <string>
#include <string_view>
#include <vector>

#include "bson/doc.h"
#include "store/query/value.h"

namespace halo::aggregate {

/// Appends `v` under `key` unless it is missing.
void appendValue(bson_t* out, std::string_view key, const query::Value& v);

/// The value at a dotted path through embedded documents only (as $unwind and
/// mongod's Document::getNestedField read it); missing when absent or when a
/// non-document is on the way.
query::Value getPath(const bson_t* doc, const std::vector<std::string>& parts);

/// A copy of `doc` with the dotted path set to `v` (missing: removed). Field
/// order is kept; a new field is appended; absent or non-document intermediate
/// values are replaced by documents.
bson::Doc setPath(const bson_t* doc, const std::vector<std::string>& parts, const query::Value& v);

/// A document copy of a DOCUMENT value (empty document otherwise).
bson::Doc toDoc(const query::Value& v);

/// Array keys "0", "1", ... without allocation for small indexes.
class ArrayKey {
  public:
    const char* operator()(size_t i);

  private:
    char buf_[24];
};

}  // namespace halo::aggregate
