#pragma once
// Internal: the building blocks of a pipeline. Every stage is a DocStream that
// owns its input stream; stage factories parse one stage specification
// (throwing DBException with mongod's codes) and wrap the input.
#include <bson/bson.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store/aggregate/pipeline.h"
#include "store/exec/doc_stream.h"

namespace halo::aggregate {

using StreamPtr = std::unique_ptr<store::DocStream>;
using ContextPtr = std::shared_ptr<const PipelineContext>;

/// A stage that pulls from one input. Explain and counters forward to the input.
class Stage : public store::DocStream {
  public:
    explicit Stage(StreamPtr input) : input_(std::move(input)) {}
    void saveState() override { input_->saveState(); }
    void explain(bson_t* winningPlan) const override { input_->explain(winningPlan); }
    int64_t keysExamined() const override { return input_->keysExamined(); }
    int64_t docsExamined() const override { return input_->docsExamined(); }

  protected:
    StreamPtr input_;
};

/// One stage specification: {$name: <value>}; `value` borrows the pipeline's bytes.
struct StageSpec {
    std::string name;
    bson_iter_t it;  // positioned on the stage's only field
    const bson_value_t& value() const { return *bson_iter_value(const_cast<bson_iter_t*>(&it)); }
    bool isDocument() const { return BSON_ITER_HOLDS_DOCUMENT(&it); }
    /// The value as a static bson_t (documents and arrays only).
    bson_t doc() const;
};

/// Splits a stage document into its name and value: 40323 when it does not have
/// exactly one field, 15942-style errors for non-documents.
StageSpec parseStageSpec(const bson_iter_t& stageElem);

/// Builds `stages` (each an element of a pipeline array) on top of `input`.
/// `pipelineStages` is a static view of the array.
StreamPtr buildStages(StreamPtr input, const bson_t* pipelineStages, size_t firstStage,
                      const ContextPtr& ctx);

// Stage factories (one per stage family; see the *_stage.cpp files).
StreamPtr makeMatch(StreamPtr in, const StageSpec& s, const ContextPtr& ctx);
StreamPtr makeProject(StreamPtr in, const StageSpec& s, const ContextPtr& ctx);
StreamPtr makeAddFields(StreamPtr in, const StageSpec& s, const ContextPtr& ctx);
StreamPtr makeUnset(StreamPtr in, const StageSpec& s, const ContextPtr& ctx);
StreamPtr makeReplaceRoot(StreamPtr in, const StageSpec& s, const ContextPtr& ctx);
StreamPtr makeGroup(StreamPtr in, const StageSpec& s, const ContextPtr& ctx);
StreamPtr makeBucket(StreamPtr in, const StageSpec& s, const ContextPtr& ctx);
StreamPtr makeSortByCount(StreamPtr in, const StageSpec& s, const ContextPtr& ctx);
/// `topK` > 0 when a $limit directly follows: only the first topK are kept.
StreamPtr makeSort(StreamPtr in, const bson_t* sortSpec, int64_t topK, const ContextPtr& ctx);
StreamPtr makeSkip(StreamPtr in, const StageSpec& s, const ContextPtr& ctx);
StreamPtr makeLimit(StreamPtr in, const StageSpec& s, const ContextPtr& ctx);
StreamPtr makeCount(StreamPtr in, const StageSpec& s, const ContextPtr& ctx);
StreamPtr makeUnwind(StreamPtr in, const StageSpec& s, const ContextPtr& ctx);
StreamPtr makeSample(StreamPtr in, const StageSpec& s, const ContextPtr& ctx);
StreamPtr makeDocuments(StreamPtr in, const StageSpec& s, const ContextPtr& ctx);
StreamPtr makeLookup(StreamPtr in, const StageSpec& s, const ContextPtr& ctx);
StreamPtr makeFacet(StreamPtr in, const StageSpec& s, const ContextPtr& ctx);

/// Parses the $sort specification (15973/15975/15976) and returns it.
bson::Doc parseSortSpec(const StageSpec& s);
/// Parses a $limit / $skip argument (15957/15958, 15972/15956).
int64_t parseLimit(const bson_value_t& v);
int64_t parseSkip(const bson_value_t& v);

/// Rewrites a $match filter so that $expr sub-expressions see the context's user
/// variables and $$NOW as literals (the Matcher evaluates $expr without variables).
bson::Doc bindFilterVariables(const bson_t* filter, const PipelineContext& ctx);

}  // namespace halo::aggregate
