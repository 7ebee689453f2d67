#include "tiering/access.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <unordered_map>

namespace halo::tiering::access {

namespace {

// ---------------------------------------------------------------------------
// Action names, in the order of enum Action.

constexpr std::array<std::string_view, static_cast<size_t>(Action::kCount_)> kActionNames = {
    "bypassDocumentValidation",
    "changeCustomData",
    "changeOwnCustomData",
    "changeOwnPassword",
    "changePassword",
    "changeStream",
    "checkFreeMonitoringStatus",
    "collMod",
    "collStats",
    "compact",
    "connPoolStats",
    "convertToCapped",
    "createCollection",
    "createIndex",
    "createRole",
    "createUser",
    "dbHash",
    "dbStats",
    "dropCollection",
    "dropDatabase",
    "dropIndex",
    "dropRole",
    "dropUser",
    "enableProfiler",
    "find",
    "fsync",
    "getCmdLineOpts",
    "getDefaultRWConcern",
    "getLog",
    "getParameter",
    "grantRole",
    "hostInfo",
    "indexStats",
    "inprog",
    "insert",
    "internal",
    "invalidateUserCache",
    "killAnyCursor",
    "killAnySession",
    "killCursors",
    "killop",
    "listCollections",
    "listDatabases",
    "listIndexes",
    "listSearchIndexes",
    "listSessions",
    "logRotate",
    "planCacheIndexFilter",
    "planCacheRead",
    "planCacheWrite",
    "reIndex",
    "remove",
    "renameCollectionSameDB",
    "replSetGetConfig",
    "replSetGetStatus",
    "revokeRole",
    "serverStatus",
    "setAuthenticationRestriction",
    "setDefaultRWConcern",
    "setParameter",
    "shutdown",
    "top",
    "unlock",
    "update",
    "useUUID",
    "validate",
    "viewRole",
    "viewUser",
    "",  // kOther
};

static_assert(kActionNames[static_cast<size_t>(Action::kViewUser)] == "viewUser");
static_assert(kActionNames[static_cast<size_t>(Action::kOther)].empty());

Action actionFromName(std::string_view name) {
    for (size_t i = 0; i < static_cast<size_t>(Action::kOther); ++i)
        if (kActionNames[i] == name) return static_cast<Action>(i);
    return Action::kOther;
}

// ---------------------------------------------------------------------------
// Small BSON helpers (the command was validated by the proxy; nothing here trusts
// a type it did not check).

std::string_view utf8(const bson_iter_t& it) {
    uint32_t len = 0;
    const char* s = bson_iter_utf8(&it, &len);
    return {s, len};
}

bool findField(const bson_t* doc, std::string_view key, bson_iter_t* it) {
    return bson_iter_init(it, doc) &&
           bson_iter_find_w_len(it, key.data(), static_cast<int>(key.size()));
}

bool has(const bson_t* doc, std::string_view key) {
    bson_iter_t it;
    return findField(doc, key, &it);
}

/// mongod's BSONElement::trueValue(): false for a missing field, false, 0, null, undefined.
bool truthy(const bson_t* doc, std::string_view key) {
    bson_iter_t it;
    return findField(doc, key, &it) && bson_iter_as_bool(&it);
}

/// A string field, or false when absent or of another type.
bool stringField(const bson_t* doc, std::string_view key, std::string_view* out) {
    bson_iter_t it;
    if (!findField(doc, key, &it) || !BSON_ITER_HOLDS_UTF8(&it)) return false;
    *out = utf8(it);
    return true;
}

/// The embedded document or array an iterator points at, as a static bson_t.
bool subDoc(const bson_iter_t& it, bson_t* out) {
    uint32_t len = 0;
    const uint8_t* data = nullptr;
    if (BSON_ITER_HOLDS_DOCUMENT(&it))
        bson_iter_document(&it, &len, &data);
    else if (BSON_ITER_HOLDS_ARRAY(&it))
        bson_iter_array(&it, &len, &data);
    else
        return false;
    return bson_init_static(out, data, len);
}

bool docField(const bson_t* doc, std::string_view key, bson_t* out) {
    bson_iter_t it;
    return findField(doc, key, &it) && BSON_ITER_HOLDS_DOCUMENT(&it) && subDoc(it, out);
}

bool arrayField(const bson_t* doc, std::string_view key, bson_t* out) {
    bson_iter_t it;
    return findField(doc, key, &it) && BSON_ITER_HOLDS_ARRAY(&it) && subDoc(it, out);
}

/// "db.coll" -> (db, coll); false without a dot.
bool splitNamespace(std::string_view ns, std::string_view* db, std::string_view* coll) {
    auto dot = ns.find('.');
    if (dot == std::string_view::npos || dot == 0) return false;
    *db = ns.substr(0, dot);
    *coll = ns.substr(dot + 1);
    return true;
}

// ---------------------------------------------------------------------------
// Resource matching: mongod's ResourcePatternSearchList, turned around (does this
// privilege's pattern appear in the target's search list?).

constexpr std::string_view kBucketsPrefix = "system.buckets.";

bool isNormalDatabase(std::string_view db) {
    return db != "local" && db != "config";
}

bool isNormalCollection(std::string_view db, std::string_view coll) {
    return !coll.starts_with("system.") && !(db == "local" && coll.starts_with("replset."));
}

/// What a command needs an action on.
struct Target {
    enum class Kind : uint8_t { kAnyResource, kCluster, kAnyNormal, kDatabase, kNamespace };
    Kind kind = Kind::kAnyResource;
    std::string_view db;
    std::string_view coll;

    static Target cluster() { return {Kind::kCluster, {}, {}}; }
    static Target anyNormal() { return {Kind::kAnyNormal, {}, {}}; }
    static Target database(std::string_view db) { return {Kind::kDatabase, db, {}}; }
    static Target ns(std::string_view db, std::string_view coll) {
        return {Kind::kNamespace, db, coll};
    }
};

bool covers(const Resource& p, const Target& t) {
    using K = Resource::Kind;
    if (p.kind == K::kAnyResource) return true;
    switch (t.kind) {
        case Target::Kind::kAnyResource:
            return false;
        case Target::Kind::kCluster:
            return p.kind == K::kCluster;
        case Target::Kind::kAnyNormal:
            return p.kind == K::kAnyNormal;
        case Target::Kind::kDatabase:
            return (p.kind == K::kAnyNormal && isNormalDatabase(t.db)) ||
                   (p.kind == K::kDatabase && p.db == t.db);
        case Target::Kind::kNamespace:
            break;
    }
    bool normal = isNormalCollection(t.db, t.coll);
    bool buckets = t.coll.size() > kBucketsPrefix.size() && t.coll.starts_with(kBucketsPrefix);
    std::string_view bucketsOf = buckets ? t.coll.substr(kBucketsPrefix.size()) : "";
    switch (p.kind) {
        case K::kAnyNormal:
            return normal && isNormalDatabase(t.db);
        case K::kDatabase:
            return normal && p.db == t.db;
        case K::kCollectionName:
            return p.collection == t.coll;
        case K::kNamespace:
            return p.db == t.db && p.collection == t.coll;
        case K::kAnySystemBuckets:
            return buckets;
        case K::kSystemBucketsInDatabase:
            return buckets && p.db == t.db;
        case K::kSystemBucketsName:
            return buckets && p.collection == bucketsOf;
        case K::kSystemBucketsNamespace:
            return buckets && p.db == t.db && p.collection == bucketsOf;
        default:
            return false;
    }
}

/// mongod unions the actions of every pattern in the target's search list.
bool authorized(const Target& t, const ActionSet& required, const std::vector<Privilege>& privs) {
    ActionSet granted;
    for (const auto& p : privs) {
        if (!covers(p.resource, t)) continue;
        granted.addAll(p.actions);
        if (granted.containsAll(required)) return true;
    }
    return required.empty();
}

/// "Root": a privilege on {anyResource: true} (root holds validate there, __system
/// everything). What the proxy asks for when it cannot tell what mongod would check.
bool isRoot(const std::vector<Privilege>& privs) {
    for (const auto& p : privs)
        if (p.resource.kind == Resource::Kind::kAnyResource && !p.actions.empty()) return true;
    return false;
}

// ---------------------------------------------------------------------------
// Parsing privileges.

enum class ResourceParse { kKnown, kUnknown };

ResourceParse parseResource(const bson_t* doc, Resource* out) {
    bson_iter_t it;
    std::string_view db, coll, buckets;
    bool hasDb = false, hasColl = false, hasBuckets = false, cluster = false, any = false;
    int fields = 0;
    if (!bson_iter_init(&it, doc)) return ResourceParse::kUnknown;
    while (bson_iter_next(&it)) {
        ++fields;
        std::string_view k = bson_iter_key(&it);
        if (k == "db" && BSON_ITER_HOLDS_UTF8(&it)) {
            hasDb = true;
            db = utf8(it);
        } else if (k == "collection" && BSON_ITER_HOLDS_UTF8(&it)) {
            hasColl = true;
            coll = utf8(it);
        } else if (k == "system_buckets" && BSON_ITER_HOLDS_UTF8(&it)) {
            hasBuckets = true;
            buckets = utf8(it);
        } else if (k == "cluster" && BSON_ITER_HOLDS_BOOL(&it) && bson_iter_bool(&it)) {
            cluster = true;
        } else if (k == "anyResource" && BSON_ITER_HOLDS_BOOL(&it) && bson_iter_bool(&it)) {
            any = true;
        } else {
            return ResourceParse::kUnknown;  // a tenant, a future pattern: grants nothing
        }
    }
    using K = Resource::Kind;
    if (any && fields == 1) {
        out->kind = K::kAnyResource;
    } else if (cluster && fields == 1) {
        out->kind = K::kCluster;
    } else if (hasDb && hasColl && fields == 2) {
        out->kind = db.empty() ? (coll.empty() ? K::kAnyNormal : K::kCollectionName)
                               : (coll.empty() ? K::kDatabase : K::kNamespace);
        out->db = db;
        out->collection = coll;
    } else if (hasDb && hasBuckets && fields == 2) {
        out->kind = db.empty() ? (buckets.empty() ? K::kAnySystemBuckets : K::kSystemBucketsName)
                               : (buckets.empty() ? K::kSystemBucketsInDatabase
                                                  : K::kSystemBucketsNamespace);
        out->db = db;
        out->collection = buckets;
    } else {
        return ResourceParse::kUnknown;
    }
    return ResourceParse::kKnown;
}

Status privilegeError(size_t i, std::string_view what) {
    return Status(ErrorCode::FailedToParse, fmt::format("inheritedPrivileges[{}]: {}", i, what));
}

}  // namespace

std::string_view actionName(Action a) {
    return kActionNames[static_cast<size_t>(a)];
}

StatusWith<std::vector<Privilege>> parsePrivileges(const bson_t* arr) {
    std::vector<Privilege> out;
    bson_iter_t it;
    if (arr == nullptr || !bson_iter_init(&it, arr))
        return Status(ErrorCode::FailedToParse, "inheritedPrivileges is not an array");
    for (size_t i = 0; bson_iter_next(&it); ++i) {
        bson_t entry;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !subDoc(it, &entry))
            return privilegeError(i, "not a document");
        bson_t resource, actions;
        if (!docField(&entry, "resource", &resource))
            return privilegeError(i, "resource is not a document");
        if (!arrayField(&entry, "actions", &actions))
            return privilegeError(i, "actions is not an array");
        Privilege p;
        bson_iter_t a;
        bson_iter_init(&a, &actions);
        while (bson_iter_next(&a)) {
            if (!BSON_ITER_HOLDS_UTF8(&a)) return privilegeError(i, "an action is not a string");
            p.actions.add(actionFromName(utf8(a)));
        }
        if (parseResource(&resource, &p.resource) == ResourceParse::kKnown)
            out.push_back(std::move(p));
    }
    return out;
}

bool isAuthorizedOnNamespace(std::string_view db, std::string_view coll, const ActionSet& actions,
                             const std::vector<Privilege>& privs) {
    return authorized(Target::ns(db, coll), actions, privs);
}

bool isAuthorizedOnCluster(const ActionSet& actions, const std::vector<Privilege>& privs) {
    return authorized(Target::cluster(), actions, privs);
}

bool hasAnyPrivilegeOn(std::string_view db, std::string_view coll,
                       const std::vector<Privilege>& privs) {
    Target t = Target::ns(db, coll);
    for (const auto& p : privs)
        if (!p.actions.empty() && covers(p.resource, t)) return true;
    return false;
}

bool hasAnyPrivilegeOnDatabase(std::string_view db, const std::vector<Privilege>& privs) {
    using K = Resource::Kind;
    for (const auto& p : privs) {
        if (p.actions.empty()) continue;
        switch (p.resource.kind) {
            case K::kAnyResource:
            case K::kCollectionName:  // some collection of that name may live in db
            case K::kAnySystemBuckets:
            case K::kSystemBucketsName:
                return true;
            case K::kAnyNormal:
                if (isNormalDatabase(db)) return true;
                break;
            case K::kDatabase:
            case K::kNamespace:
            case K::kSystemBucketsInDatabase:
            case K::kSystemBucketsNamespace:
                if (p.resource.db == db) return true;
                break;
            case K::kCluster:
                break;
        }
    }
    return false;
}

ListDatabasesScope listDatabasesScope(const bson_t* cmd, const std::vector<Privilege>& privs) {
    bson_iter_t it;
    if (findField(cmd, "authorizedDatabases", &it) && !BSON_ITER_HOLDS_NULL(&it))
        return bson_iter_as_bool(&it) ? ListDatabasesScope::kAuthorizedOnly
                                      : ListDatabasesScope::kAll;
    return authorized(Target::cluster(), {Action::kListDatabases}, privs)
               ? ListDatabasesScope::kAll
               : ListDatabasesScope::kAuthorizedOnly;
}

bool mayKillAnyCursor(std::string_view ns, const std::vector<Privilege>& privs) {
    if (authorized(Target::cluster(), {Action::kKillAnyCursor}, privs)) return true;
    std::string_view db, coll;
    if (!splitNamespace(ns, &db, &coll)) return false;
    // A listCollections cursor ("db.$cmd.listCollections") belongs to the database.
    Target t = coll == "$cmd.listCollections" ? Target::database(db) : Target::ns(db, coll);
    return authorized(t, {Action::kKillAnyCursor}, privs);
}

bool maySeeAllOperations(const std::vector<Privilege>& privs) {
    return authorized(Target::cluster(), {Action::kInprog}, privs);
}

bool mayKillAnyOperation(const std::vector<Privilege>& privs) {
    return authorized(Target::cluster(), {Action::kKillop}, privs);
}

namespace {

// ---------------------------------------------------------------------------
// The command table.

struct Request {
    std::string_view name;
    std::string_view db;
    const bson_t* cmd;
    const std::vector<Privilege>& privs;
    std::string_view userName;  // empty: not authenticated
    std::string_view userDb;
    std::span<const wire::DocumentSequence> sequences;

    bool can(const Target& t, const ActionSet& actions) const {
        return authorized(t, actions, privs);
    }
    bool isSelf(std::string_view user, std::string_view db) const {
        return !userName.empty() && user == userName && db == userDb;
    }
};

/// A refusal whose message authorize() writes ("not authorized on ...").
Status denied() {
    return Status(ErrorCode::Unauthorized, std::string());
}

Status allowIf(bool ok) {
    return ok ? Status::OK() : denied();
}

Status rootOnly(const Request& r) {
    return allowIf(isRoot(r.privs));
}

using Check = Status (*)(const Request&);

/// The collection a command names with its first field. False (the caller then
/// asks for root) for a UUID, which only mongod's catalog can resolve, or any
/// other non-string value.
bool firstCollection(const Request& r, Target* out) {
    bson_iter_t it;
    if (!bson_iter_init(&it, r.cmd) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_UTF8(&it))
        return false;
    *out = Target::ns(r.db, utf8(it));
    return true;
}

Status onCollection(const Request& r, ActionSet actions) {
    Target t;
    if (!firstCollection(r, &t)) return rootOnly(r);
    return allowIf(r.can(t, actions));
}

template <Action A>
Status collectionAction(const Request& r) {
    return onCollection(r, {A});
}

template <Action A>
Status databaseAction(const Request& r) {
    return allowIf(r.can(Target::database(r.db), {A}));
}

template <Action A>
Status clusterAction(const Request& r) {
    return allowIf(r.can(Target::cluster(), {A}));
}

Status anyUser(const Request&) {
    return Status::OK();
}

void addBypass(const Request& r, ActionSet* actions) {
    if (truthy(r.cmd, "bypassDocumentValidation")) actions->add(Action::kBypassDocumentValidation);
}

/// The `term` field is for replica set members only (mongod: internal on the cluster).
Status termNeedsInternal(const Request& r) {
    if (has(r.cmd, "term")) return allowIf(r.can(Target::cluster(), {Action::kInternal}));
    return Status::OK();
}

Status checkFind(const Request& r) {
    Status s = onCollection(r, {Action::kFind});
    return s.isOK() ? termNeedsInternal(r) : s;
}

Status checkGetMore(const Request& r) {
    // The cursor must be the caller's own: the proxy's cursor map checks that.
    return termNeedsInternal(r);
}

Status checkInsert(const Request& r) {
    ActionSet a{Action::kInsert};
    addBypass(r, &a);
    return onCollection(r, a);
}

/// Whether any statement of an update (in the body or a document sequence) upserts.
bool anyUpsert(const Request& r) {
    for (const auto& seq : r.sequences) {
        if (seq.identifier != "updates") continue;
        for (auto d : seq.documents) {
            bson_t stmt;
            if (bson_init_static(&stmt, d.data(), d.size()) && truthy(&stmt, "upsert")) return true;
        }
    }
    bson_t updates;
    if (!arrayField(r.cmd, "updates", &updates)) return false;
    bson_iter_t it;
    bson_iter_init(&it, &updates);
    while (bson_iter_next(&it)) {
        bson_t stmt;
        if (BSON_ITER_HOLDS_DOCUMENT(&it) && subDoc(it, &stmt) && truthy(&stmt, "upsert"))
            return true;
    }
    return false;
}

Status checkUpdate(const Request& r) {
    ActionSet a{Action::kUpdate};
    if (anyUpsert(r)) a.add(Action::kInsert);
    addBypass(r, &a);
    return onCollection(r, a);
}

Status checkFindAndModify(const Request& r) {
    ActionSet a{Action::kFind};
    bson_iter_t it;
    if (findField(r.cmd, "update", &it) && !BSON_ITER_HOLDS_NULL(&it)) a.add(Action::kUpdate);
    if (truthy(r.cmd, "upsert")) a.add(Action::kInsert);
    if (truthy(r.cmd, "remove")) a.add(Action::kRemove);
    addBypass(r, &a);
    return onCollection(r, a);
}

// ---- aggregation pipelines (mongod's LiteParsedDocumentSource::requiredPrivileges)

enum class Stage : uint8_t {
    kNone,  // needs nothing of its own ($match, $group...)
    kDocuments,
    kLookup,
    kGraphLookup,
    kUnionWith,
    kFacet,
    kOut,
    kMerge,
    kCollStats,
    kIndexStats,
    kPlanCacheStats,
    kCurrentOp,
    kListSessions,
    kChangeStream,
    kSearch,
    kListSearchIndexes,
    kUnknown,
};

struct StageInfo {
    Stage stage;
    bool initialSource;  // produces its own documents: no implicit find on the collection
};

StageInfo stageInfo(std::string_view name) {
    static const std::unordered_map<std::string_view, StageInfo> kStages = {
        {"$addFields", {Stage::kNone, false}},
        {"$bucket", {Stage::kNone, false}},
        {"$bucketAuto", {Stage::kNone, false}},
        {"$changeStreamSplitLargeEvent", {Stage::kNone, false}},
        {"$count", {Stage::kNone, false}},
        {"$densify", {Stage::kNone, false}},
        {"$fill", {Stage::kNone, false}},
        {"$geoNear", {Stage::kNone, false}},
        {"$group", {Stage::kNone, false}},
        {"$limit", {Stage::kNone, false}},
        {"$match", {Stage::kNone, false}},
        {"$project", {Stage::kNone, false}},
        {"$redact", {Stage::kNone, false}},
        {"$replaceRoot", {Stage::kNone, false}},
        {"$replaceWith", {Stage::kNone, false}},
        {"$sample", {Stage::kNone, false}},
        {"$set", {Stage::kNone, false}},
        {"$setWindowFields", {Stage::kNone, false}},
        {"$skip", {Stage::kNone, false}},
        {"$sort", {Stage::kNone, false}},
        {"$sortByCount", {Stage::kNone, false}},
        {"$unset", {Stage::kNone, false}},
        {"$unwind", {Stage::kNone, false}},
        {"$documents", {Stage::kDocuments, true}},
        {"$lookup", {Stage::kLookup, false}},
        {"$graphLookup", {Stage::kGraphLookup, false}},
        {"$unionWith", {Stage::kUnionWith, false}},
        {"$facet", {Stage::kFacet, false}},
        {"$out", {Stage::kOut, false}},
        {"$merge", {Stage::kMerge, false}},
        {"$collStats", {Stage::kCollStats, true}},
        {"$indexStats", {Stage::kIndexStats, true}},
        {"$planCacheStats", {Stage::kPlanCacheStats, true}},
        {"$currentOp", {Stage::kCurrentOp, true}},
        {"$listSessions", {Stage::kListSessions, true}},
        {"$listLocalSessions", {Stage::kListSessions, true}},
        {"$changeStream", {Stage::kChangeStream, true}},
        {"$search", {Stage::kSearch, true}},
        {"$searchMeta", {Stage::kSearch, true}},
        {"$vectorSearch", {Stage::kSearch, true}},
        {"$listSearchIndexes", {Stage::kListSearchIndexes, true}},
    };
    auto it = kStages.find(name);
    return it == kStages.end() ? StageInfo{Stage::kUnknown, false} : it->second;
}

constexpr std::string_view kCollectionless = "$cmd.aggregate";  // mongod's {aggregate: 1} ns
constexpr int kMaxPipelineDepth = 20;

/// The namespace a pipeline reads: db.coll, or db.$cmd.aggregate for {aggregate: 1}.
struct PipelineNs {
    std::string_view db;
    std::string_view coll;
    bool collectionless() const { return coll == kCollectionless; }
    Target target() const { return Target::ns(db, coll); }
};

/// A pipeline's stages: each element must be a one-field document.
bool firstStageName(const bson_t* pipeline, std::string_view* name) {
    bson_iter_t it, st;
    if (!bson_iter_init(&it, pipeline) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &st) || !bson_iter_next(&st))
        return false;
    *name = bson_iter_key(&st);
    return true;
}

bool startsWithInitialSource(const bson_t* pipeline) {
    std::string_view first;
    return firstStageName(pipeline, &first) && stageInfo(first).initialSource;
}

Status checkStages(const Request& r, const PipelineNs& ns, const bson_t* pipeline, bool bypass,
                   int depth);

/// Whole-pipeline rule (getPrivilegesForAggregate): find on the namespace unless
/// the first stage produces its own documents, then every stage's needs.
Status checkPipeline(const Request& r, const PipelineNs& ns, const bson_t* pipeline, bool bypass) {
    if (!startsWithInitialSource(pipeline) && !r.can(ns.target(), {Action::kFind})) return denied();
    return checkStages(r, ns, pipeline, bypass, 0);
}

/// A foreign namespace in a stage spec: a string (same database) or {db, coll}.
bool foreignNs(const bson_iter_t& it, std::string_view db, PipelineNs* out) {
    if (BSON_ITER_HOLDS_UTF8(&it)) {
        *out = {db, utf8(it)};
        return true;
    }
    bson_t d;
    std::string_view fdb, fcoll;
    if (BSON_ITER_HOLDS_DOCUMENT(&it) && subDoc(it, &d) && stringField(&d, "coll", &fcoll)) {
        if (!stringField(&d, "db", &fdb)) fdb = db;
        *out = {fdb, fcoll};
        return true;
    }
    return false;
}

/// $lookup and $unionWith: find on the foreign collection unless a sub-pipeline
/// starts with its own source ($documents), plus the sub-pipeline's stages.
Status checkJoin(const Request& r, const PipelineNs& foreign, const bson_t* subPipeline,
                 bool bypass, int depth) {
    if ((subPipeline == nullptr || !startsWithInitialSource(subPipeline)) &&
        !r.can(foreign.target(), {Action::kFind}))
        return denied();
    return subPipeline ? checkStages(r, foreign, subPipeline, bypass, depth + 1) : Status::OK();
}

Status checkLookup(const Request& r, const PipelineNs& ns, const bson_iter_t& spec, bool bypass,
                   int depth) {
    bson_t d, sub;
    if (!BSON_ITER_HOLDS_DOCUMENT(&spec) || !subDoc(spec, &d)) return rootOnly(r);
    PipelineNs foreign{ns.db, kCollectionless};
    bson_iter_t from;
    if (findField(&d, "from", &from) && !foreignNs(from, ns.db, &foreign)) return rootOnly(r);
    bool hasPipeline = has(&d, "pipeline");
    if (hasPipeline && !arrayField(&d, "pipeline", &sub)) return rootOnly(r);
    return checkJoin(r, foreign, hasPipeline ? &sub : nullptr, bypass, depth);
}

Status checkUnionWith(const Request& r, const PipelineNs& ns, const bson_iter_t& spec, bool bypass,
                      int depth) {
    if (BSON_ITER_HOLDS_UTF8(&spec))
        return checkJoin(r, {ns.db, utf8(spec)}, nullptr, bypass, depth);
    bson_t d, sub;
    if (!BSON_ITER_HOLDS_DOCUMENT(&spec) || !subDoc(spec, &d)) return rootOnly(r);
    PipelineNs foreign{ns.db, kCollectionless};
    bson_iter_t coll;
    if (findField(&d, "coll", &coll)) {
        if (!BSON_ITER_HOLDS_UTF8(&coll)) return rootOnly(r);
        foreign.coll = utf8(coll);
    }
    bool hasPipeline = has(&d, "pipeline");
    if (hasPipeline && !arrayField(&d, "pipeline", &sub)) return rootOnly(r);
    return checkJoin(r, foreign, hasPipeline ? &sub : nullptr, bypass, depth);
}

Status checkGraphLookup(const Request& r, const PipelineNs& ns, const bson_iter_t& spec) {
    bson_t d;
    std::string_view from;
    if (!BSON_ITER_HOLDS_DOCUMENT(&spec) || !subDoc(spec, &d) || !stringField(&d, "from", &from))
        return rootOnly(r);
    return allowIf(r.can(Target::ns(ns.db, from), {Action::kFind}));
}

Status checkFacet(const Request& r, const PipelineNs& ns, const bson_iter_t& spec, bool bypass,
                  int depth) {
    bson_t d;
    if (!BSON_ITER_HOLDS_DOCUMENT(&spec) || !subDoc(spec, &d)) return rootOnly(r);
    bson_iter_t it;
    bson_iter_init(&it, &d);
    while (bson_iter_next(&it)) {
        bson_t sub;
        if (!BSON_ITER_HOLDS_ARRAY(&it) || !subDoc(it, &sub)) return rootOnly(r);
        Status s = checkStages(r, ns, &sub, bypass, depth + 1);
        if (!s.isOK()) return s;
    }
    return Status::OK();
}

Status checkOut(const Request& r, const PipelineNs& ns, const bson_iter_t& spec, bool bypass) {
    PipelineNs target;
    if (!foreignNs(spec, ns.db, &target)) return rootOnly(r);
    ActionSet a{Action::kInsert, Action::kRemove};
    if (bypass) a.add(Action::kBypassDocumentValidation);
    return allowIf(r.can(target.target(), a));
}

/// $merge's actions by (whenMatched, whenNotMatched), as mongod's merge strategy
/// descriptors: update when documents may be matched, insert when they may be added.
Status checkMerge(const Request& r, const PipelineNs& ns, const bson_iter_t& spec, bool bypass) {
    PipelineNs target;
    std::string_view matched = "merge", notMatched = "insert";
    if (BSON_ITER_HOLDS_UTF8(&spec)) {
        target = {ns.db, utf8(spec)};
    } else {
        bson_t d;
        bson_iter_t into, wm;
        if (!BSON_ITER_HOLDS_DOCUMENT(&spec) || !subDoc(spec, &d) ||
            !findField(&d, "into", &into) || !foreignNs(into, ns.db, &target))
            return rootOnly(r);
        if (findField(&d, "whenMatched", &wm)) {
            if (BSON_ITER_HOLDS_UTF8(&wm))
                matched = utf8(wm);
            else if (BSON_ITER_HOLDS_ARRAY(&wm))
                matched = "pipeline";
            else
                return rootOnly(r);
        }
        if (has(&d, "whenNotMatched") && !stringField(&d, "whenNotMatched", &notMatched))
            return rootOnly(r);
    }
    ActionSet a;
    if (matched == "fail" && notMatched == "insert") {
        a.add(Action::kInsert);
    } else {
        a.add(Action::kUpdate);
        // replace/merge/keepExisting/pipeline with insert add documents; with
        // fail or discard they only update. An unknown mode mongod refuses anyway.
        if (notMatched != "fail" && notMatched != "discard") a.add(Action::kInsert);
    }
    if (bypass) a.add(Action::kBypassDocumentValidation);
    return allowIf(r.can(target.target(), a));
}

/// $listSessions / $listLocalSessions: every user's sessions, or users other than
/// oneself, need listSessions on the cluster.
Status checkListSessions(const Request& r, const bson_iter_t& spec) {
    bson_t d;
    if (!BSON_ITER_HOLDS_DOCUMENT(&spec) || !subDoc(spec, &d)) return rootOnly(r);
    bool others = truthy(&d, "allUsers");
    bson_t users;
    if (!others && arrayField(&d, "users", &users)) {
        bson_iter_t it;
        bson_iter_init(&it, &users);
        while (bson_iter_next(&it)) {
            bson_t u;
            std::string_view name, db;
            if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !subDoc(it, &u) ||
                !stringField(&u, "user", &name) || !stringField(&u, "db", &db) ||
                !r.isSelf(name, db))
                others = true;
        }
    }
    return others ? allowIf(r.can(Target::cluster(), {Action::kListSessions})) : Status::OK();
}

/// $changeStream: find + changeStream on what it watches: the collection, the
/// database ({aggregate: 1}), or every normal collection (admin, {aggregate: 1}).
Status checkChangeStream(const Request& r, const PipelineNs& ns) {
    ActionSet a{Action::kFind, Action::kChangeStream};
    if (!ns.collectionless()) return allowIf(r.can(ns.target(), a));
    if (ns.db == "admin") return allowIf(r.can(Target::anyNormal(), a));
    return allowIf(r.can(Target::database(ns.db), a));
}

Status checkStage(const Request& r, const PipelineNs& ns, const bson_iter_t& spec,
                  std::string_view name, bool bypass, int depth) {
    switch (stageInfo(name).stage) {
        case Stage::kNone:
        case Stage::kDocuments:
            return Status::OK();
        case Stage::kLookup:
            return checkLookup(r, ns, spec, bypass, depth);
        case Stage::kGraphLookup:
            return checkGraphLookup(r, ns, spec);
        case Stage::kUnionWith:
            return checkUnionWith(r, ns, spec, bypass, depth);
        case Stage::kFacet:
            return checkFacet(r, ns, spec, bypass, depth);
        case Stage::kOut:
            return checkOut(r, ns, spec, bypass);
        case Stage::kMerge:
            return checkMerge(r, ns, spec, bypass);
        case Stage::kCollStats:
            return allowIf(r.can(ns.target(), {Action::kCollStats}));
        case Stage::kIndexStats:
            return allowIf(r.can(ns.target(), {Action::kIndexStats}));
        case Stage::kPlanCacheStats:
            return allowIf(r.can(ns.target(), {Action::kPlanCacheRead}));
        case Stage::kCurrentOp: {
            // The proxy answers $currentOp from its own operations (mongos' localOps):
            // one's own need nothing, everyone's need inprog.
            bson_t d;
            if (!BSON_ITER_HOLDS_DOCUMENT(&spec) || !subDoc(spec, &d)) return rootOnly(r);
            return truthy(&d, "allUsers") ? allowIf(r.can(Target::cluster(), {Action::kInprog}))
                                          : Status::OK();
        }
        case Stage::kListSessions:
            return checkListSessions(r, spec);
        case Stage::kChangeStream:
            return checkChangeStream(r, ns);
        case Stage::kSearch:
            return allowIf(r.can(ns.target(), {Action::kFind}));
        case Stage::kListSearchIndexes:
            return allowIf(r.can(ns.target(), {Action::kListSearchIndexes}));
        case Stage::kUnknown:
            break;
    }
    return rootOnly(r);
}

Status checkStages(const Request& r, const PipelineNs& ns, const bson_t* pipeline, bool bypass,
                   int depth) {
    if (depth > kMaxPipelineDepth) return rootOnly(r);
    bson_iter_t it;
    if (!bson_iter_init(&it, pipeline)) return rootOnly(r);
    while (bson_iter_next(&it)) {
        bson_iter_t st;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &st) || !bson_iter_next(&st))
            return rootOnly(r);
        Status s = checkStage(r, ns, st, bson_iter_key(&st), bypass, depth);
        if (!s.isOK()) return s;
        if (bson_iter_next(&st)) return rootOnly(r);  // a stage is a one-field document
    }
    return Status::OK();
}

Status checkAggregate(const Request& r) {
    bson_iter_t it;
    PipelineNs ns{r.db, kCollectionless};
    if (!bson_iter_init(&it, r.cmd) || !bson_iter_next(&it)) return rootOnly(r);
    if (BSON_ITER_HOLDS_UTF8(&it))
        ns.coll = utf8(it);
    else if (!BSON_ITER_HOLDS_NUMBER(&it))  // a UUID or garbage
        return rootOnly(r);
    bson_t pipeline;
    if (!arrayField(r.cmd, "pipeline", &pipeline)) return rootOnly(r);
    return checkPipeline(r, ns, &pipeline, truthy(r.cmd, "bypassDocumentValidation"));
}

// ---- DDL

/// Creating or changing a view (checkAuthForCreateOrModifyView): nothing more when
/// the user cannot read the view anyway, else what aggregating its pipeline over
/// `viewOn` needs.
Status checkView(const Request& r, const Target& view, std::string_view viewOn,
                 const bson_t* pipeline) {
    if (!r.can(view, {Action::kFind})) return Status::OK();
    bson_t empty = BSON_INITIALIZER;
    return checkPipeline(r, {r.db, viewOn}, pipeline ? pipeline : &empty, false);
}

Status checkCreate(const Request& r) {
    Target t;
    if (!firstCollection(r, &t)) return rootOnly(r);
    if (truthy(r.cmd, "capped") && !r.can(t, {Action::kConvertToCapped})) return denied();
    bool mayCreate = r.can(t, {Action::kCreateCollection});
    if (has(r.cmd, "viewOn")) {
        // A view needs createCollection itself; insert does not imply it.
        std::string_view viewOn;
        if (!mayCreate) return denied();
        if (!stringField(r.cmd, "viewOn", &viewOn)) return rootOnly(r);
        bson_t pipeline;
        bool hasPipeline = has(r.cmd, "pipeline");
        if (hasPipeline && !arrayField(r.cmd, "pipeline", &pipeline)) return rootOnly(r);
        return checkView(r, t, viewOn, hasPipeline ? &pipeline : nullptr);
    }
    return allowIf(mayCreate || r.can(t, {Action::kInsert}));
}

Status checkCollMod(const Request& r) {
    Target t;
    if (!firstCollection(r, &t)) return rootOnly(r);
    if (!r.can(t, {Action::kCollMod})) return denied();
    bool hasViewOn = has(r.cmd, "viewOn"), hasPipeline = has(r.cmd, "pipeline");
    if (hasViewOn != hasPipeline)
        return Status(ErrorCode::InvalidOptions,
                      "Must specify both 'viewOn' and 'pipeline' when modifying a view and auth "
                      "is enabled");
    if (!hasViewOn) return Status::OK();
    std::string_view viewOn;
    bson_t pipeline;
    if (!stringField(r.cmd, "viewOn", &viewOn) || !arrayField(r.cmd, "pipeline", &pipeline))
        return rootOnly(r);
    return checkView(r, t, viewOn, &pipeline);
}

/// renameCollection (admin only): within a database, renameCollectionSameDB (and
/// dropCollection on the target with dropTarget) suffices unless the user could read
/// the target but not the source; otherwise find+dropCollection on the source and
/// insert+createIndex (+dropCollection) on the target.
Status checkRenameCollection(const Request& r) {
    std::string_view from, to, fromDb, fromColl, toDb, toColl;
    if (!stringField(r.cmd, "renameCollection", &from) || !stringField(r.cmd, "to", &to) ||
        !splitNamespace(from, &fromDb, &fromColl) || !splitNamespace(to, &toDb, &toColl))
        return rootOnly(r);
    Target source = Target::ns(fromDb, fromColl), target = Target::ns(toDb, toColl);
    bool dropTarget = truthy(r.cmd, "dropTarget");
    if (fromDb == toDb && !fromColl.starts_with("system.") && !toColl.starts_with("system.")) {
        bool canRename = r.can(Target::database(fromDb), {Action::kRenameCollectionSameDB});
        bool canDrop = !dropTarget || r.can(target, {Action::kDropCollection});
        bool readSource = r.can(source, {Action::kFind});
        bool readTarget = r.can(target, {Action::kFind});
        if (canRename && canDrop && (readSource || !readTarget)) return Status::OK();
    }
    if (!r.can(source, {Action::kFind, Action::kDropCollection})) return denied();
    ActionSet onTarget{Action::kInsert, Action::kCreateIndex};
    if (dropTarget) onTarget.add(Action::kDropCollection);
    return allowIf(r.can(target, onTarget));
}

Status checkCloneCollectionAsCapped(const Request& r) {
    Target source;
    std::string_view to;
    if (!firstCollection(r, &source) || !stringField(r.cmd, "toCollection", &to))
        return rootOnly(r);
    if (!r.can(source, {Action::kFind})) return denied();
    return allowIf(r.can(Target::ns(r.db, to),
                         {Action::kInsert, Action::kCreateIndex, Action::kConvertToCapped}));
}

/// dataSize names a full namespace ("db.coll").
Status checkDataSize(const Request& r) {
    bson_iter_t it;
    std::string_view db, coll;
    if (!bson_iter_init(&it, r.cmd) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_UTF8(&it) ||
        !splitNamespace(utf8(it), &db, &coll))
        return rootOnly(r);
    return allowIf(r.can(Target::ns(db, coll), {Action::kFind}));
}

/// mapReduce: find on the input; a collection output needs insert and remove
/// (replace) or update (merge, reduce), plus bypassDocumentValidation when asked.
Status checkMapReduce(const Request& r) {
    Target input;
    if (!firstCollection(r, &input)) return rootOnly(r);
    if (!r.can(input, {Action::kFind})) return denied();
    bson_iter_t out;
    if (!findField(r.cmd, "out", &out)) return rootOnly(r);
    std::string_view outDb = r.db, outColl;
    bool replace = true;
    if (BSON_ITER_HOLDS_UTF8(&out)) {
        outColl = utf8(out);
    } else {
        bson_t d;
        if (!BSON_ITER_HOLDS_DOCUMENT(&out) || !subDoc(out, &d)) return rootOnly(r);
        if (has(&d, "inline")) return Status::OK();
        if (stringField(&d, "replace", &outColl)) {
            replace = true;
        } else if (stringField(&d, "merge", &outColl) || stringField(&d, "reduce", &outColl)) {
            replace = false;
        } else {
            return rootOnly(r);
        }
        if (has(&d, "db") && !stringField(&d, "db", &outDb)) return rootOnly(r);
    }
    ActionSet a{Action::kInsert, replace ? Action::kRemove : Action::kUpdate};
    addBypass(r, &a);
    return allowIf(r.can(Target::ns(outDb, outColl), a));
}

Status checkListCollections(const Request& r) {
    // nameOnly + authorizedCollections: any privilege in the database will do (the
    // proxy then lists only the collections hasAnyPrivilegeOn() accepts).
    if (truthy(r.cmd, "authorizedCollections") && truthy(r.cmd, "nameOnly") &&
        hasAnyPrivilegeOnDatabase(r.db, r.privs))
        return Status::OK();
    return allowIf(r.can(Target::database(r.db), {Action::kListCollections}));
}

Status checkListDatabases(const Request& r) {
    // Any user may list the databases it can reach; asking for all of them
    // (authorizedDatabases: false) needs listDatabases. mongod raises this one itself.
    bson_iter_t it;
    if (findField(r.cmd, "authorizedDatabases", &it) && !BSON_ITER_HOLDS_NULL(&it) &&
        !bson_iter_as_bool(&it) && !r.can(Target::cluster(), {Action::kListDatabases}))
        return Status(ErrorCode::Unauthorized, "Insufficient permissions to list all databases");
    return Status::OK();
}

Status checkProfile(const Request& r) {
    // Reading the settings ({profile: -1} alone) needs only find on system.profile.
    bson_iter_t it;
    if (bson_iter_init(&it, r.cmd) && bson_iter_next(&it) && BSON_ITER_HOLDS_NUMBER(&it) &&
        bson_iter_as_double(&it) < 0 && !has(r.cmd, "slowms") && !has(r.cmd, "sampleRate") &&
        !has(r.cmd, "filter") && r.can(Target::ns(r.db, "system.profile"), {Action::kFind}))
        return Status::OK();
    return allowIf(r.can(Target::database(r.db), {Action::kEnableProfiler}));
}

Status checkCurrentOp(const Request& r) {
    // Without inprog a user sees its own operations, when it asks for only those.
    return allowIf(r.can(Target::cluster(), {Action::kInprog}) || truthy(r.cmd, "$ownOps"));
}

// ---- users and roles (mongod's user_management_commands checks)

struct RoleRef {
    std::string_view role;
    std::string_view db;
};

/// A roles array: "name" (a role of this database) or {role, db}. False when malformed.
bool roleList(const Request& r, const bson_t* arr, std::vector<RoleRef>* out) {
    bson_iter_t it;
    if (!bson_iter_init(&it, arr)) return false;
    while (bson_iter_next(&it)) {
        if (BSON_ITER_HOLDS_UTF8(&it)) {
            out->push_back({utf8(it), r.db});
            continue;
        }
        bson_t d;
        RoleRef ref;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !subDoc(it, &d) ||
            !stringField(&d, "role", &ref.role) || !stringField(&d, "db", &ref.db))
            return false;
        out->push_back(ref);
    }
    return true;
}

/// grantRole (or revokeRole) on the database of every role in field `field`.
Status checkRoles(const Request& r, std::string_view field, Action action, bool required) {
    if (!has(r.cmd, field)) return required ? rootOnly(r) : Status::OK();
    bson_t arr;
    std::vector<RoleRef> roles;
    if (!arrayField(r.cmd, field, &arr) || !roleList(r, &arr, &roles)) return rootOnly(r);
    for (const auto& role : roles)
        if (!r.can(Target::database(role.db), {action})) return denied();
    return Status::OK();
}

/// Granting (revoking) privileges: grantRole (revokeRole) on the database of a
/// database or namespace resource, on admin for anything wider.
Status checkPrivilegeGrants(const Request& r, Action action, bool required) {
    if (!has(r.cmd, "privileges")) return required ? rootOnly(r) : Status::OK();
    bson_t arr;
    if (!arrayField(r.cmd, "privileges", &arr)) return rootOnly(r);
    bson_iter_t it;
    bson_iter_init(&it, &arr);
    while (bson_iter_next(&it)) {
        bson_t p, res;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !subDoc(it, &p) || !docField(&p, "resource", &res))
            return rootOnly(r);
        Resource parsed;
        std::string_view db = "admin";
        if (parseResource(&res, &parsed) == ResourceParse::kKnown &&
            (parsed.kind == Resource::Kind::kDatabase || parsed.kind == Resource::Kind::kNamespace))
            db = parsed.db;
        if (!r.can(Target::database(db), {action})) return denied();
    }
    return Status::OK();
}

Status checkRestrictions(const Request& r) {
    if (!has(r.cmd, "authenticationRestrictions")) return Status::OK();
    return allowIf(r.can(Target::database(r.db), {Action::kSetAuthenticationRestriction}));
}

template <typename... Checks>
Status allOf(Checks... checks) {
    Status result = Status::OK();
    ((result.isOK() ? (void)(result = checks()) : (void)0), ...);
    return result;
}

Status checkCreateUser(const Request& r) {
    return allOf([&] { return databaseAction<Action::kCreateUser>(r); },
                 [&] { return checkRoles(r, "roles", Action::kGrantRole, false); },
                 [&] { return checkRestrictions(r); });
}

Status checkUpdateUser(const Request& r) {
    std::string_view name;
    if (!stringField(r.cmd, "updateUser", &name)) return rootOnly(r);
    Target db = Target::database(r.db);
    bool self = r.isSelf(name, r.db);
    // One's own password and customData need only changeOwn*; anyone's need change*.
    if (has(r.cmd, "pwd") && !(self && r.can(db, {Action::kChangeOwnPassword})) &&
        !r.can(db, {Action::kChangePassword}))
        return denied();
    if (has(r.cmd, "customData") && !(self && r.can(db, {Action::kChangeOwnCustomData})) &&
        !r.can(db, {Action::kChangeCustomData}))
        return denied();
    if (has(r.cmd, "roles")) {
        // Setting the roles may revoke any role: revokeRole everywhere.
        if (!r.can(Target::anyNormal(), {Action::kRevokeRole})) return denied();
        Status s = checkRoles(r, "roles", Action::kGrantRole, true);
        if (!s.isOK()) return s;
    }
    return checkRestrictions(r);
}

Status checkCreateRole(const Request& r) {
    return allOf([&] { return databaseAction<Action::kCreateRole>(r); },
                 [&] { return checkRoles(r, "roles", Action::kGrantRole, false); },
                 [&] { return checkPrivilegeGrants(r, Action::kGrantRole, false); },
                 [&] { return checkRestrictions(r); });
}

Status checkUpdateRole(const Request& r) {
    return allOf([&] { return allowIf(r.can(Target::anyNormal(), {Action::kRevokeRole})); },
                 [&] { return checkRoles(r, "roles", Action::kGrantRole, false); },
                 [&] { return checkPrivilegeGrants(r, Action::kGrantRole, false); },
                 [&] { return checkRestrictions(r); });
}

Status checkGrantRoles(const Request& r) {
    return checkRoles(r, "roles", Action::kGrantRole, true);
}

Status checkRevokeRoles(const Request& r) {
    return checkRoles(r, "roles", Action::kRevokeRole, true);
}

Status checkGrantPrivileges(const Request& r) {
    return checkPrivilegeGrants(r, Action::kGrantRole, true);
}

Status checkRevokePrivileges(const Request& r) {
    return checkPrivilegeGrants(r, Action::kRevokeRole, true);
}

/// usersInfo / rolesInfo: 1 (this database), {forAllDBs: true} (usersInfo: viewUser
/// on the cluster), or names ("name", {user|role, db}, or an array of those), each
/// needing view* on its database unless it is oneself (usersInfo).
Status checkInfo(const Request& r, std::string_view nameField, Action view, bool users) {
    bson_iter_t arg;
    if (!bson_iter_init(&arg, r.cmd) || !bson_iter_next(&arg)) return rootOnly(r);
    if (BSON_ITER_HOLDS_NUMBER(&arg)) return allowIf(r.can(Target::database(r.db), {view}));
    auto one = [&](const bson_iter_t& e) -> Status {
        std::string_view name, db = r.db;
        if (BSON_ITER_HOLDS_UTF8(&e)) {
            name = utf8(e);
        } else {
            bson_t d;
            if (!BSON_ITER_HOLDS_DOCUMENT(&e) || !subDoc(e, &d) ||
                !stringField(&d, nameField, &name) || !stringField(&d, "db", &db))
                return rootOnly(r);
        }
        if (users && r.isSelf(name, db)) return Status::OK();
        return allowIf(r.can(Target::database(db), {view}));
    };
    if (BSON_ITER_HOLDS_DOCUMENT(&arg)) {
        bson_t d;
        if (subDoc(arg, &d) && has(&d, "forAllDBs"))
            return users && truthy(&d, "forAllDBs") ? allowIf(r.can(Target::cluster(), {view}))
                                                    : rootOnly(r);
    }
    if (!BSON_ITER_HOLDS_ARRAY(&arg)) return one(arg);
    bson_iter_t it;
    bson_iter_recurse(&arg, &it);
    while (bson_iter_next(&it)) {
        Status s = one(it);
        if (!s.isOK()) return s;
    }
    return Status::OK();
}

Status checkUsersInfo(const Request& r) {
    return checkInfo(r, "user", Action::kViewUser, true);
}

Status checkRolesInfo(const Request& r) {
    // mongod also shows the roles one holds; the proxy knows privileges, not role
    // names, so it asks viewRole for every role (stricter).
    return checkInfo(r, "role", Action::kViewRole, false);
}

Status checkExplain(const Request& r);

struct CommandRule {
    std::string_view canonical;  // mongod's getName(), for messages
    bool requiresAuth;
    bool adminOnly;
    Check check;
};

const CommandRule* findRule(std::string_view name) {
    constexpr bool kAuth = true, kNoAuth = false, kAdmin = true, kAnyDb = false;
    static const std::unordered_map<std::string_view, CommandRule> kRules = {
        // Handshake and authentication: no authentication needed.
        {"hello", {"hello", kNoAuth, kAnyDb, anyUser}},
        {"isMaster", {"isMaster", kNoAuth, kAnyDb, anyUser}},
        {"ismaster", {"isMaster", kNoAuth, kAnyDb, anyUser}},
        {"ping", {"ping", kNoAuth, kAnyDb, anyUser}},
        {"buildInfo", {"buildInfo", kNoAuth, kAnyDb, anyUser}},
        {"buildinfo", {"buildInfo", kNoAuth, kAnyDb, anyUser}},
        {"saslStart", {"saslStart", kNoAuth, kAnyDb, anyUser}},
        {"saslContinue", {"saslContinue", kNoAuth, kAnyDb, anyUser}},
        {"authenticate", {"authenticate", kNoAuth, kAnyDb, anyUser}},
        {"logout", {"logout", kNoAuth, kAnyDb, anyUser}},
        {"connectionStatus", {"connectionStatus", kNoAuth, kAnyDb, anyUser}},
        {"listCommands", {"listCommands", kNoAuth, kAnyDb, anyUser}},
        // Any authenticated user; ownership is checked where the proxy keeps the
        // cursors, operations and sessions.
        {"getMore", {"getMore", kAuth, kAnyDb, checkGetMore}},
        {"killCursors", {"killCursors", kAuth, kAnyDb, anyUser}},
        {"killOp", {"killOp", kAuth, kAdmin, anyUser}},
        {"startSession", {"startSession", kAuth, kAnyDb, anyUser}},
        {"refreshSessions", {"refreshSessions", kAuth, kAnyDb, anyUser}},
        {"endSessions", {"endSessions", kAuth, kAnyDb, anyUser}},
        {"killSessions", {"killSessions", kAuth, kAnyDb, anyUser}},
        {"commitTransaction", {"commitTransaction", kAuth, kAdmin, anyUser}},
        {"abortTransaction", {"abortTransaction", kAuth, kAdmin, anyUser}},
        {"whatsmyuri", {"whatsmyuri", kAuth, kAnyDb, anyUser}},
        {"listDatabases", {"listDatabases", kAuth, kAdmin, checkListDatabases}},
        {"currentOp", {"currentOp", kAuth, kAdmin, checkCurrentOp}},
        // CRUD
        {"find", {"find", kAuth, kAnyDb, checkFind}},
        {"count", {"count", kAuth, kAnyDb, collectionAction<Action::kFind>}},
        {"distinct", {"distinct", kAuth, kAnyDb, collectionAction<Action::kFind>}},
        {"insert", {"insert", kAuth, kAnyDb, checkInsert}},
        {"update", {"update", kAuth, kAnyDb, checkUpdate}},
        {"delete", {"delete", kAuth, kAnyDb, collectionAction<Action::kRemove>}},
        {"findAndModify", {"findAndModify", kAuth, kAnyDb, checkFindAndModify}},
        {"findandmodify", {"findAndModify", kAuth, kAnyDb, checkFindAndModify}},
        {"aggregate", {"aggregate", kAuth, kAnyDb, checkAggregate}},
        {"mapReduce", {"mapReduce", kAuth, kAnyDb, checkMapReduce}},
        {"mapreduce", {"mapReduce", kAuth, kAnyDb, checkMapReduce}},
        {"explain", {"explain", kAuth, kAnyDb, checkExplain}},
        // DDL and collection administration
        {"create", {"create", kAuth, kAnyDb, checkCreate}},
        {"collMod", {"collMod", kAuth, kAnyDb, checkCollMod}},
        {"createIndexes", {"createIndexes", kAuth, kAnyDb, collectionAction<Action::kCreateIndex>}},
        {"dropIndexes", {"dropIndexes", kAuth, kAnyDb, collectionAction<Action::kDropIndex>}},
        {"deleteIndexes", {"dropIndexes", kAuth, kAnyDb, collectionAction<Action::kDropIndex>}},
        {"drop", {"drop", kAuth, kAnyDb, collectionAction<Action::kDropCollection>}},
        {"dropDatabase", {"dropDatabase", kAuth, kAnyDb, databaseAction<Action::kDropDatabase>}},
        {"listCollections", {"listCollections", kAuth, kAnyDb, checkListCollections}},
        {"listIndexes", {"listIndexes", kAuth, kAnyDb, collectionAction<Action::kListIndexes>}},
        {"renameCollection", {"renameCollection", kAuth, kAdmin, checkRenameCollection}},
        {"convertToCapped",
         {"convertToCapped", kAuth, kAnyDb, collectionAction<Action::kConvertToCapped>}},
        {"cloneCollectionAsCapped",
         {"cloneCollectionAsCapped", kAuth, kAnyDb, checkCloneCollectionAsCapped}},
        {"collStats", {"collStats", kAuth, kAnyDb, collectionAction<Action::kCollStats>}},
        {"collstats", {"collStats", kAuth, kAnyDb, collectionAction<Action::kCollStats>}},
        {"dbStats", {"dbStats", kAuth, kAnyDb, databaseAction<Action::kDbStats>}},
        {"dbstats", {"dbStats", kAuth, kAnyDb, databaseAction<Action::kDbStats>}},
        {"dbHash", {"dbHash", kAuth, kAnyDb, databaseAction<Action::kDbHash>}},
        {"dbhash", {"dbHash", kAuth, kAnyDb, databaseAction<Action::kDbHash>}},
        {"dataSize", {"dataSize", kAuth, kAnyDb, checkDataSize}},
        {"datasize", {"dataSize", kAuth, kAnyDb, checkDataSize}},
        {"validate", {"validate", kAuth, kAnyDb, collectionAction<Action::kValidate>}},
        {"compact", {"compact", kAuth, kAnyDb, collectionAction<Action::kCompact>}},
        {"reIndex", {"reIndex", kAuth, kAnyDb, collectionAction<Action::kReIndex>}},
        {"profile", {"profile", kAuth, kAnyDb, checkProfile}},
        {"planCacheClear",
         {"planCacheClear", kAuth, kAnyDb, collectionAction<Action::kPlanCacheWrite>}},
        {"planCacheListFilters",
         {"planCacheListFilters", kAuth, kAnyDb, collectionAction<Action::kPlanCacheRead>}},
        {"planCacheSetFilter",
         {"planCacheSetFilter", kAuth, kAnyDb, collectionAction<Action::kPlanCacheIndexFilter>}},
        {"planCacheClearFilters",
         {"planCacheClearFilters", kAuth, kAnyDb, collectionAction<Action::kPlanCacheIndexFilter>}},
        // Server and cluster
        {"serverStatus", {"serverStatus", kAuth, kAnyDb, clusterAction<Action::kServerStatus>}},
        {"lockInfo", {"lockInfo", kAuth, kAdmin, clusterAction<Action::kServerStatus>}},
        {"top", {"top", kAuth, kAdmin, clusterAction<Action::kTop>}},
        {"connPoolStats", {"connPoolStats", kAuth, kAnyDb, clusterAction<Action::kConnPoolStats>}},
        {"hostInfo", {"hostInfo", kAuth, kAnyDb, clusterAction<Action::kHostInfo>}},
        {"getLog", {"getLog", kAuth, kAdmin, clusterAction<Action::kGetLog>}},
        {"getCmdLineOpts",
         {"getCmdLineOpts", kAuth, kAdmin, clusterAction<Action::kGetCmdLineOpts>}},
        {"getParameter", {"getParameter", kAuth, kAdmin, clusterAction<Action::kGetParameter>}},
        {"setParameter", {"setParameter", kAuth, kAdmin, clusterAction<Action::kSetParameter>}},
        {"replSetGetStatus",
         {"replSetGetStatus", kAuth, kAdmin, clusterAction<Action::kReplSetGetStatus>}},
        {"replSetGetConfig",
         {"replSetGetConfig", kAuth, kAdmin, clusterAction<Action::kReplSetGetConfig>}},
        {"getDefaultRWConcern",
         {"getDefaultRWConcern", kAuth, kAdmin, clusterAction<Action::kGetDefaultRWConcern>}},
        {"setDefaultRWConcern",
         {"setDefaultRWConcern", kAuth, kAdmin, clusterAction<Action::kSetDefaultRWConcern>}},
        {"getFreeMonitoringStatus",
         {"getFreeMonitoringStatus", kAuth, kAdmin,
          clusterAction<Action::kCheckFreeMonitoringStatus>}},
        {"fsync", {"fsync", kAuth, kAdmin, clusterAction<Action::kFsync>}},
        {"fsyncUnlock", {"fsyncUnlock", kAuth, kAdmin, clusterAction<Action::kUnlock>}},
        {"shutdown", {"shutdown", kAuth, kAdmin, clusterAction<Action::kShutdown>}},
        {"logRotate", {"logRotate", kAuth, kAdmin, clusterAction<Action::kLogRotate>}},
        {"killAllSessions",
         {"killAllSessions", kAuth, kAnyDb, clusterAction<Action::kKillAnySession>}},
        {"killAllSessionsByPattern",
         {"killAllSessionsByPattern", kAuth, kAnyDb, clusterAction<Action::kKillAnySession>}},
        {"invalidateUserCache",
         {"invalidateUserCache", kAuth, kAdmin, clusterAction<Action::kInvalidateUserCache>}},
        // The proxy's own (server-wide state: what clusterMonitor may see).
        {"haloclineStatus",
         {"haloclineStatus", kAuth, kAnyDb, clusterAction<Action::kServerStatus>}},
        {"haloclineExplain",
         {"haloclineExplain", kAuth, kAnyDb, clusterAction<Action::kServerStatus>}},
        {"haloclinePauseFeeder",
         {"haloclinePauseFeeder", kAuth, kAdmin, clusterAction<Action::kSetParameter>}},
        {"haloclineFlushFeeder",
         {"haloclineFlushFeeder", kAuth, kAdmin, clusterAction<Action::kSetParameter>}},
        // Users and roles
        {"createUser", {"createUser", kAuth, kAnyDb, checkCreateUser}},
        {"updateUser", {"updateUser", kAuth, kAnyDb, checkUpdateUser}},
        {"dropUser", {"dropUser", kAuth, kAnyDb, databaseAction<Action::kDropUser>}},
        {"dropAllUsersFromDatabase",
         {"dropAllUsersFromDatabase", kAuth, kAnyDb, databaseAction<Action::kDropUser>}},
        {"grantRolesToUser", {"grantRolesToUser", kAuth, kAnyDb, checkGrantRoles}},
        {"revokeRolesFromUser", {"revokeRolesFromUser", kAuth, kAnyDb, checkRevokeRoles}},
        {"usersInfo", {"usersInfo", kAuth, kAnyDb, checkUsersInfo}},
        {"createRole", {"createRole", kAuth, kAnyDb, checkCreateRole}},
        {"updateRole", {"updateRole", kAuth, kAnyDb, checkUpdateRole}},
        {"dropRole", {"dropRole", kAuth, kAnyDb, databaseAction<Action::kDropRole>}},
        {"dropAllRolesFromDatabase",
         {"dropAllRolesFromDatabase", kAuth, kAnyDb, databaseAction<Action::kDropRole>}},
        {"grantRolesToRole", {"grantRolesToRole", kAuth, kAnyDb, checkGrantRoles}},
        {"revokeRolesFromRole", {"revokeRolesFromRole", kAuth, kAnyDb, checkRevokeRoles}},
        {"grantPrivilegesToRole", {"grantPrivilegesToRole", kAuth, kAnyDb, checkGrantPrivileges}},
        {"revokePrivilegesFromRole",
         {"revokePrivilegesFromRole", kAuth, kAnyDb, checkRevokePrivileges}},
        {"rolesInfo", {"rolesInfo", kAuth, kAnyDb, checkRolesInfo}},
    };
    auto it = kRules.find(name);
    return it == kRules.end() ? nullptr : &it->second;
}

/// explain: what the explained command needs (mongod checks the inner command;
/// any refusal is reported against the explain command as the client sent it).
Status checkExplain(const Request& r) {
    bson_t inner;
    bson_iter_t it;
    if (!docField(r.cmd, "explain", &inner) || !bson_iter_init(&it, &inner) || !bson_iter_next(&it))
        return rootOnly(r);
    std::string_view name = bson_iter_key(&it);
    const CommandRule* rule = findRule(name);
    if (rule == nullptr || name == "explain") return rootOnly(r);
    if (rule->adminOnly && r.db != "admin") return denied();
    Request innerRequest{name, r.db, &inner, r.privs, r.userName, r.userDb, {}};
    Status s = rule->check(innerRequest);
    return s.code() == ErrorCode::Unauthorized ? denied() : s;
}

// ---------------------------------------------------------------------------
// The command as mongod prints it in the refusal: BSONObj::toString() (field names
// bare, strings double-quoted and cut at 150 bytes, ObjectId('...'), UUID("..."),
// new Date(ms), Timestamp(s, i), doubles with a ".0" when integral).

constexpr int kMaxToStringDepth = 100;
constexpr size_t kMaxShown = 1 << 20;  // keeps the error reply far below 16 MB

void appendObject(std::string& out, const bson_t* doc, bool isArray, int depth, bool redactPwd);

void appendHex(std::string& out, const uint8_t* data, size_t len, bool lower) {
    const char* digits = lower ? "0123456789abcdef" : "0123456789ABCDEF";
    for (size_t i = 0; i < len; ++i) {
        out += digits[data[i] >> 4];
        out += digits[data[i] & 0xf];
    }
}

/// mongod cuts long strings at a byte count; the cut backs off to a UTF-8 character
/// boundary here so that the error message stays valid UTF-8 (drivers decode it).
void appendPrefix(std::string& out, const char* s, size_t n) {
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    out.append(s, n);
}

void appendDouble(std::string& out, double d) {
    char buf[32];
    int n = std::snprintf(buf, sizeof buf, "%.16g", d);
    if (n < 0) return;
    out.append(buf, std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
    if (!std::strchr(buf, '.') && !std::strchr(buf, 'E') && !std::strchr(buf, 'N')) out += ".0";
}

void appendElement(std::string& out, const bson_iter_t& it, bool withName, int depth,
                   bool redactPwd) {
    if (depth > kMaxToStringDepth) {
        out += "...";
        return;
    }
    std::string_view key = bson_iter_key(&it);
    if (withName) {
        out += key;
        out += ": ";
    }
    if (redactPwd && key == "pwd") {  // mongod's redactPasswordData: any type becomes "xxx"
        out += "\"xxx\"";
        return;
    }
    bson_t sub;
    switch (bson_iter_type(&it)) {
        case BSON_TYPE_DOCUMENT:
        case BSON_TYPE_ARRAY:
            if (subDoc(it, &sub))
                appendObject(out, &sub, BSON_ITER_HOLDS_ARRAY(&it), depth + 1, false);
            return;
        default:
            break;
    }
    switch (bson_iter_type(&it)) {
        case BSON_TYPE_DATE_TIME:
            out += fmt::format("new Date({})", bson_iter_date_time(&it));
            break;
        case BSON_TYPE_REGEX: {
            const char* options = nullptr;
            const char* regex = bson_iter_regex(&it, &options);
            out += '/';
            out += regex ? regex : "";
            out += '/';
            out += options ? options : "";
            break;
        }
        case BSON_TYPE_DOUBLE:
            appendDouble(out, bson_iter_double(&it));
            break;
        case BSON_TYPE_INT64:
            out += std::to_string(bson_iter_int64(&it));
            break;
        case BSON_TYPE_INT32:
            out += std::to_string(bson_iter_int32(&it));
            break;
        case BSON_TYPE_DECIMAL128: {
            bson_decimal128_t dec;
            char buf[BSON_DECIMAL128_STRING];
            bson_iter_decimal128(&it, &dec);
            bson_decimal128_to_string(&dec, buf);
            out += buf;
            break;
        }
        case BSON_TYPE_BOOL:
            out += bson_iter_bool(&it) ? "true" : "false";
            break;
        case BSON_TYPE_UNDEFINED:
            out += "undefined";
            break;
        case BSON_TYPE_NULL:
            out += "null";
            break;
        case BSON_TYPE_MAXKEY:
            out += "MaxKey";
            break;
        case BSON_TYPE_MINKEY:
            out += "MinKey";
            break;
        case BSON_TYPE_CODEWSCOPE: {
            uint32_t len = 0, scopeLen = 0;
            const uint8_t* scopeData = nullptr;
            const char* code = bson_iter_codewscope(&it, &len, &scopeLen, &scopeData);
            out += "CodeWScope( ";
            out.append(code, len);
            out += ", ";
            bson_t scope;
            if (bson_init_static(&scope, scopeData, scopeLen))
                appendObject(out, &scope, false, 0, false);
            out += ")";
            break;
        }
        case BSON_TYPE_CODE: {
            uint32_t len = 0;
            const char* code = bson_iter_code(&it, &len);
            if (len + 1 > 80) {
                appendPrefix(out, code, 70);
                out += "...";
            } else {
                out.append(code, len);
            }
            break;
        }
        case BSON_TYPE_SYMBOL:
        case BSON_TYPE_UTF8: {
            uint32_t len = 0;
            const char* s =
                BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, &len) : bson_iter_symbol(&it, &len);
            out += '"';
            if (len + 1 > 160) {
                appendPrefix(out, s, 150);
                out += "...\"";
            } else {
                out.append(s, len);
                out += '"';
            }
            break;
        }
        case BSON_TYPE_DBPOINTER: {
            uint32_t len = 0;
            const char* coll = nullptr;
            const bson_oid_t* oid = nullptr;
            bson_iter_dbpointer(&it, &len, &coll, &oid);
            out += "DBRef('";
            out.append(coll, len);
            out += "',";
            appendHex(out, oid->bytes, 12, true);
            out += ')';
            break;
        }
        case BSON_TYPE_OID:
            out += "ObjectId('";
            appendHex(out, bson_iter_oid(&it)->bytes, 12, true);
            out += "')";
            break;
        case BSON_TYPE_BINARY: {
            bson_subtype_t subtype;
            uint32_t len = 0;
            const uint8_t* data = nullptr;
            bson_iter_binary(&it, &subtype, &len, &data);
            if (subtype == BSON_SUBTYPE_UUID && len == 16) {
                out += "UUID(\"";
                appendHex(out, data, 4, true);
                out += '-';
                appendHex(out, data + 4, 2, true);
                out += '-';
                appendHex(out, data + 6, 2, true);
                out += '-';
                appendHex(out, data + 8, 2, true);
                out += '-';
                appendHex(out, data + 10, 6, true);
                out += "\")";
                break;
            }
            out += fmt::format("BinData({}, ", static_cast<int>(subtype));
            if (len > 80) {
                appendHex(out, data, 70, false);
                out += "...)";
            } else {
                appendHex(out, data, len, false);
                out += ')';
            }
            break;
        }
        case BSON_TYPE_TIMESTAMP: {
            uint32_t t = 0, i = 0;
            bson_iter_timestamp(&it, &t, &i);
            out += fmt::format("Timestamp({}, {})", t, i);
            break;
        }
        default:
            out += fmt::format("?type={}", static_cast<int>(bson_iter_type(&it)));
            break;
    }
}

void appendObject(std::string& out, const bson_t* doc, bool isArray, int depth, bool redactPwd) {
    bson_iter_t it;
    if (doc->len <= 5 || !bson_iter_init(&it, doc)) {
        out += isArray ? "[]" : "{}";
        return;
    }
    out += isArray ? "[ " : "{ ";
    bool first = true;
    while (bson_iter_next(&it)) {
        if (out.size() > kMaxShown) {
            out += first ? "..." : ", ...";
            break;
        }
        if (!first) out += ", ";
        first = false;
        appendElement(out, it, !isArray, depth, redactPwd);
    }
    out += isArray ? " ]" : " }";
}

Status notAuthorized(std::string_view db, const bson_t* cmd, bool redactPwd) {
    std::string shown;
    appendObject(shown, cmd, false, 0, redactPwd);
    return Status(ErrorCode::Unauthorized,
                  fmt::format("not authorized on {} to execute command {}", db, shown));
}

}  // namespace

bool requiresAuthentication(std::string_view commandName) {
    const CommandRule* rule = findRule(commandName);
    return rule == nullptr || rule->requiresAuth;
}

Status authorize(std::string_view commandName, const std::string& db, const bson_t* cmd,
                 const std::vector<Privilege>& privs, const std::string& user,
                 std::span<const wire::DocumentSequence> sequences) {
    const CommandRule* rule = findRule(commandName);
    std::string_view name = rule ? rule->canonical : commandName;
    if (rule && rule->adminOnly && db != "admin")
        return Status(ErrorCode::Unauthorized,
                      fmt::format("{} may only be run against the admin database.", name));
    if (user.empty()) {
        if (rule && !rule->requiresAuth) return Status::OK();
        return Status(ErrorCode::Unauthorized,
                      fmt::format("command {} requires authentication", name));
    }
    // "name@db": user names may hold '@' (e-mail addresses), database names do not.
    std::string_view u = user;
    auto at = u.rfind('@');
    Request r{commandName,
              db,
              cmd,
              privs,
              at == std::string_view::npos ? u : u.substr(0, at),
              at == std::string_view::npos ? std::string_view() : u.substr(at + 1),
              sequences};
    Status s = rule ? rule->check(r) : rootOnly(r);
    if (s.code() == ErrorCode::Unauthorized && s.reason().empty())
        return notAuthorized(db, cmd, name == "createUser" || name == "updateUser");
    return s;
}

}  // namespace halo::tiering::access
