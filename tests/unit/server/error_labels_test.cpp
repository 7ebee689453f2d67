// errorLabelsFor: mongod's ErrorLabelBuilder decisions for transactions,
// retryable writes and change streams.
#include "store/rules/error_labels.h"

#include <gtest/gtest.h>

#include "common/error_codes.h"

namespace halo::store {
namespace {

using Labels = std::vector<std::string_view>;
constexpr int kShutdown = static_cast<int>(ErrorCode::ShutdownInProgress);
constexpr int kWriteConflict = static_cast<int>(ErrorCode::WriteConflict);
constexpr int kNoSuchTxn = static_cast<int>(ErrorCode::NoSuchTransaction);
constexpr int kDupKey = static_cast<int>(ErrorCode::DuplicateKey);
constexpr int kHostUnreachable = static_cast<int>(ErrorCode::HostUnreachable);

LabelContext retryableWrite(std::string_view cmd = "insert") {
    return {cmd, /*hasTxnNumber=*/true, /*hasAutocommit=*/false, false, false};
}
LabelContext inTransaction(std::string_view cmd) {
    return {cmd, true, true, false, false};
}

TEST(ErrorLabelsTest, NothingWithoutAnError) {
    EXPECT_EQ(errorLabelsFor(retryableWrite(), std::nullopt, std::nullopt), Labels{});
}

TEST(ErrorLabelsTest, RetryableWrites) {
    EXPECT_EQ(errorLabelsFor(retryableWrite(), kShutdown, std::nullopt),
              Labels{"RetryableWriteError"});
    EXPECT_EQ(errorLabelsFor(retryableWrite(), std::nullopt, kShutdown),
              Labels{"RetryableWriteError"});
    EXPECT_EQ(errorLabelsFor(retryableWrite(), kDupKey, std::nullopt), Labels{});
    // Not a retryable write: no txnNumber.
    LabelContext plain{"insert", false, false, false, false};
    EXPECT_EQ(errorLabelsFor(plain, kShutdown, std::nullopt), Labels{});
    // Internal clients (other servers) never get it.
    LabelContext internal = retryableWrite();
    internal.internalClient = true;
    EXPECT_EQ(errorLabelsFor(internal, kShutdown, std::nullopt), Labels{});
}

TEST(ErrorLabelsTest, Transactions) {
    EXPECT_EQ(errorLabelsFor(inTransaction("insert"), kWriteConflict, std::nullopt),
              Labels{"TransientTransactionError"});
    EXPECT_EQ(errorLabelsFor(inTransaction("insert"), kShutdown, std::nullopt),
              Labels{"TransientTransactionError"});
    EXPECT_EQ(errorLabelsFor(inTransaction("find"), kNoSuchTxn, std::nullopt),
              Labels{"TransientTransactionError"});
    EXPECT_EQ(errorLabelsFor(inTransaction("insert"), kDupKey, std::nullopt), Labels{});
    // A statement's write concern error inside a transaction: no label.
    EXPECT_EQ(errorLabelsFor(inTransaction("insert"), std::nullopt, kShutdown), Labels{});
    // Commit: retriable codes are RetryableWriteError, not transient.
    EXPECT_EQ(errorLabelsFor(inTransaction("commitTransaction"), kShutdown, std::nullopt),
              Labels{"RetryableWriteError"});
    EXPECT_EQ(errorLabelsFor(inTransaction("commitTransaction"), std::nullopt, kShutdown),
              Labels{"RetryableWriteError"});
    EXPECT_EQ(errorLabelsFor(inTransaction("commitTransaction"), kNoSuchTxn, std::nullopt),
              Labels{"TransientTransactionError"});
    EXPECT_EQ(errorLabelsFor(inTransaction("abortTransaction"), kNoSuchTxn, kShutdown),
              Labels{"RetryableWriteError"});
    EXPECT_TRUE(
        isTransientTransactionError(static_cast<int>(ErrorCode::SnapshotTooOld), false, false));
}

TEST(ErrorLabelsTest, ChangeStreams) {
    LabelContext getMore{"getMore", false, false, false, /*changeStream=*/true};
    EXPECT_EQ(errorLabelsFor(getMore, kHostUnreachable, std::nullopt),
              Labels{"ResumableChangeStreamError"});
    EXPECT_EQ(errorLabelsFor(getMore, static_cast<int>(ErrorCode::RetryChangeStream), std::nullopt),
              Labels{"ResumableChangeStreamError"});
    EXPECT_EQ(errorLabelsFor(getMore, kDupKey, std::nullopt), Labels{});
    LabelContext plainGetMore{"getMore", false, false, false, false};
    EXPECT_EQ(errorLabelsFor(plainGetMore, kHostUnreachable, std::nullopt), Labels{});
    EXPECT_EQ(
        errorLabelsFor(getMore, static_cast<int>(ErrorCode::ChangeStreamFatalError), std::nullopt),
        Labels{"NonResumableChangeStreamError"});
    LabelContext aggregate{"aggregate", false, false, false, false};
    EXPECT_EQ(errorLabelsFor(aggregate, static_cast<int>(ErrorCode::ChangeStreamHistoryLost),
                             std::nullopt),
              Labels{"NonResumableChangeStreamError"});
}

}  // namespace
}  // namespace halo::store
