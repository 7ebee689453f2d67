#include "store/commands/authz_documents.h"

#include <fmt/format.h>

#include <algorithm>

#include "store/authz/builtin_roles.h"
#include "store/commands/write_path.h"
#include "store/server/store.h"
#include "store/storage/catalog.h"

namespace halo::store {

namespace {

/// {_id: {$in: ["db.role", ...]}}
bson::Doc roleIdFilter(const std::vector<authz::RoleName>& roles) {
    bson::Doc filter;
    bson_t id, in;
    BSON_APPEND_DOCUMENT_BEGIN(filter.mut(), "_id", &id);
    BSON_APPEND_ARRAY_BEGIN(&id, "$in", &in);
    for (size_t i = 0; i < roles.size(); ++i) {
        std::string k = std::to_string(i);
        BSON_APPEND_UTF8(&in, k.c_str(), roles[i].id().c_str());
    }
    bson_append_array_end(&id, &in);
    bson_append_document_end(filter.mut(), &id);
    return filter;
}

}  // namespace

std::vector<bson::Doc> findAuthzDocuments(Store& store, const char* collection,
                                          const bson_t* filter, const bson_t* sort) {
    bson::Doc cmd;
    BSON_APPEND_UTF8(cmd.mut(), "find", collection);
    BSON_APPEND_DOCUMENT(cmd.mut(), "filter", filter);
    if (sort) {
        BSON_APPEND_DOCUMENT(cmd.mut(), "sort", sort);
    } else {
        bson_t byId;
        BSON_APPEND_DOCUMENT_BEGIN(cmd.mut(), "sort", &byId);
        BSON_APPEND_INT32(&byId, "_id", 1);
        bson_append_document_end(cmd.mut(), &byId);
    }
    BSON_APPEND_INT64(cmd.mut(), "batchSize", 1'000'000);
    BSON_APPEND_BOOL(cmd.mut(), "singleBatch", true);
    bson::Doc reply = store.runInternal("admin", cmd.get());
    bson_iter_t it;
    if (bson_iter_init_find(&it, reply.get(), "ok") && !bson_iter_as_bool(&it)) {
        int code = 8;
        if (bson_iter_init_find(&it, reply.get(), "code")) code = bson_iter_as_int64(&it);
        uasserted(static_cast<ErrorCode>(code),
                  fmt::format("reading admin.{}: {}", collection,
                              bson::stringField(reply.get(), "errmsg")));
    }
    std::vector<bson::Doc> out;
    bson_t cursor, batch;
    if (!bson::subDocument(reply.get(), "cursor", &cursor) ||
        !bson::subDocument(&cursor, "firstBatch", &batch))
        return out;
    bson_iter_init(&it, &batch);
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it)) continue;
        uint32_t len;
        const uint8_t* data;
        bson_iter_document(&it, &len, &data);
        out.push_back(bson::Doc::copyOf(data, len));
    }
    return out;
}

std::optional<bson::Doc> findUserDoc(Store& store, std::string_view db, std::string_view user) {
    bson::Doc filter;
    bson_append_utf8(filter.mut(), "user", 4, user.data(), static_cast<int>(user.size()));
    bson_append_utf8(filter.mut(), "db", 2, db.data(), static_cast<int>(db.size()));
    auto found = findAuthzDocuments(store, kUsersCollection, filter.get());
    if (found.empty()) return std::nullopt;
    return std::move(found.front());
}

std::vector<authz::RoleName> rolesOf(const bson_t* doc) {
    bson_t arr;
    if (!bson::subDocument(doc, "roles", &arr)) return {};
    return authz::roleNamesIn(&arr, "");
}

void insertAuthzDocument(Store& store, const char* collection, const bson_t* doc,
                         const Status& duplicate) {
    bson::Doc insert;
    BSON_APPEND_UTF8(insert.mut(), "insert", collection);
    bson_t docs;
    BSON_APPEND_ARRAY_BEGIN(insert.mut(), "documents", &docs);
    BSON_APPEND_DOCUMENT(&docs, "0", doc);
    bson_append_array_end(insert.mut(), &docs);
    bson::Doc reply = store.runInternal("admin", insert.get());
    store.bumpAuthzGeneration();
    checkWriteReply(reply.get(), &duplicate);
}

bool anyUserOrRoleExists(Store& store) {
    for (const char* ns : {"admin.system.users", "admin.system.roles"}) {
        auto c = lookupCollection(store, ns);
        if (c && c->numRecords.load() > 0) return true;
    }
    return false;
}

authz::RoleLookup roleLookup(Store& store) {
    return [&store](const std::vector<authz::RoleName>& names) {
        std::vector<authz::RoleDefinition> out;
        bson::Doc filter = roleIdFilter(names);
        for (const auto& doc : findAuthzDocuments(store, kRolesCollection, filter.get())) {
            auto def = authz::parseRoleDocument(doc.get());
            if (!def.isOK()) throw DBException(def.getStatus());
            out.push_back(std::move(def.getValue()));
        }
        return out;
    };
}

authz::ResolvedRoles resolveRoles(Store& store, const std::vector<authz::RoleName>& roles) {
    return authz::resolveRoles(roles, roleLookup(store));
}

std::shared_ptr<const authz::PrivilegeSet> privilegesOf(Store& store,
                                                        const std::vector<authz::RoleName>& roles) {
    return std::make_shared<const authz::PrivilegeSet>(resolveRoles(store, roles).privileges);
}

std::vector<authz::RoleName> missingRoles(Store& store, const std::vector<authz::RoleName>& roles) {
    std::vector<authz::RoleName> custom;
    for (const auto& r : roles)
        if (!authz::isBuiltinRole(r)) custom.push_back(r);
    if (custom.empty()) return {};
    bson::Doc filter = roleIdFilter(custom);
    auto found = findAuthzDocuments(store, kRolesCollection, filter.get());
    std::vector<authz::RoleName> missing;
    for (const auto& r : custom) {
        bool present = std::any_of(found.begin(), found.end(), [&](const bson::Doc& d) {
            return bson::stringField(d.get(), "role") == r.role &&
                   bson::stringField(d.get(), "db") == r.db;
        });
        if (!present) missing.push_back(r);
    }
    return missing;
}

void throwRoleNotFound(const std::vector<authz::RoleName>& missing, std::string_view context) {
    std::vector<std::string> names;
    for (const auto& r : missing) names.push_back(r.toString());
    std::string msg = missing.size() == 1
                          ? fmt::format("Could not find role: {}", names[0])
                          : fmt::format("Could not find roles: {}", fmt::join(names, ", "));
    uasserted(ErrorCode::RoleNotFound, std::string(context) + msg);
}

std::vector<authz::RoleName> parseRoleNames(const bson_t* cmd, std::string_view cmdName,
                                            std::string_view db) {
    bson_iter_t it, a;
    if (!bson::find(cmd, "roles", &it))
        uasserted(ErrorCode::Location40414,
                  fmt::format("BSON field '{}.roles' is missing but a required field", cmdName));
    if (!BSON_ITER_HOLDS_ARRAY(&it))
        uasserted(ErrorCode::TypeMismatch,
                  fmt::format("BSON field '{}.roles' is the wrong type '{}', expected type 'array'",
                              cmdName, bson::typeName(bson_iter_type(&it))));
    std::vector<authz::RoleName> out;
    bson_iter_recurse(&it, &a);
    while (bson_iter_next(&a)) {
        authz::RoleName r;
        if (BSON_ITER_HOLDS_UTF8(&a)) {
            r = {bson_iter_utf8(&a, nullptr), std::string(db)};
        } else if (BSON_ITER_HOLDS_DOCUMENT(&a)) {
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&a, &len, &data);
            bson::View v(data, len);
            r = {bson::stringField(v.get(), "role"), bson::stringField(v.get(), "db")};
            if (r.role.empty() || r.db.empty())
                uasserted(ErrorCode::BadValue,
                          "A role document needs string 'role' and 'db' fields");
        } else {
            uasserted(ErrorCode::BadValue, "Role names must be either strings or objects");
        }
        bool dup = false;
        for (const auto& o : out) dup = dup || o == r;
        if (!dup) out.push_back(std::move(r));
    }
    return out;
}

void checkWriteReply(const bson_t* reply, const Status* duplicate) {
    bson_iter_t it;
    auto fail = [&](const bson_t* d) {
        int64_t code = 8;
        bson_iter_t c;
        if (bson_iter_init_find(&c, d, "code")) code = bson_iter_as_int64(&c);
        if (duplicate && code == static_cast<int>(ErrorCode::DuplicateKey))
            throw DBException(*duplicate);
        uasserted(static_cast<ErrorCode>(code), bson::stringField(d, "errmsg"));
    };
    if (bson_iter_init_find(&it, reply, "ok") && !bson_iter_as_bool(&it)) fail(reply);
    bson_t errs;
    if (bson::subDocument(reply, "writeErrors", &errs) && bson_iter_init(&it, &errs) &&
        bson_iter_next(&it) && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        uint32_t len;
        const uint8_t* data;
        bson_iter_document(&it, &len, &data);
        bson::View v(data, len);
        fail(v.get());
    }
}

int64_t writeCount(const bson_t* reply) {
    bson_iter_t it;
    return bson_iter_init_find(&it, reply, "n") ? bson_iter_as_int64(&it) : 0;
}

}  // namespace halo::store
