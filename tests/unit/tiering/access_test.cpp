// The proxy's authorization (src/tiering/access.h): mongod's resource matching and
// per-command privileges over the inheritedPrivileges that usersInfo reports, the
// handshake commands, and mongod's refusal text.
//
// The fixtures are built-in roles as `usersInfo ... showPrivileges: true` reports
// them on MongoDB 6.0 (abridged to the actions the rules look at, plus a few
// others), and custom roles. The table below is the specification: one row per
// {command, database, privileges} with the answer mongod gives.
#include "tiering/access.h"

#include <gtest/gtest.h>

#include <map>

#include "bson/doc.h"

namespace halo::tiering::access {
namespace {

// --- fixtures: inheritedPrivileges arrays -----------------------------------

#define READ_ACTIONS                                                                        \
    "\"changeStream\", \"collStats\", \"dbHash\", \"dbStats\", \"find\", \"killCursors\", " \
    "\"listCollections\", \"listIndexes\", \"listSearchIndexes\", \"planCacheRead\""
#define WRITE_ACTIONS                                                                  \
    "\"convertToCapped\", \"createCollection\", \"createIndex\", \"dropCollection\", " \
    "\"dropIndex\", \"insert\", \"remove\", \"renameCollectionSameDB\", \"update\""
#define DB_ADMIN_ACTIONS                                                                  \
    "\"bypassDocumentValidation\", \"collMod\", \"collStats\", \"compact\", "             \
    "\"convertToCapped\", \"createCollection\", \"createIndex\", \"dbStats\", "           \
    "\"dropCollection\", \"dropDatabase\", \"dropIndex\", \"enableProfiler\", "           \
    "\"listCollections\", \"listIndexes\", \"planCacheIndexFilter\", \"planCacheRead\", " \
    "\"planCacheWrite\", \"reIndex\", \"renameCollectionSameDB\", \"storageDetails\", "   \
    "\"validate\""

const std::map<std::string, std::string>& fixtures() {
    static const std::map<std::string, std::string> k = {
        // read@app
        {"read", R"([
            {"resource": {"db": "app", "collection": ""}, "actions": [)" READ_ACTIONS R"(]},
            {"resource": {"db": "app", "collection": "system.js"}, "actions": [)" READ_ACTIONS
                 R"(]}])"},
        // readWrite@app
        {"readWrite", R"([
            {"resource": {"db": "app", "collection": ""},
             "actions": [)" READ_ACTIONS ", " WRITE_ACTIONS R"(]},
            {"resource": {"db": "app", "collection": "system.js"},
             "actions": [)" READ_ACTIONS ", " WRITE_ACTIONS R"(]}])"},
        // readAnyDatabase@admin
        {"readAnyDatabase", R"([
            {"resource": {"db": "", "collection": ""}, "actions": [)" READ_ACTIONS R"(]},
            {"resource": {"cluster": true}, "actions": ["listDatabases"]},
            {"resource": {"db": "", "collection": "system.js"}, "actions": [)" READ_ACTIONS
                            R"(]}])"},
        // clusterMonitor@admin
        {"clusterMonitor", R"([
            {"resource": {"cluster": true},
             "actions": ["checkFreeMonitoringStatus", "connPoolStats", "getCmdLineOpts",
                         "getDefaultRWConcern", "getLog", "getParameter", "getShardMap",
                         "hostInfo", "inprog", "listDatabases", "listSessions", "listShards",
                         "netstat", "replSetGetConfig", "replSetGetStatus", "serverStatus",
                         "shardingState", "top"]},
            {"resource": {"db": "", "collection": "system.profile"}, "actions": ["find"]},
            {"resource": {"db": "", "collection": ""},
             "actions": ["collStats", "dbHash", "dbStats", "getShardVersion", "indexStats",
                         "useUUID"]},
            {"resource": {"db": "config", "collection": ""},
             "actions": ["collStats", "dbHash", "dbStats", "find", "indexStats"]},
            {"resource": {"db": "local", "collection": ""},
             "actions": ["collStats", "dbHash", "dbStats", "find", "indexStats"]}])"},
        // dbAdmin@app
        {"dbAdmin", R"([
            {"resource": {"db": "app", "collection": ""}, "actions": [)" DB_ADMIN_ACTIONS R"(]},
            {"resource": {"db": "app", "collection": "system.profile"},
             "actions": ["changeStream", "collStats", "convertToCapped", "createCollection",
                         "dbHash", "dbStats", "dropCollection", "find", "killCursors",
                         "listCollections", "listIndexes", "planCacheRead"]}])"},
        // readWrite@app + dbAdmin@app (what dbOwner holds, minus userAdmin)
        {"readWriteDbAdmin", R"([
            {"resource": {"db": "app", "collection": ""},
             "actions": [)" READ_ACTIONS ", " WRITE_ACTIONS ", " DB_ADMIN_ACTIONS R"(]}])"},
        // userAdmin@app
        {"userAdmin", R"([
            {"resource": {"db": "app", "collection": ""},
             "actions": ["changeCustomData", "changePassword", "createRole", "createUser",
                         "dropRole", "dropUser", "grantRole", "revokeRole",
                         "setAuthenticationRestriction", "viewRole", "viewUser"]}])"},
        // A custom role: find on app.orders only.
        {"ordersFinder", R"([
            {"resource": {"db": "app", "collection": "orders"}, "actions": ["find"]}])"},
        // A custom role: update (no insert) on app.orders.
        {"ordersUpdater", R"([
            {"resource": {"db": "app", "collection": "orders"}, "actions": ["update"]}])"},
        // A custom role: read app.orders, insert (only) into app.summary.
        {"summaryInserter", R"([
            {"resource": {"db": "app", "collection": "orders"}, "actions": ["find"]},
            {"resource": {"db": "app", "collection": "summary"}, "actions": ["insert"]}])"},
        // A custom role: may change its own password and customData.
        {"selfService", R"([
            {"resource": {"db": "app", "collection": ""},
             "actions": ["changeOwnCustomData", "changeOwnPassword"]}])"},
        // A custom role on time-series buckets of app.
        {"bucketsReader", R"([
            {"resource": {"db": "app", "system_buckets": ""}, "actions": ["find"]}])"},
        // root@admin (abridged): validate on anyResource is what makes it root.
        {"root", R"([
            {"resource": {"anyResource": true}, "actions": ["validate"]},
            {"resource": {"db": "", "collection": ""},
             "actions": [)" READ_ACTIONS ", " WRITE_ACTIONS ", " DB_ADMIN_ACTIONS R"(]},
            {"resource": {"cluster": true},
             "actions": ["inprog", "killop", "listDatabases", "serverStatus", "shutdown",
                         "useUUID"]}])"},
        {"none", "[]"},
    };
    return k;
}

std::vector<Privilege> privileges(const std::string& fixture) {
    auto it = fixtures().find(fixture);
    EXPECT_TRUE(it != fixtures().end()) << fixture;
    auto wrapped = bson::Doc::fromJsonOrDie("{\"p\": " + it->second + "}");
    bson_t arr;
    EXPECT_TRUE(bson::subDocument(wrapped.get(), "p", &arr));
    auto parsed = parsePrivileges(&arr);
    EXPECT_TRUE(parsed.isOK()) << fixture << ": " << parsed.getStatus().reason();
    return parsed.isOK() ? parsed.getValue() : std::vector<Privilege>{};
}

std::string firstKey(const bson_t* doc) {
    bson_iter_t it;
    if (bson_iter_init(&it, doc) && bson_iter_next(&it)) return bson_iter_key(&it);
    return {};
}

Status run(const std::string& db, const std::string& cmdJson, const std::string& fixture,
           const std::string& user = "alice@app") {
    auto cmd = bson::Doc::fromJsonOrDie(cmdJson);
    return authorize(firstKey(cmd.get()), db, cmd.get(), privileges(fixture), user);
}

// --- the table ----------------------------------------------------------------

struct Case {
    const char* fixture;
    const char* db;
    const char* cmd;
    bool allowed;
    const char* why;
};

const Case kCases[] = {
    // read on one database
    {"read", "app", R"({"find": "orders", "filter": {}})", true, "find in its database"},
    {"read", "other", R"({"find": "orders"})", false, "another database"},
    {"read", "app", R"({"count": "orders"})", true, "count is find"},
    {"read", "app", R"({"distinct": "orders", "key": "x"})", true, "distinct is find"},
    {"read", "app", R"({"insert": "orders", "documents": [{}]})", false, "no insert"},
    {"read", "app", R"({"update": "orders", "updates": [{"q": {}, "u": {}}]})", false, "no update"},
    {"read", "app", R"({"delete": "orders", "deletes": [{"q": {}, "limit": 1}]})", false,
     "no remove"},
    {"read", "app", R"({"find": "system.js"})", true, "system.js is granted explicitly"},
    {"read", "app", R"({"find": "system.views"})", false,
     "a database grant does not cover system collections"},
    {"read", "app", R"({"listCollections": 1})", true, "listCollections on the database"},
    {"read", "app", R"({"listIndexes": "orders"})", true, "listIndexes"},
    {"read", "app", R"({"collStats": "orders"})", true, "collStats"},
    {"read", "app", R"({"dbStats": 1})", true, "dbStats"},
    {"read", "app", R"({"dbstats": 1})", true, "the lower-case alias"},
    {"read", "app", R"({"drop": "orders"})", false, "no dropCollection"},
    {"read", "app", R"({"createIndexes": "orders", "indexes": []})", false, "no createIndex"},
    {"read", "app", R"({"create": "newcoll"})", false, "neither createCollection nor insert"},
    {"read", "app", R"({"getMore": {"$numberLong": "5"}, "collection": "orders"})", true,
     "getMore: ownership is the cursor map's"},
    {"read", "app", R"({"killCursors": "orders", "cursors": []})", true,
     "killCursors: ownership is the cursor map's"},
    {"read", "app", R"({"serverStatus": 1})", false, "no serverStatus"},
    {"read", "admin", R"({"listDatabases": 1})", true, "lists the databases it can reach"},
    {"read", "admin", R"({"listDatabases": 1, "authorizedDatabases": false})", false,
     "all databases need listDatabases"},
    {"read", "app", R"({"fooBar": 1})", false, "unknown commands need root"},
    {"read", "app", R"({"find": {"$binary": {"base64": "AAAAAAAAAAAAAAAAAAAAAA==",
                                             "subType": "04"}}})",
     false, "a UUID namespace needs root"},
    {"read", "app", R"({"find": "orders", "term": 3})", false, "term is for members only"},
    {"read", "app", R"({"startSession": 1})", true, "sessions: any user"},
    {"read", "admin", R"({"commitTransaction": 1})", true, "transactions: any user"},
    {"read", "admin", R"({"killOp": 1, "op": 12})", true, "killOp: the owner check is later"},
    {"read", "app", R"({"killAllSessions": []})", false, "killAnySession"},
    {"read", "app", R"({"profile": -1})", false, "no find on system.profile"},
    {"read", "app", R"({"haloclineStatus": 1})", false, "needs serverStatus"},

    // aggregate: the collection, each stage's own needs, nested pipelines
    {"read", "app", R"({"aggregate": "orders", "pipeline": [{"$match": {}}], "cursor": {}})", true,
     "find on the collection"},
    {"read", "app", R"({"aggregate": "orders", "pipeline": [], "cursor": {}})", true,
     "an empty pipeline reads the collection"},
    {"read", "app", R"({"aggregate": "orders", "pipeline": [{"$out": "summary"}]})", false,
     "$out needs insert+remove"},
    {"read", "app",
     R"({"aggregate": "orders", "pipeline": [{"$lookup": {"from": "customers",
         "localField": "c", "foreignField": "_id", "as": "c"}}]})",
     true, "$lookup in the same database"},
    {"read", "app",
     R"({"aggregate": "orders", "pipeline": [{"$lookup": {"from": {"db": "other", "coll": "x"},
         "pipeline": [], "as": "c"}}]})",
     false, "$lookup into another database"},
    {"read", "app",
     R"({"aggregate": "orders", "pipeline": [{"$lookup": {"from": "system.users",
         "pipeline": [{"$match": {}}], "as": "u"}}]})",
     false, "$lookup into a system collection"},
    {"read", "app", R"({"aggregate": "orders", "pipeline": [{"$collStats": {}}]})", true,
     "$collStats: collStats"},
    {"read", "app", R"({"aggregate": "orders", "pipeline": [{"$indexStats": {}}]})", false,
     "$indexStats: read has no indexStats"},
    {"read", "app", R"({"aggregate": "orders", "pipeline": [{"$planCacheStats": {}}]})", true,
     "$planCacheStats: planCacheRead"},
    {"read", "app", R"({"aggregate": "orders", "pipeline": [{"$changeStream": {}}]})", true,
     "a collection change stream"},
    {"read", "app", R"({"aggregate": 1, "pipeline": [{"$changeStream": {}}]})", true,
     "a database change stream"},
    {"read", "admin",
     R"({"aggregate": 1, "pipeline": [{"$changeStream": {"allChangesForCluster": true}}]})", false,
     "a cluster change stream needs find+changeStream on every database"},
    {"read", "app", R"({"aggregate": "orders", "pipeline": [{"$fooStage": {}}]})", false,
     "unknown stages need root"},
    {"read", "app", R"({"explain": {"find": "orders"}, "verbosity": "queryPlanner"})", true,
     "explain: the explained command's needs"},
    {"read", "app", R"({"explain": {"update": "orders", "updates": [{"q": {}, "u": {}}]}})", false,
     "explain of an update needs update"},
    {"read", "app", R"({"explain": {"aggregate": "orders", "pipeline": [{"$out": "x"}]}})", false,
     "explain of $out"},

    // readWrite on one database
    {"readWrite", "app", R"({"insert": "orders", "documents": [{}]})", true, "insert"},
    {"readWrite", "app", R"({"insert": "orders", "documents": [{}],
                             "bypassDocumentValidation": true})",
     false, "bypassDocumentValidation needs its action"},
    {"readWrite", "app", R"({"insert": "orders", "documents": [{}],
                             "bypassDocumentValidation": false})",
     true, "a false flag needs nothing"},
    {"readWrite", "app", R"({"update": "orders", "updates": [{"q": {}, "u": {}, "upsert": true}]})",
     true, "upsert: update+insert"},
    {"readWrite", "app", R"({"delete": "orders", "deletes": [{"q": {}, "limit": 0}]})", true,
     "delete: remove"},
    {"readWrite", "app",
     R"({"findAndModify": "orders", "query": {}, "update": {"$set": {"a": 1}}, "upsert": true})",
     true, "findAndModify: find+update+insert"},
    {"readWrite", "app", R"({"findandmodify": "orders", "query": {}, "remove": true})", true,
     "findAndModify remove: find+remove"},
    {"readWrite", "app", R"({"aggregate": "orders", "pipeline": [{"$out": "summary"}]})", true,
     "$out in its database"},
    {"readWrite", "app",
     R"({"aggregate": "orders", "pipeline": [{"$out": {"db": "other", "coll": "s"}}]})", false,
     "$out into another database"},
    {"readWrite", "app", R"({"aggregate": "orders", "pipeline": [{"$merge": {"into": "s"}}]})",
     true, "$merge: insert+update"},
    {"readWrite", "app",
     R"({"aggregate": "orders", "pipeline": [{"$out": "s"}], "bypassDocumentValidation": true})",
     false, "$out with bypass needs bypassDocumentValidation"},
    {"readWrite", "app", R"({"drop": "orders"})", true, "drop"},
    {"readWrite", "app", R"({"create": "newcoll"})", true, "create"},
    {"readWrite", "app", R"({"create": "capped", "capped": true, "size": 4096})", true,
     "capped: convertToCapped"},
    {"readWrite", "app", R"({"createIndexes": "orders", "indexes": []})", true, "createIndex"},
    {"readWrite", "app", R"({"dropIndexes": "orders", "index": "*"})", true, "dropIndex"},
    {"readWrite", "app", R"({"deleteIndexes": "orders", "index": "*"})", true, "the old alias"},
    {"readWrite", "app", R"({"dropDatabase": 1})", false, "no dropDatabase"},
    {"readWrite", "app", R"({"collMod": "orders"})", false, "no collMod"},
    {"readWrite", "admin", R"({"renameCollection": "app.a", "to": "app.b"})", true,
     "rename within the database"},
    {"readWrite", "admin", R"({"renameCollection": "app.a", "to": "other.b"})", false,
     "rename into another database"},
    {"readWrite", "app",
     R"({"create": "v", "viewOn": "orders", "pipeline": [{"$lookup": {"from": "customers",
         "localField": "c", "foreignField": "_id", "as": "c"}}]})",
     true, "a view over what it can read"},
    {"readWrite", "app",
     R"({"create": "v", "viewOn": "orders", "pipeline": [{"$lookup": {
         "from": {"db": "other", "coll": "x"}, "pipeline": [], "as": "c"}}]})",
     false, "a view reading another database"},

    {"readWrite", "app", R"({"collMod": "orders", "index": {"name": "a_1", "hidden": true}})",
     false, "index options are collMod"},
    {"read", "app", R"({"dataSize": "app.orders"})", true, "dataSize: find on the full namespace"},
    {"read", "app", R"({"dataSize": "other.orders"})", false, "dataSize names its own database"},
    {"read", "app", R"({"mapReduce": "orders", "map": "f", "reduce": "g", "out": {"inline": 1}})",
     true, "mapReduce inline: find"},
    {"read", "app", R"({"mapReduce": "orders", "map": "f", "reduce": "g", "out": "mr"})", false,
     "mapReduce into a collection: insert+remove"},
    {"readWrite", "app",
     R"({"mapReduce": "orders", "map": "f", "reduce": "g", "out": {"merge": "mr"}})", true,
     "mapReduce merge: insert+update"},
    {"readWrite", "app",
     R"({"cloneCollectionAsCapped": "orders", "toCollection": "c", "size": 4096})", true,
     "cloneCollectionAsCapped"},
    {"summaryInserter", "app", R"({"aggregate": "orders", "pipeline": [{"$merge": "summary"}]})",
     false, "$merge (merge/insert) needs update too"},
    {"summaryInserter", "app",
     R"({"aggregate": "orders", "pipeline": [{"$merge": {"into": "summary",
         "whenMatched": "fail", "whenNotMatched": "insert"}}]})",
     true, "$merge fail/insert needs insert only"},
    {"summaryInserter", "app",
     R"({"aggregate": "orders", "pipeline": [{"$merge": {"into": "summary",
         "whenMatched": [{"$set": {"n": 1}}], "whenNotMatched": "discard"}}]})",
     false, "$merge with a pipeline updates"},

    // readAnyDatabase
    {"readAnyDatabase", "crm", R"({"find": "leads"})", true, "any normal database"},
    {"readAnyDatabase", "local", R"({"find": "oplog.rs"})", false, "local is not normal"},
    {"readAnyDatabase", "config", R"({"find": "chunks"})", false, "config is not normal"},
    {"readAnyDatabase", "crm", R"({"find": "system.js"})", true,
     "system.js in every database, by name"},
    {"readAnyDatabase", "admin", R"({"find": "system.users"})", false, "not system.users"},
    {"readAnyDatabase", "admin", R"({"listDatabases": 1, "authorizedDatabases": false})", true,
     "listDatabases on the cluster"},
    {"readAnyDatabase", "admin",
     R"({"aggregate": 1, "pipeline": [{"$changeStream": {"allChangesForCluster": true}}]})", true,
     "a cluster-wide change stream"},
    {"readAnyDatabase", "crm", R"({"insert": "leads", "documents": [{}]})", false, "read only"},
    {"readAnyDatabase", "crm", R"({"listCollections": 1})", true, "listCollections anywhere"},
    {"readAnyDatabase", "local", R"({"listCollections": 1})", false, "but not in local"},

    // clusterMonitor
    {"clusterMonitor", "admin", R"({"serverStatus": 1})", true, "serverStatus"},
    {"clusterMonitor", "admin", R"({"haloclineStatus": 1})", true,
     "the proxy's status: serverStatus"},
    {"clusterMonitor", "app", R"({"haloclineExplain": {"find": "orders"}})", true,
     "the proxy's routing explain: serverStatus"},
    {"clusterMonitor", "admin", R"({"currentOp": 1})", true, "inprog"},
    {"clusterMonitor", "admin",
     R"({"aggregate": 1, "pipeline": [{"$currentOp": {"allUsers": true}}]})", true,
     "$currentOp of everyone: inprog"},
    {"clusterMonitor", "admin", R"({"replSetGetStatus": 1})", true, "replSetGetStatus"},
    {"clusterMonitor", "admin", R"({"getLog": "global"})", true, "getLog"},
    {"clusterMonitor", "admin", R"({"getParameter": "*"})", true, "getParameter"},
    {"clusterMonitor", "admin", R"({"setParameter": 1, "logLevel": 1})", false, "not setParameter"},
    {"clusterMonitor", "admin", R"({"shutdown": 1})", false, "not shutdown"},
    {"clusterMonitor", "app", R"({"connPoolStats": 1})", true, "connPoolStats"},
    {"clusterMonitor", "app", R"({"find": "orders"})", false, "no data"},
    {"clusterMonitor", "app", R"({"find": "system.profile"})", true, "the profiler's collection"},
    {"clusterMonitor", "app", R"({"aggregate": "orders", "pipeline": [{"$indexStats": {}}]})", true,
     "$indexStats"},
    {"clusterMonitor", "admin",
     R"({"aggregate": 1, "pipeline": [{"$listSessions": {"allUsers": true}}]})", true,
     "everyone's sessions: listSessions"},

    // a custom role: find on one collection
    {"ordersFinder", "app", R"({"find": "orders"})", true, "its collection"},
    {"ordersFinder", "app", R"({"find": "customers"})", false, "no other collection"},
    {"ordersFinder", "app",
     R"({"aggregate": "orders", "pipeline": [{"$lookup": {"from": "customers",
         "localField": "c", "foreignField": "_id", "as": "c"}}]})",
     false, "$lookup needs find on the foreign collection"},
    {"ordersFinder", "app",
     R"({"aggregate": "orders", "pipeline": [{"$facet": {"a": [{"$lookup": {
         "from": "customers", "pipeline": [], "as": "c"}}]}}]})",
     false, "$lookup inside $facet"},
    {"ordersFinder", "app",
     R"({"aggregate": "orders", "pipeline": [{"$lookup": {"from": "orders", "as": "o",
         "pipeline": [{"$unionWith": "customers"}]}}]})",
     false, "$unionWith nested in a $lookup pipeline"},
    {"ordersFinder", "app",
     R"({"aggregate": "orders", "pipeline": [{"$unionWith": {"pipeline": [
         {"$documents": [{"a": 1}]}]}}]})",
     true, "$unionWith over $documents reads no collection"},
    {"ordersFinder", "app",
     R"({"aggregate": "orders", "pipeline": [{"$graphLookup": {"from": "orders",
         "startWith": "$p", "connectFromField": "p", "connectToField": "_id", "as": "t"}}]})",
     true, "$graphLookup on itself"},
    {"ordersFinder", "app",
     R"({"aggregate": "orders", "pipeline": [{"$graphLookup": {"from": "parts",
         "startWith": "$p", "connectFromField": "p", "connectToField": "_id", "as": "t"}}]})",
     false, "$graphLookup on another collection"},
    {"ordersFinder", "app", R"({"aggregate": 1, "pipeline": [{"$documents": [{"a": 1}]}]})", true,
     "$documents needs nothing"},
    {"ordersFinder", "app", R"({"listCollections": 1})", false, "no listCollections"},
    {"ordersFinder", "app",
     R"({"listCollections": 1, "nameOnly": true, "authorizedCollections": true})", true,
     "authorizedCollections: any privilege in the database"},
    {"ordersFinder", "crm",
     R"({"listCollections": 1, "nameOnly": true, "authorizedCollections": true})", false,
     "but not elsewhere"},
    {"ordersFinder", "app", R"({"explain": {"aggregate": "orders", "pipeline": []}})", true,
     "explain of an aggregate"},
    {"ordersFinder", "admin", R"({"currentOp": 1, "$ownOps": true})", true, "its own operations"},
    {"ordersFinder", "admin", R"({"currentOp": 1})", false, "everyone's need inprog"},
    {"ordersFinder", "admin", R"({"aggregate": 1, "pipeline": [{"$currentOp": {}}]})", true,
     "$currentOp of its own"},
    {"ordersFinder", "admin",
     R"({"aggregate": 1, "pipeline": [{"$currentOp": {"allUsers": true}}]})", false,
     "$currentOp of everyone"},
    {"ordersFinder", "admin",
     R"({"aggregate": 1, "pipeline": [{"$listSessions": {"users": [{"user": "alice",
         "db": "app"}]}}]})",
     true, "its own sessions"},
    {"ordersFinder", "admin",
     R"({"aggregate": 1, "pipeline": [{"$listSessions": {"users": [{"user": "bob",
         "db": "app"}]}}]})",
     false, "another user's sessions"},
    {"ordersFinder", "app", R"({"usersInfo": "alice"})", true, "oneself"},
    {"ordersFinder", "app", R"({"usersInfo": {"user": "alice", "db": "app"}})", true, "oneself"},
    {"ordersFinder", "app", R"({"usersInfo": "bob"})", false, "another user"},
    {"ordersFinder", "app", R"({"usersInfo": 1})", false, "all users of the database"},
    {"ordersFinder", "app", R"({"updateUser": "alice", "pwd": "new"})", false,
     "no changeOwnPassword"},

    // time-series buckets
    {"bucketsReader", "app", R"({"find": "system.buckets.weather"})", true,
     "system_buckets pattern"},
    {"bucketsReader", "app", R"({"find": "system.views"})", false, "only buckets"},
    {"bucketsReader", "app", R"({"find": "weather"})", false, "not the view"},
    {"readWrite", "app", R"({"find": "system.buckets.weather"})", false,
     "buckets are system collections"},

    // self-service: own password and customData only
    {"selfService", "app", R"({"updateUser": "alice", "pwd": "new"})", true, "its own password"},
    {"selfService", "app", R"({"updateUser": "alice", "customData": {"a": 1}})", true,
     "its own customData"},
    {"selfService", "app", R"({"updateUser": "bob", "pwd": "new"})", false, "not another's"},
    {"selfService", "app", R"({"updateUser": "alice", "pwd": "new", "roles": []})", false,
     "setting roles needs revokeRole everywhere"},

    // dbAdmin (and with readWrite: the bypass cases)
    {"dbAdmin", "app", R"({"collMod": "orders", "validator": {}})", true, "collMod"},
    {"dbAdmin", "app", R"({"profile": 1, "slowms": 50})", true, "enableProfiler"},
    {"dbAdmin", "app", R"({"dropDatabase": 1})", true, "dropDatabase"},
    {"dbAdmin", "app", R"({"validate": "orders"})", true, "validate"},
    {"dbAdmin", "app", R"({"collMod": "orders", "index": {"name": "a_1", "hidden": true}})", true,
     "index options need nothing beyond collMod"},
    {"clusterMonitor", "app", R"({"profile": -1})", true,
     "reading the profiler settings: find on system.profile"},
    {"clusterMonitor", "app", R"({"profile": 1})", false, "changing them: enableProfiler"},
    {"clusterMonitor", "admin", R"({"top": 1})", true, "top"},
    {"dbAdmin", "app", R"({"compact": "orders"})", true, "compact"},
    {"dbAdmin", "app", R"({"find": "orders"})", false, "no data"},
    {"dbAdmin", "app", R"({"find": "system.profile"})", true, "the profiler's collection"},
    {"dbAdmin", "app", R"({"insert": "orders", "documents": [{}],
                           "bypassDocumentValidation": true})",
     false, "bypass alone does not insert"},
    {"readWriteDbAdmin", "app", R"({"insert": "orders", "documents": [{}],
                                    "bypassDocumentValidation": true})",
     true, "insert with bypass"},
    {"readWriteDbAdmin", "app", R"({"update": "orders", "updates": [{"q": {}, "u": {}}],
                                    "bypassDocumentValidation": true})",
     true, "update with bypass"},
    {"readWriteDbAdmin", "app",
     R"({"findAndModify": "orders", "query": {}, "update": {}, "bypassDocumentValidation": true})",
     true, "findAndModify with bypass"},
    {"readWriteDbAdmin", "app",
     R"({"aggregate": "orders", "pipeline": [{"$out": "s"}], "bypassDocumentValidation": true})",
     true, "$out with bypass"},

    // userAdmin
    {"userAdmin", "app", R"({"createUser": "bob", "pwd": "p", "roles": ["read"]})", true,
     "createUser granting a role of its database"},
    {"userAdmin", "app",
     R"({"createUser": "bob", "pwd": "p", "roles": [{"role": "read", "db": "other"}]})", false,
     "granting a role of another database needs grantRole there"},
    {"userAdmin", "app", R"({"usersInfo": 1})", true, "viewUser"},
    {"userAdmin", "app", R"({"usersInfo": {"forAllDBs": true}})", false,
     "every database: viewUser on the cluster"},
    {"userAdmin", "app", R"({"dropUser": "bob"})", true, "dropUser"},
    {"userAdmin", "app", R"({"grantRolesToUser": "bob", "roles": ["readWrite"]})", true,
     "grantRole"},
    {"userAdmin", "app", R"({"revokeRolesFromUser": "bob", "roles": ["readWrite"]})", true,
     "revokeRole"},
    {"userAdmin", "app", R"({"updateUser": "bob", "roles": ["read"]})", false,
     "roles: revokeRole on every database"},
    {"userAdmin", "app", R"({"updateUser": "bob", "pwd": "x"})", true, "changePassword"},
    {"userAdmin", "app",
     R"({"createRole": "r", "privileges": [{"resource": {"db": "app", "collection": "c"},
         "actions": ["find"]}], "roles": []})",
     true, "privileges in its database"},
    {"userAdmin", "app",
     R"({"createRole": "r", "privileges": [{"resource": {"cluster": true},
         "actions": ["serverStatus"]}], "roles": []})",
     false, "cluster privileges need grantRole on admin"},
    {"userAdmin", "app", R"({"rolesInfo": 1})", true, "viewRole"},
    {"userAdmin", "app", R"({"find": "orders"})", false, "no data"},

    // root
    {"root", "app", R"({"fooBar": 1})", true, "unknown commands: root"},
    {"root", "app", R"({"find": {"$binary": {"base64": "AAAAAAAAAAAAAAAAAAAAAA==",
                                             "subType": "04"}}})",
     true, "a UUID namespace: root"},
    {"root", "admin", R"({"shutdown": 1})", true, "shutdown"},

    // no privileges at all
    {"none", "app", R"({"find": "orders"})", false, "nothing"},
    {"none", "app", R"({"ping": 1})", true, "handshake commands need nothing"},
    {"none", "admin", R"({"endSessions": []})", true, "endSessions: any user"},
};

TEST(Authorize, Table) {
    for (const auto& c : kCases) {
        Status s = run(c.db, c.cmd, c.fixture);
        if (c.allowed) {
            EXPECT_TRUE(s.isOK()) << c.fixture << " on " << c.db << ": " << c.cmd << " (" << c.why
                                  << "): " << s.reason();
        } else {
            EXPECT_EQ(s.code(), ErrorCode::Unauthorized)
                << c.fixture << " on " << c.db << ": " << c.cmd << " (" << c.why << ")";
        }
    }
}

// --- messages -----------------------------------------------------------------

TEST(Authorize, RefusalPrintsTheCommandAsMongodDoes) {
    Status s = run("other",
                   R"({"find": "orders", "filter": {"qty": {"$gt": 5}}, "limit": 1.0,
                       "lsid": {"id": {"$binary": {"base64": "3q2+7wAAAAAAAAAAAAAAAA==",
                                                   "subType": "04"}}},
                       "$db": "other"})",
                   "read");
    EXPECT_EQ(s.code(), ErrorCode::Unauthorized);
    EXPECT_EQ(s.reason(),
              "not authorized on other to execute command { find: \"orders\", filter: { qty: { "
              "$gt: 5 } }, limit: 1.0, lsid: { id: UUID(\"deadbeef-0000-0000-0000-000000000000\") "
              "}, $db: \"other\" }");
}

TEST(Authorize, RefusalRedactsPasswords) {
    Status s = run("app", R"({"createUser": "bob", "pwd": "secret", "roles": ["read"],
                             "$db": "app"})",
                   "read");
    EXPECT_EQ(s.reason(),
              "not authorized on app to execute command { createUser: \"bob\", pwd: \"xxx\", "
              "roles: [ \"read\" ], $db: \"app\" }");
    s = run("app", R"({"updateUser": "bob", "pwd": "secret", "$db": "app"})", "read");
    EXPECT_EQ(s.reason().find("secret"), std::string::npos) << s.reason();
}

TEST(Authorize, RefusalRendersEveryType) {
    Status s = run("app",
                   R"({"insert": "c", "documents": [{
                        "_id": {"$oid": "65a1b2c3d4e5f60718293a4b"},
                        "d": {"$date": {"$numberLong": "1700000000123"}},
                        "t": {"$timestamp": {"t": 1700000000, "i": 3}},
                        "l": {"$numberLong": "5"}, "x": 2.5, "y": -0.0, "big": 1e21,
                        "dec": {"$numberDecimal": "1.50"},
                        "b": {"$binary": {"base64": "AQID", "subType": "00"}},
                        "r": {"$regularExpression": {"pattern": "^a", "options": "i"}},
                        "n": null, "t2": true, "e": {}, "ea": [],
                        "min": {"$minKey": 1}, "max": {"$maxKey": 1}}],
                       "ordered": true, "$db": "app"})",
                   "read");
    EXPECT_EQ(s.reason(),
              "not authorized on app to execute command { insert: \"c\", documents: [ { _id: "
              "ObjectId('65a1b2c3d4e5f60718293a4b'), d: new Date(1700000000123), t: "
              "Timestamp(1700000000, 3), l: 5, x: 2.5, y: -0.0, big: 1e+21.0, dec: 1.50, b: "
              "BinData(0, 010203), r: /^a/i, n: null, t2: true, e: {}, ea: [], min: MinKey, max: "
              "MaxKey } ], ordered: true, $db: \"app\" }");
}

TEST(Authorize, RefusalCutsLongStringsAt150Bytes) {
    std::string longValue(200, 'a');
    Status s = run("app", "{\"find\": \"orders\", \"comment\": \"" + longValue + "\"}", "none");
    EXPECT_EQ(s.reason(),
              "not authorized on app to execute command { find: \"orders\", comment: \"" +
                  std::string(150, 'a') + "...\" }");
}

TEST(Authorize, RefusalCutsStringsOnACharacterBoundary) {
    // Byte 150 falls inside the two-byte "\u00e9": the cut keeps the message valid UTF-8.
    std::string value = std::string(149, 'a') + "\u00e9" + std::string(20, 'b');
    Status s = run("app", "{\"find\": \"orders\", \"comment\": \"" + value + "\"}", "none");
    EXPECT_EQ(s.reason(),
              "not authorized on app to execute command { find: \"orders\", comment: \"" +
                  std::string(149, 'a') + "...\" }");
}

TEST(Authorize, RefusalOfAHugeCommandStaysBounded) {
    std::string docs = "[";
    for (int i = 0; i < 200'000; ++i) docs += (i ? ", " : "") + std::to_string(i);
    docs += "]";
    Status s = run("app", "{\"insert\": \"orders\", \"documents\": " + docs + "}", "none");
    EXPECT_EQ(s.code(), ErrorCode::Unauthorized);
    EXPECT_LT(s.reason().size(), 1'100'000u);
    EXPECT_NE(s.reason().find(", ... ] }"), std::string::npos);
}

TEST(Authorize, ExplainRefusalNamesTheExplainCommand) {
    Status s = run("app", R"({"explain": {"find": "orders"}, "$db": "app"})", "none");
    EXPECT_EQ(s.reason(),
              "not authorized on app to execute command { explain: { find: \"orders\" }, $db: "
              "\"app\" }");
}

TEST(Authorize, AdminOnlyCommands) {
    Status s = run("app", R"({"renameCollection": "app.a", "to": "app.b"})", "root");
    EXPECT_EQ(s.code(), ErrorCode::Unauthorized);
    EXPECT_EQ(s.reason(), "renameCollection may only be run against the admin database.");
    s = run("app", R"({"listDatabases": 1})", "root");
    EXPECT_EQ(s.reason(), "listDatabases may only be run against the admin database.");
}

TEST(Authorize, ListingAllDatabasesHasItsOwnMessage) {
    Status s = run("admin", R"({"listDatabases": 1, "authorizedDatabases": false})", "read");
    EXPECT_EQ(s.code(), ErrorCode::Unauthorized);
    EXPECT_EQ(s.reason(), "Insufficient permissions to list all databases");
}

TEST(Authorize, CollModOfAViewNeedsViewOnAndPipelineTogether) {
    Status s = run("app", R"({"collMod": "v", "viewOn": "orders"})", "dbAdmin");
    EXPECT_EQ(s.code(), ErrorCode::InvalidOptions);
    EXPECT_EQ(s.reason(),
              "Must specify both 'viewOn' and 'pipeline' when modifying a view and auth is "
              "enabled");
    // With both, and no find on the view: nothing more to check (it could not read it).
    EXPECT_TRUE(
        run("app", R"({"collMod": "v", "viewOn": "orders", "pipeline": []})", "dbAdmin").isOK());
}

// --- authentication -------------------------------------------------------------

TEST(Authenticate, HandshakeCommandsNeedNone) {
    for (const char* c :
         {"hello", "isMaster", "ismaster", "ping", "buildInfo", "buildinfo", "saslStart",
          "saslContinue", "authenticate", "logout", "connectionStatus", "listCommands"}) {
        EXPECT_FALSE(requiresAuthentication(c)) << c;
        auto cmd = bson::Doc::fromJsonOrDie(std::string("{\"") + c + "\": 1}");
        EXPECT_TRUE(authorize(c, "admin", cmd.get(), {}, "").isOK()) << c;
    }
    for (const char* c :
         {"find", "getMore", "endSessions", "whatsmyuri", "fooBar", "haloclineStatus"})
        EXPECT_TRUE(requiresAuthentication(c)) << c;
}

TEST(Authenticate, OtherCommandsRefuseUnauthenticatedClients) {
    Status s = run("app", R"({"find": "orders"})", "root", "");
    EXPECT_EQ(s.code(), ErrorCode::Unauthorized);
    EXPECT_EQ(s.reason(), "command find requires authentication");
    s = run("app", R"({"findandmodify": "orders", "remove": true})", "root", "");
    EXPECT_EQ(s.reason(), "command findAndModify requires authentication") << "mongod's name";
    s = run("app", R"({"fooBar": 1})", "root", "");
    EXPECT_EQ(s.reason(), "command fooBar requires authentication");
}

// --- document sequences -----------------------------------------------------------

TEST(Authorize, UpsertInADocumentSequenceNeedsInsert) {
    auto privs = privileges("ordersUpdater");
    auto cmd = bson::Doc::fromJsonOrDie(R"({"update": "orders", "$db": "app"})");
    auto plain = bson::Doc::fromJsonOrDie(R"({"q": {"a": 1}, "u": {"$set": {"b": 1}}})");
    auto upsert =
        bson::Doc::fromJsonOrDie(R"({"q": {"a": 1}, "u": {"$set": {"b": 1}}, "upsert": true})");
    std::vector<wire::DocumentSequence> seqs(1);
    seqs[0].identifier = "updates";
    seqs[0].documents.emplace_back(plain.data(), plain.size());
    EXPECT_TRUE(authorize("update", "app", cmd.get(), privs, "alice@app", seqs).isOK());
    seqs[0].documents.emplace_back(upsert.data(), upsert.size());
    EXPECT_EQ(authorize("update", "app", cmd.get(), privs, "alice@app", seqs).code(),
              ErrorCode::Unauthorized);
}

// --- parsing ----------------------------------------------------------------------

StatusWith<std::vector<Privilege>> parse(const std::string& json) {
    auto wrapped = bson::Doc::fromJsonOrDie("{\"p\": " + json + "}");
    bson_t arr;
    bson::subDocument(wrapped.get(), "p", &arr);
    return parsePrivileges(&arr);
}

TEST(ParsePrivileges, ReadsEveryResourceShape) {
    auto p = parse(R"([
        {"resource": {"anyResource": true}, "actions": ["validate"]},
        {"resource": {"cluster": true}, "actions": ["serverStatus"]},
        {"resource": {"db": "", "collection": ""}, "actions": ["find"]},
        {"resource": {"db": "a", "collection": ""}, "actions": ["find"]},
        {"resource": {"db": "", "collection": "c"}, "actions": ["find"]},
        {"resource": {"db": "a", "collection": "c"}, "actions": ["find", "madeUpAction"]},
        {"resource": {"db": "a", "system_buckets": "w"}, "actions": ["find"]}])");
    ASSERT_TRUE(p.isOK()) << p.getStatus().reason();
    const auto& v = p.getValue();
    ASSERT_EQ(v.size(), 7u);
    using K = Resource::Kind;
    EXPECT_EQ(v[0].resource.kind, K::kAnyResource);
    EXPECT_EQ(v[1].resource.kind, K::kCluster);
    EXPECT_EQ(v[2].resource.kind, K::kAnyNormal);
    EXPECT_EQ(v[3].resource.kind, K::kDatabase);
    EXPECT_EQ(v[4].resource.kind, K::kCollectionName);
    EXPECT_EQ(v[5].resource.kind, K::kNamespace);
    EXPECT_EQ(v[6].resource.kind, K::kSystemBucketsNamespace);
    EXPECT_TRUE(v[5].actions.contains(Action::kFind));
    EXPECT_TRUE(v[5].actions.contains(Action::kOther)) << "unknown actions are kept as kOther";
    EXPECT_EQ(actionName(Action::kFind), "find");
    EXPECT_EQ(actionName(Action::kBypassDocumentValidation), "bypassDocumentValidation");
}

TEST(ParsePrivileges, UnknownResourceShapesGrantNothing) {
    auto p = parse(R"([
        {"resource": {"db": "a", "collection": "c", "tenant": "t"}, "actions": ["find"]},
        {"resource": {"cluster": false}, "actions": ["find"]},
        {"resource": {"db": "a", "collection": "c"}, "actions": ["find"]}])");
    ASSERT_TRUE(p.isOK());
    EXPECT_EQ(p.getValue().size(), 1u);
}

TEST(ParsePrivileges, RefusesMalformedEntries) {
    EXPECT_EQ(parse(R"([1])").getStatus().code(), ErrorCode::FailedToParse);
    EXPECT_EQ(parse(R"([{"resource": 1, "actions": []}])").getStatus().code(),
              ErrorCode::FailedToParse);
    EXPECT_EQ(parse(R"([{"resource": {"cluster": true}}])").getStatus().code(),
              ErrorCode::FailedToParse);
    EXPECT_EQ(parse(R"([{"resource": {"cluster": true}, "actions": [1]}])").getStatus().code(),
              ErrorCode::FailedToParse);
    EXPECT_EQ(parsePrivileges(nullptr).getStatus().code(), ErrorCode::FailedToParse);
}

// --- what the proxy filters itself ------------------------------------------------------

TEST(Filters, DatabasesAUserCanReach) {
    auto read = privileges("read");
    EXPECT_TRUE(hasAnyPrivilegeOnDatabase("app", read));
    EXPECT_FALSE(hasAnyPrivilegeOnDatabase("crm", read));
    auto any = privileges("readAnyDatabase");
    EXPECT_TRUE(hasAnyPrivilegeOnDatabase("crm", any));
    EXPECT_TRUE(hasAnyPrivilegeOnDatabase("local", any)) << "system.js by name, in any database";
    auto monitor = privileges("clusterMonitor");
    EXPECT_TRUE(hasAnyPrivilegeOnDatabase("config", monitor));
    EXPECT_FALSE(hasAnyPrivilegeOnDatabase("app", privileges("none")));
    auto custom =
        parse(R"([{"resource": {"db": "x", "collection": "c"}, "actions": ["someAction"]}])");
    EXPECT_TRUE(hasAnyPrivilegeOnDatabase("x", custom.getValue()))
        << "any action counts, known here or not";
}

TEST(Filters, ListDatabasesScope) {
    auto all = bson::Doc::fromJsonOrDie(R"({"listDatabases": 1})");
    auto mine = bson::Doc::fromJsonOrDie(R"({"listDatabases": 1, "authorizedDatabases": true})");
    EXPECT_EQ(listDatabasesScope(all.get(), privileges("read")),
              ListDatabasesScope::kAuthorizedOnly);
    EXPECT_EQ(listDatabasesScope(all.get(), privileges("readAnyDatabase")),
              ListDatabasesScope::kAll);
    EXPECT_EQ(listDatabasesScope(mine.get(), privileges("readAnyDatabase")),
              ListDatabasesScope::kAuthorizedOnly);
}

TEST(Filters, CollectionsAUserCanSee) {
    auto finder = privileges("ordersFinder");
    EXPECT_TRUE(hasAnyPrivilegeOn("app", "orders", finder));
    EXPECT_FALSE(hasAnyPrivilegeOn("app", "customers", finder));
    EXPECT_TRUE(isAuthorizedOnNamespace("app", "orders", {Action::kFind}, finder));
    EXPECT_FALSE(
        isAuthorizedOnNamespace("app", "orders", {Action::kFind, Action::kInsert}, finder));
    EXPECT_TRUE(isAuthorizedOnCluster({Action::kServerStatus}, privileges("clusterMonitor")));
}

TEST(Filters, OwnershipOverrides) {
    auto monitor = privileges("clusterMonitor");
    EXPECT_TRUE(maySeeAllOperations(monitor));
    EXPECT_FALSE(mayKillAnyOperation(monitor));
    auto root = privileges("root");
    EXPECT_TRUE(mayKillAnyOperation(root));
    EXPECT_FALSE(mayKillAnyCursor("app.orders", privileges("read")));
    auto killer = parse(R"([{"resource": {"db": "app", "collection": ""},
                             "actions": ["killAnyCursor"]}])");
    EXPECT_TRUE(mayKillAnyCursor("app.orders", killer.getValue()));
    EXPECT_TRUE(mayKillAnyCursor("app.$cmd.listCollections", killer.getValue()));
    EXPECT_FALSE(mayKillAnyCursor("crm.leads", killer.getValue()));
}

}  // namespace
}  // namespace halo::tiering::access
