#pragma once
// Document writes and reads on one collection inside the caller's storage
// transaction: the record store table plus every index kept consistent.
// All functions throw DBException (DuplicateKey 11000, WriteConflict 112, ...)
// and must run inside a Txn on `s`.
#include <optional>

#include "bson/doc.h"
#include "store/storage/catalog.h"
#include "store/storage/error_with_info.h"

namespace halo::store::rs {

/// Inserts `doc` (which already has its _id) and its index keys; returns the record id.
int64_t insert(Session& s, const CollectionEntry& c, const bson_t* doc);
/// Inserts at a caller-chosen record id (the oplog keys entries by timestamp).
void insertWithRecordId(Session& s, const CollectionEntry& c, int64_t rid, const bson_t* doc);
/// Replaces the document at `rid`, moving only the index keys that changed.
void update(Session& s, const CollectionEntry& c, int64_t rid, const bson_t* oldDoc,
            const bson_t* newDoc);
/// Removes the document at `rid` and its index keys.
void remove(Session& s, const CollectionEntry& c, int64_t rid, const bson_t* oldDoc);
/// Reads the document at `rid`.
std::optional<bson::Doc> fetch(Session& s, const CollectionEntry& c, int64_t rid);
/// Finds the record id of the document whose _id equals `id` (via the _id index).
std::optional<int64_t> findById(Session& s, const CollectionEntry& c, const bson_value_t& id);

void insertIndexKeys(Session& s, const CollectionEntry& c, const IndexEntry& idx, const bson_t* doc,
                     int64_t rid);
void removeIndexKeys(Session& s, const CollectionEntry& c, const IndexEntry& idx, const bson_t* doc,
                     int64_t rid);

/// The keys `doc` has in `idx` (empty when a sparse/partial index skips it).
std::vector<std::string> indexKeys(const IndexEntry& idx, const bson_t* doc, bool* multikey);

/// DuplicateKey (11000) with the keyPattern/keyValue fields mongod adds to the
/// error: info() is {keyPattern: {...}, keyValue: {...}}.
class DuplicateKeyError : public ErrorWithInfo {
  public:
    using ErrorWithInfo::ErrorWithInfo;
};

/// mongod's duplicate key error for `doc` in `idx`.
[[noreturn]] void throwDuplicateKey(const CollectionEntry& c, const IndexEntry& idx,
                                    const bson_t* doc);

}  // namespace halo::store::rs
