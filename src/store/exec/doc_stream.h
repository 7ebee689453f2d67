#pragma once
// A resumable stream of result documents (a find plan or an aggregation
// pipeline). next() runs inside a storage transaction on the given session;
// between calls in different transactions (getMore) the stream keeps only its
// logical position, never a WiredTiger cursor, so it survives across batches.
#include <optional>

#include "bson/doc.h"
#include "store/storage/catalog.h"

namespace halo::store {

class DocStream {
  public:
    virtual ~DocStream() = default;
    /// The next document, or nullopt when exhausted. May throw DBException.
    virtual std::optional<bson::Doc> next(Session& s) = 0;
    /// True when next() is known to return nothing more (e.g. a reached limit),
    /// so a cursor need not stay open.
    virtual bool atEnd() const { return false; }
    /// Called when a batch ends (its transaction is about to close).
    virtual void saveState() {}
    /// Appends explain output (queryPlanner.winningPlan shape).
    virtual void explain(bson_t* winningPlan) const {}
    /// For change streams: the token to report as postBatchResumeToken.
    virtual std::optional<bson::Doc> postBatchResumeToken() const { return std::nullopt; }
    /// A change stream (its errors are labelled as such).
    virtual bool isChangeStream() const { return false; }
    /// A tailable stream keeps its cursor open when it runs dry.
    virtual bool isTailable() const { return false; }
    /// A tailable stream that must now close (e.g. after an invalidate event).
    virtual bool isExhausted() const { return false; }
    /// Counters for explain executionStats.
    virtual int64_t keysExamined() const { return 0; }
    virtual int64_t docsExamined() const { return 0; }

    /// A document a batch took from next() but had no room for (fillBatch): the
    /// next batch starts with it.
    std::optional<bson::Doc> held;
};

}  // namespace halo::store
