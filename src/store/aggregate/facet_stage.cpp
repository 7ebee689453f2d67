// $facet: drains its input once, then runs each named sub-pipeline over the
// buffered documents and returns a single document {name: [results], ...}.
#include <fmt/format.h>

#include "store/aggregate/stage.h"
#include "store/aggregate/vector_source.h"

namespace halo::aggregate {
namespace {

constexpr size_t kMaxFacetOutputBytes = 16 * 1024 * 1024;

class FacetStage : public Stage {
  public:
    FacetStage(StreamPtr in, std::vector<std::pair<std::string, bson::Doc>> facets, ContextPtr ctx)
        : Stage(std::move(in)), facets_(std::move(facets)), ctx_(std::move(ctx)) {}

    std::optional<bson::Doc> next(store::Session& s) override {
        if (done_) return std::nullopt;
        done_ = true;
        auto docs = std::make_shared<std::vector<bson::Doc>>();
        size_t bytes = 0;
        while (auto d = input_->next(s)) {
            bytes += d->size();
            if (bytes > ctx_->memoryLimitBytes && !ctx_->allowDiskUse)
                uasserted(ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed,
                          "Exceeded memory limit for $facet, but didn't allow external sort. Pass "
                          "allowDiskUse:true to opt in.");
            docs->push_back(std::move(*d));
        }
        std::shared_ptr<const std::vector<bson::Doc>> shared = docs;
        bson::Doc out;
        for (const auto& [name, stages] : facets_) {
            auto p = buildPipeline(std::make_unique<VectorSource>(shared), stages.get(), *ctx_);
            bson_t arr;
            bson_append_array_begin(out.mut(), name.c_str(), -1, &arr);
            uint32_t n = 0;
            char buf[16];
            while (auto d = p->next(s)) {
                const char* key;
                bson_uint32_to_string(n++, &key, buf, sizeof buf);
                bson_append_document(&arr, key, -1, d->get());
                if (out.size() + arr.len > kMaxFacetOutputBytes)
                    uasserted(ErrorCode::BSONObjectTooLarge,
                              "document constructed by $facet is larger than 16MB");
            }
            bson_append_array_end(out.mut(), &arr);
        }
        return out;
    }

  private:
    std::vector<std::pair<std::string, bson::Doc>> facets_;
    ContextPtr ctx_;
    bool done_ = false;
};

}  // namespace

StreamPtr makeFacet(StreamPtr in, const StageSpec& s, const ContextPtr& ctx) {
    bson_t spec;
    if (!s.isDocument() || (spec = s.doc(), bson_count_keys(&spec) == 0))
        uasserted(ErrorCode::Location40169, "the $facet specification must be a non-empty object");
    std::vector<std::pair<std::string, bson::Doc>> facets;
    bson_iter_t it;
    bson_iter_init(&it, &spec);
    while (bson_iter_next(&it)) {
        std::string name = bson_iter_key(&it);
        if (name.empty() || name[0] == '$')
            uasserted(ErrorCode::Location40352,
                      fmt::format("Invalid $facet :: caused by :: FieldPath field names "
                                  "may not start with '$' or be empty: '{}'",
                                  name));
        if (!BSON_ITER_HOLDS_ARRAY(&it))
            uasserted(ErrorCode::Location40170,
                      fmt::format("arguments to $facet must be arrays, {} is type {}", name,
                                  bson::typeName(bson_iter_type(&it))));
        uint32_t len;
        const uint8_t* data;
        bson_iter_array(&it, &len, &data);
        bson::Doc stages = bson::Doc::copyOf(data, len);
        if (stages.empty())
            uasserted(ErrorCode::Location40171, "sub-pipeline in $facet stage cannot be empty");
        bson_iter_t st;
        bson_iter_init(&st, stages.get());
        while (bson_iter_next(&st)) {
            StageSpec sub = parseStageSpec(st);
            if (sub.name == "$facet" || sub.name == "$out" || sub.name == "$merge" ||
                sub.name == "$documents" || sub.name == "$changeStream" ||
                sub.name == "$collStats" || sub.name == "$indexStats" || sub.name == "$currentOp")
                uasserted(
                    ErrorCode::Location40600,
                    fmt::format("{} is not allowed to be used within a $facet stage", sub.name));
        }
        // Parse now so errors surface before any document is read.
        buildPipeline(std::make_unique<VectorSource>(std::vector<bson::Doc>{}), stages.get(), *ctx);
        facets.emplace_back(std::move(name), std::move(stages));
    }
    return std::make_unique<FacetStage>(std::move(in), std::move(facets), ctx);
}

}  // namespace halo::aggregate
