// $group, $bucket and $sortByCount: blocking stages that drain their input on the
// first next() call, fold it into per-key accumulators, then stream the groups.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>

#include "bson/compare.h"
#include "store/aggregate/accumulators.h"
#include "store/aggregate/document_ops.h"
#include "store/aggregate/stage.h"
#include "store/query/collator.h"

namespace halo::aggregate {
namespace {

using query::Expression;
using query::Value;

/// Group keys compare under the pipeline's collation (strength 2: "a" and "A"
/// are one group, keyed by the first value seen).
struct ValueLess {
    const bson::StringComparator* coll = nullptr;
    bool operator()(const Value& a, const Value& b) const { return query::compare(a, b, coll) < 0; }
};

size_t valueBytes(const Value& v) {
    const auto& b = v.get();
    switch (b.value_type) {
        case BSON_TYPE_UTF8:
            return b.value.v_utf8.len;
        case BSON_TYPE_DOCUMENT:
        case BSON_TYPE_ARRAY:
            return b.value.v_doc.data_len;
        case BSON_TYPE_BINARY:
            return b.value.v_binary.data_len;
        default:
            return 0;
    }
}

class GroupStage : public Stage {
  public:
    using KeyFn = std::function<Value(const bson_t*)>;
    GroupStage(StreamPtr in, KeyFn key, std::vector<AccumulatorSpec> accs, bool sortByKey,
               ContextPtr ctx)
        : Stage(std::move(in)),
          key_(std::move(key)),
          accs_(std::move(accs)),
          sortByKey_(sortByKey),
          ctx_(std::move(ctx)),
          index_(ValueLess{ctx_->collator.get()}) {}

    std::optional<bson::Doc> next(store::Session& s) override {
        if (!drained_) drain(s);
        if (pos_ >= groups_.size()) return std::nullopt;
        Group& g = groups_[order_[pos_++]];
        bson::Doc out;
        appendValue(out.mut(), "_id", g.key);
        for (size_t i = 0; i < accs_.size(); ++i)
            appendValue(out.mut(), accs_[i].field, g.accs[i]->result());
        g.accs.clear();  // release memory as groups are returned
        return out;
    }

  private:
    struct Group {
        Value key;
        std::vector<std::unique_ptr<Accumulator>> accs;
    };

    void drain(store::Session& s) {
        const query::Variables* vars = &ctx_->variables();
        while (auto d = input_->next(s)) {
            Value k = key_(d->get());
            if (k.isMissing()) k = Value::null();
            auto it = index_.find(k);
            size_t gi;
            if (it == index_.end()) {
                gi = groups_.size();
                Group g;
                g.key = k;
                for (const auto& a : accs_) g.accs.push_back(a.make());
                groups_.push_back(std::move(g));
                bytes_ += 2 * (sizeof(Value) + valueBytes(k)) + 64 * (accs_.size() + 1);
                index_.emplace(std::move(k), gi);
            } else {
                gi = it->second;
            }
            Group& g = groups_[gi];
            for (size_t i = 0; i < accs_.size(); ++i) {
                size_t before = g.accs[i]->memoryBytes();
                g.accs[i]->process(accs_[i].arg->evaluate(d->get(), vars));
                bytes_ += g.accs[i]->memoryBytes() - before;
            }
            if (bytes_ > ctx_->memoryLimitBytes && !ctx_->allowDiskUse)
                uasserted(ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed,
                          "Exceeded memory limit for $group, but didn't allow external sort. Pass "
                          "allowDiskUse:true to opt in.");
        }
        order_.resize(groups_.size());
        for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
        if (sortByKey_) {
            std::stable_sort(order_.begin(), order_.end(), [this](size_t a, size_t b) {
                return query::compare(groups_[a].key, groups_[b].key, ctx_->collator.get()) < 0;
            });
        }
        index_.clear();
        drained_ = true;
    }

    KeyFn key_;
    std::vector<AccumulatorSpec> accs_;
    bool sortByKey_;
    ContextPtr ctx_;
    bool drained_ = false;
    std::map<Value, size_t, ValueLess> index_;
    std::vector<Group> groups_;
    std::vector<size_t> order_;
    size_t pos_ = 0;
    size_t bytes_ = 0;
};

/// True for a "$path" string or an {$operator: ...} object.
bool isPathOrOperator(const bson_value_t& v) {
    if (v.value_type == BSON_TYPE_UTF8)
        return v.value.v_utf8.len > 0 && v.value.v_utf8.str[0] == '$';
    if (v.value_type != BSON_TYPE_DOCUMENT) return false;
    bson_t d;
    bson_iter_t it;
    return query::viewOf(v, &d) && bson_iter_init(&it, &d) && bson_iter_next(&it) &&
           bson_iter_key(&it)[0] == '$';
}

std::vector<AccumulatorSpec> parseOutput(const bson_t* spec, const ContextPtr& ctx) {
    std::vector<AccumulatorSpec> accs;
    bson_iter_t it;
    bson_iter_init(&it, spec);
    while (bson_iter_next(&it))
        accs.push_back(parseAccumulator(bson_iter_key(&it), it, ctx->parseOptions()));
    return accs;
}

}  // namespace

StreamPtr makeGroup(StreamPtr in, const StageSpec& s, const ContextPtr& ctx) {
    if (!s.isDocument())
        uasserted(ErrorCode::Location15947, "a group's fields must be specified in an object");
    bson_t spec = s.doc();
    std::shared_ptr<Expression> idExpr;
    std::vector<AccumulatorSpec> accs;
    bson_iter_t it;
    bson_iter_init(&it, &spec);
    while (bson_iter_next(&it)) {
        std::string key = bson_iter_key(&it);
        if (key == "_id") {
            if (idExpr)
                uasserted(ErrorCode::Location15948, "a group's _id may only be specified once");
            idExpr = Expression::parse(*bson_iter_value(&it), ctx->parseOptions());
        } else {
            accs.push_back(parseAccumulator(key, it, ctx->parseOptions()));
        }
    }
    if (!idExpr) uasserted(ErrorCode::Location15955, "a group specification must include an _id");
    auto keyFn = [idExpr, ctx](const bson_t* d) { return idExpr->evaluate(d, &ctx->variables()); };
    return std::make_unique<GroupStage>(std::move(in), keyFn, std::move(accs), false, ctx);
}

StreamPtr makeSortByCount(StreamPtr in, const StageSpec& s, const ContextPtr& ctx) {
    if (!isPathOrOperator(s.value()))
        uasserted(ErrorCode::Location40148,
                  "the sortByCount field must be defined as a $-prefixed path or an expression");
    std::shared_ptr<Expression> expr = Expression::parse(s.value(), ctx->parseOptions());
    std::vector<AccumulatorSpec> accs;
    bson::Doc countSpec = bson::Doc::fromJsonOrDie(R"({"count": {"$sum": 1}})");
    bson_iter_t it;
    bson_iter_init_find(&it, countSpec.get(), "count");
    accs.push_back(parseAccumulator("count", it, ctx->parseOptions()));
    auto keyFn = [expr, ctx](const bson_t* d) { return expr->evaluate(d, &ctx->variables()); };
    StreamPtr group =
        std::make_unique<GroupStage>(std::move(in), keyFn, std::move(accs), false, ctx);
    bson::Doc sortSpec = bson::Doc::fromJsonOrDie(R"({"count": -1})");
    return makeSort(std::move(group), sortSpec.get(), 0, ctx);
}

StreamPtr makeBucket(StreamPtr in, const StageSpec& s, const ContextPtr& ctx) {
    const bson::StringComparator* coll = ctx->collator.get();  // boundaries compare under it
    if (!s.isDocument())
        uasserted(ErrorCode::Location40201,
                  fmt::format("Argument to $bucket stage must be an object, but found type: {}.",
                              bson::typeName(s.value().value_type)));
    bson_t spec = s.doc();
    std::shared_ptr<Expression> groupBy;
    auto bounds = std::make_shared<std::vector<Value>>();
    bool haveBounds = false;
    std::optional<Value> dflt;
    std::vector<AccumulatorSpec> accs;
    bool haveOutput = false;
    bson_iter_t it;
    bson_iter_init(&it, &spec);
    while (bson_iter_next(&it)) {
        std::string_view key = bson_iter_key(&it);
        const bson_value_t& v = *bson_iter_value(&it);
        if (key == "groupBy") {
            if (!isPathOrOperator(v))
                uasserted(
                    ErrorCode::Location40202,
                    fmt::format(
                        "The $bucket 'groupBy' field must be defined as a $-prefixed path or an "
                        "expression, but found: {}.",
                        bson::valueToString(v)));
            groupBy = Expression::parse(v, ctx->parseOptions());
        } else if (key == "boundaries") {
            if (v.value_type != BSON_TYPE_ARRAY)
                uasserted(
                    ErrorCode::Location40200,
                    fmt::format(
                        "The $bucket 'boundaries' field must be an array, but found type: {}.",
                        bson::typeName(v.value_type)));
            bson_t arr;
            query::viewOf(v, &arr);
            bson_iter_t a;
            bson_iter_init(&a, &arr);
            while (bson_iter_next(&a)) {
                auto e = Expression::parse(*bson_iter_value(&a), ctx->parseOptions());
                if (!e->isConstant())
                    uasserted(ErrorCode::Location40191,
                              "The $bucket 'boundaries' field must be an array of constant values");
                bounds->push_back(e->evaluate(&spec, nullptr));
            }
            haveBounds = true;
        } else if (key == "default") {
            auto e = Expression::parse(v, ctx->parseOptions());
            if (!e->isConstant())
                uasserted(ErrorCode::Location40195,
                          "The $bucket 'default' field must be a constant value");
            dflt = e->evaluate(&spec, nullptr);
        } else if (key == "output") {
            if (v.value_type != BSON_TYPE_DOCUMENT)
                uasserted(
                    ErrorCode::Location40196,
                    fmt::format("The $bucket 'output' field must be an object, but found type: {}.",
                                bson::typeName(v.value_type)));
            bson_t out;
            query::viewOf(v, &out);
            accs = parseOutput(&out, ctx);
            haveOutput = true;
        } else {
            uasserted(ErrorCode::Location40197,
                      fmt::format("Unrecognized option to $bucket: {}.", key));
        }
    }
    if (!groupBy || !haveBounds)
        uasserted(ErrorCode::Location40198,
                  "$bucket requires 'groupBy' and 'boundaries' to be specified.");
    if (bounds->size() < 2)
        uasserted(ErrorCode::Location40192, fmt::format("The $bucket 'boundaries' field must have "
                                                        "at least 2 values, but found {} value(s).",
                                                        bounds->size()));
    for (size_t i = 1; i < bounds->size(); ++i) {
        const Value& a = (*bounds)[i - 1];
        const Value& b = (*bounds)[i];
        if (bson::canonicalRank(a.type()) != bson::canonicalRank(b.type()))
            uasserted(
                ErrorCode::Location40193,
                fmt::format(
                    "All values in the the 'boundaries' option to $bucket must have the same type. "
                    "Found conflicting types {} and {}.",
                    bson::typeName(a.type()), bson::typeName(b.type())));
        if (query::compare(a, b, coll) >= 0)
            uasserted(
                ErrorCode::Location40194,
                fmt::format(
                    "The 'boundaries' option to $bucket must be sorted in ascending order, but "
                    "elements {} and {} are not in ascending order ({} is not less than {}).",
                    i - 1, i, a.toString(), b.toString()));
    }
    if (dflt && bson::canonicalRank(dflt->type()) == bson::canonicalRank(bounds->front().type()) &&
        query::compare(*dflt, bounds->front(), coll) >= 0 &&
        query::compare(*dflt, bounds->back(), coll) < 0)
        uasserted(ErrorCode::Location40199,
                  "The $bucket 'default' field must be less than the lowest boundary or greater "
                  "than or equal "
                  "to the highest boundary.");
    if (!haveOutput) {
        bson::Doc countSpec = bson::Doc::fromJsonOrDie(R"({"count": {"$sum": 1}})");
        accs = parseOutput(countSpec.get(), ctx);
    }
    auto keyFn = [groupBy, bounds, dflt, ctx](const bson_t* d) -> Value {
        const bson::StringComparator* coll = ctx->collator.get();
        Value v = groupBy->evaluate(d, &ctx->variables());
        if (v.isMissing()) v = Value::null();
        if (bson::canonicalRank(v.type()) == bson::canonicalRank(bounds->front().type()) &&
            query::compare(v, bounds->front(), coll) >= 0 &&
            query::compare(v, bounds->back(), coll) < 0) {
            auto ub = std::upper_bound(
                bounds->begin(), bounds->end(), v,
                [coll](const Value& x, const Value& b) { return query::compare(x, b, coll) < 0; });
            return *(ub - 1);
        }
        if (!dflt)
            uasserted(ErrorCode::Location40066,
                      "$switch could not find a matching branch for an input, and no default was "
                      "specified.");
        return *dflt;
    };
    return std::make_unique<GroupStage>(std::move(in), keyFn, std::move(accs), true, ctx);
}

}  // namespace halo::aggregate
