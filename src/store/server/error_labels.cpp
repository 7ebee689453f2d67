#include "store/server/error_labels.h"

#include "common/error_codes.h"

namespace halo::store {

namespace {

bool isCommitOrAbort(std::string_view name) {
    return name == "commitTransaction" || name == "abortTransaction";
}

}  // namespace

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
