#pragma once
// Projection: a parsed find() projection with mongod 4.4+ semantics.
//  - inclusion ({a: 1, "b.c": true}), exclusion ({a: 0}); _id is included
//    unless {_id: 0}, and may be included/excluded in either mode;
//  - dotted paths traverse arrays of documents (inclusion drops scalar
//    elements, exclusion keeps them);
//  - {a: {$slice: n}} / {$slice: [skip, limit]}, {a: {$elemMatch: {...}}}
//    (appended after the other fields, as mongod 4.4+ does), positional "a.$"
//    (needs the MatchDetails of the query's match);
//  - computed fields: {x: {$add: ["$a", 1]}}, {x: "$a"}, {x: "literal"}
//    (any value other than a boolean or number), evaluated with Expression.
// Errors: 31254 "Cannot do exclusion on field x in inclusion projection",
// 31253 "Cannot do inclusion on field x in exclusion projection", 31252 for an
// expression in an exclusion projection, 31249/31250 path collisions, 31275
// $elemMatch on a nested field, 31276 two positional projections, 31395
// positional exclusion, 51050 positional path not in the query.
//
// Immutable after parse; apply() is const and thread-safe. apply() throws
// DBException for expression errors and 51246 when a positional projection
// finds no matching array element.
#include <bson/bson.h>

#include <memory>
#include <string>

#include "bson/doc.h"
#include "common/status.h"
#include "store/query/matcher.h"

namespace halo::query {

class Projection {
  public:
    struct Node;  // internal tree node

    Projection(Projection&&) noexcept;
    Projection& operator=(Projection&&) noexcept;
    ~Projection();

    /// `query` (may be null) is the find filter, checked by positional projections.
    /// `collator` (null: binary) is the operation's collation, used by $elemMatch
    /// and by computed fields' expressions.
    static StatusWith<Projection> parse(const bson_t* spec, const Matcher* query,
                                        std::shared_ptr<const Collator> collator = nullptr);

    /// The projected document. `details` (may be null) supplies elemMatchKey for
    /// positional projections.
    bson::Doc apply(const bson_t* doc, const MatchDetails* details) const;

    /// True for inclusion projections (including those with only computed or
    /// positional fields); false for exclusion ones and for projections with
    /// only $slice/$elemMatch.
    bool isInclusion() const { return inclusion_; }
    /// True when apply() needs MatchDetails (a positional "a.$" is present).
    bool requiresMatchDetails() const { return hasPositional_; }

  private:
    Projection();
    std::unique_ptr<Node> root_;
    bool inclusion_ = false;
    bool hasPositional_ = false;
};

}  // namespace halo::query
