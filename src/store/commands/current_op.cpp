// In-flight operations: the $currentOp stage, the legacy currentOp command and
// killOp (see exec/operation_registry.h).
#include <fmt/format.h>
#include <openssl/evp.h>

#include <chrono>
#include <set>

#include "common/log.h"
#include "store/commands/stage_sources.h"
#include "store/query/matcher.h"
#include "store/server/store.h"
#include "store/txn/session_catalog.h"

namespace halo::store {

namespace {

/// allUsers: false shows only the caller's operations (with --auth, once authenticated).
OperationRegistry::ReportOptions reportOptions(const OperationContext& op, bool allUsers,
                                               bool idleConnections) {
    OperationRegistry::ReportOptions o;
    o.host = op.store.hostAndPort();
    o.idleConnections = idleConnections;
    if (!allUsers && op.store.authEnabled() && op.client.user)
        o.onlyUser.emplace(op.client.user->user, op.client.user->db);
    return o;
}

bool boolOption(const bson_iter_t& it, std::string_view stage) {
    if (!BSON_ITER_HOLDS_BOOL(&it))
        uasserted(ErrorCode::TypeMismatch,
                  fmt::format("BSON field '{}.{}' is the wrong type '{}', expected type 'bool'",
                              stage, bson_iter_key(&it), bson::typeName(bson_iter_type(&it))));
    return bson_iter_bool(&it);
}

}  // namespace

std::vector<bson::Doc> currentOpStage(OperationContext& op, const bson_t* spec) {
    if (op.db != "admin")
        uasserted(ErrorCode::InvalidNamespace,
                  "$currentOp must be run against the 'admin' database with {aggregate: 1}");
    bool allUsers = false, idleConnections = false;
    bson_iter_t it;
    bson_iter_init(&it, spec);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (k == "allUsers") {
            allUsers = boolOption(it, "$currentOp");
        } else if (k == "idleConnections") {
            idleConnections = boolOption(it, "$currentOp");
        } else if (k == "idleCursors" || k == "idleSessions" || k == "localOps" ||
                   k == "truncateOps" || k == "backtrace" || k == "targetAllNodes") {
            boolOption(it, "$currentOp");  // accepted: nothing here to show or truncate
        } else {
            uasserted(ErrorCode::Location40415,
                      fmt::format("BSON field '$currentOp.{}' is an unknown field.", k));
        }
    }
    return op.store.operations().report(reportOptions(op, allUsers, idleConnections));
}

namespace {

/// {currentOp: 1, $all, $ownOps, <filter>}: mongod's legacy command, {inprog: [...]}.
void runCurrentOp(OperationContext& op, bson_t* reply) {
    bool all = false, ownOps = false;
    bson::Doc filter;
    bson_iter_t it;
    bson_iter_init(&it, op.cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (k == "$all") {
            all = bson::isTruthy(*bson_iter_value(&it));
        } else if (k == "$ownOps") {
            ownOps = bson::isTruthy(*bson_iter_value(&it));
        } else if (cmdarg::isGenericArgument(k) || k == "$truncateOps") {
            continue;
        } else {
            bson::appendIter(filter.mut(), k, it);
        }
    }
    auto matcher = uassertStatusOK(query::Matcher::parse(filter.get()));
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(reply, "inprog", &arr);
    int n = 0;
    for (const auto& d : op.store.operations().report(reportOptions(op, !ownOps, all))) {
        if (!matcher->matches(d.get())) continue;
        std::string key = std::to_string(n++);
        BSON_APPEND_DOCUMENT(&arr, key.c_str(), d.get());
    }
    bson_append_array_end(reply, &arr);
}

HALO_REGISTER_COMMAND(CommandSpec{{"currentOp"}, runCurrentOp, true});

/// {killOp: 1, op: <opid>}: interrupts the operation; answers ok whether or not
/// it still runs, as mongod does.
void runKillOp(OperationContext& op, bson_t* reply) {
    bson_iter_t it;
    if (!bson::find(op.cmd, "op", &it))
        uasserted(ErrorCode::BadValue, "Did not provide \"op\" field");
    int64_t opid = 0;
    if (!bson::isNumber(bson_iter_type(&it)) || !bson::toInt64Exact(*bson_iter_value(&it), &opid))
        uasserted(ErrorCode::TypeMismatch, fmt::format("Expected op to be a number, but got {}",
                                                       bson::valueToString(*bson_iter_value(&it))));
    log::info("command", 20482, "Going to kill op", fmt::format(R"({{"opId":{}}})", opid));
    // Without the killop action on the cluster a user may kill only its own operations.
    std::optional<std::pair<std::string, std::string>> owner;
    if (op.store.authEnabled() && op.client.user &&
        !op.client.user->privileges->isAuthorized(authz::ResourcePattern::cluster(),
                                                  authz::ActionType::killop))
        owner.emplace(op.client.user->user, op.client.user->db);
    if (!op.store.operations().kill(opid, owner) && owner)
        uasserted(ErrorCode::Unauthorized, "Unauthorized");
    BSON_APPEND_UTF8(reply, "info", "attempting to kill op");
}

HALO_REGISTER_COMMAND(CommandSpec{{"killOp"}, runKillOp, true});

}  // namespace
namespace {

/// mongod's session uid: SHA-256 of the owner's "user@db" (of "" without auth).
void appendUid(bson_t* out, const std::string& owner) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_Digest(owner.data(), owner.size(), digest, &len, EVP_sha256(), nullptr);
    bson_append_binary(out, "uid", 3, BSON_SUBTYPE_BINARY, digest, len);
}

}  // namespace

std::vector<bson::Doc> listLocalSessionsStage(OperationContext& op, const bson_t* spec) {
    // {} : the caller's sessions (every session without auth); {allUsers: true};
    // {users: [{user, db}, ...]}.
    bool allUsers = false;
    std::set<std::string> owners;
    if (op.client.user) owners.insert(op.client.user->user + "@" + op.client.user->db);
    bson_iter_t it;
    bson_iter_init(&it, spec);
    bool sawUsers = false;
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (k == "allUsers") {
            if (boolOption(it, "$listLocalSessions")) allUsers = true;
        } else if (k == "users") {
            if (!BSON_ITER_HOLDS_ARRAY(&it))
                uasserted(ErrorCode::TypeMismatch,
                          fmt::format("BSON field '$listLocalSessions.users' is the wrong type "
                                      "'{}', expected type 'array'",
                                      bson::typeName(bson_iter_type(&it))));
            sawUsers = true;
            owners.clear();
            bson_iter_t a;
            bson_iter_recurse(&it, &a);
            while (bson_iter_next(&a)) {
                bson_t u;
                bson_iter_t name, db;
                uint32_t len = 0;
                const uint8_t* data = nullptr;
                if (BSON_ITER_HOLDS_DOCUMENT(&a)) bson_iter_document(&a, &len, &data);
                if (!data || !bson_init_static(&u, data, len) || !bson::find(&u, "user", &name) ||
                    !bson::find(&u, "db", &db) || !BSON_ITER_HOLDS_UTF8(&name) ||
                    !BSON_ITER_HOLDS_UTF8(&db))
                    uasserted(ErrorCode::Location40414,
                              "BSON field '$listLocalSessions.users.user' is missing but a "
                              "required field");
                owners.insert(std::string(bson_iter_utf8(&name, nullptr)) + "@" +
                              bson_iter_utf8(&db, nullptr));
            }
        } else {
            uasserted(ErrorCode::Location40415,
                      fmt::format("BSON field '$listLocalSessions.{}' is an unknown field.", k));
        }
    }
    if (allUsers && sawUsers)
        uasserted(ErrorCode::FailedToParse,
                  "$listLocalSessions: allUsers and users cannot both be given");
    // Without auth every session is everyone's, unless users are named.
    if (!op.store.authEnabled() && !sawUsers) allUsers = true;
    auto steadyNow = std::chrono::steady_clock::now();
    auto wallNow = std::chrono::system_clock::now();
    std::vector<bson::Doc> out;
    for (const auto& s : op.store.sessions().list()) {
        if (!allUsers && !owners.count(s.owner)) continue;
        bson::Doc d;
        bson_t id;
        BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "_id", &id);
        bson_iter_t f;
        if (bson::find(s.lsid.get(), "id", &f)) bson::appendIter(&id, "id", f);
        if (bson::find(s.lsid.get(), "uid", &f))
            bson::appendIter(&id, "uid", f);
        else
            appendUid(&id, s.owner);
        bson_append_document_end(d.mut(), &id);
        auto wall = wallNow - std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                  steadyNow - s.lastUse);
        BSON_APPEND_DATE_TIME(
            d.mut(), "lastUse",
            std::chrono::duration_cast<std::chrono::milliseconds>(wall.time_since_epoch()).count());
        if (!s.owner.empty()) {
            bson_t user;
            BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "user", &user);
            BSON_APPEND_UTF8(&user, "name", s.owner.c_str());
            bson_append_document_end(d.mut(), &user);
        }
        out.push_back(std::move(d));
    }
    return out;
}

}  // namespace halo::store
