#pragma once
// UpdateTree: an operator-style update ({$set: {...}, $inc: {...}}) parsed into
// a tree of path components with one Modifier per leaf, as mongod's
// UpdateObjectNode/UpdateArrayNode tree:
//  - children are applied in path order (numeric components numerically, the
//    rest bytewise), so new fields are appended in that order;
//  - "$" resolves to the positional index the query matched; "$[]" applies to
//    every array element, "$[id]" to elements matching array filter `id`;
//  - two paths where one is a prefix of the other are rejected at parse time
//    (ConflictingUpdateOperators); positional children that land on the same
//    element are merged at apply time ("Update created a conflict at ...").
// Parsing and applying throw DBException with mongod's codes. A parsed tree is
// immutable; apply() may run concurrently on different documents.
#include <bson/bson.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "store/query/matcher.h"
#include "store/update/element.h"
#include "store/update/modifier.h"

namespace halo::update {

/// Orders path components: two numeric components numerically, else bytewise.
struct ComponentLess {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const;
};

/// Array filters by identifier ({"x.grade": {$gte: 85}} -> "x").
using ArrayFilterMap = std::map<std::string, std::unique_ptr<query::Matcher>, std::less<>>;

/// Parses the `arrayFilters` array (may be null). Throws DBException.
ArrayFilterMap parseArrayFilters(const bson_t* arrayFilters, const Collation& coll = nullptr);

/// Splits and validates an update path: EmptyFieldName for "" or empty parts.
std::vector<std::string> parseUpdatePath(std::string_view path);

class UpdateTree {
  public:
    UpdateTree();
    ~UpdateTree();

    /// Parses an operator-style update (the first field starts with '$').
    static std::unique_ptr<UpdateTree> parse(const bson_t* update, ArrayFilterMap arrayFilters,
                                             const Collation& coll = nullptr);

    /// True when some path uses the positional "$".
    bool positional() const { return positional_; }

    /// Applies all modifiers to `root` (a document). Throws DBException.
    void apply(Element* root, ApplyContext& ctx,
               const std::optional<std::string>& positionalIndex) const;

    struct Node;

  private:
    std::unique_ptr<Node> root_;
    ArrayFilterMap filters_;
    bool positional_ = false;
};

}  // namespace halo::update
