// Handshake and server-information commands: hello/isMaster, buildInfo, ping,
// getParameter, serverStatus, hostInfo, getLog, whatsmyuri,
// endSessions, killSessions, killAllSessions, getCmdLineOpts, listCommands.
#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <set>

#include "store/commands/auth_commands.h"
#include "store/commands/command.h"
#include "store/commands/write_path.h"
#include "store/exec/cursor_manager.h"
#include "store/repl/oplog.h"
#include "store/rules/kill_sessions.h"
#include "store/server/store.h"
#include "store/storage/engine.h"
#include "store/txn/session_catalog.h"

// gperftools' tcmalloc, when the binary links it (src/cli/CMakeLists.txt): weak,
// so the libraries also link into tests that use the default allocator.
extern "C" int MallocExtension_GetNumericProperty(const char* property, size_t* value)
    __attribute__((weak));

namespace halo::store {

inline constexpr const char* kVersion = "7.0.15";
inline constexpr int kMaxWireVersion = 21;

namespace {

int64_t nowMillis() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

/// serverStatus.tcmalloc, as mongod built with tcmalloc reports it: the bytes
/// the program holds (generic.current_allocated_bytes) beside what the
/// allocator took from the system (heap_size) and keeps free in its caches.
/// Nothing when the allocator is not tcmalloc.
void appendTcmalloc(bson_t* r) {
    if (!MallocExtension_GetNumericProperty) return;
    auto append = [](bson_t* to, const char* key, const char* property) {
        size_t v = 0;
        if (MallocExtension_GetNumericProperty(property, &v))
            BSON_APPEND_INT64(to, key, static_cast<int64_t>(v));
    };
    bson_t t, generic, details;
    BSON_APPEND_DOCUMENT_BEGIN(r, "tcmalloc", &t);
    BSON_APPEND_DOCUMENT_BEGIN(&t, "generic", &generic);
    append(&generic, "current_allocated_bytes", "generic.current_allocated_bytes");
    append(&generic, "heap_size", "generic.heap_size");
    bson_append_document_end(&t, &generic);
    BSON_APPEND_DOCUMENT_BEGIN(&t, "tcmalloc", &details);
    append(&details, "pageheap_free_bytes", "tcmalloc.pageheap_free_bytes");
    append(&details, "pageheap_unmapped_bytes", "tcmalloc.pageheap_unmapped_bytes");
    append(&details, "max_total_thread_cache_bytes", "tcmalloc.max_total_thread_cache_bytes");
    append(&details, "current_total_thread_cache_bytes",
           "tcmalloc.current_total_thread_cache_bytes");
    append(&details, "central_cache_free_bytes", "tcmalloc.central_cache_free_bytes");
    append(&details, "transfer_cache_free_bytes", "tcmalloc.transfer_cache_free_bytes");
    append(&details, "thread_cache_free_bytes", "tcmalloc.thread_cache_free_bytes");
    bson_append_document_end(&t, &details);
    bson_append_document_end(r, &t);
}

void negotiateCompression(OperationContext& op, bson_t* reply) {
    bson_iter_t it;
    if (!bson::find(op.cmd, "compression", &it) || !BSON_ITER_HOLDS_ARRAY(&it)) return;
    op.client.compressors.clear();
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(reply, "compression", &arr);
    bson_iter_t a;
    bson_iter_recurse(&it, &a);
    int i = 0;
    while (bson_iter_next(&a)) {
        if (!BSON_ITER_HOLDS_UTF8(&a)) continue;
        wire::Compressor c;
        std::string name = bson_iter_utf8(&a, nullptr);
        if (!wire::compressorFromName(name, &c)) continue;
        op.client.compressors.push_back(c);
        std::string k = std::to_string(i++);
        BSON_APPEND_UTF8(&arr, k.c_str(), name.c_str());
    }
    bson_append_array_end(reply, &arr);
}

/// True when the client's topologyVersion is ours: nothing can change, so an
/// awaitable hello waits out maxAwaitTimeMS before answering.
bool sameTopology(OperationContext& op, int64_t* maxAwaitMs) {
    bson_t tv;
    bson_iter_t it;
    if (!bson::subDocument(op.cmd, "topologyVersion", &tv) ||
        !bson::find(op.cmd, "maxAwaitTimeMS", &it))
        return false;
    *maxAwaitMs = bson_iter_as_int64(&it);
    if (*maxAwaitMs < 0)
        uasserted(ErrorCode::BadValue, "maxAwaitTimeMS must be a non-negative integer");
    bson_iter_t pid, counter;
    if (!bson::find(&tv, "processId", &pid) || !BSON_ITER_HOLDS_OID(&pid) ||
        !bson::find(&tv, "counter", &counter))
        return false;
    return bson_oid_equal(bson_iter_oid(&pid), &op.store.processId()) &&
           bson_iter_as_int64(&counter) == 0;
}

void runHello(OperationContext& op, bson_t* reply, bool legacy) {
    bson_iter_t it;
    int64_t maxAwaitMs = 0;
    if (op.deferral && !op.finalAttempt && sameTopology(op, &maxAwaitMs)) {
        op.deferral->requested = true;
        op.deferral->deadline =
            std::chrono::steady_clock::now() + std::chrono::milliseconds(maxAwaitMs);
        return;
    }
    if (!op.client.sawHandshake) {
        op.client.sawHandshake = true;
        // Another server's connection (mongod tags it an internal client).
        op.client.internalClient = bson::find(op.cmd, "internalClient", &it);
        bson_t meta;
        if (bson::subDocument(op.cmd, "client", &meta)) {
            op.client.clientMetadata = bson::Doc::copyOf(&meta);
            op.store.operations().setClientMetadata(op.client.connectionId, &meta);
        }
    }
    if (bson::find(op.cmd, "helloOk", &it)) BSON_APPEND_BOOL(reply, "helloOk", true);
    bson_t tv;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "topologyVersion", &tv);
    BSON_APPEND_OID(&tv, "processId", &op.store.processId());
    BSON_APPEND_INT64(&tv, "counter", 0);
    bson_append_document_end(reply, &tv);
    if (op.store.isReplicaSet()) {
        std::string me = op.store.hostAndPort();
        bson_t hosts;
        BSON_APPEND_ARRAY_BEGIN(reply, "hosts", &hosts);
        BSON_APPEND_UTF8(&hosts, "0", me.c_str());
        bson_append_array_end(reply, &hosts);
        BSON_APPEND_UTF8(reply, "setName", op.store.options().replSet.c_str());
        BSON_APPEND_INT32(reply, "setVersion", 1);
    }
    BSON_APPEND_BOOL(reply, legacy ? "ismaster" : "isWritablePrimary", true);
    BSON_APPEND_BOOL(reply, "secondary", false);
    if (op.store.isReplicaSet()) {
        std::string me = op.store.hostAndPort();
        BSON_APPEND_UTF8(reply, "primary", me.c_str());
        BSON_APPEND_UTF8(reply, "me", me.c_str());
        bson_oid_t election;
        bson_oid_init_from_string(&election, "7fffffff0000000000000001");
        BSON_APPEND_OID(reply, "electionId", &election);
        Timestamp last = op.store.oplog().visibleUpTo();
        bson_t lw, opTime, majority;
        BSON_APPEND_DOCUMENT_BEGIN(reply, "lastWrite", &lw);
        BSON_APPEND_DOCUMENT_BEGIN(&lw, "opTime", &opTime);
        appendTimestamp(&opTime, "ts", last);
        BSON_APPEND_INT64(&opTime, "t", 1);
        bson_append_document_end(&lw, &opTime);
        BSON_APPEND_DATE_TIME(&lw, "lastWriteDate", static_cast<int64_t>(last.secs) * 1000);
        BSON_APPEND_DOCUMENT_BEGIN(&lw, "majorityOpTime", &majority);
        appendTimestamp(&majority, "ts", last);
        BSON_APPEND_INT64(&majority, "t", 1);
        bson_append_document_end(&lw, &majority);
        BSON_APPEND_DATE_TIME(&lw, "majorityWriteDate", static_cast<int64_t>(last.secs) * 1000);
        bson_append_document_end(reply, &lw);
    }
    BSON_APPEND_INT32(reply, "maxBsonObjectSize", wire::kMaxBsonObjectSize);
    BSON_APPEND_INT32(reply, "maxMessageSizeBytes", wire::kMaxMessageSizeBytes);
    BSON_APPEND_INT32(reply, "maxWriteBatchSize", wire::kMaxWriteBatchSize);
    BSON_APPEND_DATE_TIME(reply, "localTime", nowMillis());
    BSON_APPEND_INT32(reply, "logicalSessionTimeoutMinutes", 30);
    BSON_APPEND_INT64(reply, "connectionId", static_cast<int64_t>(op.client.connectionId));
    BSON_APPEND_INT32(reply, "minWireVersion", 0);
    BSON_APPEND_INT32(reply, "maxWireVersion", kMaxWireVersion);
    BSON_APPEND_BOOL(reply, "readOnly", false);
    negotiateCompression(op, reply);
    appendHelloAuth(op, reply);
}

HALO_REGISTER_COMMAND(CommandSpec{{"hello"},
                                  [](OperationContext& op, bson_t* r) { runHello(op, r, false); }});
HALO_REGISTER_COMMAND(CommandSpec{{"isMaster", "ismaster"},
                                  [](OperationContext& op, bson_t* r) { runHello(op, r, true); }});

HALO_REGISTER_COMMAND(CommandSpec{{"ping"}, [](OperationContext&, bson_t*) {}});

// Whether a connection reaches this very process: one id per process, as mongod.
HALO_REGISTER_COMMAND(CommandSpec{{"_isSelf"}, [](OperationContext&, bson_t* r) {
                                      static const bson_oid_t self = [] {
                                          bson_oid_t o;
                                          bson_oid_init(&o, nullptr);
                                          return o;
                                      }();
                                      BSON_APPEND_OID(r, "id", &self);
                                  }});

HALO_REGISTER_COMMAND(CommandSpec{{"buildInfo", "buildinfo"}, [](OperationContext&, bson_t* r) {
                                      BSON_APPEND_UTF8(r, "version", kVersion);
                                      BSON_APPEND_UTF8(r, "gitVersion", "halocline");
                                      bson_t arr;
                                      BSON_APPEND_ARRAY_BEGIN(r, "versionArray", &arr);
                                      BSON_APPEND_INT32(&arr, "0", 7);
                                      BSON_APPEND_INT32(&arr, "1", 0);
                                      BSON_APPEND_INT32(&arr, "2", 15);
                                      BSON_APPEND_INT32(&arr, "3", 0);
                                      bson_append_array_end(r, &arr);
                                      BSON_APPEND_INT32(r, "bits", 64);
                                      BSON_APPEND_BOOL(r, "debug", false);
                                      BSON_APPEND_INT32(r, "maxBsonObjectSize",
                                                        wire::kMaxBsonObjectSize);
                                      bson_t modules, se, env;
                                      BSON_APPEND_ARRAY_BEGIN(r, "modules", &modules);
                                      bson_append_array_end(r, &modules);
                                      BSON_APPEND_ARRAY_BEGIN(r, "storageEngines", &se);
                                      BSON_APPEND_UTF8(&se, "0", "wiredTiger");
                                      bson_append_array_end(r, &se);
                                      BSON_APPEND_DOCUMENT_BEGIN(r, "buildEnvironment", &env);
                                      BSON_APPEND_UTF8(&env, "distarch", "x86_64");
                                      BSON_APPEND_UTF8(&env, "target_os", "linux");
                                      bson_append_document_end(r, &env);
                                      BSON_APPEND_UTF8(r, "javascriptEngine", "none");
                                      BSON_APPEND_UTF8(r, "allocator", "system");
                                      BSON_APPEND_UTF8(r, "sysInfo", "deprecated");
                                  }});

void appendParameters(OperationContext& op, bson_t* r, bool all) {
    bson_iter_t it;
    auto want = [&](const char* name) { return all || bson::find(op.cmd, name, &it); };
    bool any = false;
    if (want("featureCompatibilityVersion")) {
        bson_t fcv;
        BSON_APPEND_DOCUMENT_BEGIN(r, "featureCompatibilityVersion", &fcv);
        BSON_APPEND_UTF8(&fcv, "version", "7.0");
        bson_append_document_end(r, &fcv);
        any = true;
    }
    if (want("authenticationMechanisms")) {
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(r, "authenticationMechanisms", &arr);
        BSON_APPEND_UTF8(&arr, "0", "SCRAM-SHA-1");
        BSON_APPEND_UTF8(&arr, "1", "SCRAM-SHA-256");
        bson_append_array_end(r, &arr);
        any = true;
    }
    if (want("cursorTimeoutMillis")) {
        BSON_APPEND_INT64(r, "cursorTimeoutMillis", op.store.options().cursorTimeoutMillis);
        any = true;
    }
    if (want("internalQueryMaxBlockingSortMemoryUsageBytes")) {
        BSON_APPEND_INT32(r, "internalQueryMaxBlockingSortMemoryUsageBytes", 100 * 1024 * 1024);
        any = true;
    }
    if (want("logLevel")) {
        BSON_APPEND_INT32(r, "logLevel", op.store.options().verbose ? 1 : 0);
        any = true;
    }
    if (want("maxBSONDepth")) {
        BSON_APPEND_INT32(r, "maxBSONDepth", 200);
        any = true;
    }
    if (want("enableTestCommands")) {
        BSON_APPEND_BOOL(r, "enableTestCommands", op.store.options().enableTestCommands);
        any = true;
    }
    if (want("transactionLifetimeLimitSeconds")) {
        BSON_APPEND_INT32(r, "transactionLifetimeLimitSeconds", 60);
        any = true;
    }
    if (!any && !all) uasserted(ErrorCode::InvalidOptions, "no option found to get");
}

HALO_REGISTER_COMMAND(CommandSpec{
    {"getParameter"},
    [](OperationContext& op, bson_t* r) {
        bson_iter_t it;
        bson_iter_init(&it, op.cmd);
        bson_iter_next(&it);
        bool all =
            BSON_ITER_HOLDS_UTF8(&it) && std::string_view(bson_iter_utf8(&it, nullptr)) == "*";
        if (!all && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_t sub;
            bson::subDocument(op.cmd, "getParameter", &sub);
            bson_iter_t a;
            if (bson::find(&sub, "allParameters", &a) && bson::isTruthy(*bson_iter_value(&a)))
                all = true;
        }
        appendParameters(op, r, all);
    },
    true});

HALO_REGISTER_COMMAND(CommandSpec{
    {"serverStatus"}, [](OperationContext& op, bson_t* r) {
        Store& st = op.store;
        auto up = std::chrono::steady_clock::now() - st.startTime();
        auto upMs = std::chrono::duration_cast<std::chrono::milliseconds>(up).count();
        char host[256] = {};
        gethostname(host, sizeof host - 1);
        BSON_APPEND_UTF8(r, "host", host);
        BSON_APPEND_UTF8(r, "version", kVersion);
        BSON_APPEND_UTF8(r, "process", "mongod");
        BSON_APPEND_INT64(r, "pid", getpid());
        BSON_APPEND_INT64(r, "uptime", upMs / 1000);
        BSON_APPEND_INT64(r, "uptimeMillis", upMs);
        BSON_APPEND_INT64(r, "uptimeEstimate", upMs / 1000);
        BSON_APPEND_DATE_TIME(r, "localTime", nowMillis());
        bson_t conn, ops, wt, cache, se, metrics, cursor;
        BSON_APPEND_DOCUMENT_BEGIN(r, "connections", &conn);
        BSON_APPEND_INT32(&conn, "current", static_cast<int32_t>(st.openConnections()));
        BSON_APPEND_INT32(
            &conn, "available",
            static_cast<int32_t>(std::max<int64_t>(
                0, st.maxConnections() - static_cast<int64_t>(st.openConnections()))));
        BSON_APPEND_INT32(&conn, "totalCreated", static_cast<int32_t>(st.totalConnections()));
        BSON_APPEND_INT64(&conn, "rejected", static_cast<int64_t>(st.rejectedConnections()));
        bson_append_document_end(r, &conn);
        BSON_APPEND_DOCUMENT_BEGIN(r, "opcounters", &ops);
        auto& c = st.counters();
        BSON_APPEND_INT64(&ops, "insert", c.insert.load());
        BSON_APPEND_INT64(&ops, "query", c.query.load());
        BSON_APPEND_INT64(&ops, "update", c.update.load());
        BSON_APPEND_INT64(&ops, "delete", c.del.load());
        BSON_APPEND_INT64(&ops, "getmore", c.getmore.load());
        BSON_APPEND_INT64(&ops, "command", c.command.load());
        bson_append_document_end(r, &ops);
        BSON_APPEND_DOCUMENT_BEGIN(r, "storageEngine", &se);
        BSON_APPEND_UTF8(&se, "name", "wiredTiger");
        BSON_APPEND_BOOL(&se, "supportsCommittedReads", true);
        BSON_APPEND_BOOL(&se, "persistent", true);
        bson_append_document_end(r, &se);
        Engine& e = st.engine();
        BSON_APPEND_DOCUMENT_BEGIN(r, "wiredTiger", &wt);
        BSON_APPEND_DOCUMENT_BEGIN(&wt, "cache", &cache);
        BSON_APPEND_INT64(&cache, "maximum bytes configured",
                          e.connStat(WT_STAT_CONN_CACHE_BYTES_MAX));
        BSON_APPEND_INT64(&cache, "bytes currently in the cache",
                          e.connStat(WT_STAT_CONN_CACHE_BYTES_INUSE));
        BSON_APPEND_INT64(&cache, "tracked dirty bytes in the cache",
                          e.connStat(WT_STAT_CONN_CACHE_BYTES_DIRTY));
        BSON_APPEND_INT64(&cache, "pages read into cache", e.connStat(WT_STAT_CONN_CACHE_READ));
        BSON_APPEND_INT64(&cache, "pages written from cache", e.connStat(WT_STAT_CONN_CACHE_WRITE));
        BSON_APPEND_INT64(&cache, "bytes read into cache",
                          e.connStat(WT_STAT_CONN_CACHE_BYTES_READ));
        BSON_APPEND_INT64(&cache, "bytes written from cache",
                          e.connStat(WT_STAT_CONN_CACHE_BYTES_WRITE));
        BSON_APPEND_INT64(&cache, "pages currently held in the cache",
                          e.connStat(WT_STAT_CONN_CACHE_PAGES_INUSE));
        // Command threads pulled into eviction: the cache's dirty data passed
        // its trigger (each command then pays for writing pages back).
        BSON_APPEND_INT64(&cache, "pages evicted by application threads",
                          e.connStat(WT_STAT_CONN_CACHE_EVICTION_APP));
        BSON_APPEND_INT64(&cache, "modified pages evicted by application threads",
                          e.connStat(WT_STAT_CONN_CACHE_EVICTION_APP_DIRTY));
        bson_append_document_end(&wt, &cache);
        bson_t yield;
        BSON_APPEND_DOCUMENT_BEGIN(&wt, "thread-yield", &yield);
        BSON_APPEND_INT64(&yield, "application thread time evicting (usecs)",
                          e.connStat(WT_STAT_CONN_APPLICATION_EVICT_TIME));
        BSON_APPEND_INT64(&yield, "application thread time waiting for cache (usecs)",
                          e.connStat(WT_STAT_CONN_APPLICATION_CACHE_TIME));
        bson_append_document_end(&wt, &yield);
        bson_append_document_end(r, &wt);
        appendTcmalloc(r);
        BSON_APPEND_DOCUMENT_BEGIN(r, "metrics", &metrics);
        BSON_APPEND_DOCUMENT_BEGIN(&metrics, "cursor", &cursor);
        BSON_APPEND_INT64(&cursor, "timedOut", st.cursors().timedOut());
        bson_t open;
        BSON_APPEND_DOCUMENT_BEGIN(&cursor, "open", &open);
        BSON_APPEND_INT64(&open, "total", static_cast<int64_t>(st.cursors().open()));
        bson_append_document_end(&cursor, &open);
        bson_append_document_end(&metrics, &cursor);
        bson_t ttl;
        BSON_APPEND_DOCUMENT_BEGIN(&metrics, "ttl", &ttl);
        BSON_APPEND_INT64(&ttl, "deletedDocuments", st.counters().ttlDeleted.load());
        BSON_APPEND_INT64(&ttl, "passes", st.counters().ttlPasses.load());
        bson_append_document_end(&metrics, &ttl);
        bson_append_document_end(r, &metrics);
    }});

HALO_REGISTER_COMMAND(CommandSpec{
    {"hostInfo"}, [](OperationContext&, bson_t* r) {
        struct utsname u;
        uname(&u);
        bson_t sys, os, extra;
        BSON_APPEND_DOCUMENT_BEGIN(r, "system", &sys);
        BSON_APPEND_DATE_TIME(&sys, "currentTime", nowMillis());
        BSON_APPEND_UTF8(&sys, "hostname", u.nodename);
        BSON_APPEND_INT32(&sys, "cpuAddrSize", 64);
        long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
        BSON_APPEND_INT64(&sys, "memSizeMB",
                          static_cast<int64_t>(pages) * pageSize / (1024 * 1024));
        BSON_APPEND_INT32(&sys, "numCores", static_cast<int32_t>(sysconf(_SC_NPROCESSORS_ONLN)));
        BSON_APPEND_UTF8(&sys, "cpuArch", u.machine);
        BSON_APPEND_BOOL(&sys, "numaEnabled", false);
        bson_append_document_end(r, &sys);
        BSON_APPEND_DOCUMENT_BEGIN(r, "os", &os);
        BSON_APPEND_UTF8(&os, "type", "Linux");
        BSON_APPEND_UTF8(&os, "name", u.sysname);
        BSON_APPEND_UTF8(&os, "version", u.release);
        bson_append_document_end(r, &os);
        BSON_APPEND_DOCUMENT_BEGIN(r, "extra", &extra);
        BSON_APPEND_UTF8(&extra, "versionString", u.version);
        BSON_APPEND_INT64(&extra, "pageSize", pageSize);
        bson_append_document_end(r, &extra);
    }});

HALO_REGISTER_COMMAND(CommandSpec{
    {"getLog"},
    [](OperationContext& op, bson_t* r) {
        bson_iter_t it;
        bson_iter_init(&it, op.cmd);
        bson_iter_next(&it);
        std::string which = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, nullptr) : "";
        if (which == "*") {
            bson_t names;
            BSON_APPEND_ARRAY_BEGIN(r, "names", &names);
            BSON_APPEND_UTF8(&names, "0", "global");
            BSON_APPEND_UTF8(&names, "1", "startupWarnings");
            bson_append_array_end(r, &names);
            return;
        }
        if (which != "global" && which != "startupWarnings")
            uasserted(ErrorCode::OperationFailed, "No log named '" + which + "'");
        BSON_APPEND_INT32(r, "totalLinesWritten", 0);
        bson_t log;
        BSON_APPEND_ARRAY_BEGIN(r, "log", &log);
        bson_append_array_end(r, &log);
    },
    true});

HALO_REGISTER_COMMAND(CommandSpec{{"whatsmyuri"}, [](OperationContext& op, bson_t* r) {
                                      BSON_APPEND_UTF8(r, "you", op.client.remote.c_str());
                                  }});

HALO_REGISTER_COMMAND(CommandSpec{{"endSessions"}, [](OperationContext& op, bson_t*) {
                                      bson_iter_t it, a;
                                      if (!bson::find(op.cmd, "endSessions", &it) ||
                                          !BSON_ITER_HOLDS_ARRAY(&it))
                                          return;
                                      bson_iter_recurse(&it, &a);
                                      while (bson_iter_next(&a)) {
                                          if (!BSON_ITER_HOLDS_DOCUMENT(&a)) continue;
                                          uint32_t len;
                                          const uint8_t* data;
                                          bson_iter_document(&a, &len, &data);
                                          bson::View lsid(data, len);
                                          op.store.sessions().end(lsid.get());
                                      }
                                  }});

HALO_REGISTER_COMMAND(CommandSpec{{"commitTransaction"},
                                  [](OperationContext& op, bson_t*) {
                                      CurrentOperation& cur = currentOperation();
                                      if (!cur.txn)
                                          return;  // a retried commit of a committed transaction
                                      const int64_t bytes = transactionWriteBytes(*cur.txn);
                                      try {
                                          cur.sessions->commit(*cur.txn);
                                      } catch (const DBException& e) {
                                          // WiredTiger rolled the commit back.
                                          if (e.code() == ErrorCode::WriteConflict)
                                              throwIfTooLargeForCache(op.store, bytes);
                                          throw;
                                      }
                                  },
                                  true});

HALO_REGISTER_COMMAND(CommandSpec{{"abortTransaction"},
                                  [](OperationContext& op, bson_t*) {
                                      CurrentOperation& cur = currentOperation();
                                      if (!cur.txn)
                                          uasserted(ErrorCode::NoSuchTransaction,
                                                    "No transaction started");
                                      cur.sessions->abort(*cur.txn);
                                  },
                                  true});
namespace {

/// Kills what the sessions `match` accepts (by lsid id bytes) have in flight, as
/// mongod: their running operations (but this command), their cursors, and
/// their transactions in progress.
void killMatchingSessions(OperationContext& op,
                          const std::function<bool(const std::string&)>& match) {
    const int64_t self = op.client.activeOp ? op.client.activeOp->opid() : -1;
    op.store.operations().killSessions(match, self);
    op.store.cursors().killSessions(match);
    op.store.sessions().abortTransactions(match);
}

/// killSessions ([] : the caller's sessions, every session without
/// authentication), killAllSessions ([]: every session) and
/// killAllSessionsByPattern: what they name, by lsid or by user.
void runKillSessions(OperationContext& op, bson_t*) {
    const KillSessionsArgs args = uassertStatusOK(parseKillSessions(op.cmd));
    if (args.every) {
        killMatchingSessions(op, [](const std::string&) { return true; });
        return;
    }
    std::set<std::string> ids = args.ids;
    std::set<std::string> owners = args.users;
    const std::string self = op.client.user ? op.client.user->user + "@" + op.client.user->db : "";
    const bool anyOwner = args.mine && !op.client.user;
    if (args.mine && op.client.user) owners.insert(self);
    if (anyOwner || !owners.empty()) {
        auto keys = op.store.sessions().sessionsOwnedBy(
            [&](const std::string& owner) { return anyOwner || owners.count(owner) > 0; });
        ids.insert(keys.begin(), keys.end());
    }
    killMatchingSessions(op, [&](const std::string& id) { return ids.count(id) > 0; });
}

}  // namespace

HALO_REGISTER_COMMAND(CommandSpec{{"killAllSessions"}, runKillSessions});
HALO_REGISTER_COMMAND(CommandSpec{{"killAllSessionsByPattern"}, runKillSessions});
HALO_REGISTER_COMMAND(CommandSpec{{"killSessions"}, runKillSessions});
HALO_REGISTER_COMMAND(CommandSpec{{"startSession"}, [](OperationContext&, bson_t* r) {
                                      bson_t id;
                                      BSON_APPEND_DOCUMENT_BEGIN(r, "id", &id);
                                      uint8_t uuid[16];
                                      for (auto& b : uuid) b = static_cast<uint8_t>(rand());
                                      uuid[6] = (uuid[6] & 0x0f) | 0x40;
                                      uuid[8] = (uuid[8] & 0x3f) | 0x80;
                                      bson_append_binary(&id, "id", 2, BSON_SUBTYPE_UUID, uuid, 16);
                                      bson_append_document_end(r, &id);
                                      BSON_APPEND_INT32(r, "timeoutMinutes", 30);
                                  }});
HALO_REGISTER_COMMAND(CommandSpec{{"refreshSessions"}, [](OperationContext&, bson_t*) {}});

HALO_REGISTER_COMMAND(CommandSpec{
    {"getCmdLineOpts"},
    [](OperationContext& op, bson_t* r) {
        bson_t argv, parsed, storage, net;
        BSON_APPEND_ARRAY_BEGIN(r, "argv", &argv);
        BSON_APPEND_UTF8(&argv, "0", "halocline");
        bson_append_array_end(r, &argv);
        BSON_APPEND_DOCUMENT_BEGIN(r, "parsed", &parsed);
        BSON_APPEND_DOCUMENT_BEGIN(&parsed, "net", &net);
        BSON_APPEND_UTF8(&net, "bindIp", op.store.options().bindIp.c_str());
        BSON_APPEND_INT32(&net, "port", op.store.port());
        bson_append_document_end(&parsed, &net);
        BSON_APPEND_DOCUMENT_BEGIN(&parsed, "storage", &storage);
        BSON_APPEND_UTF8(&storage, "dbPath", op.store.options().dbPath.c_str());
        bson_append_document_end(&parsed, &storage);
        bson_append_document_end(r, &parsed);
    },
    true});

HALO_REGISTER_COMMAND(CommandSpec{{"listCommands"}, [](OperationContext&, bson_t* r) {
                                      bson_t cmds;
                                      BSON_APPEND_DOCUMENT_BEGIN(r, "commands", &cmds);
                                      for (const auto& n : CommandRegistry::instance().names()) {
                                          bson_t c;
                                          BSON_APPEND_DOCUMENT_BEGIN(&cmds, n.c_str(), &c);
                                          bson_append_document_end(&cmds, &c);
                                      }
                                      bson_append_document_end(r, &cmds);
                                  }});

void requireReplSet(OperationContext& op) {
    if (!op.store.isReplicaSet())
        uasserted(ErrorCode::NoReplicationEnabled, "not running with --replSet");
}

HALO_REGISTER_COMMAND(CommandSpec{
    {"replSetGetStatus"},
    [](OperationContext& op, bson_t* r) {
        requireReplSet(op);
        std::string me = op.store.hostAndPort();
        Timestamp last = op.store.oplog().visibleUpTo();
        auto upMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - op.store.startTime())
                        .count();
        BSON_APPEND_UTF8(r, "set", op.store.options().replSet.c_str());
        BSON_APPEND_DATE_TIME(r, "date", nowMillis());
        BSON_APPEND_INT32(r, "myState", 1);
        BSON_APPEND_INT64(r, "term", 1);
        BSON_APPEND_INT32(r, "heartbeatIntervalMillis", 2000);
        bson_t optimes, members, m, opTime;
        BSON_APPEND_DOCUMENT_BEGIN(r, "optimes", &optimes);
        for (const char* k : {"lastCommittedOpTime", "appliedOpTime", "durableOpTime"}) {
            bson_t o;
            BSON_APPEND_DOCUMENT_BEGIN(&optimes, k, &o);
            appendTimestamp(&o, "ts", last);
            BSON_APPEND_INT64(&o, "t", 1);
            bson_append_document_end(&optimes, &o);
        }
        bson_append_document_end(r, &optimes);
        BSON_APPEND_ARRAY_BEGIN(r, "members", &members);
        BSON_APPEND_DOCUMENT_BEGIN(&members, "0", &m);
        BSON_APPEND_INT32(&m, "_id", 0);
        BSON_APPEND_UTF8(&m, "name", me.c_str());
        BSON_APPEND_DOUBLE(&m, "health", 1.0);
        BSON_APPEND_INT32(&m, "state", 1);
        BSON_APPEND_UTF8(&m, "stateStr", "PRIMARY");
        BSON_APPEND_INT64(&m, "uptime", upMs / 1000);
        BSON_APPEND_DOCUMENT_BEGIN(&m, "optime", &opTime);
        appendTimestamp(&opTime, "ts", last);
        BSON_APPEND_INT64(&opTime, "t", 1);
        bson_append_document_end(&m, &opTime);
        BSON_APPEND_DATE_TIME(&m, "optimeDate", static_cast<int64_t>(last.secs) * 1000);
        BSON_APPEND_BOOL(&m, "self", true);
        bson_append_document_end(&members, &m);
        bson_append_array_end(r, &members);
    },
    true});

HALO_REGISTER_COMMAND(CommandSpec{{"replSetInitiate"},
                                  [](OperationContext& op, bson_t*) {
                                      requireReplSet(op);
                                      uasserted(ErrorCode::AlreadyInitialized,
                                                "already initialized");
                                  },
                                  true});

HALO_REGISTER_COMMAND(CommandSpec{{"replSetGetConfig"},
                                  [](OperationContext& op, bson_t* r) {
                                      requireReplSet(op);
                                      bson_t cfg, members, m;
                                      BSON_APPEND_DOCUMENT_BEGIN(r, "config", &cfg);
                                      BSON_APPEND_UTF8(&cfg, "_id",
                                                       op.store.options().replSet.c_str());
                                      BSON_APPEND_INT32(&cfg, "version", 1);
                                      BSON_APPEND_INT32(&cfg, "term", 1);
                                      BSON_APPEND_ARRAY_BEGIN(&cfg, "members", &members);
                                      BSON_APPEND_DOCUMENT_BEGIN(&members, "0", &m);
                                      BSON_APPEND_INT32(&m, "_id", 0);
                                      BSON_APPEND_UTF8(&m, "host", op.store.hostAndPort().c_str());
                                      bson_append_document_end(&members, &m);
                                      bson_append_array_end(&cfg, &members);
                                      bson_append_document_end(r, &cfg);
                                  },
                                  true});

HALO_REGISTER_COMMAND(CommandSpec{
    {"getFreeMonitoringStatus"},
    [](OperationContext&, bson_t* r) { BSON_APPEND_UTF8(r, "state", "disabled"); },
    true});

HALO_REGISTER_COMMAND(CommandSpec{
    {"shutdown"}, [](OperationContext& op, bson_t*) { op.store.requestShutdown(); }, true});

}  // namespace
}  // namespace halo::store
