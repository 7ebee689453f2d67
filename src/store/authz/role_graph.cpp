#include "store/authz/role_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "bson/doc.h"
#include "store/authz/builtin_roles.h"

namespace halo::store::authz {

StatusWith<RoleDefinition> parseRoleDocument(const bson_t* doc) {
    RoleDefinition out;
    out.name = {bson::stringField(doc, "role"), bson::stringField(doc, "db")};
    if (out.name.role.empty() || out.name.db.empty())
        return Status(ErrorCode::BadValue, "Role document needs string 'role' and 'db' fields");
    bson_t arr;
    if (bson::subDocument(doc, "privileges", &arr)) {
        auto p = parsePrivileges(&arr, "privileges");
        if (!p.isOK())
            return Status(ErrorCode::BadValue,
                          fmt::format("Invalid 'privileges' field in role document '{}': {}",
                                      out.name.toString(), p.getStatus().reason()));
        out.privileges = std::move(p.getValue());
    }
    if (bson::subDocument(doc, "roles", &arr)) {
        bson_iter_t it;
        bson_iter_init(&it, &arr);
        while (bson_iter_next(&it)) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                return Status(ErrorCode::BadValue,
                              fmt::format("Invalid 'roles' field in role document '{}'",
                                          out.name.toString()));
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&it, &len, &data);
            bson::View r(data, len);
            RoleName sub{bson::stringField(r.get(), "role"), bson::stringField(r.get(), "db")};
            if (sub.role.empty() || sub.db.empty())
                return Status(ErrorCode::BadValue,
                              fmt::format("Invalid 'roles' field in role document '{}'",
                                          out.name.toString()));
            out.roles.push_back(std::move(sub));
        }
    }
    return out;
}

ResolvedRoles resolveRoles(const std::vector<RoleName>& start, const RoleLookup& lookup) {
    ResolvedRoles out;
    std::set<RoleName> visited;
    std::vector<RoleName> frontier;
    for (const auto& r : start)
        if (visited.insert(r).second) frontier.push_back(r);
    while (!frontier.empty()) {
        std::vector<RoleName> custom;
        for (const auto& r : frontier) {
            if (isBuiltinRole(r))
                addPrivileges(&out.privileges, builtinRolePrivileges(r));
            else
                custom.push_back(r);
        }
        std::vector<RoleName> next;
        if (!custom.empty()) {
            std::vector<RoleDefinition> found = lookup(custom);
            std::set<RoleName> present;
            // In the order asked, so the merged privileges do not depend on the lookup's order.
            for (const auto& want : custom) {
                auto def = std::find_if(found.begin(), found.end(),
                                        [&](const RoleDefinition& d) { return d.name == want; });
                if (def == found.end()) {
                    out.notFound.push_back(want);
                    continue;
                }
                addPrivileges(&out.privileges, def->privileges);
                for (const auto& sub : def->roles)
                    if (visited.insert(sub).second) next.push_back(sub);
            }
        }
        frontier = std::move(next);
    }
    for (const auto& r : visited)
        if (std::find(out.notFound.begin(), out.notFound.end(), r) == out.notFound.end())
            out.roles.push_back(r);
    return out;
}

std::vector<RoleName> roleNamesIn(const bson_t* array, std::string_view db) {
    std::vector<RoleName> out;
    bson_iter_t a;
    if (!array || !bson_iter_init(&a, array)) return out;
    while (bson_iter_next(&a)) {
        if (BSON_ITER_HOLDS_UTF8(&a) && !db.empty()) {
            out.push_back({bson_iter_utf8(&a, nullptr), std::string(db)});
        } else if (BSON_ITER_HOLDS_DOCUMENT(&a)) {
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&a, &len, &data);
            bson::View v(data, len);
            out.push_back({bson::stringField(v.get(), "role"), bson::stringField(v.get(), "db")});
        }
    }
    return out;
}

void appendRoleNames(bson_t* parent, const char* key, const std::vector<RoleName>& roles) {
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(parent, key, &arr);
    for (size_t i = 0; i < roles.size(); ++i) {
        std::string k = std::to_string(i);
        bson_t r;
        BSON_APPEND_DOCUMENT_BEGIN(&arr, k.c_str(), &r);
        BSON_APPEND_UTF8(&r, "role", roles[i].role.c_str());
        BSON_APPEND_UTF8(&r, "db", roles[i].db.c_str());
        bson_append_document_end(&arr, &r);
    }
    bson_append_array_end(parent, &arr);
}

}  // namespace halo::store::authz
