#pragma once
// The aggregation framework: parses a pipeline (a BSON array of stage documents)
// into a chain of DocStreams. Leading $match / $sort / $skip / $limit stages are
// pushed down into a store::FindExecutor so the planner can use indexes; the
// remaining stages run in memory on top of it.
//
// Contracts:
//  - Parsing errors carry mongod's codes and messages and are thrown as
//    DBException by buildPipeline (before any document is read).
//  - The returned stream is resumable across getMore batches: next(Session&)
//    only uses the Session it is given for the duration of the call and keeps
//    no WiredTiger cursor between calls. Blocking stages ($group, $sort,
//    $facet, $sample, $bucket) drain their input on their first next() call.
//  - Reading a collection (the source, or a $lookup's foreign collection)
//    requires the caller to hold the catalog's DDL lock shared, as every data
//    command does (CollectionLock).
//  - Not thread-safe: one stream is used by one operation at a time.
#include <bson/bson.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "store/exec/doc_stream.h"
#include "store/query/expression.h"

namespace halo::query {
class Collator;
}  // namespace halo::query

namespace halo::store {
class Catalog;
struct CollectionEntry;
class FindExecutor;
}  // namespace halo::store

namespace halo::aggregate {

/// mongod's memory limit for a blocking stage ($sort, $group) without allowDiskUse.
inline constexpr size_t kBlockingStageMemoryLimit = 100 * 1024 * 1024;

struct PipelineContext {
    store::Catalog* catalog = nullptr;  // for $lookup; may be null in tests
    std::string db;
    std::string ns;  // "db.coll" of the aggregated collection ("db.$cmd.aggregate" when none)
    int64_t nowMillis = 0;      // $$NOW
    bool allowDiskUse = false;  // blocking stages may exceed kBlockingStageMemoryLimit
    uint64_t randomSeed = 0;    // $sample; 0 picks a random seed
    /// The command's index hint for the pushed-down find ({$hint: name} or a key pattern);
    /// null for none. Not inherited by $lookup sub-pipelines.
    std::shared_ptr<const bson::Doc> hint;
    /// The operation's collation (the command's, else the collection's default):
    /// $match, $sort, $group keys, accumulators and expressions compare strings
    /// with it; null: binary.
    std::shared_ptr<const query::Collator> collator;
    /// Blocking-stage memory limit (tests lower it).
    size_t memoryLimitBytes = kBlockingStageMemoryLimit;

    /// Test hook: when set, $lookup reads the foreign collection `collName` from
    /// this source instead of the catalog (the $lookup's $match then runs in memory).
    std::function<std::unique_ptr<store::DocStream>(const std::string& collName)> foreignSource;

    /// User variables ($$name) from the command's `let` or a $lookup's `let`.
    /// Redefining a name replaces its value.
    void setVariable(const std::string& name, query::Value v);
    const query::Variables& variables() const { return vars_; }
    const std::vector<std::string>& variableNames() const { return varNames_; }
    /// Expression parse options naming the user variables.
    query::ExpressionParseOptions parseOptions() const;
    /// Binds $$NOW to nowMillis (buildPipeline does this).
    void bindNow() { vars_.setNow(nowMillis); }

  private:
    query::Variables vars_;
    std::vector<std::string> varNames_;
};

/// A built pipeline: a DocStream that also knows how to explain itself.
class Pipeline : public store::DocStream {
  public:
    Pipeline(std::unique_ptr<store::DocStream> tail, store::FindExecutor* pushedDown,
             std::vector<bson::Doc> remainingStages, bson::Doc pushedFilter, std::string ns);
    std::optional<bson::Doc> next(store::Session& s) override { return tail_->next(s); }
    void saveState() override { tail_->saveState(); }
    void explain(bson_t* winningPlan) const override;
    int64_t keysExamined() const override;
    int64_t docsExamined() const override;

    /// Appends mongod's aggregate explain fields to `reply`: {queryPlanner} when the whole
    /// pipeline was pushed into the find layer, else {stages: [{$cursor: {queryPlanner}}, ...]}.
    void appendExplain(bson_t* reply) const;
    /// True when every stage was pushed down into the FindExecutor.
    bool fullyPushedDown() const { return remaining_.empty(); }

  private:
    std::unique_ptr<store::DocStream> tail_;
    store::FindExecutor* pushed_;  // owned inside tail_'s chain; null when no collection source
    std::vector<bson::Doc> remaining_;
    bson::Doc pushedFilter_;
    std::string ns_;
};

/// Parses and builds the pipeline over collection `coll` (null: the collection
/// does not exist, so the input is empty). Throws DBException with mongod's codes.
std::unique_ptr<Pipeline> buildPipeline(std::shared_ptr<const store::CollectionEntry> coll,
                                        const bson_t* pipeline, const PipelineContext& ctx);

/// Builds the stages of `pipeline` on top of an arbitrary source (no pushdown).
/// Used for collection-less aggregates, $facet sub-pipelines and tests.
std::unique_ptr<Pipeline> buildPipeline(std::unique_ptr<store::DocStream> source,
                                        const bson_t* pipeline, const PipelineContext& ctx);

}  // namespace halo::aggregate
