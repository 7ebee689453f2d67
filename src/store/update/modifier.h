#pragma once
// Modifier: one update operator bound to one path ($set: {a: 1} -> a SetModifier
// at "a"). Modifiers are created at parse time (argument errors throw there)
// and applied by the update tree (update_tree.h), which resolves the path,
// handles positional elements and creates missing parents. A parsed Modifier
// is immutable and may be applied to many documents; apply methods throw
// DBException with mongod's codes.
#include <bson/bson.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/update/element.h"

namespace halo::query {
class Collator;
}  // namespace halo::query

namespace halo::update {

/// The update's collation (null: binary): $min/$max, $addToSet, $pull,
/// $pullAll and $push's $sort compare strings with it, as in mongod.
using Collation = std::shared_ptr<const query::Collator>;

enum class ModifierType {
    kSet,
    kSetOnInsert,
    kUnset,
    kInc,
    kMul,
    kMin,
    kMax,
    kRename,
    kCurrentDate,
    kPush,
    kAddToSet,
    kPull,
    kPullAll,
    kPop,
    kBit,
};

/// What changed, recorded as modifiers apply (feeds UpdateDescription).
struct ChangeLog {
    std::vector<std::string> updated;                         // dotted paths whose value is new
    std::vector<std::string> removed;                         // dotted paths removed
    std::vector<std::pair<std::string, uint32_t>> truncated;  // array path, new size
};

/// Per-document state shared by all modifiers of one apply().
struct ApplyContext {
    Element* root = nullptr;
    bool isInsert = false;
    bool checkIdImmutable = true;  // false for upsert inserts without a seeded _id
    int64_t nowMillis = 0;
    std::string idBraced = "{}";  // "{_id: 1}" for messages
    std::string idElement;        // "_id: 1", or empty when the document has none
    ChangeLog* log = nullptr;     // null when no description is wanted

    void logUpdated(const std::string& path) const {
        if (log) log->updated.push_back(path);
    }
    void logRemoved(const std::string& path) const {
        if (log) log->removed.push_back(path);
    }
    /// Records an array rewrite as per-index updates plus truncation, as
    /// change streams report them. `before` may be null (no description wanted).
    void logArrayChange(const std::string& path, const Element* before, const Element& after) const;
};

class Modifier {
  public:
    virtual ~Modifier() = default;
    /// $setOnInsert: applies only when the update inserts (upsert).
    virtual bool insertOnly() const { return false; }
    /// False for $unset/$pull/$pullAll/$pop: a missing path is a no-op.
    virtual bool createsMissing() const { return true; }
    /// A path blocked by a scalar (a.b where a: 1) is a no-op instead of PathNotViable.
    virtual bool noopOnNonViablePath(const ApplyContext&) const { return !createsMissing(); }
    /// Applies to the existing element `e` at concrete dotted `path`. Returns true
    /// when the document changed; logs its own changes into ctx.
    virtual bool applyExisting(Element& e, const std::string& path, ApplyContext& ctx) const = 0;
    /// The value to create at the missing `path` (the caller inserts and logs it),
    /// or null for a no-op.
    virtual std::unique_ptr<Element> valueForMissing(const std::string& path,
                                                     ApplyContext& ctx) const = 0;
};

/// Type of a "$name" operator, or nullopt when unknown.
std::optional<ModifierType> modifierTypeFor(std::string_view opName);

// Factories; each validates its argument (the value of the path in the update)
// and throws DBException with mongod's code and message.
std::unique_ptr<Modifier> makeSetModifier(const bson_value_t& v, bool onInsertOnly);
std::unique_ptr<Modifier> makeUnsetModifier();
std::unique_ptr<Modifier> makeCurrentDateModifier(std::string_view field, const bson_value_t& v);
/// A placeholder at the $rename source path: reserves the path for conflict detection.
std::unique_ptr<Modifier> makePlaceholderModifier();
/// Lives at the destination path; moves the value found at `fromPath`.
std::unique_ptr<Modifier> makeRenameModifier(std::vector<std::string> fromPath, std::string from,
                                             std::vector<std::string> toPath);
std::unique_ptr<Modifier> makeArithmeticModifier(ModifierType t, std::string_view field,
                                                 const bson_value_t& v);
std::unique_ptr<Modifier> makeCompareModifier(ModifierType t, const bson_value_t& v,
                                              const Collation& coll);
std::unique_ptr<Modifier> makeBitModifier(std::string_view field, const bson_value_t& v);
std::unique_ptr<Modifier> makePushModifier(const bson_value_t& v, const Collation& coll);
std::unique_ptr<Modifier> makeAddToSetModifier(const bson_value_t& v, const Collation& coll);
std::unique_ptr<Modifier> makePullModifier(const bson_value_t& v, const Collation& coll);
std::unique_ptr<Modifier> makePullAllModifier(const bson_value_t& v, const Collation& coll);
std::unique_ptr<Modifier> makePopModifier(std::string_view field, const bson_value_t& v);

/// The last path component of a dotted path.
std::string lastComponent(const std::string& path);

}  // namespace halo::update
