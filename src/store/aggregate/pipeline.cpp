#include "store/aggregate/pipeline.h"

#include <fmt/format.h>

#include "store/aggregate/stage.h"
#include "store/aggregate/vector_source.h"
#include "store/exec/find_executor.h"
#include "store/query/collator.h"
#include "store/storage/catalog.h"

namespace halo::aggregate {

// ---------------------------------------------------------------- context

void PipelineContext::setVariable(const std::string& name, query::Value v) {
    vars_.set(name, std::move(v));
    if (std::find(varNames_.begin(), varNames_.end(), name) == varNames_.end())
        varNames_.push_back(name);
}

query::ExpressionParseOptions PipelineContext::parseOptions() const {
    query::ExpressionParseOptions o;
    o.userVariables = varNames_;
    o.collator = collator;
    return o;
}

// ---------------------------------------------------------------- stage specs

bson_t StageSpec::doc() const {
    bson_t out;
    const bson_value_t& v = value();
    if (!query::viewOf(v, &out)) bson_init(&out);
    return out;
}

StageSpec parseStageSpec(const bson_iter_t& stageElem) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&stageElem))
        uasserted(ErrorCode::TypeMismatch,
                  "Each element of the 'pipeline' array must be an object");
    bson_iter_t it;
    bson_iter_recurse(&stageElem, &it);
    StageSpec s;
    if (!bson_iter_next(&it))
        uasserted(ErrorCode::Location40323,
                  "A pipeline stage specification object must contain exactly one field.");
    s.name = bson_iter_key(&it);
    s.it = it;
    if (bson_iter_next(&it))
        uasserted(ErrorCode::Location40323,
                  "A pipeline stage specification object must contain exactly one field.");
    return s;
}

namespace {

using Factory = StreamPtr (*)(StreamPtr, const StageSpec&, const ContextPtr&);

struct StageEntry {
    const char* name;
    Factory make;
};

StreamPtr makeSortStage(StreamPtr, const StageSpec&, const ContextPtr&) {
    return nullptr;
}  // special-cased

constexpr StageEntry kStages[] = {
    {"$match", makeMatch},
    {"$project", makeProject},
    {"$addFields", makeAddFields},
    {"$set", makeAddFields},
    {"$unset", makeUnset},
    {"$replaceRoot", makeReplaceRoot},
    {"$replaceWith", makeReplaceRoot},
    {"$group", makeGroup},
    {"$bucket", makeBucket},
    {"$sortByCount", makeSortByCount},
    {"$sort", makeSortStage},
    {"$skip", makeSkip},
    {"$limit", makeLimit},
    {"$count", makeCount},
    {"$unwind", makeUnwind},
    {"$sample", makeSample},
    {"$documents", makeDocuments},
    {"$lookup", makeLookup},
    {"$facet", makeFacet},
};

/// Stages mongod has that this store does not implement: a clear error instead
/// of "unrecognized", and never a silent no-op.
constexpr const char* kUnsupported[] = {
    "$geoNear",      "$graphLookup",    "$unionWith",
    "$bucketAuto",   "$redact",         "$setWindowFields",
    "$densify",      "$fill",           "$changeStream",
    "$currentOp",    "$collStats",      "$indexStats",
    "$listSessions", "$planCacheStats", "$shardedDataDistribution",
    "$listCatalog",  "$queryStats",     "$changeStreamSplitLargeEvent",
};

const StageEntry* findStage(std::string_view name) {
    for (const auto& e : kStages)
        if (name == e.name) return &e;
    return nullptr;
}

void checkKnown(const StageSpec& s) {
    if (findStage(s.name)) return;
    // The aggregate command takes a final $out/$merge off before building the
    // pipeline; anywhere else (also inside $facet or $lookup) is misplaced.
    if (s.name == "$out" || s.name == "$merge")
        uasserted(static_cast<ErrorCode>(40601),
                  fmt::format("{} can only be the final stage in the pipeline", s.name));
    // Atlas Search stages need mongot: mongod 7.0 without it refuses them so.
    if (s.name == "$search" || s.name == "$searchMeta" || s.name == "$vectorSearch" ||
        s.name == "$listSearchIndexes")
        uasserted(ErrorCode::Location6047401,
                  fmt::format("{} stage is only allowed on MongoDB Atlas", s.name));
    for (const char* u : kUnsupported)
        if (s.name == u)
            uasserted(
                ErrorCode::CommandNotSupported,
                fmt::format("The {} aggregation stage is not supported by this server", s.name));
    uasserted(ErrorCode::Location40324,
              fmt::format("Unrecognized pipeline stage name: '{}'", s.name));
}

std::vector<StageSpec> parseAll(const bson_t* pipeline) {
    std::vector<StageSpec> out;
    bson_iter_t it;
    if (!bson_iter_init(&it, pipeline)) return out;
    while (bson_iter_next(&it)) {
        out.push_back(parseStageSpec(it));
        checkKnown(out.back());
    }
    for (size_t i = 1; i < out.size(); ++i)
        if (out[i].name == "$documents")
            uasserted(ErrorCode::Location40602,
                      "$documents is only valid as the first stage in a pipeline");
    return out;
}

bson::Doc stageDoc(const StageSpec& s) {
    bson::Doc d;
    bson::appendValue(d.mut(), s.name, s.value());
    return d;
}

StreamPtr buildFrom(StreamPtr input, const std::vector<StageSpec>& specs, size_t first,
                    const ContextPtr& ctx, std::vector<bson::Doc>* remaining) {
    for (size_t i = first; i < specs.size(); ++i) {
        const StageSpec& s = specs[i];
        if (remaining) remaining->push_back(stageDoc(s));
        if (s.name == "$sort") {
            bson::Doc spec = parseSortSpec(s);
            int64_t topK = 0;
            if (i + 1 < specs.size() && specs[i + 1].name == "$limit")
                topK = parseLimit(specs[i + 1].value());
            input = makeSort(std::move(input), spec.get(), topK, ctx);
            continue;
        }
        input = findStage(s.name)->make(std::move(input), s, ctx);
    }
    return input;
}

ContextPtr prepare(const PipelineContext& ctx) {
    auto c = std::make_shared<PipelineContext>(ctx);
    c->bindNow();
    return c;
}

}  // namespace

StreamPtr buildStages(StreamPtr input, const bson_t* pipelineStages, size_t firstStage,
                      const ContextPtr& ctx) {
    return buildFrom(std::move(input), parseAll(pipelineStages), firstStage, ctx, nullptr);
}

// ---------------------------------------------------------------- Pipeline

Pipeline::Pipeline(std::unique_ptr<store::DocStream> tail, store::FindExecutor* pushedDown,
                   std::vector<bson::Doc> remainingStages, bson::Doc pushedFilter, std::string ns)
    : tail_(std::move(tail)),
      pushed_(pushedDown),
      remaining_(std::move(remainingStages)),
      pushedFilter_(std::move(pushedFilter)),
      ns_(std::move(ns)) {}

void Pipeline::explain(bson_t* winningPlan) const {
    if (pushed_) {
        pushed_->explain(winningPlan);
    } else {
        tail_->explain(winningPlan);
    }
}

int64_t Pipeline::keysExamined() const {
    return tail_->keysExamined();
}
int64_t Pipeline::docsExamined() const {
    return tail_->docsExamined();
}

void Pipeline::appendExplain(bson_t* reply) const {
    auto appendQueryPlanner = [this](bson_t* parent) {
        bson_t qp, wp, rejected;
        BSON_APPEND_DOCUMENT_BEGIN(parent, "queryPlanner", &qp);
        BSON_APPEND_UTF8(&qp, "namespace", ns_.c_str());
        BSON_APPEND_BOOL(&qp, "indexFilterSet", false);
        BSON_APPEND_DOCUMENT(&qp, "parsedQuery", pushedFilter_.get());
        BSON_APPEND_DOCUMENT_BEGIN(&qp, "winningPlan", &wp);
        if (pushed_) {
            pushed_->explain(&wp);
        } else {
            BSON_APPEND_UTF8(&wp, "stage", "EOF");
        }
        bson_append_document_end(&qp, &wp);
        BSON_APPEND_ARRAY_BEGIN(&qp, "rejectedPlans", &rejected);
        bson_append_array_end(&qp, &rejected);
        bson_append_document_end(parent, &qp);
    };
    if (remaining_.empty()) {
        appendQueryPlanner(reply);
        return;
    }
    bson_t stages, first, cursor;
    BSON_APPEND_ARRAY_BEGIN(reply, "stages", &stages);
    uint32_t n = 0;
    char buf[16];
    const char* key;
    bson_uint32_to_string(n++, &key, buf, sizeof buf);
    BSON_APPEND_DOCUMENT_BEGIN(&stages, key, &first);
    BSON_APPEND_DOCUMENT_BEGIN(&first, "$cursor", &cursor);
    appendQueryPlanner(&cursor);
    bson_append_document_end(&first, &cursor);
    bson_append_document_end(&stages, &first);
    for (const auto& st : remaining_) {
        bson_uint32_to_string(n++, &key, buf, sizeof buf);
        BSON_APPEND_DOCUMENT(&stages, key, st.get());
    }
    bson_append_array_end(reply, &stages);
}

// ---------------------------------------------------------------- builders

std::unique_ptr<Pipeline> buildPipeline(std::shared_ptr<const store::CollectionEntry> coll,
                                        const bson_t* pipeline, const PipelineContext& pctx) {
    ContextPtr ctx = prepare(pctx);
    std::vector<StageSpec> specs = parseAll(pipeline);
    if (!specs.empty() && specs[0].name == "$documents") {
        std::vector<bson::Doc> remaining;
        StreamPtr tail = buildFrom(std::make_unique<VectorSource>(std::vector<bson::Doc>{}), specs,
                                   0, ctx, &remaining);
        return std::make_unique<Pipeline>(std::move(tail), nullptr, std::move(remaining),
                                          bson::Doc(), ctx->ns);
    }

    // Push the leading [$match][$sort][$skip][$limit] into the find layer.
    size_t i = 0;
    store::FindSpec spec;
    bson::Doc filter;
    if (i < specs.size() && specs[i].name == "$match") {
        if (!specs[i].isDocument())
            uasserted(ErrorCode::Location15959,
                      "the match filter must be an expression in an object");
        bson_t f = specs[i].doc();
        filter = bindFilterVariables(&f, *ctx);
        spec.filter = filter.copy();
        ++i;
    }
    size_t beforeSort = i;
    if (i < specs.size() && specs[i].name == "$sort") {
        spec.sort = parseSortSpec(specs[i]);
        ++i;
    }
    if (i < specs.size() && specs[i].name == "$skip") {
        spec.skip = parseSkip(specs[i].value());
        ++i;
    }
    if (i < specs.size() && specs[i].name == "$limit") {
        spec.limit = parseLimit(specs[i].value());
        ++i;
    }
    bson::Doc sortSpec = spec.sort.copy();
    if (ctx->hint) spec.hint = ctx->hint->copy();
    spec.collator = ctx->collator;
    auto exec = std::make_unique<store::FindExecutor>(coll, std::move(spec));
    if (coll && !sortSpec.empty() && ctx->allowDiskUse && !exec->plan().providesSort) {
        // A blocking sort in the find layer has a hard memory limit; with allowDiskUse
        // the pipeline's own $sort (which may exceed it) does the sorting instead.
        store::FindSpec noSort;
        noSort.filter = filter.copy();
        if (ctx->hint) noSort.hint = ctx->hint->copy();
        noSort.collator = ctx->collator;
        exec = std::make_unique<store::FindExecutor>(coll, std::move(noSort));
        i = beforeSort;
    }
    store::FindExecutor* pushed = exec.get();
    StreamPtr source;
    if (coll) {
        source = std::move(exec);
    } else {
        pushed = nullptr;  // the collection does not exist: empty input
        source = std::make_unique<VectorSource>(std::vector<bson::Doc>{});
    }
    std::vector<bson::Doc> remaining;
    StreamPtr tail = buildFrom(std::move(source), specs, i, ctx, &remaining);
    return std::make_unique<Pipeline>(std::move(tail), pushed, std::move(remaining),
                                      std::move(filter), ctx->ns);
}

std::unique_ptr<Pipeline> buildPipeline(std::unique_ptr<store::DocStream> source,
                                        const bson_t* pipeline, const PipelineContext& pctx) {
    ContextPtr ctx = prepare(pctx);
    std::vector<StageSpec> specs = parseAll(pipeline);
    std::vector<bson::Doc> remaining;
    StreamPtr tail = buildFrom(std::move(source), specs, 0, ctx, &remaining);
    return std::make_unique<Pipeline>(std::move(tail), nullptr, std::move(remaining), bson::Doc(),
                                      ctx->ns);
}

}  // namespace halo::aggregate
