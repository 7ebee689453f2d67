#pragma once
// VectorSource: a DocStream over documents held in memory. It feeds $facet
// sub-pipelines, $documents, collection-less aggregates and unit tests (so the
// stages are testable without WiredTiger). The documents may be shared by
// several sources; each source keeps only its own position. Never touches the
// Session it is given.
#include <memory>
#include <vector>

#include "store/exec/doc_stream.h"

namespace halo::aggregate {

class VectorSource : public store::DocStream {
  public:
    explicit VectorSource(std::shared_ptr<const std::vector<bson::Doc>> docs)
        : docs_(std::move(docs)) {}
    explicit VectorSource(std::vector<bson::Doc> docs)
        : docs_(std::make_shared<const std::vector<bson::Doc>>(std::move(docs))) {}
    std::optional<bson::Doc> next(store::Session&) override {
        if (pos_ >= docs_->size()) return std::nullopt;
        return (*docs_)[pos_++].copy();
    }
    void explain(bson_t* winningPlan) const override {
        BSON_APPEND_UTF8(winningPlan, "stage", "VIRTUAL");
    }

  private:
    std::shared_ptr<const std::vector<bson::Doc>> docs_;
    size_t pos_ = 0;
};

}  // namespace halo::aggregate
