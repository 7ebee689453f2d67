#pragma once
// Authorization in the tiering proxy: mongod's privilege model applied to the
// privileges the archive reports for a user (`usersInfo` with
// `showPrivileges: true` -> `inheritedPrivileges`), so that the proxy refuses
// exactly what mongod (or mongos) would refuse, with the same code and text.
// It is separate from the store's coarse role classes (store/authz) and shares
// no code with them: the proxy must work against any real mongod 6.0+, whose
// users hold custom roles and per-collection privileges.
//
// Contract: pure functions over the command document and the privileges. No
// I/O, no exceptions (every problem is a Status), no mutable state: thread-safe.
// The allowed path of a CRUD command allocates nothing (about 0.1 us for a find
// with readWrite, release build).
//
// Resources (as mongod's ResourcePattern, docs "Resource Document"):
//   {anyResource: true}            every resource, system collections and the cluster included
//   {cluster: true}                cluster-wide actions (serverStatus, inprog, listDatabases...)
//   {db: "", collection: ""}       every non-system collection of every database except
//                                  local and config, and those databases themselves
//   {db: D, collection: ""}        database D and its non-system collections
//   {db: "", collection: C}        collection C in every database (system ones too)
//   {db: D, collection: C}         exactly D.C
//   {db, system_buckets}           the same four shapes over time-series buckets
//                                  collections (D.system.buckets.C)
// "Non-system" is mongod's NamespaceString::isNormalCollection: not "system.*",
// and in local not "replset.*". The exceptions mongod makes for system.js,
// system.profile... are explicit privileges of the built-in roles (read holds
// find on {db: D, collection: "system.js"}), which the archive reports, so
// they need no rule here. Unknown resource shapes grant nothing.
//
// When the proxy cannot tell what mongod would check (a collection named by
// UUID, a malformed argument, an unknown command or aggregation stage) the
// command needs "root": a privilege on {anyResource: true}, which only root
// (validate on anyResource) and the internal __system user hold. Never looser
// than mongod, at worst stricter; the rest of the rules are mongod's.
//
// Choices the proxy makes (see docs/ARCHITECTURE.md, Authorization in the proxy):
// - haloclineStatus and haloclineExplain need `serverStatus` on the cluster:
//   they show server-wide state (tiers, feeder lag, routing), which is what
//   clusterMonitor (and root, clusterAdmin) may see.
// - The proxy runs every command on the tiers as its own service user, so the
//   archive never filters results for the client: the proxy must filter
//   listDatabases (listDatabasesScope, hasAnyPrivilegeOnDatabase),
//   listCollections with authorizedCollections (hasAnyPrivilegeOn), and check
//   ownership of cursors (getMore, killCursors: mayKillAnyCursor), operations
//   (currentOp/$currentOp/killOp: maySeeAllOperations, mayKillAnyOperation) and
//   sessions itself. authorize() lets those commands through for any
//   authenticated user, as mongod's own check does before the ownership test.
#include <bson/bson.h>

#include <bitset>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "wire/message.h"

namespace halo::tiering::access {

/// mongod's action names (src/mongo/db/auth/action_type.idl) that some rule
/// here requires. Any other action a privilege lists is kept as kOther: it
/// never satisfies a rule, but it still counts as "some privilege" on its
/// resource (listDatabases filtering, listCollections' authorizedCollections).
enum class Action : uint8_t {
    kBypassDocumentValidation,
    kChangeCustomData,
    kChangeOwnCustomData,
    kChangeOwnPassword,
    kChangePassword,
    kChangeStream,
    kCheckFreeMonitoringStatus,
    kCollMod,
    kCollStats,
    kCompact,
    kConnPoolStats,
    kConvertToCapped,
    kCreateCollection,
    kCreateIndex,
    kCreateRole,
    kCreateUser,
    kDbHash,
    kDbStats,
    kDropCollection,
    kDropDatabase,
    kDropIndex,
    kDropRole,
    kDropUser,
    kEnableProfiler,
    kFind,
    kFsync,
    kGetCmdLineOpts,
    kGetDefaultRWConcern,
    kGetLog,
    kGetParameter,
    kGrantRole,
    kHostInfo,
    kIndexStats,
    kInprog,
    kInsert,
    kInternal,
    kInvalidateUserCache,
    kKillAnyCursor,
    kKillAnySession,
    kKillCursors,
    kKillop,
    kListCollections,
    kListDatabases,
    kListIndexes,
    kListSearchIndexes,
    kListSessions,
    kLogRotate,
    kPlanCacheIndexFilter,
    kPlanCacheRead,
    kPlanCacheWrite,
    kReIndex,
    kRemove,
    kRenameCollectionSameDB,
    kReplSetGetConfig,
    kReplSetGetStatus,
    kRevokeRole,
    kServerStatus,
    kSetAuthenticationRestriction,
    kSetDefaultRWConcern,
    kSetParameter,
    kShutdown,
    kTop,
    kUnlock,
    kUpdate,
    kUseUUID,
    kValidate,
    kViewRole,
    kViewUser,
    kOther,  // any action name not above
    kCount_
};

/// mongod's name of an action ("find", "bypassDocumentValidation"...).
std::string_view actionName(Action a);

class ActionSet {
  public:
    ActionSet() = default;
    ActionSet(std::initializer_list<Action> actions) {
        for (Action a : actions) add(a);
    }
    void add(Action a) { bits_.set(static_cast<size_t>(a)); }
    void addAll(const ActionSet& o) { bits_ |= o.bits_; }
    bool contains(Action a) const { return bits_.test(static_cast<size_t>(a)); }
    bool containsAll(const ActionSet& o) const { return (o.bits_ & ~bits_).none(); }
    bool empty() const { return bits_.none(); }
    bool operator==(const ActionSet&) const = default;

  private:
    std::bitset<static_cast<size_t>(Action::kCount_)> bits_;
};

/// One resource pattern of a privilege (see the table above).
struct Resource {
    enum class Kind : uint8_t {
        kAnyResource,              // {anyResource: true}
        kCluster,                  // {cluster: true}
        kAnyNormal,                // {db: "", collection: ""}
        kDatabase,                 // {db: D, collection: ""}
        kCollectionName,           // {db: "", collection: C}
        kNamespace,                // {db: D, collection: C}
        kAnySystemBuckets,         // {db: "", system_buckets: ""}
        kSystemBucketsInDatabase,  // {db: D, system_buckets: ""}
        kSystemBucketsName,        // {db: "", system_buckets: C}
        kSystemBucketsNamespace,   // {db: D, system_buckets: C}
    };
    Kind kind = Kind::kAnyNormal;
    std::string db;
    std::string collection;  // or the buckets' collection name (without "system.buckets.")
    bool operator==(const Resource&) const = default;
};

struct Privilege {
    Resource resource;
    ActionSet actions;
};

/// Parses `inheritedPrivileges` (an array of {resource, actions}) as usersInfo
/// returns it. A resource of a shape this module does not know grants nothing
/// and is dropped; an entry that is not {resource: document, actions: [string...]}
/// fails the parse with FailedToParse (the user cache should then refuse the login
/// rather than guess).
StatusWith<std::vector<Privilege>> parsePrivileges(const bson_t* inheritedPrivilegesArray);

/// Whether mongod runs `commandName` only for authenticated clients. False for
/// the handshake and authentication commands (requiresAuth() == false in mongod):
/// hello, isMaster/ismaster, ping, buildInfo/buildinfo, saslStart, saslContinue,
/// authenticate, logout, connectionStatus, listCommands. Unknown names: true.
bool requiresAuthentication(std::string_view commandName);

/// Whether the authenticated user `user` ("name@db"; empty when the connection is
/// not authenticated) with privileges `privs` may run command `commandName` (the
/// first key of `cmd`, as the client spelled it) on database `db`. `cmd` is the
/// OP_MSG body as the client sent it ($db, lsid... included: mongod prints them);
/// `sequences` are the request's document sequences (update's `updates` may be
/// one, and its upsert flags matter).
///
/// Returns OK, or what mongod answers:
/// - 13 "command <name> requires authentication" for a command that needs it on an
///   unauthenticated connection;
/// - 13 "<name> may only be run against the admin database." (admin-only commands);
/// - 13 "not authorized on <db> to execute command { <cmd as mongod prints it> }",
///   with createUser/updateUser passwords shown as "xxx" (mongod's snipForLogging).
///   As mongod, strings are cut at 150 bytes (here on a UTF-8 character boundary, so
///   the message stays valid UTF-8) and BinData at 70 bytes; unlike mongod, the
///   whole text is bounded (about 1 MB) so that the error reply always fits;
/// - the few other errors mongod's checks raise themselves (13 "Insufficient
///   permissions to list all databases", 72 for collMod with only one of viewOn and
///   pipeline).
/// getMore, killCursors, killOp, currentOp with $ownOps and the session and
/// transaction commands pass for any authenticated user: the proxy checks
/// ownership itself (see the helpers below), as mongod does after this check.
Status authorize(std::string_view commandName, const std::string& db, const bson_t* cmd,
                 const std::vector<Privilege>& privs, const std::string& user,
                 std::span<const wire::DocumentSequence> sequences = {});

/// Whether the privileges grant all of `actions` on the namespace `db.coll`
/// (mongod's isAuthorizedForActionsOnNamespace).
bool isAuthorizedOnNamespace(std::string_view db, std::string_view coll, const ActionSet& actions,
                             const std::vector<Privilege>& privs);
/// Whether the privileges grant all of `actions` on the cluster resource.
bool isAuthorizedOnCluster(const ActionSet& actions, const std::vector<Privilege>& privs);

/// Whether some privilege grants any action on `db.coll` (listCollections with
/// authorizedCollections: true lists only those).
bool hasAnyPrivilegeOn(std::string_view db, std::string_view coll,
                       const std::vector<Privilege>& privs);
/// Whether some privilege could reach a resource in `db` (mongod's
/// isAuthorizedForAnyActionOnAnyResourceInDB): listDatabases lists only those
/// databases unless the user may list them all.
bool hasAnyPrivilegeOnDatabase(std::string_view db, const std::vector<Privilege>& privs);

/// Which databases a listDatabases that authorize() allowed must show: every one
/// (the user holds listDatabases on the cluster and did not ask for
/// authorizedDatabases: true), or only those hasAnyPrivilegeOnDatabase() accepts;
/// then totalSize/totalSizeMb cover the shown ones only, as mongod computes them.
enum class ListDatabasesScope { kAll, kAuthorizedOnly };
ListDatabasesScope listDatabasesScope(const bson_t* cmd, const std::vector<Privilege>& privs);

/// killCursors of a cursor another user opened: killAnyCursor on the cluster or on
/// the cursor's namespace `ns` ("db.coll").
bool mayKillAnyCursor(std::string_view ns, const std::vector<Privilege>& privs);
/// currentOp/$currentOp of every user's operations: inprog on the cluster.
bool maySeeAllOperations(const std::vector<Privilege>& privs);
/// killOp of another user's operation: killop on the cluster.
bool mayKillAnyOperation(const std::vector<Privilege>& privs);

}  // namespace halo::tiering::access
