#pragma once
// The find plan executor: scan (collection or index intervals) -> filter ->
// blocking sort when the scan cannot provide the order -> skip -> limit ->
// projection. Resumable across getMore by logical position (see DocStream).
#include <memory>
#include <unordered_set>

#include "store/exec/doc_stream.h"
#include "store/exec/planner.h"

namespace halo::query {
class Collator;
class Matcher;
class Projection;
class SortPattern;
}  // namespace halo::query

namespace halo::store {

struct FindSpec {
    bson::Doc filter;
    bson::Doc projection;  // empty: whole documents
    bson::Doc sort;        // empty: natural order
    bson::Doc hint;        // empty: planner's choice
    int64_t skip = 0;
    int64_t limit = 0;  // 0: no limit
    /// The operation's collation (see effectiveCollator); null: simple.
    std::shared_ptr<const query::Collator> collator;
};

/// The collation an operation on `coll` uses: its `collation` document when
/// given (null: none), parsed with mongod's errors (thrown as DBException),
/// where {locale: "simple"} means binary comparison even on a collection with
/// a default collation; else the collection's default (null `coll`: simple).
std::shared_ptr<const query::Collator> effectiveCollator(const bson_t* requested,
                                                         const CollectionEntry* coll);

/// Scans the collection through `plan` and yields (record id, document) pairs
/// matching `matcher` (when given).
class ScanStage {
  public:
    ScanStage(std::shared_ptr<const CollectionEntry> coll, QueryPlan plan,
              std::shared_ptr<const query::Matcher> matcher);
    /// Next matching document, or nullopt when done. Runs in the caller's txn.
    std::optional<bson::Doc> next(Session& s, int64_t* ridOut = nullptr);
    const QueryPlan& plan() const { return plan_; }
    /// Ends a batch: drops documents read ahead (see DocStream::saveState).
    void saveState();
    int64_t keysExamined() const { return keys_; }
    int64_t docsExamined() const { return docs_; }

  private:
    std::optional<std::pair<int64_t, bson::Doc>> nextRaw(Session& s);
    std::optional<std::pair<int64_t, bson::Doc>> nextCollScan(Session& s);
    void readAhead(Session& s);
    std::optional<std::pair<int64_t, bson::Doc>> nextIndexScan(Session& s);
    std::optional<std::pair<int64_t, bson::Doc>> nextExactKey(Session& s);

    std::shared_ptr<const CollectionEntry> coll_;
    QueryPlan plan_;
    std::shared_ptr<const query::Matcher> matcher_;
    // Position.
    bool started_ = false;
    bool done_ = false;
    int64_t lastRid_ = 0;  // the last record returned
    std::vector<std::pair<int64_t, bson::Doc>>
        ahead_;  // read but not yet returned (this batch only)
    size_t aheadPos_ = 0;
    size_t readAheadSize_ = 1;
    bool scanEnded_ = false;
    size_t interval_ = 0;
    std::string lastKey_;
    bool dedupe_ = false;
    std::unordered_set<int64_t> seen_;
    int64_t keys_ = 0, docs_ = 0;
};

class FindExecutor : public DocStream {
  public:
    /// Parses filter/sort/projection (throws DBException with mongod's codes) and plans.
    FindExecutor(std::shared_ptr<const CollectionEntry> coll, FindSpec spec);
    ~FindExecutor() override;
    std::optional<bson::Doc> next(Session& s) override;
    void saveState() override;
    void explain(bson_t* winningPlan) const override;
    int64_t keysExamined() const override { return scan_->keysExamined(); }
    int64_t docsExamined() const override { return scan_->docsExamined(); }
    const QueryPlan& plan() const { return scan_->plan(); }
    bool atEnd() const override { return spec_.limit > 0 && returned_ >= spec_.limit; }

  private:
    std::optional<bson::Doc> nextSorted(Session& s);

    FindSpec spec_;
    std::shared_ptr<const query::Matcher> matcher_;
    std::unique_ptr<query::Projection> projection_;
    std::unique_ptr<query::SortPattern> sort_;
    std::unique_ptr<ScanStage> scan_;
    bool blockingSort_ = false;
    bool positionalProjection_ = false;  // projection has "a.$": needs the match details
    bool sorted_ = false;
    std::vector<bson::Doc> buffer_;
    size_t bufferPos_ = 0;
    int64_t skipped_ = 0;
    int64_t returned_ = 0;
};

/// mongod's in-memory sort limit (100 MB) before QueryExceededMemoryLimitNoDiskUseAllowed.
inline constexpr size_t kMaxBlockingSortBytes = 100 * 1024 * 1024;

}  // namespace halo::store
