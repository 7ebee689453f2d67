#include "store/authz/resource_pattern.h"

#include <fmt/format.h>

#include <functional>

#include "bson/doc.h"

namespace halo::store::authz {

bool isInternalDatabase(std::string_view db) {
    return db == "local" || db == "config";
}

bool isNormalCollection(std::string_view db, std::string_view coll) {
    if (coll.starts_with("system.")) return false;
    return !(db == "local" && coll.starts_with("replset."));
}

ResourcePattern ResourcePattern::forNamespace(std::string_view ns) {
    auto dot = ns.find('.');
    if (dot == std::string_view::npos) return exact(std::string(ns), "");
    return exact(std::string(ns.substr(0, dot)), std::string(ns.substr(dot + 1)));
}

namespace {

Status conflict(std::string_view pattern, std::string_view field) {
    return Status(ErrorCode::BadValue,
                  fmt::format("{} conflicts with resource type '{}'", pattern, field));
}

bool validCollectionName(std::string_view c) {
    return !c.starts_with('.') && c.find('$') == std::string_view::npos &&
           c.find('\0') == std::string_view::npos;
}

}  // namespace

StatusWith<ResourcePattern> ResourcePattern::parse(const bson_t* resource) {
    bson_iter_t it;
    bool hasCluster = false, cluster = false, hasAny = false, any = false;
    bool hasDb = false, hasColl = false, hasBuckets = false;
    std::string db, coll;
    if (!bson_iter_init(&it, resource))
        return Status(ErrorCode::BadValue, "resource must be a document");
    auto wrongType = [](std::string_view f, const bson_iter_t& i, std::string_view want) {
        return Status(ErrorCode::TypeMismatch,
                      fmt::format("BSON field 'privilege.resource.{}' is the wrong type '{}', "
                                  "expected type '{}'",
                                  f, bson::typeName(bson_iter_type(&i)), want));
    };
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (k == "cluster" || k == "anyResource") {
            if (!BSON_ITER_HOLDS_BOOL(&it) && !BSON_ITER_HOLDS_NUMBER(&it))
                return wrongType(k, it, "bool");
            (k == "cluster" ? hasCluster : hasAny) = true;
            (k == "cluster" ? cluster : any) = bson_iter_as_bool(&it);
        } else if (k == "db" || k == "collection") {
            if (!BSON_ITER_HOLDS_UTF8(&it)) return wrongType(k, it, "string");
            (k == "db" ? hasDb : hasColl) = true;
            (k == "db" ? db : coll) = bson_iter_utf8(&it, nullptr);
        } else if (k == "system_buckets") {
            hasBuckets = true;
        } else {
            return Status(ErrorCode::Location40415,
                          fmt::format("BSON field 'privilege.resource.{}' is an unknown field", k));
        }
    }
    if (hasCluster) {
        if (!cluster) return Status(ErrorCode::BadValue, "resource: {cluster: false} must be true");
        for (auto [has, f] :
             {std::pair{hasAny, "anyResource"}, std::pair{hasDb, "db"},
              std::pair{hasColl, "collection"}, std::pair{hasBuckets, "system_buckets"}})
            if (has) return conflict("resource: {cluster: true}", f);
        return ResourcePattern::cluster();
    }
    if (hasAny) {
        if (!any) return Status(ErrorCode::BadValue, "resource: {anyResource: false} must be true");
        for (auto [has, f] : {std::pair{hasDb, "db"}, std::pair{hasColl, "collection"},
                              std::pair{hasBuckets, "system_buckets"}})
            if (has) return conflict("resource: {anyResource: true}", f);
        return ResourcePattern::anyResource();
    }
    if (hasBuckets)
        return Status(ErrorCode::BadValue,
                      "system_buckets resources (time series) are not supported by this store");
    if (!hasColl)
        return Status(ErrorCode::BadValue,
                      "resource pattern must contain 'collection' or 'systemBuckets' specifier");
    if (!hasDb)
        return Status(ErrorCode::BadValue,
                      "resource {collection: '...'} must include 'db' field as well");
    if (!coll.empty() && !validCollectionName(coll))
        return Status(ErrorCode::BadValue,
                      fmt::format("'{}' is not a valid collection name", coll));
    if (db.empty() && coll.empty()) return anyNormal();
    if (db.empty()) return collectionName(std::move(coll));
    if (coll.empty()) return database(std::move(db));
    return exact(std::move(db), std::move(coll));
}

std::vector<ResourcePattern> ResourcePattern::searchList() const {
    std::vector<ResourcePattern> out{anyResource()};
    switch (kind_) {
        case Kind::AnyResource:
            return out;
        case Kind::Cluster:
        case Kind::AnyNormal:
            break;
        case Kind::Database:
            if (!isInternalDatabase(db_)) out.push_back(anyNormal());
            break;
        case Kind::CollectionName:
            if (isNormalCollection("", coll_)) out.push_back(anyNormal());
            break;
        case Kind::ExactNamespace:
            if (isNormalCollection(db_, coll_)) {
                if (!isInternalDatabase(db_)) out.push_back(anyNormal());
                out.push_back(database(db_));
            }
            out.push_back(collectionName(coll_));
            break;
    }
    out.push_back(*this);
    return out;
}

void ResourcePattern::appendTo(bson_t* parent, const char* key) const {
    bson_t r;
    BSON_APPEND_DOCUMENT_BEGIN(parent, key, &r);
    switch (kind_) {
        case Kind::Cluster:
            BSON_APPEND_BOOL(&r, "cluster", true);
            break;
        case Kind::AnyResource:
            BSON_APPEND_BOOL(&r, "anyResource", true);
            break;
        default:
            bson_append_utf8(&r, "db", 2, db_.data(), static_cast<int>(db_.size()));
            bson_append_utf8(&r, "collection", 10, coll_.data(), static_cast<int>(coll_.size()));
            break;
    }
    bson_append_document_end(parent, &r);
}

std::string ResourcePattern::toString() const {
    switch (kind_) {
        case Kind::Cluster:
            return "{cluster: true}";
        case Kind::AnyResource:
            return "{anyResource: true}";
        default:
            return fmt::format("{{db: \"{}\", collection: \"{}\"}}", db_, coll_);
    }
}

size_t ResourcePattern::hash() const {
    size_t h = std::hash<std::string>{}(db_);
    h ^= std::hash<std::string>{}(coll_) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h ^ static_cast<size_t>(kind_);
}

}  // namespace halo::store::authz
