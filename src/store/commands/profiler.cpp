// The profile command (db.setProfilingLevel / db.getProfilingStatus) and the
// writing of system.profile documents.
#include "store/commands/profiler.h"

#include <fmt/format.h>

#include <chrono>
#include <random>

#include "common/log.h"
#include "store/commands/write_path.h"
#include "store/exec/operation_registry.h"
#include "store/query/matcher.h"
#include "store/storage/record_store.h"

namespace halo::store {
namespace {

constexpr int64_t kProfileCollectionBytes = 1024 * 1024;  // mongod's default capped size

int64_t nowMillis() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

/// Documents in the reply's first or next batch.
int64_t returned(const bson_t* reply) {
    bson_t cursor, batch;
    if (!bson::subDocument(reply, "cursor", &cursor)) return -1;
    if (bson::subDocument(&cursor, "firstBatch", &batch) ||
        bson::subDocument(&cursor, "nextBatch", &batch))
        return bson_count_keys(&batch);
    return -1;
}

int64_t intField(const bson_t* doc, const char* field) {
    bson_iter_t it;
    return bson::find(doc, field, &it) && BSON_ITER_HOLDS_NUMBER(&it) ? bson_iter_as_int64(&it) : 0;
}

/// The system.profile document of one finished command.
bson::Doc profileDoc(const ClientState& client, std::string_view db, const bson_t* cmd,
                     const bson_t* reply, int64_t micros) {
    auto [op, ns] = describeCommand(db, cmd);
    bson::Doc d;
    BSON_APPEND_UTF8(d.mut(), "op", op.c_str());
    BSON_APPEND_UTF8(d.mut(), "ns", ns.c_str());
    BSON_APPEND_DOCUMENT(d.mut(), "command", cmd);
    if (int64_t n = returned(reply); n >= 0) bson::appendNumber(d.mut(), "nreturned", n);
    if (op == "insert") bson::appendNumber(d.mut(), "ninserted", intField(reply, "n"));
    if (op == "update") {
        bson::appendNumber(d.mut(), "nMatched", intField(reply, "n"));
        bson::appendNumber(d.mut(), "nModified", intField(reply, "nModified"));
    }
    if (op == "remove") bson::appendNumber(d.mut(), "ndeleted", intField(reply, "n"));
    BSON_APPEND_INT32(d.mut(), "numYield", 0);
    bson_iter_t it;
    if (bson::find(reply, "ok", &it) && !bson::isTruthy(*bson_iter_value(&it))) {
        BSON_APPEND_DOUBLE(d.mut(), "ok", 0);
        if (bson::find(reply, "errmsg", &it)) bson::appendIter(d.mut(), "errMsg", it);
        if (bson::find(reply, "codeName", &it)) bson::appendIter(d.mut(), "errName", it);
        if (bson::find(reply, "code", &it)) bson::appendIter(d.mut(), "errCode", it);
    }
    bson::appendNumber(d.mut(), "responseLength", reply->len);
    BSON_APPEND_UTF8(d.mut(), "protocol", "op_msg");
    bson::appendNumber(d.mut(), "millis", micros / 1000);
    BSON_APPEND_DATE_TIME(d.mut(), "ts", nowMillis());
    std::string address = client.remote.substr(0, client.remote.rfind(':'));
    BSON_APPEND_UTF8(d.mut(), "client", address.c_str());
    bson_t app;
    if (bson::subDocument(client.clientMetadata.get(), "application", &app) &&
        bson::find(&app, "name", &it) && BSON_ITER_HOLDS_UTF8(&it))
        bson::appendIter(d.mut(), "appName", it);
    bson_t users;
    BSON_APPEND_ARRAY_BEGIN(d.mut(), "allUsers", &users);
    if (client.user) {
        bson_t u;
        BSON_APPEND_DOCUMENT_BEGIN(&users, "0", &u);
        BSON_APPEND_UTF8(&u, "user", client.user->user.c_str());
        BSON_APPEND_UTF8(&u, "db", client.user->db.c_str());
        bson_append_document_end(&users, &u);
    }
    bson_append_array_end(d.mut(), &users);
    std::string user = client.user ? client.user->user + "@" + client.user->db : "";
    BSON_APPEND_UTF8(d.mut(), "user", user.c_str());
    return d;
}

bool sampled(double rate) {
    if (rate >= 1.0) return true;
    thread_local std::mt19937_64 rng{std::random_device{}()};
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng) < rate;
}

/// The command as a log line shows it: passwords and SASL payloads replaced,
/// and a command over 10 KB (mongod's maxLogSizeKB) cut to its first field.
bson::Doc loggableCommand(const bson_t* cmd) {
    constexpr uint32_t kMaxBytes = 10 * 1024;
    bson::Doc shown;
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    bool first = true;
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (!first && cmd->len > kMaxBytes) {
            BSON_APPEND_BOOL(shown.mut(), "$truncated", true);
            break;
        }
        first = false;
        if (k == "pwd" || k == "payload")
            BSON_APPEND_UTF8(shown.mut(), std::string(k).c_str(), "xxx");
        else
            bson::appendIter(shown.mut(), k, it);
    }
    return shown;
}

/// mongod's slow query line (51803): the operation's profile fields, in the
/// order mongod logs them.
void logSlowQuery(const ClientState& client, const bson_t* cmd, const bson::Doc& profiled,
                  int64_t micros) {
    bson::Doc attr;
    BSON_APPEND_UTF8(attr.mut(), "type", "command");
    bson_iter_t it;
    auto copy = [&](const char* from, const char* to) {
        if (bson::find(profiled.get(), from, &it)) bson::appendIter(attr.mut(), to, it);
    };
    copy("ns", "ns");
    copy("appName", "appName");
    bson::Doc shown = loggableCommand(cmd);
    BSON_APPEND_DOCUMENT(attr.mut(), "command", shown.get());
    for (const char* f : {"nreturned", "ninserted", "nMatched", "nModified", "ndeleted"})
        copy(f, f);
    copy("numYield", "numYields");
    for (const char* f : {"ok", "errMsg", "errName", "errCode"}) copy(f, f);
    copy("responseLength", "reslen");
    bson_t empty;
    BSON_APPEND_DOCUMENT_BEGIN(attr.mut(), "locks", &empty);
    bson_append_document_end(attr.mut(), &empty);
    BSON_APPEND_UTF8(attr.mut(), "remote", client.remote.c_str());
    BSON_APPEND_UTF8(attr.mut(), "protocol", "op_msg");
    bson::appendNumber(attr.mut(), "durationMillis", micros / 1000);
    log::info("command", 51803, "Slow query", attr.toJson());
}

/// Appends `doc` to <db>.system.profile (created capped, without an _id index,
/// not in the oplog), then drops the oldest documents beyond the cap.
void record(Store& store, const std::string& db, const bson::Doc& doc) {
    Catalog& catalog = store.catalog();
    const std::string ns = db + ".system.profile";
    {
        std::shared_lock lk(catalog.ddlLock());
        if (!catalog.lookup(ns)) {
            lk.unlock();
            std::unique_lock ex(catalog.ddlLock());
            if (!catalog.lookup(ns)) {
                auto options = bson::Doc::fromJsonOrDie(R"({"capped": true, "size": 1048576})");
                uassertStatusOK(catalog.createCollection(ns, options.get(), false).getStatus());
            }
        }
    }
    CollectionLock lk(catalog);
    auto coll = catalog.lookup(ns);
    if (!coll) return;  // dropped meanwhile
    PooledSession s(catalog.sessions());
    for (int attempt = 0;; ++attempt) {
        try {
            Txn txn(*s);
            rs::insert(*s, *coll, doc.get());
            std::vector<std::pair<int64_t, bson::Doc>> oldest;
            int64_t excess = coll->dataSize.load() + doc.size() - kProfileCollectionBytes;
            if (excess > 0) {
                Cursor c = s->open(coll->uri);
                while (excess > 0 && c->next(c.get()) == 0) {
                    int64_t rid;
                    WT_ITEM v;
                    c->get_key(c.get(), &rid);
                    c->get_value(c.get(), &v);
                    excess -= static_cast<int64_t>(v.size);
                    oldest.emplace_back(
                        rid, bson::Doc::copyOf(static_cast<const uint8_t*>(v.data), v.size));
                }
            }
            for (const auto& [rid, old] : oldest) rs::remove(*s, *coll, rid, old.get());
            txn.commit(false);
            coll->numRecords += 1 - static_cast<int64_t>(oldest.size());
            coll->dataSize += doc.size();
            for (const auto& [rid, old] : oldest) coll->dataSize -= old.size();
            return;
        } catch (const DBException& e) {
            if (e.code() != ErrorCode::WriteConflict || attempt >= 100) throw;
            writeConflictBackoff(attempt);
        }
    }
}

}  // namespace

void profileCommand(Store& store, const ClientState& client, std::string_view db, const bson_t* cmd,
                    const bson_t* reply, int64_t micros) {
    ProfileSettings& profiling = store.profiling();
    const bool slow = micros / 1000 > profiling.slowMs();
    if (!slow && !profiling.anyWatched()) return;
    auto settings = profiling.get(std::string(db));
    if (!slow && settings.db.level == 0 && !settings.db.filter) return;
    try {
        bson::Doc doc = profileDoc(client, db, cmd, reply, micros);
        // As mongod: a database's filter decides both the log line and level 1
        // profiling; without one, slowms and one sampleRate draw decide both.
        const bool chosen = settings.db.filter ? settings.db.filter->matches(doc.get())
                                               : slow && sampled(settings.sampleRate);
        if (chosen) logSlowQuery(client, cmd, doc, micros);
        if (settings.db.level == 2 || (settings.db.level == 1 && chosen))
            record(store, std::string(db), doc);
    } catch (const std::exception& e) {
        log::warning(
            "command", 20700, "Failed to write to the profile collection",
            fmt::format(R"({{"db":{},"error":{}}})", log::quote(db), log::quote(e.what())));
    }
}

namespace {

/// {profile: <-1|0|1|2>, slowms, sampleRate, filter}: answers the settings from
/// before the change ({was, slowms, sampleRate}); -1 only reads them.
void runProfile(OperationContext& op, bson_t* reply) {
    validateDbName(op.db);
    bson_iter_t it;
    bson_iter_init(&it, op.cmd);
    bson_iter_next(&it);
    int64_t level = 0;
    if (!bson::isNumber(bson_iter_type(&it)) || !bson::toInt64Exact(*bson_iter_value(&it), &level))
        uasserted(ErrorCode::TypeMismatch,
                  fmt::format("BSON field 'profile.profile' is the wrong type '{}', expected "
                              "types '[long, int, decimal, double]'",
                              bson::typeName(bson_iter_type(&it))));
    if (level < -1 || level > 2)
        uasserted(
            ErrorCode::BadValue,
            fmt::format("Invalid profiling level: {}. The level must be -1, 0, 1 or 2", level));
    cmdarg::checkFields(op, {"slowms", "sampleRate", "filter"});
    std::optional<int> slowMs;
    if (bson::find(op.cmd, "slowms", &it))
        slowMs = static_cast<int>(cmdarg::getInt(op.cmd, "slowms", 100, "profile"));
    std::optional<double> sampleRate;
    if (bson::find(op.cmd, "sampleRate", &it)) {
        if (!BSON_ITER_HOLDS_NUMBER(&it))
            uasserted(ErrorCode::TypeMismatch,
                      "BSON field 'profile.sampleRate' is the wrong type, expected type 'double'");
        sampleRate = bson::toDouble(*bson_iter_value(&it));
        if (!(*sampleRate >= 0.0 && *sampleRate <= 1.0))
            uasserted(ErrorCode::BadValue, "'sampleRate' must be between 0.0 and 1.0 inclusive");
    }
    std::optional<std::pair<std::shared_ptr<const query::Matcher>, bson::Doc>> filter;
    if (bson::find(op.cmd, "filter", &it)) {
        if (BSON_ITER_HOLDS_UTF8(&it) &&
            std::string_view(bson_iter_utf8(&it, nullptr)) == "unset") {
            filter.emplace(nullptr, bson::Doc());
        } else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_t f;
            bson::subDocument(op.cmd, "filter", &f);
            filter.emplace(uassertStatusOK(query::Matcher::parse(&f)), bson::Doc::copyOf(&f));
        } else {
            uasserted(ErrorCode::BadValue, "Expected an object, or the string 'unset'.");
        }
    }
    const bool changes = level != -1 || slowMs || sampleRate || filter;
    auto before = op.store.profiling().update(
        op.db, level == -1 ? std::nullopt : std::optional<int>(static_cast<int>(level)), slowMs,
        sampleRate, std::move(filter));
    BSON_APPEND_INT32(reply, "was", before.db.level);
    BSON_APPEND_INT32(reply, "slowms", before.slowMs);
    BSON_APPEND_DOUBLE(reply, "sampleRate", before.sampleRate);
    if (before.db.filter) BSON_APPEND_DOCUMENT(reply, "filter", before.db.filterSpec.get());
    if (before.db.filter || bson::find(op.cmd, "filter", &it))
        BSON_APPEND_UTF8(reply, "note",
                         "When a filter expression is set, slowms and sampleRate are not used for "
                         "profiling and slow-query log lines.");
    if (changes) {
        auto now = op.store.profiling().get(op.db);
        log::info("command", 48742, "Profiler settings changed",
                  fmt::format(R"({{"from":{{"level":{},"slowms":{},"sampleRate":{}}},)"
                              R"("to":{{"level":{},"slowms":{},"sampleRate":{}}}}})",
                              before.db.level, before.slowMs, before.sampleRate, now.db.level,
                              now.slowMs, now.sampleRate));
    }
}

HALO_REGISTER_COMMAND(CommandSpec{{"profile"}, runProfile});

}  // namespace
}  // namespace halo::store
