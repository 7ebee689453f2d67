// $sort: a blocking, stable in-memory sort. With a directly following $limit k
// only the best k documents are kept (a bounded heap), so memory stays O(k).
#include <fmt/format.h>

#include <algorithm>
#include <queue>

#include "store/aggregate/stage.h"
#include "store/query/collator.h"
#include "store/query/sort.h"

namespace halo::aggregate {
namespace {

class SortStage : public Stage {
  public:
    SortStage(StreamPtr in, query::SortPattern pattern, int64_t topK, ContextPtr ctx)
        : Stage(std::move(in)), pattern_(std::move(pattern)), topK_(topK), ctx_(std::move(ctx)) {}

    std::optional<bson::Doc> next(store::Session& s) override {
        if (!drained_) drain(s);
        if (pos_ >= rows_.size()) {
            rows_.clear();
            return std::nullopt;
        }
        return std::move(rows_[pos_++].doc);
    }

  private:
    struct Row {
        query::SortKey key;
        uint64_t seq;
        bson::Doc doc;
    };
    bool less(const Row& a, const Row& b) const {
        int c = pattern_.compareKeys(a.key, b.key);
        return c != 0 ? c < 0 : a.seq < b.seq;
    }
    static size_t rowBytes(const Row& r) {
        return r.doc.size() + sizeof(Row) + r.key.values.size() * sizeof(query::Value);
    }

    void drain(store::Session& s) {
        auto cmp = [this](const Row& a, const Row& b) { return less(a, b); };
        uint64_t seq = 0;
        size_t bytes = 0;
        while (auto d = input_->next(s)) {
            Row r{pattern_.sortKey(d->get()), seq++, std::move(*d)};
            if (topK_ > 0) {
                // rows_ is a max-heap of the best topK rows seen so far.
                if (static_cast<int64_t>(rows_.size()) < topK_) {
                    bytes += rowBytes(r);
                    rows_.push_back(std::move(r));
                    std::push_heap(rows_.begin(), rows_.end(), cmp);
                } else if (less(r, rows_.front())) {
                    std::pop_heap(rows_.begin(), rows_.end(), cmp);
                    bytes -= rowBytes(rows_.back());
                    bytes += rowBytes(r);
                    rows_.back() = std::move(r);
                    std::push_heap(rows_.begin(), rows_.end(), cmp);
                }
            } else {
                bytes += rowBytes(r);
                rows_.push_back(std::move(r));
            }
            if (bytes > ctx_->memoryLimitBytes && !ctx_->allowDiskUse)
                uasserted(
                    ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed,
                    fmt::format("Sort exceeded memory limit of {} bytes, but did not opt in to "
                                "external sorting.",
                                ctx_->memoryLimitBytes));
        }
        if (topK_ > 0) {
            std::sort_heap(rows_.begin(), rows_.end(), cmp);
        } else {
            std::sort(rows_.begin(), rows_.end(), cmp);
        }
        drained_ = true;
    }

    query::SortPattern pattern_;
    int64_t topK_;
    ContextPtr ctx_;
    bool drained_ = false;
    std::vector<Row> rows_;
    size_t pos_ = 0;
};

}  // namespace

bson::Doc parseSortSpec(const StageSpec& s) {
    if (!s.isDocument())
        uasserted(ErrorCode::Location15973, "the $sort key specification must be an object");
    bson_t spec = s.doc();
    if (bson_count_keys(&spec) == 0)
        uasserted(ErrorCode::Location15976, "$sort stage must have at least one sort key");
    bson::Doc out = bson::Doc::copyOf(&spec);
    (void)uassertStatusOK(query::SortPattern::parse(out.get()));  // validate now
    return out;
}

StreamPtr makeSort(StreamPtr in, const bson_t* sortSpec, int64_t topK, const ContextPtr& ctx) {
    auto pattern = uassertStatusOK(query::SortPattern::parse(sortSpec, ctx->collator));
    return std::make_unique<SortStage>(std::move(in), std::move(pattern), topK, ctx);
}

}  // namespace halo::aggregate
