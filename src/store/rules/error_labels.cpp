#include "store/rules/error_labels.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "common/error_codes.h"

namespace halo::store {

namespace {

bool isCommitOrAbort(std::string_view name) {
    return name == "commitTransaction" || name == "abortTransaction";
}

}  // namespace

void appendErrorLabels(bson_t* reply, const LabelContext& ctx, std::optional<int> code,
                       std::optional<int> wcCode, const std::optional<bson::Doc>& labelsOverride) {
    if (labelsOverride) {
        if (!bson_empty(labelsOverride->get()))
            bson_append_array(reply, "errorLabels", 11, labelsOverride->get());
        return;
    }
    auto labels = errorLabelsFor(ctx, code, wcCode);
    if (labels.empty()) return;
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(reply, "errorLabels", &arr);
    for (size_t i = 0; i < labels.size(); ++i) {
        std::string k = std::to_string(i);
        bson_append_utf8(&arr, k.c_str(), -1, labels[i].data(), static_cast<int>(labels[i].size()));
    }
    bson_append_array_end(reply, &arr);
}

/// Commands that take a write concern (mongod's supportsWriteConcern).
bool takesWriteConcern(std::string_view name) {
    static constexpr std::string_view kWrites[] = {"insert",
                                                   "update",
                                                   "delete",
                                                   "findAndModify",
                                                   "findandmodify",
                                                   "create",
                                                   "drop",
                                                   "createIndexes",
                                                   "dropIndexes",
                                                   "deleteIndexes",
                                                   "collMod",
                                                   "renameCollection",
                                                   "dropDatabase",
                                                   "commitTransaction",
                                                   "abortTransaction",
                                                   "createUser",
                                                   "updateUser",
                                                   "dropUser",
                                                   "dropAllUsersFromDatabase",
                                                   "grantRolesToUser",
                                                   "revokeRolesFromUser",
                                                   "createRole",
                                                   "updateRole",
                                                   "dropRole",
                                                   "dropAllRolesFromDatabase",
                                                   "grantPrivilegesToRole",
                                                   "revokePrivilegesFromRole",
                                                   "grantRolesToRole",
                                                   "revokeRolesFromRole"};
    return std::find(std::begin(kWrites), std::end(kWrites), name) != std::end(kWrites);
}

bool isTransientTransactionError(int code, bool hasWriteConcernError, bool commitOrAbort) {
    using E = ErrorCode;
    if (code == static_cast<int>(E::InternalTransactionNotSupported)) return false;
    for (E c : {E::WriteConflict, E::LockTimeout, E::PreparedTransactionInProgress,
                E::ShardCannotRefreshDueToLocksHeld, E::StaleDbVersion})
        if (code == static_cast<int>(c)) return true;
    if (isSnapshotError(code) || isNeedRetargettingError(code)) return true;
    const bool noSuchTransaction = code == static_cast<int>(E::NoSuchTransaction);
    // A commit or abort that found no transaction may be retried as a whole only
    // when the (no-op) write behind its answer is known to be durable.
    if (commitOrAbort) return noSuchTransaction && !hasWriteConcernError;
    return isRetriableError(code) || noSuchTransaction;
}

std::vector<std::string_view> errorLabelsFor(const LabelContext& ctx, std::optional<int> code,
                                             std::optional<int> wcCode) {
    std::vector<std::string_view> labels;
    if (!code && !wcCode) return labels;
    const bool commitOrAbort = isCommitOrAbort(ctx.command);
    bool transientOrRetryable = false;
    if (code && ctx.hasTxnNumber && ctx.hasAutocommit &&
        isTransientTransactionError(*code, wcCode.has_value(), commitOrAbort)) {
        labels.push_back("TransientTransactionError");
        transientOrRetryable = true;
    } else if (!ctx.internalClient && ctx.hasTxnNumber && (!ctx.hasAutocommit || commitOrAbort) &&
               ((code && isRetriableError(*code)) || (wcCode && isRetriableError(*wcCode)))) {
        // A retryable write, or the commit or abort of a transaction.
        labels.push_back("RetryableWriteError");
        transientOrRetryable = true;
    }
    const bool nonResumable =
        code && (*code == static_cast<int>(ErrorCode::ChangeStreamFatalError) ||
                 *code == static_cast<int>(ErrorCode::ChangeStreamHistoryLost));
    const bool resumableCandidate =
        ctx.changeStream && (ctx.command == "aggregate" || ctx.command == "getMore") && code &&
        !wcCode &&
        (isRetriableError(*code) || isNetworkError(*code) || isNeedRetargettingError(*code) ||
         *code == static_cast<int>(ErrorCode::RetryChangeStream) ||
         *code == static_cast<int>(ErrorCode::FailedToSatisfyReadPreference));
    if (!transientOrRetryable && resumableCandidate)
        labels.push_back("ResumableChangeStreamError");
    else if (nonResumable)
        labels.push_back("NonResumableChangeStreamError");
    return labels;
}

}  // namespace halo::store
