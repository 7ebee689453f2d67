#pragma once
// halo_update: MongoDB 6.0/7.0 update semantics over libbson documents.
//
// UpdateDriver parses one update (a replacement document or an operator-style
// update: $set $unset $inc $mul $min $max $rename $setOnInsert $currentDate
// $push{$each,$slice,$sort,$position} $addToSet{$each} $pull $pullAll $pop $bit,
// with "$", "$[]" and "$[id]" + arrayFilters) once, then applies it to any
// number of documents. Errors carry mongod's codes and messages.
//
// Contracts:
//  - parse() never throws; apply()/applyUpsert()/seedUpsertDocument() throw
//    DBException for errors that end the operation (TypeMismatch,
//    PathNotViable, ImmutableField, ...); tryApply() returns them as a Status.
//  - A parsed UpdateDriver is immutable and apply() is const: one driver may be
//    shared by threads applying it to different documents.
//  - No clock is read: $currentDate uses ApplyOptions::nowMillis.
//  - The result keeps _id first; a document without _id (upsert whose query
//    has no _id equality) is returned without one: the caller generates it.
//  - Pipeline-style updates (arrays) are not handled here.
#include <bson/bson.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bson/doc.h"
#include "common/status.h"

namespace halo::query {
class Collator;
}  // namespace halo::query

namespace halo::update {

class UpdateTree;
class Element;

struct ApplyOptions {
    /// True when applying to a document being inserted by an upsert: $setOnInsert applies.
    bool isUpsertInsert = false;
    /// The array index the query matched (MatchDetails::elemMatchKey), for "$".
    std::optional<std::string> positionalIndex;
    /// Fill UpdateResult::description (costs copies of modified arrays).
    bool computeDescription = false;
    /// "Now" for $currentDate, in milliseconds since the epoch (timestamps use now/1000, inc 1).
    int64_t nowMillis = 0;
};

/// What changed, as a change stream's updateDescription reports it (approximate for
/// array operators: changed indexes plus truncation).
struct UpdateDescription {
    bson::Doc updatedFields;                                        // {"a.b": <new value>, ...}
    std::vector<std::string> removedFields;                         // dotted paths
    std::vector<std::pair<std::string, uint32_t>> truncatedArrays;  // {field, newSize}
};

struct UpdateResult {
    bson::Doc newDoc;
    /// False for no-ops ($set to the current value, $unset of a missing field, ...): nModified 0.
    bool modified = false;
    /// Set for operator updates when computeDescription and modified; never for replacements.
    std::optional<UpdateDescription> description;
};

class UpdateDriver {
  public:
    ~UpdateDriver();

    /// Parses `update` (a document) and `arrayFilters` (an array of filter documents,
    /// or null). Errors: FailedToParse (unknown modifier, unused array filter, ...),
    /// BadValue, TypeMismatch, EmptyFieldName, ConflictingUpdateOperators.
    /// `collator` is the update's collation: arrayFilters, $pull/$pullAll,
    /// $addToSet, $min/$max and $push's $sort compare strings with it.
    static StatusWith<std::unique_ptr<UpdateDriver>> parse(
        const bson_t* update, const bson_t* arrayFilters = nullptr,
        const std::shared_ptr<const query::Collator>& collator = nullptr);

    bool isReplacement() const { return replacement_.has_value(); }
    /// True when a path uses the positional "$" (the caller must pass positionalIndex).
    bool needsPositional() const;

    /// Applies the update to `oldDoc`, validates the result for storage and returns it.
    UpdateResult apply(const bson_t* oldDoc, const ApplyOptions& opts) const;
    /// apply() with errors returned instead of thrown.
    StatusWith<UpdateResult> tryApply(const bson_t* oldDoc, const ApplyOptions& opts) const;

    /// The document an upsert inserts: seedUpsertDocument(query) (only the _id
    /// equality for replacements), then apply() with isUpsertInsert = true.
    UpdateResult applyUpsert(const bson_t* query, const ApplyOptions& opts) const;

  private:
    UpdateDriver() = default;
    UpdateResult applyReplacement(const bson_t* oldDoc, const ApplyOptions& opts) const;

    std::optional<bson::Doc> replacement_;
    std::unique_ptr<UpdateTree> tree_;
};

/// Builds the base document of an upsert from the query's top-level equalities
/// ({a: 1, "b.c": 2, $and: [{d: 3}], e: {$eq: 4}, f: {$in: [5]}} -> {a: 1, b: {c: 2},
/// d: 3, e: 4, f: 5}), _id first. With idOnly, keeps only the _id equality
/// (replacement-style upserts). Throws DBException: NotSingleValueField (54) when a
/// path is matched twice or two matched paths overlap; query parse errors.
bson::Doc seedUpsertDocument(const bson_t* query, bool idOnly = false);

/// Storage validation of a document produced by an update: _id not an
/// array/regex/undefined (InvalidIdField), no $-prefixed top-level field and no
/// $-prefixed field directly inside an _id document other than a DBRef's $ref,
/// $id, $db (DollarPrefixedFieldName, named by its path as mongod 7.0 does), size
/// <= 16 MiB (BSONObjectTooLarge). With `before` (an operator update's input), a
/// top-level $-prefixed field the document already had is allowed: mongod validates
/// what an operator update changed.
Status validateForStorage(const bson_t* doc, const bson_t* before = nullptr);

/// The first field name at any depth of `doc` that starts with '$' and is not
/// part of a DBRef ({$ref: <string>, $id: ..., [$db: <string>]}, in that
/// order), as mongod's BSONObj::storageValidEmbedded finds it; empty if none.
std::string firstDollarPrefixedField(const bson_t* doc);

/// mongod's check of an inserted document's _id: not an array, regex or
/// undefined (InvalidIdField, 53), and, when a document, no '$'-prefixed field
/// at any depth but a DBRef's (DollarPrefixedFieldName, 52: "_id fields may
/// not contain '$'-prefixed fields: $a is not valid for storage.").
Status validateIdForInsert(const bson_iter_t& id);

}  // namespace halo::update
