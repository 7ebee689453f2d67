#include "store/aggregate/accumulators.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <vector>

#include "bson/compare.h"
#include "store/aggregate/document_ops.h"

namespace halo::aggregate {
namespace {

using query::Value;

/// Exact-while-possible numeric sum with mongod's widening rules.
class NumericSum {
  public:
    void add(const Value& v) {
        const bson_value_t& b = v.get();
        switch (b.value_type) {
            case BSON_TYPE_INT32:
                addInt(b.value.v_int32);
                break;
            case BSON_TYPE_INT64:
                if (kind_ == Kind::kInt32) kind_ = Kind::kInt64;
                addInt(b.value.v_int64);
                break;
            case BSON_TYPE_DOUBLE:
                if (kind_ != Kind::kDecimal) kind_ = Kind::kDouble;
                addDouble(b.value.v_double);
                break;
            case BSON_TYPE_DECIMAL128:
                kind_ = Kind::kDecimal;
                addDouble(bson::toDouble(b));
                break;
            default:
                return;
        }
        ++count_;
    }
    int64_t count() const { return count_; }
    double asDouble() const { return static_cast<double>(isum_) + dsum_; }
    Value result() const {
        switch (kind_) {
            case Kind::kInt32:
                if (!intOverflow_ && isum_ >= std::numeric_limits<int32_t>::min() &&
                    isum_ <= std::numeric_limits<int32_t>::max())
                    return Value::fromInt32(static_cast<int32_t>(isum_));
                [[fallthrough]];
            case Kind::kInt64:
                if (!intOverflow_) return Value::fromInt64(isum_);
                return Value::fromDouble(asDouble());
            case Kind::kDouble:
                return Value::fromDouble(asDouble());
            case Kind::kDecimal:
                return decimal(asDouble());
        }
        return Value::fromInt32(0);
    }
    bool sawDecimal() const { return kind_ == Kind::kDecimal; }

    static Value decimal(double d) {
        bson_decimal128_t dec;
        std::string s = std::isnan(d)   ? "NaN"
                        : std::isinf(d) ? (d > 0 ? "Inf" : "-Inf")
                                        : fmt::format("{}", d);
        bson_decimal128_from_string(s.c_str(), &dec);
        return Value::fromDecimal(dec);
    }

  private:
    enum class Kind { kInt32, kInt64, kDouble, kDecimal };
    void addInt(int64_t i) {
        if (intOverflow_) {
            addDouble(static_cast<double>(i));
            return;
        }
        int64_t r;
        if (__builtin_add_overflow(isum_, i, &r)) {
            intOverflow_ = true;
            addDouble(static_cast<double>(isum_));
            addDouble(static_cast<double>(i));
            isum_ = 0;
            return;
        }
        isum_ = r;
    }
    void addDouble(double d) {  // Kahan summation while finite
        if (!std::isfinite(d) || !std::isfinite(dsum_)) {
            dsum_ += d;
            dcomp_ = 0;
            return;
        }
        double y = d - dcomp_;
        double t = dsum_ + y;
        dcomp_ = (t - dsum_) - y;
        dsum_ = t;
    }
    Kind kind_ = Kind::kInt32;
    int64_t isum_ = 0;
    bool intOverflow_ = false;
    double dsum_ = 0, dcomp_ = 0;
    int64_t count_ = 0;
};

class SumAcc : public Accumulator {
  public:
    void process(const Value& v) override { sum_.add(v); }
    Value result() const override { return sum_.result(); }

  private:
    NumericSum sum_;
};

class AvgAcc : public Accumulator {
  public:
    void process(const Value& v) override { sum_.add(v); }
    Value result() const override {
        if (sum_.count() == 0) return Value::null();
        double avg = sum_.asDouble() / static_cast<double>(sum_.count());
        return sum_.sawDecimal() ? NumericSum::decimal(avg) : Value::fromDouble(avg);
    }

  private:
    NumericSum sum_;
};

class MinMaxAcc : public Accumulator {
  public:
    MinMaxAcc(int sign, const bson::StringComparator* coll) : sign_(sign), coll_(coll) {}
    void process(const Value& v) override {
        if (v.isNullish()) return;
        if (best_.isMissing() || sign_ * query::compare(v, best_, coll_) > 0) best_ = v;
    }
    Value result() const override { return best_.isMissing() ? Value::null() : best_; }
    size_t memoryBytes() const override { return sizeof(Value) + valueBytes(best_); }
    static size_t valueBytes(const Value& v) {
        const auto& b = v.get();
        if (b.value_type == BSON_TYPE_UTF8) return b.value.v_utf8.len;
        if (b.value_type == BSON_TYPE_DOCUMENT || b.value_type == BSON_TYPE_ARRAY)
            return b.value.v_doc.data_len;
        if (b.value_type == BSON_TYPE_BINARY) return b.value.v_binary.data_len;
        return 0;
    }

  private:
    int sign_;
    const bson::StringComparator* coll_;
    Value best_;
};

class FirstAcc : public Accumulator {
  public:
    void process(const Value& v) override {
        if (seen_) return;
        seen_ = true;
        v_ = v;
    }
    Value result() const override { return v_.isMissing() ? Value::null() : v_; }
    size_t memoryBytes() const override { return MinMaxAcc::valueBytes(v_); }

  private:
    bool seen_ = false;
    Value v_;
};

class LastAcc : public Accumulator {
  public:
    void process(const Value& v) override { v_ = v; }
    Value result() const override { return v_.isMissing() ? Value::null() : v_; }
    size_t memoryBytes() const override { return MinMaxAcc::valueBytes(v_); }

  private:
    Value v_;
};

class PushAcc : public Accumulator {
  public:
    PushAcc(bool unique, const bson::StringComparator* coll) : unique_(unique), coll_(coll) {}
    void process(const Value& v) override {
        if (v.isMissing()) return;
        if (unique_) {
            for (const auto& e : values_)
                if (query::compare(e, v, coll_) == 0) return;
        }
        bytes_ += sizeof(Value) + MinMaxAcc::valueBytes(v);
        values_.push_back(v);
    }
    Value result() const override { return Value::fromArray(values_); }
    size_t memoryBytes() const override { return bytes_; }

  private:
    bool unique_;
    const bson::StringComparator* coll_;
    std::vector<Value> values_;
    size_t bytes_ = 0;
};

class StdDevAcc : public Accumulator {
  public:
    explicit StdDevAcc(bool sample) : sample_(sample) {}
    void process(const Value& v) override {
        if (!v.isNumber()) return;
        double x = bson::toDouble(v.get());
        ++n_;
        double delta = x - mean_;
        mean_ += delta / static_cast<double>(n_);
        m2_ += delta * (x - mean_);
    }
    Value result() const override {
        int64_t denom = sample_ ? n_ - 1 : n_;
        if (denom <= 0) return Value::null();
        return Value::fromDouble(std::sqrt(m2_ / static_cast<double>(denom)));
    }

  private:
    bool sample_;
    int64_t n_ = 0;
    double mean_ = 0, m2_ = 0;
};

class MergeObjectsAcc : public Accumulator {
  public:
    void process(const Value& v) override {
        if (v.isNullish()) return;
        if (!v.isDocument())
            uasserted(
                ErrorCode::Location40400,
                fmt::format("$mergeObjects requires object inputs, but input {} is of type {}",
                            v.toString(), bson::typeName(v.type())));
        bson_t view;
        v.view(&view);
        bson_iter_t it;
        bson_iter_init(&it, &view);
        while (bson_iter_next(&it)) {
            std::string key = bson_iter_key(&it);
            Value fv = Value::fromIter(it);
            bool replaced = false;
            for (auto& [k, existing] : fields_) {
                if (k == key) {
                    existing = std::move(fv);
                    replaced = true;
                    break;
                }
            }
            if (!replaced) fields_.emplace_back(std::move(key), std::move(fv));
        }
    }
    Value result() const override {
        bson::Doc d;
        for (const auto& [k, v] : fields_) appendValue(d.mut(), k, v);
        return Value::fromDocument(d.get());
    }

  private:
    std::vector<std::pair<std::string, Value>> fields_;
};

bool isKnown(std::string_view op) {
    static const char* const kOps[] = {"$sum",   "$avg",       "$min",        "$max",
                                       "$first", "$last",      "$push",       "$addToSet",
                                       "$count", "$stdDevPop", "$stdDevSamp", "$mergeObjects"};
    for (const char* o : kOps)
        if (op == o) return true;
    return false;
}

}  // namespace

std::unique_ptr<Accumulator> AccumulatorSpec::make() const {
    if (op == "$sum" || op == "$count") return std::make_unique<SumAcc>();
    if (op == "$avg") return std::make_unique<AvgAcc>();
    if (op == "$min") return std::make_unique<MinMaxAcc>(-1, collator.get());
    if (op == "$max") return std::make_unique<MinMaxAcc>(1, collator.get());
    if (op == "$first") return std::make_unique<FirstAcc>();
    if (op == "$last") return std::make_unique<LastAcc>();
    if (op == "$push") return std::make_unique<PushAcc>(false, nullptr);
    if (op == "$addToSet") return std::make_unique<PushAcc>(true, collator.get());
    if (op == "$stdDevPop") return std::make_unique<StdDevAcc>(false);
    if (op == "$stdDevSamp") return std::make_unique<StdDevAcc>(true);
    if (op == "$mergeObjects") return std::make_unique<MergeObjectsAcc>();
    HALO_INVARIANT(false);
}

AccumulatorSpec parseAccumulator(const std::string& field, const bson_iter_t& it,
                                 const query::ExpressionParseOptions& opts) {
    if (field.find('.') != std::string::npos)
        uasserted(ErrorCode::Location40235,
                  fmt::format("The field name '{}' cannot contain '.'", field));
    if (!field.empty() && field[0] == '$')
        uasserted(ErrorCode::Location40236,
                  fmt::format("The field name '{}' cannot be an operator name", field));
    if (!BSON_ITER_HOLDS_DOCUMENT(&it))
        uasserted(ErrorCode::Location40234,
                  fmt::format("The field '{}' must be an accumulator object", field));
    bson_iter_t sub;
    bson_iter_recurse(&it, &sub);
    if (!bson_iter_next(&sub))
        uasserted(ErrorCode::Location40234,
                  fmt::format("The field '{}' must be an accumulator object", field));
    AccumulatorSpec spec;
    spec.field = field;
    spec.collator = opts.collator;
    spec.op = bson_iter_key(&sub);
    bson_iter_t argIt = sub;
    if (bson_iter_next(&sub))
        uasserted(ErrorCode::Location40238,
                  fmt::format("The field '{}' must specify one accumulator", field));
    if (!isKnown(spec.op))
        uasserted(ErrorCode::Location15952, fmt::format("unknown group operator '{}'", spec.op));
    const bson_value_t& arg = *bson_iter_value(&argIt);
    if (spec.op == "$count") {
        bson_iter_t c;
        if (!BSON_ITER_HOLDS_DOCUMENT(&argIt) || !bson_iter_recurse(&argIt, &c) ||
            bson_iter_next(&c))
            uasserted(ErrorCode::TypeMismatch, "$count takes no arguments, i.e. $count:{}");
        bson_value_t one;
        one.value_type = BSON_TYPE_INT32;
        one.value.v_int32 = 1;
        spec.op = "$sum";
        spec.arg = query::Expression::parse(one, opts);
        return spec;
    }
    if (arg.value_type == BSON_TYPE_ARRAY)
        uasserted(ErrorCode::Location40237,
                  fmt::format("The {} accumulator is a unary operator", spec.op));
    spec.arg = query::Expression::parse(arg, opts);
    return spec;
}

}  // namespace halo::aggregate
