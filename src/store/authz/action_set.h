#pragma once
// mongod's privilege actions ("find", "insert", "viewUser", ...) and sets of
// them. Names are mongod's, spelled as on the wire; every action name mongod
// 7.0 accepts in a privilege document parses (plus the few added after it, so
// a role written for a newer mongod still loads). Value types, thread-safe.
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace halo::store::authz {

// In ASCII order of the names: a set's members come out in that order.
#define HALO_AUTHZ_ACTIONS(X)              \
    X(addShard)                            \
    X(advanceClusterTime)                  \
    X(allCollectionStats)                  \
    X(analyze)                             \
    X(analyzeShardKey)                     \
    X(anyAction)                           \
    X(appendOplogNote)                     \
    X(applicationMessage)                  \
    X(applyOps)                            \
    X(auditConfigure)                      \
    X(auditLogRotate)                      \
    X(authCheck)                           \
    X(authSchemaUpgrade)                   \
    X(authenticate)                        \
    X(bypassDocumentValidation)            \
    X(bypassWriteBlockingMode)             \
    X(changeCustomData)                    \
    X(changeOwnCustomData)                 \
    X(changeOwnPassword)                   \
    X(changePassword)                      \
    X(changeStream)                        \
    X(checkFreeMonitoringStatus)           \
    X(checkMetadataConsistency)            \
    X(cleanupOrphaned)                     \
    X(cleanupStructuredEncryptionData)     \
    X(clearJumboFlag)                      \
    X(closeAllDatabases)                   \
    X(collMod)                             \
    X(collStats)                           \
    X(compact)                             \
    X(compactStructuredEncryptionData)     \
    X(configureQueryAnalyzer)              \
    X(connPoolStats)                       \
    X(connPoolSync)                        \
    X(convertToCapped)                     \
    X(cpuProfiler)                         \
    X(createCollection)                    \
    X(createDatabase)                      \
    X(createIndex)                         \
    X(createRole)                          \
    X(createSearchIndexes)                 \
    X(createUser)                          \
    X(dbCheck)                             \
    X(dbHash)                              \
    X(dbStats)                             \
    X(dropAllRolesFromDatabase)            \
    X(dropAllUsersFromDatabase)            \
    X(dropCollection)                      \
    X(dropConnections)                     \
    X(dropDatabase)                        \
    X(dropIndex)                           \
    X(dropRole)                            \
    X(dropSearchIndex)                     \
    X(dropUser)                            \
    X(emptycapped)                         \
    X(enableProfiler)                      \
    X(enableSharding)                      \
    X(exportCollection)                    \
    X(find)                                \
    X(flushRouterConfig)                   \
    X(forceUUID)                           \
    X(fsync)                               \
    X(fsyncUnlock)                         \
    X(getChangeStreamState)                \
    X(getClusterParameter)                 \
    X(getCmdLineOpts)                      \
    X(getDatabaseVersion)                  \
    X(getDefaultRWConcern)                 \
    X(getLog)                              \
    X(getParameter)                        \
    X(getShardMap)                         \
    X(getShardVersion)                     \
    X(grantPrivilegesToRole)               \
    X(grantRole)                           \
    X(grantRolesToRole)                    \
    X(grantRolesToUser)                    \
    X(hostInfo)                            \
    X(impersonate)                         \
    X(importCollection)                    \
    X(indexStats)                          \
    X(inprog)                              \
    X(insert)                              \
    X(internal)                            \
    X(invalidateUserCache)                 \
    X(issueDirectShardOperations)          \
    X(killAnyCursor)                       \
    X(killAnySession)                      \
    X(killCursors)                         \
    X(killop)                              \
    X(listCachedAndActiveUsers)            \
    X(listCollections)                     \
    X(listCursors)                         \
    X(listDatabases)                       \
    X(listIndexes)                         \
    X(listSampledQueries)                  \
    X(listSearchIndexes)                   \
    X(listSessions)                        \
    X(listShards)                          \
    X(logRotate)                           \
    X(moveChunk)                           \
    X(moveCollection)                      \
    X(netstat)                             \
    X(oidReset)                            \
    X(oidcListKeys)                        \
    X(oidcRefreshKeys)                     \
    X(operationMetrics)                    \
    X(planCacheIndexFilter)                \
    X(planCacheRead)                       \
    X(planCacheWrite)                      \
    X(querySettings)                       \
    X(queryStatsRead)                      \
    X(queryStatsReadTransformed)           \
    X(reIndex)                             \
    X(refineCollectionShardKey)            \
    X(remove)                              \
    X(removeShard)                         \
    X(renameCollection)                    \
    X(renameCollectionSameDB)              \
    X(repairDatabase)                      \
    X(replSetConfigure)                    \
    X(replSetGetConfig)                    \
    X(replSetGetStatus)                    \
    X(replSetHeartbeat)                    \
    X(replSetReconfig)                     \
    X(replSetResizeOplog)                  \
    X(replSetStateChange)                  \
    X(reshardCollection)                   \
    X(resync)                              \
    X(revokePrivilegesFromRole)            \
    X(revokeRole)                          \
    X(revokeRolesFromRole)                 \
    X(revokeRolesFromUser)                 \
    X(rotateCertificates)                  \
    X(runAsLessPrivilegedUser)             \
    X(runTenantMigration)                  \
    X(serverStatus)                        \
    X(setAuthenticationRestriction)        \
    X(setChangeStreamState)                \
    X(setClusterParameter)                 \
    X(setDefaultRWConcern)                 \
    X(setFeatureCompatibilityVersion)      \
    X(setFreeMonitoring)                   \
    X(setParameter)                        \
    X(setUserWriteBlockMode)               \
    X(shardCollection)                     \
    X(shardedDataDistribution)             \
    X(shardingState)                       \
    X(shutdown)                            \
    X(splitChunk)                          \
    X(splitVector)                         \
    X(storageDetails)                      \
    X(top)                                 \
    X(touch)                               \
    X(trafficRecord)                       \
    X(transitionFromDedicatedConfigServer) \
    X(transitionToDedicatedConfigServer)   \
    X(unlock)                              \
    X(update)                              \
    X(updateRole)                          \
    X(updateSearchIndex)                   \
    X(updateUser)                          \
    X(useTenant)                           \
    X(useUUID)                             \
    X(validate)                            \
    X(viewRole)                            \
    X(viewUser)

enum class ActionType : uint16_t {
#define HALO_AUTHZ_ENUM(name) name,
    HALO_AUTHZ_ACTIONS(HALO_AUTHZ_ENUM)
#undef HALO_AUTHZ_ENUM
};

#define HALO_AUTHZ_COUNT(name) +1
inline constexpr size_t kNumActionTypes = 0 HALO_AUTHZ_ACTIONS(HALO_AUTHZ_COUNT);
#undef HALO_AUTHZ_COUNT

/// The wire name of an action.
std::string_view actionName(ActionType a);
/// The action with this wire name (case-sensitive, as mongod), or nullopt.
std::optional<ActionType> parseAction(std::string_view name);

/// A set of actions. Holding `anyAction` means holding every action (mongod's
/// rule): adding it adds all, and removing any action also drops it.
class ActionSet {
  public:
    ActionSet() = default;
    ActionSet(std::initializer_list<ActionType> actions) {
        for (auto a : actions) add(a);
    }

    void add(ActionType a);
    void addAll(const ActionSet& other);
    void remove(ActionType a);
    void removeAll(const ActionSet& other);
    bool contains(ActionType a) const { return bits_.test(static_cast<size_t>(a)); }
    bool containsAll(const ActionSet& other) const { return (bits_ & other.bits_) == other.bits_; }
    bool empty() const { return bits_.none(); }
    bool operator==(const ActionSet&) const = default;

    /// The members' names in ASCII order; just {"anyAction"} when it is held.
    std::vector<std::string_view> names() const;

  private:
    std::bitset<kNumActionTypes> bits_;
};

}  // namespace halo::store::authz
