// $lookup: for each input document, runs a sub-pipeline on a collection of the
// same database, inside the caller's Session, and stores the results as an
// array. The equality form {from, localField, foreignField, as} becomes the
// sub-pipeline [{$match: {foreignField: {$in: <local values>}}}], so the
// foreign collection's indexes are used; the pipeline form adds `let`
// variables and the user's stages (after that $match when both are given).
#include <fmt/format.h>

#include "store/aggregate/document_ops.h"
#include "store/aggregate/stage.h"
#include "store/aggregate/vector_source.h"
#include "store/query/path.h"
#include "store/storage/catalog.h"

namespace halo::aggregate {
namespace {

using query::Value;

struct LookupSpec {
    std::string from;  // collection name (same database); empty with a $documents pipeline
    std::string localField, foreignField, as;
    std::vector<std::pair<std::string, std::shared_ptr<query::Expression>>> let;
    bson::Doc pipeline;  // array document; empty when absent
    bool hasPipeline = false;
};

class LookupStage : public Stage {
  public:
    LookupStage(StreamPtr in, LookupSpec spec, ContextPtr ctx)
        : Stage(std::move(in)),
          spec_(std::move(spec)),
          ctx_(std::move(ctx)),
          localParts_(query::splitPath(spec_.localField)),
          asParts_(query::splitPath(spec_.as)) {}

    std::optional<bson::Doc> next(store::Session& s) override {
        auto d = input_->next(s);
        if (!d) return std::nullopt;
        PipelineContext sub = *ctx_;
        sub.hint = nullptr;
        for (const auto& [name, expr] : spec_.let)
            sub.setVariable(name, expr->evaluate(d->get(), &ctx_->variables()));
        bson::Doc stages = subPipeline(d->get());
        std::unique_ptr<Pipeline> p;
        if (ctx_->foreignSource) {
            p = buildPipeline(ctx_->foreignSource(spec_.from), stages.get(), sub);
        } else {
            std::shared_ptr<const store::CollectionEntry> coll;
            if (ctx_->catalog && !spec_.from.empty())
                coll = ctx_->catalog->lookup(ctx_->db + "." + spec_.from);
            p = buildPipeline(std::move(coll), stages.get(), sub);
        }
        std::vector<Value> matches;
        size_t bytes = 0;
        while (auto m = p->next(s)) {
            bytes += m->size();
            if (bytes > 16 * 1024 * 1024)
                uasserted(ErrorCode::BSONObjectTooLarge,
                          "Total size of documents in $lookup exceeds maximum document size");
            matches.push_back(Value::fromDocument(m->get()));
        }
        return setPath(d->get(), asParts_, Value::fromArray(matches));
    }

  private:
    /// The stages to run for one input document, as a BSON array document.
    bson::Doc subPipeline(const bson_t* doc) const {
        bson::Doc out;
        ArrayKey key;
        size_t n = 0;
        if (!spec_.localField.empty()) {
            std::vector<Value> values;
            bool hasRegex = false;
            auto collect = [&](const bson_value_t& v, int64_t) {
                if (v.value_type == BSON_TYPE_EOD) return false;
                if (v.value_type == BSON_TYPE_REGEX) hasRegex = true;
                values.emplace_back(v);
                return false;
            };
            query::PathWalkOptions opt;
            opt.expandLeafArrays = true;
            opt.yieldWholeLeafArray = false;
            bson_value_t root = query::borrowDocument(doc);
            query::walkPath(root, localParts_, opt, collect);
            if (values.empty()) values.push_back(Value::null());
            bson_t stage, match, cond, arr;
            bson_append_document_begin(out.mut(), key(n++), -1, &stage);
            bson_append_document_begin(&stage, "$match", -1, &match);
            if (!hasRegex) {
                bson_append_document_begin(&match, spec_.foreignField.c_str(), -1, &cond);
                bson_append_array_begin(&cond, "$in", -1, &arr);
                ArrayKey k;
                for (size_t i = 0; i < values.size(); ++i) appendValue(&arr, k(i), values[i]);
                bson_append_array_end(&cond, &arr);
                bson_append_document_end(&match, &cond);
            } else {
                // A regex in $in would be a pattern match; $lookup compares regexes by value.
                bson_append_array_begin(&match, "$or", -1, &arr);
                ArrayKey k;
                for (size_t i = 0; i < values.size(); ++i) {
                    bson_t clause, eq;
                    bson_append_document_begin(&arr, k(i), -1, &clause);
                    bson_append_document_begin(&clause, spec_.foreignField.c_str(), -1, &eq);
                    appendValue(&eq, "$eq", values[i]);
                    bson_append_document_end(&clause, &eq);
                    bson_append_document_end(&arr, &clause);
                }
                bson_append_array_end(&match, &arr);
            }
            bson_append_document_end(&stage, &match);
            bson_append_document_end(out.mut(), &stage);
        }
        if (spec_.hasPipeline) {
            bson_iter_t it;
            bson_iter_init(&it, spec_.pipeline.get());
            while (bson_iter_next(&it)) bson_append_iter(out.mut(), key(n++), -1, &it);
        }
        return out;
    }

    LookupSpec spec_;
    ContextPtr ctx_;
    std::vector<std::string> localParts_;
    std::vector<std::string> asParts_;
};

std::string stringField(const bson_iter_t& it, std::string_view name) {
    if (!BSON_ITER_HOLDS_UTF8(&it))
        uasserted(ErrorCode::FailedToParse,
                  fmt::format("$lookup argument '{}' must be a string, found {}", name,
                              bson::typeName(bson_iter_type(&it))));
    return bson_iter_utf8(&it, nullptr);
}

}  // namespace

StreamPtr makeLookup(StreamPtr in, const StageSpec& s, const ContextPtr& ctx) {
    if (!s.isDocument())
        uasserted(ErrorCode::Location40319, "the $lookup specification must be an Object");
    bson_t specDoc = s.doc();
    LookupSpec spec;
    bool haveFrom = false, haveLocal = false, haveForeign = false, haveAs = false;
    bson::Doc letDoc;
    bson_iter_t it;
    bson_iter_init(&it, &specDoc);
    while (bson_iter_next(&it)) {
        std::string_view key = bson_iter_key(&it);
        if (key == "from") {
            if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
                bson_t from;
                bson::subDocument(&specDoc, "from", &from);
                bson_iter_t f;
                if (bson_iter_init_find(&f, &from, "db") && BSON_ITER_HOLDS_UTF8(&f) &&
                    ctx->db != bson_iter_utf8(&f, nullptr))
                    uasserted(ErrorCode::FailedToParse,
                              "$lookup from another database is not supported");
                if (!bson_iter_init_find(&f, &from, "coll"))
                    uasserted(ErrorCode::FailedToParse,
                              "$lookup 'from' document must have a 'coll' field");
                spec.from = stringField(f, "from.coll");
            } else {
                spec.from = stringField(it, "from");
            }
            haveFrom = true;
        } else if (key == "localField") {
            spec.localField = stringField(it, key);
            haveLocal = true;
        } else if (key == "foreignField") {
            spec.foreignField = stringField(it, key);
            haveForeign = true;
        } else if (key == "as") {
            spec.as = stringField(it, key);
            haveAs = true;
        } else if (key == "let") {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                uasserted(ErrorCode::FailedToParse,
                          fmt::format("$lookup argument 'let' must be an object, is type {}",
                                      bson::typeName(bson_iter_type(&it))));
            bson_t let;
            bson::subDocument(&specDoc, "let", &let);
            letDoc = bson::Doc::copyOf(&let);
        } else if (key == "pipeline") {
            if (!BSON_ITER_HOLDS_ARRAY(&it))
                uasserted(ErrorCode::FailedToParse,
                          fmt::format("$lookup argument 'pipeline' must be an array, is type {}",
                                      bson::typeName(bson_iter_type(&it))));
            uint32_t len;
            const uint8_t* data;
            bson_iter_array(&it, &len, &data);
            spec.pipeline = bson::Doc::copyOf(data, len);
            spec.hasPipeline = true;
        } else {
            uasserted(ErrorCode::FailedToParse,
                      fmt::format("unknown argument to $lookup: {}", key));
        }
    }
    if (!haveAs) uasserted(ErrorCode::FailedToParse, "must specify 'as' field for a $lookup");
    if (haveLocal != haveForeign)
        uasserted(
            ErrorCode::FailedToParse,
            "$lookup requires both or neither of 'localField' and 'foreignField' to be specified");
    if (!haveLocal && !spec.hasPipeline)
        uasserted(ErrorCode::FailedToParse,
                  "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to "
                  "be specified");
    if (!haveFrom && !spec.hasPipeline)
        uasserted(ErrorCode::FailedToParse, "must specify 'from' field for a $lookup");
    if (haveLocal && (spec.localField.empty() || spec.foreignField.empty()))
        uasserted(ErrorCode::Location40352, "FieldPath cannot be constructed with empty string");
    if (spec.as.empty())
        uasserted(ErrorCode::Location40352, "FieldPath cannot be constructed with empty string");
    if (spec.as[0] == '$')
        uasserted(ErrorCode::Location16410, "FieldPath field names may not start with '$'.");

    // Variables defined by `let` are visible to the sub-pipeline.
    PipelineContext probe = *ctx;
    bson_iter_init(&it, letDoc.get());
    while (bson_iter_next(&it)) {
        std::string name = bson_iter_key(&it);
        if (name.empty() || !(std::islower(static_cast<unsigned char>(name[0])) || name[0] < 0))
            uasserted(ErrorCode::FailedToParse,
                      fmt::format("'{}' starts with an invalid character for a user variable name",
                                  name));
        spec.let.emplace_back(name,
                              query::Expression::parse(*bson_iter_value(&it), ctx->parseOptions()));
        probe.setVariable(name, Value::null());
    }
    if (spec.hasPipeline) {
        // Validate the sub-pipeline now so errors surface before any document is read.
        bson_iter_init(&it, spec.pipeline.get());
        while (bson_iter_next(&it)) {
            StageSpec st = parseStageSpec(it);
            if (st.name == "$out" || st.name == "$merge")
                uasserted(
                    ErrorCode::Location51047,
                    fmt::format("{} is not allowed within a $lookup's sub-pipeline", st.name));
        }
        buildPipeline(std::make_unique<VectorSource>(std::vector<bson::Doc>{}), spec.pipeline.get(),
                      probe);
    }
    return std::make_unique<LookupStage>(std::move(in), std::move(spec), ctx);
}

}  // namespace halo::aggregate
