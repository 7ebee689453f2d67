#pragma once
// A privilege is a resource pattern and the actions allowed on it, in
// mongod's document shape {resource: {...}, actions: [...]}. A PrivilegeSet
// is what a user holds once its roles are resolved: it answers "may these
// actions be done on this resource?" as mongod does (the union of the actions
// of every pattern in the target's search list). Value types, thread-safe.
#include <bson/bson.h>

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "store/authz/action_set.h"
#include "store/authz/resource_pattern.h"

namespace halo::store::authz {

struct Privilege {
    ResourcePattern resource;
    ActionSet actions;
    bool operator==(const Privilege&) const = default;
};

using PrivilegeVector = std::vector<Privilege>;

/// Adds `p` to `v`, merging its actions into an existing entry for the same
/// resource (mongod's addPrivilegeToPrivilegeVector): order of first appearance.
void addPrivilege(PrivilegeVector* v, const Privilege& p);
void addPrivileges(PrivilegeVector* v, const PrivilegeVector& more);

/// Parses a `privileges` array (createRole, grantPrivilegesToRole, role
/// documents): every element {resource, actions}; unknown actions are
/// BadValue "Unrecognized action privilege strings: a, b".
StatusWith<PrivilegeVector> parsePrivileges(const bson_t* array, std::string_view field);

/// Appends {resource, actions} documents as an array under `key`.
void appendPrivileges(bson_t* parent, const char* key, const PrivilegeVector& v);

/// The privileges a user holds, indexed by resource pattern.
class PrivilegeSet {
  public:
    PrivilegeSet() = default;
    explicit PrivilegeSet(const PrivilegeVector& v);

    /// Whether every action of `actions` is allowed on `target`.
    bool isAuthorized(const ResourcePattern& target, const ActionSet& actions) const;
    bool isAuthorized(const ResourcePattern& target, ActionType a) const {
        return isAuthorized(target, ActionSet{a});
    }
    /// Whether the user holds any privilege that can reach something in `db`
    /// (listDatabases without the listDatabases action shows these).
    bool anyOnDatabase(std::string_view db) const;
    /// Whether the user holds any privilege on collection db.coll (listCollections
    /// with authorizedCollections shows these).
    bool anyOnCollection(std::string_view db, std::string_view coll) const;
    /// The privileges as resolved (merged per resource), for connectionStatus.
    const PrivilegeVector& privileges() const { return list_; }

  private:
    PrivilegeVector list_;
    std::unordered_map<ResourcePattern, ActionSet, ResourcePatternHash> byResource_;
};

}  // namespace halo::store::authz
