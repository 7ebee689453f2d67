// The aggregate command: {aggregate: "<coll>" | 1, pipeline: [...], cursor: {batchSize},
// explain, allowDiskUse, hint, let, collation, ...}. Parses the command with mongod's
// error codes, builds the pipeline (see store/aggregate/pipeline.h) under the
// catalog's DDL lock, and replies with the first batch and a cursor for getMore.
#include <fmt/format.h>

#include <chrono>

#include "bson/compare.h"
#include "store/aggregate/pipeline.h"
#include "store/aggregate/vector_source.h"
#include "store/commands/aggregate_write.h"
#include "store/commands/stage_sources.h"
#include "store/commands/views.h"
#include "store/commands/write_path.h"
#include "store/exec/change_stream.h"
#include "store/exec/find_executor.h"
#include "store/exec/interrupt.h"
#include "store/query/collator.h"

namespace halo::store {
namespace {

int64_t wallClockMillis() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

[[noreturn]] void wrongType(std::string_view field, bson_type_t t, std::string_view expected) {
    uasserted(ErrorCode::TypeMismatch,
              fmt::format("BSON field 'aggregate.{}' is the wrong type '{}', expected type '{}'",
                          field, bson::typeName(t), expected));
}

/// Stages that run without a collection ({aggregate: 1}).
bool isCollectionlessStage(std::string_view name) {
    return name == "$documents" || name == "$currentOp" || name == "$listLocalSessions" ||
           name == "$changeStream" || name == "$queryStats";
}

/// The hint as the planner takes it: a key pattern, or {$hint: name}.
std::shared_ptr<const bson::Doc> hintOf(const bson_iter_t& it) {
    auto out = std::make_shared<bson::Doc>();
    if (BSON_ITER_HOLDS_UTF8(&it)) {
        BSON_APPEND_UTF8(out->mut(), "$hint", bson_iter_utf8(&it, nullptr));
    } else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
        uint32_t len;
        const uint8_t* data;
        bson_iter_document(&it, &len, &data);
        *out = bson::Doc::copyOf(data, len);
    } else {
        wrongType("hint", bson_iter_type(&it), "[string, object]");
    }
    return out;
}

void emptyCursorReply(const std::string& ns, int64_t id, bson_t* reply) {
    bson_t cursor, arr;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "cursor", &cursor);
    BSON_APPEND_ARRAY_BEGIN(&cursor, "firstBatch", &arr);
    bson_append_array_end(&cursor, &arr);
    BSON_APPEND_INT64(&cursor, "id", id);
    BSON_APPEND_UTF8(&cursor, "ns", ns.c_str());
    bson_append_document_end(reply, &cursor);
}

/// A change stream: the $changeStream source (oplog) followed by the rest of
/// the pipeline. Forwards the source's tailable state and resume tokens.
class ChangeStreamCursor : public DocStream {
  public:
    ChangeStreamCursor(std::unique_ptr<DocStream> pipeline, ChangeStream* source)
        : pipeline_(std::move(pipeline)), source_(source) {}
    bool isChangeStream() const override { return true; }
    std::optional<bson::Doc> next(Session& s) override {
        auto ev = pipeline_->next(s);
        // The resume token must survive the user's stages, or resuming is impossible.
        if (ev) {
            bson_iter_t it;
            auto token = source_->postBatchResumeToken();
            bson_t id;
            if (!bson::subDocument(ev->get(), "_id", &id) || !token ||
                bson::compareDocs(&id, token->get()) != 0)
                uasserted(ErrorCode::ChangeStreamFatalError,
                          "Encountered an event whose _id field, which contains the resume token, "
                          "was modified by the pipeline. "
                          "Modifying the _id field of an event makes it impossible to resume the "
                          "stream from that point.");
            (void)it;
        }
        return ev;
    }
    void saveState() override { pipeline_->saveState(); }
    std::optional<bson::Doc> postBatchResumeToken() const override {
        return source_->postBatchResumeToken();
    }
    bool isTailable() const override { return source_->isTailable() || !source_->isExhausted(); }
    bool isExhausted() const override { return source_->isExhausted(); }

  private:
    std::unique_ptr<DocStream> pipeline_;
    ChangeStream* source_;  // owned by pipeline_
};

/// Handles a pipeline that starts with $changeStream; false when it does not.
bool runChangeStream(OperationContext& op, const bson_t* pipeline, const std::string& collName,
                     const std::string& ns, const aggregate::PipelineContext& ctx,
                     int64_t batchSize, bson_t* reply) {
    bson_iter_t first, stage;
    if (!bson_iter_init(&first, pipeline) || !bson_iter_next(&first) ||
        !BSON_ITER_HOLDS_DOCUMENT(&first))
        return false;
    bson_iter_recurse(&first, &stage);
    if (!bson_iter_next(&stage) || std::string_view(bson_iter_key(&stage)) != "$changeStream")
        return false;
    if (!op.store.isReplicaSet())
        uasserted(ErrorCode::Location40573,
                  "The $changeStream stage is only supported on replica sets");
    if (!BSON_ITER_HOLDS_DOCUMENT(&stage))
        uasserted(ErrorCode::Location50808, "$changeStream stage expects a document as argument");
    uint32_t len;
    const uint8_t* data;
    bson_iter_document(&stage, &len, &data);
    bson_t arg;
    bson_init_static(&arg, data, len);
    ChangeStreamSpec spec = ChangeStreamSpec::parse(&arg, op.db, collName);
    // The stages after $changeStream run over its events.
    bson::Doc rest;
    int i = 0;
    while (bson_iter_next(&first)) {
        bson_iter_t st;
        if (BSON_ITER_HOLDS_DOCUMENT(&first)) {
            bson_iter_recurse(&first, &st);
            if (bson_iter_next(&st) && std::string_view(bson_iter_key(&st)) == "$changeStream")
                uasserted(ErrorCode::Location40602,
                          "$changeStream is only valid as the first stage in a pipeline.");
        }
        std::string k = std::to_string(i++);
        bson::appendIter(rest.mut(), k, first);
    }
    std::unique_ptr<ChangeStream> source;
    {
        PooledSession s(op.store.catalog().sessions());
        Txn txn(*s);
        source = std::make_unique<ChangeStream>(op.store.oplog(), op.store.catalog(),
                                                std::move(spec), *s);
        txn.commit(false);
    }
    ChangeStream* raw = source.get();
    auto p = aggregate::buildPipeline(std::move(source), rest.get(), ctx);
    auto cursor = std::make_unique<ChangeStreamCursor>(std::move(p), raw);
    CollectionLock lk(op.store.catalog());
    replyWithCursor(op, ns, nullptr, std::move(cursor), batchSize < 0 ? 0 : batchSize, false, reply,
                    true, true);
    return true;
}

/// Whether the pipeline starts with $currentOp or $collStats (and they appear
/// nowhere else: 40602 otherwise).
bool runsServerSource(const OperationContext& op, const bson_t* pipeline, bool collectionless) {
    bson_iter_t it;
    bool first = true, starts = false;
    bson_iter_init(&it, pipeline);
    while (bson_iter_next(&it)) {
        bson_iter_t stage;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &stage) ||
            !bson_iter_next(&stage)) {
            first = false;
            continue;
        }
        std::string_view name = bson_iter_key(&stage);
        if (isServerSourceStage(name)) {
            if (!first)
                uasserted(ErrorCode::Location40602,
                          fmt::format("{} is only valid as the first stage in a pipeline", name));
            if (name == "$listLocalSessions" && !collectionless)
                uasserted(ErrorCode::InvalidNamespace,
                          "$listLocalSessions must be run as {aggregate: 1}");
            if (name == "$currentOp" && (!collectionless || op.db != "admin"))
                uasserted(ErrorCode::InvalidNamespace,
                          "$currentOp must be run against the 'admin' database with {aggregate: "
                          "1}");
            starts = true;
        }
        first = false;
    }
    return starts;
}

/// The rest of the pipeline over the documents $currentOp / $collStats compute.
std::unique_ptr<aggregate::Pipeline> buildOverServerSource(OperationContext& op,
                                                           const bson_t* pipeline,
                                                           const std::string& ns,
                                                           const aggregate::PipelineContext& ctx) {
    bson_iter_t it, stage;
    bson_iter_init(&it, pipeline);
    bson_iter_next(&it);
    bson_iter_recurse(&it, &stage);
    bson_iter_next(&stage);
    std::string name = bson_iter_key(&stage);
    if (!BSON_ITER_HOLDS_DOCUMENT(&stage))
        uasserted(ErrorCode::TypeMismatch,
                  fmt::format("{} must take a nested object but found: {}", name,
                              bson::valueToString(*bson_iter_value(&stage))));
    uint32_t len;
    const uint8_t* data;
    bson_iter_document(&stage, &len, &data);
    bson_t spec;
    bson_init_static(&spec, data, len);
    std::vector<bson::Doc> docs = name == "$currentOp"           ? currentOpStage(op, &spec)
                                  : name == "$listLocalSessions" ? listLocalSessionsStage(op, &spec)
                                                                 : collStatsStage(op, ns, &spec);
    bson::Doc rest;
    int i = 0;
    while (bson_iter_next(&it)) bson::appendIter(rest.mut(), std::to_string(i++), it);
    return aggregate::buildPipeline(std::make_unique<aggregate::VectorSource>(std::move(docs)),
                                    rest.get(), ctx);
}

void runAggregate(OperationContext& op, bson_t* reply) {
    validateDbName(op.db);
    bson_iter_t it;
    bson_iter_init(&it, op.cmd);
    bson_iter_next(&it);
    bool collectionless = false;
    std::string collName;
    if (BSON_ITER_HOLDS_UTF8(&it)) {
        collName = cmdarg::collectionName(op);
    } else {
        int64_t one = 0;
        if (!bson::toInt64Exact(*bson_iter_value(&it), &one) || one != 1)
            uasserted(ErrorCode::FailedToParse,
                      "Invalid command format: the 'aggregate' field must specify a collection "
                      "name or 1");
        collectionless = true;
    }
    std::string ns = collectionless ? op.db + ".$cmd.aggregate" : op.db + "." + collName;

    // Options.
    bson::Doc pipeline;
    bool havePipeline = false, haveCursor = false, explain = false;
    int64_t batchSize = -1;  // -1: default
    aggregate::PipelineContext ctx;
    ctx.catalog = &op.store.catalog();
    ctx.db = op.db;
    ctx.ns = ns;
    ctx.nowMillis = wallClockMillis();
    std::shared_ptr<const bson::Doc> hint;
    bson::Doc letDoc;
    std::optional<bson::Doc> collation;
    bson_iter_init(&it, op.cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        std::string_view key = bson_iter_key(&it);
        if (key == "pipeline") {
            if (!BSON_ITER_HOLDS_ARRAY(&it)) wrongType(key, bson_iter_type(&it), "array");
            uint32_t len;
            const uint8_t* data;
            bson_iter_array(&it, &len, &data);
            pipeline = bson::Doc::copyOf(data, len);
            havePipeline = true;
        } else if (key == "cursor") {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it)) wrongType(key, bson_iter_type(&it), "object");
            haveCursor = true;
            bson_iter_t c;
            bson_iter_recurse(&it, &c);
            while (bson_iter_next(&c)) {
                std::string_view ck = bson_iter_key(&c);
                if (ck != "batchSize")
                    uasserted(ErrorCode::Location40415,
                              fmt::format("BSON field 'cursor.{}' is an unknown field.", ck));
                int64_t n;
                if (!bson::isNumber(bson_iter_type(&c)) ||
                    !bson::toInt64Exact(*bson_iter_value(&c), &n))
                    uasserted(
                        ErrorCode::TypeMismatch,
                        fmt::format(
                            "BSON field 'cursor.batchSize' is the wrong type '{}', expected types "
                            "'[long, int, decimal, double']",
                            bson::typeName(bson_iter_type(&c))));
                if (n < 0)
                    uasserted(
                        ErrorCode::Location51024,
                        fmt::format("BSON field 'batchSize' value must be >= 0, actual value '{}'",
                                    n));
                batchSize = n;
            }
        } else if (key == "explain") {
            if (!BSON_ITER_HOLDS_BOOL(&it)) wrongType(key, bson_iter_type(&it), "bool");
            explain = bson_iter_bool(&it);
        } else if (key == "allowDiskUse") {
            if (!BSON_ITER_HOLDS_BOOL(&it)) wrongType(key, bson_iter_type(&it), "bool");
            ctx.allowDiskUse = bson_iter_bool(&it);
        } else if (key == "hint") {
            hint = hintOf(it);
        } else if (key == "let") {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it)) wrongType(key, bson_iter_type(&it), "object");
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&it, &len, &data);
            letDoc = bson::Doc::copyOf(data, len);
        } else if (key == "collation") {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it)) wrongType(key, bson_iter_type(&it), "object");
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&it, &len, &data);
            collation = bson::Doc::copyOf(data, len);
            // Parsed now, so a bad collation fails before anything runs (and a change
            // stream, built before the collection is looked up, filters with it).
            ctx.collator = effectiveCollator(collation->get(), nullptr);
        }
        // maxTimeMS, comment, readConcern, writeConcern, session and API fields are
        // accepted: the pipeline runs to completion within one command.
    }
    if (!havePipeline)
        uasserted(ErrorCode::Location40414,
                  "BSON field 'aggregate.pipeline' is missing but a required field");
    if (!haveCursor && !explain)
        uasserted(
            ErrorCode::FailedToParse,
            "The 'cursor' option is required, except for aggregate with the explain argument");
    ctx.hint = hint;

    // User variables from `let` are constant expressions evaluated once ($$NOW allowed).
    if (!letDoc.empty()) {
        aggregate::PipelineContext probe = ctx;
        probe.bindNow();
        bson::Doc empty;
        bson_iter_t l;
        bson_iter_init(&l, letDoc.get());
        while (bson_iter_next(&l)) {
            std::string name = bson_iter_key(&l);
            auto e = query::Expression::parse(*bson_iter_value(&l), probe.parseOptions());
            ctx.setVariable(name, e->evaluate(empty.get(), &probe.variables()));
        }
    }

    std::optional<WriteStageSpec> writeStage = takeWriteStage(pipeline, op.db);
    if (writeStage) {
        bson_t rc;
        bson_iter_t level;
        if (op.args.subDocument("readConcern", &rc) && bson::find(&rc, "level", &level) &&
            BSON_ITER_HOLDS_UTF8(&level) &&
            std::string_view(bson_iter_utf8(&level, nullptr)) == "linearizable")
            uasserted(ErrorCode::InvalidOptions,
                      fmt::format("{} cannot be used with a 'linearizable' read concern level",
                                  writeStage->stageName()));
        checkWriteStage(op, *writeStage);
    }

    // A view: its pipeline (and the views' it reads) runs first, over the
    // collection at the bottom; the cursor keeps the view's name.
    std::string sourceNs = ns;
    if (!collectionless) {
        if (auto view = resolveView(op.store, ns)) {
            bson_iter_t first, st;
            if (bson_iter_init(&first, pipeline.get()) && bson_iter_next(&first) &&
                BSON_ITER_HOLDS_DOCUMENT(&first) && bson_iter_recurse(&first, &st) &&
                bson_iter_next(&st) && std::string_view(bson_iter_key(&st)) == "$changeStream")
                uasserted(ErrorCode::CommandNotSupportedOnView,
                          fmt::format("Namespace {} is a view, not a collection", ns));
            bson::Doc full;
            int i = 0;
            for (const bson_t* part : {view->pipeline.get(), pipeline.get()}) {
                bson_iter_t p;
                bson_iter_init(&p, part);
                while (bson_iter_next(&p)) bson::appendIter(full.mut(), std::to_string(i++), p);
            }
            pipeline = std::move(full);
            sourceNs = view->sourceNs;
            ctx.ns = sourceNs;
            if (!collation && view->collation) {
                collation = view->collation->copy();
                ctx.collator = effectiveCollator(collation->get(), nullptr);
            }
        }
    }

    if (runChangeStream(op, pipeline.get(), collName, ns, ctx, batchSize, reply)) return;

    if (collectionless) {
        bson_iter_t first;
        std::string firstStage;
        if (bson_iter_init(&first, pipeline.get()) && bson_iter_next(&first) &&
            BSON_ITER_HOLDS_DOCUMENT(&first)) {
            bson_iter_t s;
            bson_iter_recurse(&first, &s);
            if (bson_iter_next(&s)) firstStage = bson_iter_key(&s);
        }
        if (firstStage.empty())
            uasserted(ErrorCode::InvalidNamespace,
                      "{aggregate: 1} is not valid for an empty pipeline.");
        if (!isCollectionlessStage(firstStage))
            uasserted(
                ErrorCode::InvalidNamespace,
                fmt::format("{{aggregate: 1}} is not valid for '{}'; a collection is required.",
                            firstStage));
    }

    std::shared_ptr<const CollectionEntry> coll;
    std::unique_ptr<aggregate::Pipeline> p;
    auto build = [&] {
        coll = collectionless ? nullptr : op.store.catalog().lookup(sourceNs);
        if (!collation) ctx.collator = effectiveCollator(nullptr, coll.get());  // the default
        p = runsServerSource(op, pipeline.get(), collectionless)
                ? buildOverServerSource(op, pipeline.get(), ns, ctx)
                : aggregate::buildPipeline(coll, pipeline.get(), ctx);
    };
    if (writeStage && !explain) {
        // The documents are read in batches under the read lock, and written
        // between batches with no lock held (writes take their own).
        auto readBatch = [&](std::vector<bson::Doc>& out) {
            CollectionLock lk(op.store.catalog());
            if (!p) build();
            ReadScope scope(op.store);
            size_t bytes = 0;
            while (out.size() < 1000 && bytes < static_cast<size_t>(wire::kMaxBsonObjectSize)) {
                checkForInterrupt();
                auto d = p->next(scope.session());
                if (!d) {
                    scope.done();
                    return false;
                }
                bytes += d->size();
                out.push_back(std::move(*d));
            }
            p->saveState();
            scope.done();
            return true;
        };
        runWriteStage(op, *writeStage, readBatch, collation ? collation->get() : nullptr);
        emptyCursorReply(ns, 0, reply);
        return;
    }
    CollectionLock lk(op.store.catalog());
    build();
    if (explain) {
        BSON_APPEND_UTF8(reply, "explainVersion", "1");
        p->appendExplain(reply);
        BSON_APPEND_DOCUMENT(reply, "command", op.cmd);
        bson_t si;
        BSON_APPEND_DOCUMENT_BEGIN(reply, "serverInfo", &si);
        BSON_APPEND_UTF8(&si, "version", "7.0.15");
        bson_append_document_end(reply, &si);
        return;
    }
    if (batchSize == 0) {
        // An empty first batch and a cursor, as mongod does.
        emptyCursorReply(ns, op.store.cursors().add(newCursor(op, ns, coll, std::move(p))), reply);
        return;
    }
    replyWithCursor(op, ns, coll, std::move(p), batchSize < 0 ? 0 : batchSize, false, reply);
}

HALO_REGISTER_COMMAND(CommandSpec{{"aggregate"}, runAggregate});

}  // namespace
}  // namespace halo::store
