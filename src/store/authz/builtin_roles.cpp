#include "store/authz/builtin_roles.h"

#include <algorithm>
#include <array>

namespace halo::store::authz {

namespace {

using A = ActionType;
using RP = ResourcePattern;

// The action groups of builtin_roles.yml.
ActionSet readActions() {
    return {A::changeStream,    A::collStats,   A::dbHash,
            A::dbStats,         A::find,        A::killCursors,
            A::listCollections, A::listIndexes, A::listSearchIndexes,
            A::planCacheRead};
}

ActionSet readWriteActions() {
    ActionSet s = readActions();
    s.addAll({A::compactStructuredEncryptionData, A::convertToCapped, A::createCollection,
              A::createIndex, A::createSearchIndexes, A::dropCollection, A::dropIndex,
              A::dropSearchIndex, A::insert, A::remove, A::renameCollectionSameDB, A::update,
              A::updateSearchIndex});
    return s;
}

ActionSet userAdminActions() {
    return {A::changeCustomData, A::changePassword, A::createUser,
            A::createRole,       A::dropUser,       A::dropRole,
            A::grantRole,        A::revokeRole,     A::setAuthenticationRestriction,
            A::viewUser,         A::viewRole};
}

ActionSet dbAdminActions() {
    return {A::analyze,
            A::bypassDocumentValidation,
            A::collMod,
            A::collStats,
            A::compact,
            A::configureQueryAnalyzer,
            A::convertToCapped,
            A::createCollection,
            A::dbStats,
            A::dropCollection,
            A::dropDatabase,
            A::dropIndex,
            A::dropSearchIndex,
            A::createIndex,
            A::createSearchIndexes,
            A::enableProfiler,
            A::listCollections,
            A::listIndexes,
            A::listSearchIndexes,
            A::updateSearchIndex,
            A::planCacheIndexFilter,
            A::planCacheRead,
            A::planCacheWrite,
            A::reIndex,
            A::renameCollectionSameDB,
            A::storageDetails,
            A::validate};
}

ActionSet profileActions() {
    ActionSet s = readActions();
    s.addAll({A::convertToCapped, A::createCollection, A::dropCollection});
    return s;
}

ActionSet clusterMonitorClusterActions() {
    return {A::checkFreeMonitoringStatus,
            A::connPoolStats,
            A::getCmdLineOpts,
            A::getDefaultRWConcern,
            A::getLog,
            A::getParameter,
            A::getShardMap,
            A::hostInfo,
            A::listDatabases,
            A::listSampledQueries,
            A::listSessions,
            A::listShards,
            A::netstat,
            A::operationMetrics,
            A::replSetGetConfig,
            A::replSetGetStatus,
            A::serverStatus,
            A::top,
            A::useUUID,
            A::inprog,
            A::shardingState,
            A::shardedDataDistribution};
}

ActionSet clusterMonitorDatabaseActions() {
    return {A::collStats, A::dbStats, A::getDatabaseVersion, A::getShardVersion, A::indexStats};
}

ActionSet hostManagerClusterActions() {
    return {A::applicationMessage,
            A::connPoolSync,
            A::dropConnections,
            A::logRotate,
            A::setParameter,
            A::shutdown,
            A::touch,
            A::unlock,
            A::flushRouterConfig,
            A::fsync,
            A::invalidateUserCache,
            A::killAnyCursor,
            A::killAnySession,
            A::killop,
            A::replSetResizeOplog,
            A::resync,
            A::trafficRecord,
            A::rotateCertificates};
}

ActionSet clusterManagerClusterActions() {
    return {A::appendOplogNote,
            A::applicationMessage,
            A::replSetConfigure,
            A::replSetGetConfig,
            A::replSetGetStatus,
            A::replSetStateChange,
            A::resync,
            A::addShard,
            A::removeShard,
            A::listSessions,
            A::listShards,
            A::flushRouterConfig,
            A::cleanupOrphaned,
            A::getDefaultRWConcern,
            A::runTenantMigration,
            A::setDefaultRWConcern,
            A::setFeatureCompatibilityVersion,
            A::setClusterParameter,
            A::getClusterParameter,
            A::setChangeStreamState,
            A::getChangeStreamState,
            A::checkMetadataConsistency};
}

ActionSet clusterManagerDatabaseActions() {
    return {A::analyzeShardKey,  A::configureQueryAnalyzer,
            A::clearJumboFlag,   A::splitChunk,
            A::moveChunk,        A::enableSharding,
            A::splitVector,      A::refineCollectionShardKey,
            A::reshardCollection};
}

ActionSet restoreWriteActions() {
    return {A::bypassDocumentValidation, A::collMod,     A::convertToCapped,
            A::createCollection,         A::createIndex, A::createSearchIndexes,
            A::dropCollection,           A::insert,      A::updateSearchIndex};
}

ActionSet with(ActionSet s, std::initializer_list<ActionType> more) {
    for (auto a : more) s.add(a);
    return s;
}

void add(PrivilegeVector* v, RP resource, const ActionSet& actions) {
    addPrivilege(v, Privilege{std::move(resource), actions});
}

// --- Roles on every database ------------------------------------------------

void readRole(PrivilegeVector* v, const std::string& db) {
    add(v, RP::database(db), readActions());
    add(v, RP::exact(db, "system.js"), readActions());
}

void readWriteRole(PrivilegeVector* v, const std::string& db) {
    add(v, RP::database(db), readWriteActions());
    add(v, RP::exact(db, "system.js"), readWriteActions());
}

void userAdminRole(PrivilegeVector* v, const std::string& db) {
    add(v, RP::database(db), userAdminActions());
}

void dbAdminRole(PrivilegeVector* v, const std::string& db) {
    add(v, RP::database(db), dbAdminActions());
    add(v, RP::exact(db, "system.profile"), profileActions());
}

void dbOwnerRole(PrivilegeVector* v, const std::string& db) {
    readWriteRole(v, db);
    dbAdminRole(v, db);
    userAdminRole(v, db);
}

void enableShardingRole(PrivilegeVector* v) {
    add(v, RP::anyNormal(),
        {A::analyzeShardKey, A::enableSharding, A::refineCollectionShardKey, A::reshardCollection});
}

// --- Roles on admin only ------------------------------------------------------

void readAnyDatabaseRole(PrivilegeVector* v) {
    add(v, RP::anyNormal(), readActions());
    add(v, RP::cluster(), {A::listDatabases});
    add(v, RP::collectionName("system.js"), readActions());
}

void readWriteAnyDatabaseRole(PrivilegeVector* v) {
    readAnyDatabaseRole(v);
    add(v, RP::anyNormal(), readWriteActions());
    add(v, RP::collectionName("system.js"), readWriteActions());
}

void userAdminAnyDatabaseRole(PrivilegeVector* v) {
    add(v, RP::anyNormal(), with(userAdminActions(), {A::listCachedAndActiveUsers}));
    add(v, RP::database("local"), userAdminActions());
    add(v, RP::database("config"), userAdminActions());
    add(v, RP::cluster(),
        {A::listDatabases, A::authSchemaUpgrade, A::invalidateUserCache, A::viewUser});
    ActionSet readAndIndex = with(
        readActions(), {A::createIndex, A::createSearchIndexes, A::dropIndex, A::dropSearchIndex});
    add(v, RP::exact("admin", "system.users"), readAndIndex);
    add(v, RP::exact("admin", "system.roles"), readAndIndex);
    add(v, RP::collectionName("system.users"), readActions());
    add(v, RP::exact("admin", "system.version"), readActions());
    add(v, RP::exact("admin", "system.backup_users"), readActions());
}

void dbAdminAnyDatabaseRole(PrivilegeVector* v) {
    add(v, RP::cluster(), {A::listDatabases, A::applyOps});
    add(v, RP::anyNormal(), dbAdminActions());
    add(v, RP::collectionName("system.profile"), profileActions());
}

void clusterMonitorRole(PrivilegeVector* v) {
    readRole(v, "config");
    readRole(v, "local");
    add(v, RP::cluster(), clusterMonitorClusterActions());
    add(v, RP::anyNormal(), clusterMonitorDatabaseActions());
    add(v, RP::database("config"), clusterMonitorDatabaseActions());
    add(v, RP::exact("config", "system.sessions"), clusterMonitorDatabaseActions());
    add(v, RP::database("local"), clusterMonitorDatabaseActions());
    add(v, RP::exact("local", "system.replset"), {A::find});
    add(v, RP::exact("local", "replset.election"), {A::find});
    add(v, RP::exact("local", "replset.minvalid"), {A::find});
    add(v, RP::collectionName("system.profile"), {A::find});
}

void hostManagerRole(PrivilegeVector* v) {
    add(v, RP::cluster(), hostManagerClusterActions());
    add(v, RP::anyNormal(), {A::killCursors});
}

void clusterManagerRole(PrivilegeVector* v) {
    readRole(v, "config");
    add(v, RP::cluster(), clusterManagerClusterActions());
    add(v, RP::anyNormal(), clusterManagerDatabaseActions());
    add(v, RP::database("config"), clusterManagerDatabaseActions());
    add(v, RP::database("local"), clusterManagerDatabaseActions());
    add(v, RP::exact("local", "system.replset"), readActions());
    add(v, RP::exact("local", "system.healthlog"), readActions());
    ActionSet writes{A::insert, A::update, A::remove};
    add(v, RP::database("config"), writes);
    add(v, RP::database("local"), writes);
    add(v, RP::exact("local", "replset.election"), writes);
    add(v, RP::exact("local", "replset.minvalid"), writes);
}

void clusterAdminRole(PrivilegeVector* v) {
    clusterMonitorRole(v);
    hostManagerRole(v);
    clusterManagerRole(v);
    add(v, RP::anyNormal(), {A::dropDatabase});
    add(v, RP::anyResource(), {A::importCollection, A::exportCollection});
}

void queryableBackupRole(PrivilegeVector* v) {
    add(v, RP::anyResource(),
        {A::collStats, A::listCollections, A::listIndexes, A::listSearchIndexes});
    add(v, RP::anyNormal(), {A::find});
    add(v, RP::cluster(), {A::getParameter, A::listDatabases, A::useUUID});
    add(v, RP::database("config"), {A::find});
    add(v, RP::database("local"), {A::find});
    add(v, RP::exact("local", "replset.election"), {A::find});
    add(v, RP::exact("local", "replset.minvalid"), {A::find});
    add(v, RP::collectionName("system.js"), {A::find});
    add(v, RP::collectionName("system.users"), {A::find});
    add(v, RP::collectionName("system.profile"), {A::find});
    add(v, RP::exact("admin", "system.backup_users"), {A::find});
    add(v, RP::exact("admin", "system.roles"), {A::find});
    add(v, RP::exact("admin", "system.version"), {A::find});
    add(v, RP::exact("config", "settings"), {A::find});
}

void backupRole(PrivilegeVector* v) {
    queryableBackupRole(v);
    add(v, RP::cluster(), {A::appendOplogNote, A::serverStatus, A::setUserWriteBlockMode});
    add(v, RP::exact("config", "settings"), {A::insert, A::update});
}

void restoreRole(PrivilegeVector* v) {
    add(v, RP::cluster(),
        {A::getParameter, A::forceUUID, A::useUUID, A::bypassWriteBlockingMode,
         A::setUserWriteBlockMode, A::applyOps});
    add(v, RP::database("local"), restoreWriteActions());
    add(v, RP::database("config"), restoreWriteActions());
    add(v, RP::exact("local", "system.replset"), restoreWriteActions());
    add(v, RP::exact("local", "replset.election"), restoreWriteActions());
    add(v, RP::exact("local", "replset.minvalid"), restoreWriteActions());
    add(v, RP::anyResource(), {A::listCollections});
    ActionSet normal = restoreWriteActions();
    normal.addAll(userAdminActions());
    add(v, RP::anyNormal(), normal);
    add(v, RP::collectionName("system.js"), restoreWriteActions());
    add(v, RP::exact("admin", "tempusers"), {A::find});
    add(v, RP::exact("admin", "temproles"), {A::find});
    add(v, RP::exact("admin", "system.backup_users"), restoreWriteActions());
    add(v, RP::exact("admin", "system.version"), with(restoreWriteActions(), {A::find}));
    add(v, RP::collectionName("system.users"),
        with(restoreWriteActions(), {A::find, A::update, A::remove}));
    add(v, RP::exact("admin", "system.roles"), {A::createIndex});
}

void rootRole(PrivilegeVector* v) {
    clusterAdminRole(v);
    userAdminAnyDatabaseRole(v);
    dbAdminAnyDatabaseRole(v);
    readWriteAnyDatabaseRole(v);
    backupRole(v);
    restoreRole(v);
    add(v, RP::anyResource(), {A::validate});
    add(v, RP::exact("config", "system.preimages"), {A::find, A::remove});
    add(v, RP::exact("config", "system.change_collection"),
        {A::find, A::insert, A::remove, A::update});
}

struct Entry {
    std::string_view name;
    bool adminOnly;
    void (*everyDb)(PrivilegeVector*, const std::string&);
    void (*adminDb)(PrivilegeVector*);
};

// In ASCII order of the names.
constexpr std::array<Entry, 18> kRoles = {{
    {"__queryableBackup", true, nullptr, queryableBackupRole},
    {"backup", true, nullptr, backupRole},
    {"clusterAdmin", true, nullptr, clusterAdminRole},
    {"clusterManager", true, nullptr, clusterManagerRole},
    {"clusterMonitor", true, nullptr, clusterMonitorRole},
    {"dbAdmin", false, dbAdminRole, nullptr},
    {"dbAdminAnyDatabase", true, nullptr, dbAdminAnyDatabaseRole},
    {"dbOwner", false, dbOwnerRole, nullptr},
    {"enableSharding", false, nullptr, enableShardingRole},
    {"hostManager", true, nullptr, hostManagerRole},
    {"read", false, readRole, nullptr},
    {"readAnyDatabase", true, nullptr, readAnyDatabaseRole},
    {"readWrite", false, readWriteRole, nullptr},
    {"readWriteAnyDatabase", true, nullptr, readWriteAnyDatabaseRole},
    {"restore", true, nullptr, restoreRole},
    {"root", true, nullptr, rootRole},
    {"userAdmin", false, userAdminRole, nullptr},
    {"userAdminAnyDatabase", true, nullptr, userAdminAnyDatabaseRole},
}};

const Entry* find(std::string_view role, std::string_view db) {
    if (db.empty()) return nullptr;
    for (const auto& e : kRoles)
        if (e.name == role) return (e.adminOnly && db != "admin") ? nullptr : &e;
    return nullptr;
}

}  // namespace

bool isBuiltinRole(const RoleName& r) {
    return find(r.role, r.db) != nullptr;
}

bool isBuiltinRoleName(std::string_view role, std::string_view db) {
    return find(role, db) != nullptr;
}

PrivilegeVector builtinRolePrivileges(const RoleName& r) {
    PrivilegeVector v;
    const Entry* e = find(r.role, r.db);
    if (!e) return v;
    if (e->everyDb)
        e->everyDb(&v, r.db);
    else
        e->adminDb(&v);
    return v;
}

std::vector<std::string> builtinRoleNames(std::string_view db) {
    std::vector<std::string> out;
    for (const auto& e : kRoles)
        if (!e.adminOnly || db == "admin") out.emplace_back(e.name);
    return out;
}

}  // namespace halo::store::authz
