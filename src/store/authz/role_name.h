#pragma once
// A role's name: {role, db}. Value type.
#include <string>

namespace halo::store::authz {

struct RoleName {
    std::string role;
    std::string db;
    bool operator==(const RoleName&) const = default;
    auto operator<=>(const RoleName&) const = default;
    /// "role@db", as mongod prints role names in messages.
    std::string toString() const { return role + "@" + db; }
    /// "db.role", the _id of the role's document in admin.system.roles.
    std::string id() const { return db + "." + role; }
};

}  // namespace halo::store::authz
