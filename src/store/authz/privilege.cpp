#include "store/authz/privilege.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bson/doc.h"

namespace halo::store::authz {

void addPrivilege(PrivilegeVector* v, const Privilege& p) {
    for (auto& have : *v) {
        if (have.resource == p.resource) {
            have.actions.addAll(p.actions);
            return;
        }
    }
    v->push_back(p);
}

void addPrivileges(PrivilegeVector* v, const PrivilegeVector& more) {
    for (const auto& p : more) addPrivilege(v, p);
}

namespace {

StatusWith<Privilege> parseOne(const bson_t* doc) {
    bson_iter_t it;
    bool haveResource = false, haveActions = false;
    StatusWith<ResourcePattern> resource =
        Status(ErrorCode::Location40414,
               "BSON field 'privilege.resource' is missing but a required field");
    ActionSet actions;
    std::vector<std::string> unknown;
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (k == "resource") {
            haveResource = true;
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                return Status(ErrorCode::TypeMismatch,
                              fmt::format("BSON field 'privilege.resource' is the wrong type "
                                          "'{}', expected type 'object'",
                                          bson::typeName(bson_iter_type(&it))));
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&it, &len, &data);
            bson::View r(data, len);
            resource = ResourcePattern::parse(r.get());
        } else if (k == "actions") {
            haveActions = true;
            if (!BSON_ITER_HOLDS_ARRAY(&it))
                return Status(ErrorCode::TypeMismatch,
                              fmt::format("BSON field 'privilege.actions' is the wrong type "
                                          "'{}', expected type 'array'",
                                          bson::typeName(bson_iter_type(&it))));
            bson_iter_t a;
            bson_iter_recurse(&it, &a);
            while (bson_iter_next(&a)) {
                if (!BSON_ITER_HOLDS_UTF8(&a))
                    return Status(
                        ErrorCode::TypeMismatch,
                        fmt::format("BSON field 'privilege.actions.{}' is the wrong "
                                    "type '{}', expected type 'string'",
                                    bson_iter_key(&a), bson::typeName(bson_iter_type(&a))));
                std::string_view name = bson_iter_utf8(&a, nullptr);
                if (auto action = parseAction(name))
                    actions.add(*action);
                else
                    unknown.emplace_back(name);
            }
        } else {
            return Status(ErrorCode::Location40415,
                          fmt::format("BSON field 'privilege.{}' is an unknown field", k));
        }
    }
    if (!haveResource) return resource.getStatus();
    if (!haveActions)
        return Status(ErrorCode::Location40414,
                      "BSON field 'privilege.actions' is missing but a required field");
    if (!resource.isOK()) return resource.getStatus();
    if (actions.empty() && unknown.empty())
        return Status(ErrorCode::BadValue,
                      "'actions' field of privilege resource must not be empty");
    if (!unknown.empty())
        return Status(ErrorCode::BadValue, fmt::format("Unrecognized action privilege strings: {}",
                                                       fmt::join(unknown, ", ")));
    return Privilege{std::move(resource.getValue()), actions};
}

}  // namespace

StatusWith<PrivilegeVector> parsePrivileges(const bson_t* array, std::string_view field) {
    PrivilegeVector out;
    bson_iter_t it;
    if (!bson_iter_init(&it, array)) return out;
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return Status(
                ErrorCode::TypeMismatch,
                fmt::format("BSON field '{}.{}' is the wrong type '{}', expected type "
                            "'object'",
                            field, bson_iter_key(&it), bson::typeName(bson_iter_type(&it))));
        uint32_t len;
        const uint8_t* data;
        bson_iter_document(&it, &len, &data);
        bson::View d(data, len);
        auto p = parseOne(d.get());
        if (!p.isOK()) return p.getStatus();
        out.push_back(std::move(p.getValue()));
    }
    return out;
}

void appendPrivileges(bson_t* parent, const char* key, const PrivilegeVector& v) {
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(parent, key, &arr);
    for (size_t i = 0; i < v.size(); ++i) {
        std::string k = std::to_string(i);
        bson_t p, actions;
        BSON_APPEND_DOCUMENT_BEGIN(&arr, k.c_str(), &p);
        v[i].resource.appendTo(&p, "resource");
        BSON_APPEND_ARRAY_BEGIN(&p, "actions", &actions);
        size_t j = 0;
        for (auto name : v[i].actions.names()) {
            std::string jk = std::to_string(j++);
            bson_append_utf8(&actions, jk.c_str(), -1, name.data(), static_cast<int>(name.size()));
        }
        bson_append_array_end(&p, &actions);
        bson_append_document_end(&arr, &p);
    }
    bson_append_array_end(parent, &arr);
}

PrivilegeSet::PrivilegeSet(const PrivilegeVector& v) {
    addPrivileges(&list_, v);
    for (const auto& p : list_) byResource_[p.resource].addAll(p.actions);
}

bool PrivilegeSet::isAuthorized(const ResourcePattern& target, const ActionSet& actions) const {
    ActionSet have;
    for (const auto& pattern : target.searchList()) {
        auto it = byResource_.find(pattern);
        if (it == byResource_.end()) continue;
        have.addAll(it->second);
        if (have.containsAll(actions)) return true;
    }
    return actions.empty();
}

bool PrivilegeSet::anyOnDatabase(std::string_view db) const {
    using Kind = ResourcePattern::Kind;
    for (const auto& p : list_) {
        if (p.actions.empty()) continue;
        switch (p.resource.kind()) {
            case Kind::AnyResource:
            case Kind::CollectionName:
                return true;
            case Kind::AnyNormal:
                if (!isInternalDatabase(db)) return true;
                break;
            case Kind::Database:
            case Kind::ExactNamespace:
                if (p.resource.db() == db) return true;
                break;
            case Kind::Cluster:
                break;
        }
    }
    return false;
}

bool PrivilegeSet::anyOnCollection(std::string_view db, std::string_view coll) const {
    for (const auto& pattern :
         ResourcePattern::exact(std::string(db), std::string(coll)).searchList()) {
        auto it = byResource_.find(pattern);
        if (it != byResource_.end() && !it->second.empty()) return true;
    }
    return false;
}

}  // namespace halo::store::authz
