#pragma once
// The resource of a privilege, in mongod's terms and document shapes:
//   {cluster: true}                    the cluster
//   {anyResource: true}                everything, system collections included
//   {db: "", collection: ""}           every normal collection of every database
//                                      except local and config ("any normal")
//   {db: "d", collection: ""}          database d (its normal collections)
//   {db: "", collection: "c"}          collection c in every database
//   {db: "d", collection: "c"}         collection d.c
// A system collection (system.*, and local.replset.*) is reached only by a
// pattern naming it (exact or by collection name) or by anyResource.
// Value type, thread-safe; parsing reports mongod's errors as Status.
#include <bson/bson.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace halo::store::authz {

class ResourcePattern {
  public:
    enum class Kind { Cluster, AnyResource, AnyNormal, Database, CollectionName, ExactNamespace };

    static ResourcePattern cluster() { return {Kind::Cluster, "", ""}; }
    static ResourcePattern anyResource() { return {Kind::AnyResource, "", ""}; }
    static ResourcePattern anyNormal() { return {Kind::AnyNormal, "", ""}; }
    static ResourcePattern database(std::string db) { return {Kind::Database, std::move(db), ""}; }
    static ResourcePattern collectionName(std::string coll) {
        return {Kind::CollectionName, "", std::move(coll)};
    }
    static ResourcePattern exact(std::string db, std::string coll) {
        return {Kind::ExactNamespace, std::move(db), std::move(coll)};
    }
    /// "db.coll" as an exact namespace (the part after the first dot is the collection).
    static ResourcePattern forNamespace(std::string_view ns);

    /// Parses a privilege's `resource` document with mongod's rules and messages.
    static StatusWith<ResourcePattern> parse(const bson_t* resource);

    Kind kind() const { return kind_; }
    const std::string& db() const { return db_; }
    const std::string& collection() const { return coll_; }
    /// Database or exact-namespace pattern: the database it names.
    bool namesDatabase() const { return kind_ == Kind::Database || kind_ == Kind::ExactNamespace; }

    /// The patterns whose privileges apply to this resource when it is the
    /// target of a check (mongod's resource search list), itself included.
    std::vector<ResourcePattern> searchList() const;

    /// Appends mongod's document shape under `key`.
    void appendTo(bson_t* parent, const char* key) const;
    /// "{db: app, collection: c}"-like text for messages and logs.
    std::string toString() const;

    bool operator==(const ResourcePattern&) const = default;
    size_t hash() const;

  private:
    ResourcePattern(Kind k, std::string db, std::string coll)
        : kind_(k), db_(std::move(db)), coll_(std::move(coll)) {}
    Kind kind_;
    std::string db_;
    std::string coll_;
};

struct ResourcePatternHash {
    size_t operator()(const ResourcePattern& p) const { return p.hash(); }
};

/// Whether `coll` of `db` is a normal collection (not system.*, not local.replset.*).
bool isNormalCollection(std::string_view db, std::string_view coll);
/// local and config: never reached by the "any normal" pattern.
bool isInternalDatabase(std::string_view db);

}  // namespace halo::store::authz
