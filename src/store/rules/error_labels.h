#pragma once
// The error labels mongod attaches to a failed reply (mongod's
// ErrorLabelBuilder): TransientTransactionError, RetryableWriteError,
// ResumableChangeStreamError, NonResumableChangeStreamError. Drivers decide
// from these, not from codes, whether to retry a transaction, a retryable
// write or a change stream. A pure function of the command and the codes.
#include <optional>
#include <string_view>
#include <vector>

#include "bson/doc.h"

namespace halo::store {

/// What the labels depend on besides the codes.
struct LabelContext {
    std::string_view command;     // the command name as sent
    bool hasTxnNumber = false;    // the request carried txnNumber
    bool hasAutocommit = false;   // ... and autocommit (a multi-document transaction)
    bool internalClient = false;  // no RetryableWriteError for internal clients
    bool changeStream = false;    // an aggregate opening, or a getMore on, a change stream
};

/// The labels for a reply that failed with `code` (absent: the command
/// succeeded) and/or carries a writeConcernError with `wcCode`. Empty when none
/// apply; at most one of TransientTransactionError and RetryableWriteError.
std::vector<std::string_view> errorLabelsFor(const LabelContext& ctx, std::optional<int> code,
                                             std::optional<int> wcCode);

/// Appends errorLabels to a failed `reply` (code `code`, writeConcernError
/// `wcCode`): `labelsOverride` as given when a fail point named them (an empty
/// array: none), else errorLabelsFor's.
void appendErrorLabels(bson_t* reply, const LabelContext& ctx, std::optional<int> code,
                       std::optional<int> wcCode, const std::optional<bson::Doc>& labelsOverride);

/// Commands that take a write concern (mongod's supportsWriteConcern).
bool takesWriteConcern(std::string_view name);

/// mongod's isTransientTransactionError: a transaction that failed with `code`
/// had no lasting effect and may be retried as a whole.
bool isTransientTransactionError(int code, bool hasWriteConcernError, bool isCommitOrAbort);

}  // namespace halo::store
