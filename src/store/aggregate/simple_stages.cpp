// Streaming stages: $match, $skip, $limit, $count, $unwind; and $sample and
// $documents.
#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "store/aggregate/document_ops.h"
#include "store/aggregate/stage.h"
#include "store/aggregate/vector_source.h"
#include "store/query/matcher.h"
#include "store/query/path.h"

namespace halo::aggregate {
namespace {

using query::Value;

class MatchStage : public Stage {
  public:
    MatchStage(StreamPtr in, std::unique_ptr<query::Matcher> m)
        : Stage(std::move(in)), m_(std::move(m)) {}
    std::optional<bson::Doc> next(store::Session& s) override {
        while (auto d = input_->next(s)) {
            if (m_->matches(d->get())) return d;
        }
        return std::nullopt;
    }

  private:
    std::unique_ptr<query::Matcher> m_;
};

class SkipStage : public Stage {
  public:
    SkipStage(StreamPtr in, int64_t n) : Stage(std::move(in)), n_(n) {}
    std::optional<bson::Doc> next(store::Session& s) override {
        while (skipped_ < n_) {
            if (!input_->next(s)) return std::nullopt;
            ++skipped_;
        }
        return input_->next(s);
    }

  private:
    int64_t n_;
    int64_t skipped_ = 0;
};

class LimitStage : public Stage {
  public:
    LimitStage(StreamPtr in, int64_t n) : Stage(std::move(in)), n_(n) {}
    std::optional<bson::Doc> next(store::Session& s) override {
        if (returned_ >= n_) return std::nullopt;
        auto d = input_->next(s);
        if (d) ++returned_;
        return d;
    }

  private:
    int64_t n_;
    int64_t returned_ = 0;
};

class CountStage : public Stage {
  public:
    CountStage(StreamPtr in, std::string field) : Stage(std::move(in)), field_(std::move(field)) {}
    std::optional<bson::Doc> next(store::Session& s) override {
        if (done_) return std::nullopt;
        int64_t n = 0;
        while (input_->next(s)) ++n;
        done_ = true;
        if (n == 0) return std::nullopt;
        bson::Doc out;
        if (n <= INT32_MAX) {
            BSON_APPEND_INT32(out.mut(), field_.c_str(), static_cast<int32_t>(n));
        } else {
            BSON_APPEND_INT64(out.mut(), field_.c_str(), n);
        }
        return out;
    }

  private:
    std::string field_;
    bool done_ = false;
};

class UnwindStage : public Stage {
  public:
    UnwindStage(StreamPtr in, std::string path, std::string indexField, bool preserve)
        : Stage(std::move(in)), parts_(query::splitPath(path)), preserve_(preserve) {
        if (!indexField.empty()) indexParts_ = query::splitPath(indexField);
    }
    std::optional<bson::Doc> next(store::Session& s) override {
        while (true) {
            if (cur_) {
                if (elemIdx_ < elems_.size()) {
                    size_t i = elemIdx_++;
                    bson::Doc out = setPath(cur_->get(), parts_, elems_[i]);
                    if (!indexParts_.empty())
                        out = setPath(out.get(), indexParts_,
                                      Value::fromInt64(static_cast<int64_t>(i)));
                    return out;
                }
                cur_.reset();
                elems_.clear();
            }
            auto d = input_->next(s);
            if (!d) return std::nullopt;
            Value v = getPath(d->get(), parts_);
            if (v.isArray()) {
                elems_ = v.arrayElements();
                if (elems_.empty()) {
                    if (!preserve_) continue;
                    bson::Doc out = setPath(d->get(), parts_, Value());
                    if (!indexParts_.empty()) out = setPath(out.get(), indexParts_, Value::null());
                    return out;
                }
                cur_ = std::move(d);
                elemIdx_ = 0;
                continue;
            }
            if (v.isNullish() && !preserve_) continue;
            if (indexParts_.empty()) return d;
            return setPath(d->get(), indexParts_, Value::null());
        }
    }

  private:
    std::vector<std::string> parts_;
    std::vector<std::string> indexParts_;
    bool preserve_;
    std::optional<bson::Doc> cur_;
    std::vector<Value> elems_;
    size_t elemIdx_ = 0;
};

class SampleStage : public Stage {
  public:
    SampleStage(StreamPtr in, int64_t size, uint64_t seed)
        : Stage(std::move(in)), size_(size), rng_(seed) {}
    std::optional<bson::Doc> next(store::Session& s) override {
        if (!drained_) {
            // Reservoir sampling keeps at most `size` documents.
            int64_t seen = 0;
            while (auto d = input_->next(s)) {
                ++seen;
                if (static_cast<int64_t>(docs_.size()) < size_) {
                    docs_.push_back(std::move(*d));
                } else {
                    std::uniform_int_distribution<int64_t> dist(0, seen - 1);
                    int64_t j = dist(rng_);
                    if (j < size_) docs_[static_cast<size_t>(j)] = std::move(*d);
                }
            }
            std::shuffle(docs_.begin(), docs_.end(), rng_);
            drained_ = true;
        }
        if (pos_ >= docs_.size()) return std::nullopt;
        return std::move(docs_[pos_++]);
    }

  private:
    int64_t size_;
    std::mt19937_64 rng_;
    bool drained_ = false;
    std::vector<bson::Doc> docs_;
    size_t pos_ = 0;
};

bool integral(const bson_value_t& v, int64_t* out) {
    return bson::toInt64Exact(v, out);
}

}  // namespace

StreamPtr makeMatch(StreamPtr in, const StageSpec& s, const ContextPtr& ctx) {
    if (!s.isDocument())
        uasserted(ErrorCode::Location15959, "the match filter must be an expression in an object");
    bson_t spec = s.doc();
    bson::Doc filter = bindFilterVariables(&spec, *ctx);
    query::MatcherParseOptions mo;
    mo.collator = ctx->collator;
    auto m = uassertStatusOK(query::Matcher::parse(filter.get(), mo));
    return std::make_unique<MatchStage>(std::move(in), std::move(m));
}

int64_t parseLimit(const bson_value_t& v) {
    int64_t n;
    if (!bson::isNumber(v.value_type))
        uasserted(ErrorCode::Location15957, "the limit must be specified as a number");
    if (!integral(v, &n))
        uasserted(ErrorCode::Location15957,
                  fmt::format("invalid argument to $limit stage: Expected an integer: $limit: {}",
                              bson::valueToString(v)));
    if (n <= 0) uasserted(ErrorCode::Location15958, "the limit must be positive");
    return n;
}

int64_t parseSkip(const bson_value_t& v) {
    int64_t n;
    if (!bson::isNumber(v.value_type))
        uasserted(ErrorCode::Location15972, "Argument to $skip must be a number.");
    if (!integral(v, &n))
        uasserted(ErrorCode::Location15972,
                  fmt::format("invalid argument to $skip stage: Expected an integer: $skip: {}",
                              bson::valueToString(v)));
    if (n < 0) uasserted(ErrorCode::Location15956, "Argument to $skip cannot be negative");
    return n;
}

StreamPtr makeSkip(StreamPtr in, const StageSpec& s, const ContextPtr&) {
    int64_t n = parseSkip(s.value());
    if (n == 0) return in;
    return std::make_unique<SkipStage>(std::move(in), n);
}

StreamPtr makeLimit(StreamPtr in, const StageSpec& s, const ContextPtr&) {
    return std::make_unique<LimitStage>(std::move(in), parseLimit(s.value()));
}

StreamPtr makeCount(StreamPtr in, const StageSpec& s, const ContextPtr&) {
    const bson_value_t& v = s.value();
    if (v.value_type != BSON_TYPE_UTF8 || v.value.v_utf8.len == 0)
        uasserted(ErrorCode::Location40156, "the count field must be a non-empty string");
    std::string field(v.value.v_utf8.str, v.value.v_utf8.len);
    if (field[0] == '$')
        uasserted(ErrorCode::Location40158, "the count field cannot be a $-prefixed path");
    if (field.find('.') != std::string::npos)
        uasserted(ErrorCode::Location40160, "the count field cannot contain '.'");
    return std::make_unique<CountStage>(std::move(in), std::move(field));
}

StreamPtr makeUnwind(StreamPtr in, const StageSpec& s, const ContextPtr&) {
    std::string path, indexField;
    bool preserve = false;
    const bson_value_t& v = s.value();
    if (v.value_type == BSON_TYPE_UTF8) {
        path.assign(v.value.v_utf8.str, v.value.v_utf8.len);
    } else if (v.value_type == BSON_TYPE_DOCUMENT) {
        bson_t spec = s.doc();
        bson_iter_t it;
        bson_iter_init(&it, &spec);
        bool havePath = false;
        while (bson_iter_next(&it)) {
            std::string_view key = bson_iter_key(&it);
            if (key == "path") {
                if (!BSON_ITER_HOLDS_UTF8(&it))
                    uasserted(ErrorCode::Location28808,
                              fmt::format("expected a string as the path for $unwind stage, got {}",
                                          bson::typeName(bson_iter_type(&it))));
                path = bson_iter_utf8(&it, nullptr);
                havePath = true;
            } else if (key == "includeArrayIndex") {
                if (!BSON_ITER_HOLDS_UTF8(&it))
                    uasserted(
                        ErrorCode::Location28810,
                        fmt::format(
                            "expected a non-empty string for the includeArrayIndex  option to "
                            "$unwind stage, got {}",
                            bson::typeName(bson_iter_type(&it))));
                indexField = bson_iter_utf8(&it, nullptr);
                if (indexField.empty())
                    uasserted(ErrorCode::Location28810,
                              "expected a non-empty string for the includeArrayIndex  option to "
                              "$unwind stage, got string");
                if (indexField[0] == '$')
                    uasserted(ErrorCode::Location28822,
                              fmt::format("includeArrayIndex option to $unwind stage should not be "
                                          "prefixed with a "
                                          "'$': {}",
                                          indexField));
            } else if (key == "preserveNullAndEmptyArrays") {
                if (!BSON_ITER_HOLDS_BOOL(&it))
                    uasserted(ErrorCode::Location28809,
                              fmt::format("expected a boolean for the preserveNullAndEmptyArrays "
                                          "option to $unwind "
                                          "stage, got {}",
                                          bson::typeName(bson_iter_type(&it))));
                preserve = bson_iter_bool(&it);
            } else {
                uasserted(ErrorCode::Location28811,
                          fmt::format("unrecognized option to $unwind stage: {}", key));
            }
        }
        if (!havePath) uasserted(ErrorCode::Location28812, "no path specified to $unwind stage");
    } else {
        uasserted(
            ErrorCode::Location15981,
            fmt::format(
                "expected either a string or an object as specification for $unwind stage, got {}",
                bson::typeName(v.value_type)));
    }
    if (path.empty() || path[0] != '$')
        uasserted(
            ErrorCode::Location28818,
            fmt::format("path option to $unwind stage should be prefixed with a '$': {}", path));
    path.erase(0, 1);
    if (path.empty() || path[0] == '$')
        uasserted(ErrorCode::Location40352, "FieldPath cannot be constructed with empty string");
    return std::make_unique<UnwindStage>(std::move(in), std::move(path), std::move(indexField),
                                         preserve);
}

StreamPtr makeSample(StreamPtr in, const StageSpec& s, const ContextPtr& ctx) {
    if (!s.isDocument())
        uasserted(ErrorCode::Location28745, "the $sample stage specification must be an object");
    bson_t spec = s.doc();
    bson_iter_t it;
    bson_iter_init(&it, &spec);
    std::optional<int64_t> size;
    while (bson_iter_next(&it)) {
        std::string_view key = bson_iter_key(&it);
        if (key != "size")
            uasserted(ErrorCode::Location28748,
                      fmt::format("unrecognized option to $sample: {}", key));
        int64_t n;
        if (!bson::isNumber(bson_iter_type(&it)) || !integral(*bson_iter_value(&it), &n))
            uasserted(ErrorCode::Location28746, "size argument to $sample must be a number");
        if (n < 0)
            uasserted(ErrorCode::Location28747, "size argument to $sample must not be negative");
        size = n;
    }
    if (!size) uasserted(ErrorCode::Location28749, "$sample stage must specify a size");
    uint64_t seed = ctx->randomSeed ? ctx->randomSeed : std::random_device{}();
    return std::make_unique<SampleStage>(std::move(in), *size, seed);
}

StreamPtr makeDocuments(StreamPtr in, const StageSpec& s, const ContextPtr& ctx) {
    // The documents are a constant array (or an expression evaluating to one).
    auto expr = query::Expression::parse(s.value(), ctx->parseOptions());
    bson::Doc empty;
    Value v = expr->evaluate(empty.get(), &ctx->variables());
    if (!v.isArray()) uasserted(ErrorCode::Location5858203, "an array is expected");
    std::vector<bson::Doc> docs;
    for (const Value& e : v.arrayElements()) {
        if (!e.isDocument())
            uasserted(ErrorCode::Location5858203, "an array of objects is expected");
        docs.push_back(toDoc(e));
    }
    (void)in;  // $documents replaces the (empty) input
    return std::make_unique<VectorSource>(std::move(docs));
}

// ---------------------------------------------------------------- variables in $match

namespace {

/// Rewrites one aggregation expression: "$$var[.path]" strings naming a user
/// variable or NOW become {$literal: value}.
void bindExpr(const bson_iter_t& it, const char* key, const PipelineContext& ctx, bson_t* out) {
    if (BSON_ITER_HOLDS_UTF8(&it)) {
        uint32_t len;
        const char* str = bson_iter_utf8(&it, &len);
        std::string_view sv(str, len);
        if (sv.size() > 2 && sv.substr(0, 2) == "$$") {
            std::string name(sv.substr(2, sv.find('.') == std::string_view::npos
                                              ? std::string_view::npos
                                              : sv.find('.') - 2));
            bool isUser = std::find(ctx.variableNames().begin(), ctx.variableNames().end(), name) !=
                          ctx.variableNames().end();
            if (isUser || name == "NOW") {
                bson_value_t spec = *bson_iter_value(const_cast<bson_iter_t*>(&it));
                auto e = query::Expression::parse(spec, ctx.parseOptions());
                bson::Doc empty;
                Value v = e->evaluate(empty.get(), &ctx.variables());
                if (v.isMissing()) {
                    BSON_APPEND_UTF8(out, key, "$$REMOVE");
                    return;
                }
                bson_t lit;
                bson_append_document_begin(out, key, -1, &lit);
                appendValue(&lit, "$literal", v);
                bson_append_document_end(out, &lit);
                return;
            }
        }
        bson_append_iter(out, key, -1, &it);
        return;
    }
    if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
        bool isArr = BSON_ITER_HOLDS_ARRAY(&it);
        bson_iter_t sub;
        bson_iter_recurse(&it, &sub);
        bson_t child;
        if (isArr) {
            bson_append_array_begin(out, key, -1, &child);
        } else {
            bson_append_document_begin(out, key, -1, &child);
        }
        bool literal = false;
        while (bson_iter_next(&sub)) {
            if (!isArr && std::string_view(bson_iter_key(&sub)) == "$literal") literal = true;
            if (literal) {
                bson_append_iter(&child, nullptr, 0, &sub);
            } else {
                bindExpr(sub, bson_iter_key(&sub), ctx, &child);
            }
        }
        if (isArr) {
            bson_append_array_end(out, &child);
        } else {
            bson_append_document_end(out, &child);
        }
        return;
    }
    bson_append_iter(out, key, -1, &it);
}

/// Copies a filter, rewriting the value of every $expr (at any depth of $and/$or/$nor).
void bindFilter(const bson_t* filter, const PipelineContext& ctx, bson_t* out) {
    bson_iter_t it;
    bson_iter_init(&it, filter);
    while (bson_iter_next(&it)) {
        std::string_view key = bson_iter_key(&it);
        if (key == "$expr") {
            bindExpr(it, "$expr", ctx, out);
        } else if ((key == "$and" || key == "$or" || key == "$nor") && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t sub;
            bson_iter_recurse(&it, &sub);
            bson_t arr;
            bson_append_array_begin(out, key.data(), static_cast<int>(key.size()), &arr);
            while (bson_iter_next(&sub)) {
                if (!BSON_ITER_HOLDS_DOCUMENT(&sub)) {
                    bson_append_iter(&arr, nullptr, 0, &sub);
                    continue;
                }
                uint32_t len;
                const uint8_t* data;
                bson_iter_document(&sub, &len, &data);
                bson_t clause, child;
                bson_init_static(&clause, data, len);
                bson_append_document_begin(&arr, bson_iter_key(&sub), -1, &child);
                bindFilter(&clause, ctx, &child);
                bson_append_document_end(&arr, &child);
            }
            bson_append_array_end(out, &arr);
        } else {
            bson_append_iter(out, nullptr, 0, &it);
        }
    }
}

bool mentionsExpr(const bson_t* filter) {
    bson_iter_t it;
    bson_iter_init(&it, filter);
    while (bson_iter_next(&it)) {
        std::string_view key = bson_iter_key(&it);
        if (key == "$expr") return true;
        if ((key == "$and" || key == "$or" || key == "$nor") && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t sub;
            bson_iter_recurse(&it, &sub);
            while (bson_iter_next(&sub)) {
                if (!BSON_ITER_HOLDS_DOCUMENT(&sub)) continue;
                uint32_t len;
                const uint8_t* data;
                bson_iter_document(&sub, &len, &data);
                bson_t clause;
                bson_init_static(&clause, data, len);
                if (mentionsExpr(&clause)) return true;
            }
        }
    }
    return false;
}

}  // namespace

bson::Doc bindFilterVariables(const bson_t* filter, const PipelineContext& ctx) {
    if (!mentionsExpr(filter)) return bson::Doc::copyOf(filter);
    bson::Doc out;
    bindFilter(filter, ctx, out.mut());
    return out;
}

}  // namespace halo::aggregate
