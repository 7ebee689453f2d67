// In-flight operations: the $currentOp stage, the legacy currentOp command and
// killOp (see exec/operation_registry.h).
#include <fmt/format.h>

#include "common/log.h"
#include "store/commands/stage_sources.h"
#include "store/query/matcher.h"
#include "store/server/store.h"

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
}  // namespace halo::store
