#pragma once
// SortPattern: a parsed sort specification ({a: 1, "b.c": -1}) with mongod's
// semantics: a missing field sorts as null, an empty array before null; for an
// array-valued field an ascending sort uses the smallest element and a
// descending sort the largest (paths traverse arrays as the matcher does).
// Immutable after parse; all methods are const and thread-safe.
#include <bson/bson.h>

#include <memory>
#include <string>
#include <vector>

#include "bson/compare.h"
#include "bson/doc.h"
#include "common/status.h"
#include "store/query/value.h"

namespace halo::query {

/// The extracted sort-key values of one document, one per sort field.
/// Compute once per document with SortPattern::sortKey, then compare with
/// SortPattern::compareKeys.
struct SortKey {
    std::vector<Value> values;
};

class SortPattern {
  public:
    struct Field {
        std::string path;
        std::vector<std::string> parts;
        bool ascending = true;
    };

    /// Parses {field: 1|-1, ...}. Errors: 15975 "$sort key ordering must be 1 (for
    /// ascending) or -1 (for descending)", 15974 for non-numeric values, 17312 for
    /// objects other than {$meta}, BadValue for {$meta: ...} (not supported),
    /// 40352/16410/15998 for invalid field paths. Strings compare under `coll`
    /// (a collation; null: binary).
    static StatusWith<SortPattern> parse(const bson_t* spec,
                                         std::shared_ptr<const bson::StringComparator> coll = {});

    /// Three-way comparison (<0, 0, >0) of two documents in sort order.
    int compare(const bson_t* a, const bson_t* b) const;

    /// The document's key values (ascending: min, descending: max over arrays).
    SortKey sortKey(const bson_t* doc) const;
    /// Three-way comparison of precomputed keys.
    int compareKeys(const SortKey& a, const SortKey& b) const;
    /// The key as a document {"": v1, "": v2, ...} (for explain/cursors).
    bson::Doc sortKeyDoc(const bson_t* doc) const;

    const std::vector<Field>& fields() const { return fields_; }
    bool empty() const { return fields_.empty(); }

    const bson::StringComparator* collator() const { return coll_.get(); }

  private:
    std::vector<Field> fields_;
    std::shared_ptr<const bson::StringComparator> coll_;
};

}  // namespace halo::query
