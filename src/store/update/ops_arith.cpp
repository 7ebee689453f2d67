// $inc, $mul, $min, $max, $bit.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "bson/compare.h"
#include "bson/doc.h"
#include "common/status.h"
#include "store/query/collator.h"
#include "store/update/format.h"
#include "store/update/modifier.h"

namespace halo::update {
namespace {

// Decimal128 arithmetic is approximated through long double (libbson has no
// decimal arithmetic); results are exact for values with <= 18 significant digits.
long double decimalToLongDouble(const bson_value_t& v) {
    switch (v.value_type) {
        case BSON_TYPE_INT32:
            return v.value.v_int32;
        case BSON_TYPE_INT64:
            return static_cast<long double>(v.value.v_int64);
        case BSON_TYPE_DOUBLE:
            return v.value.v_double;
        case BSON_TYPE_DECIMAL128: {
            char buf[BSON_DECIMAL128_STRING];
            bson_decimal128_to_string(&v.value.v_decimal128, buf);
            std::string s(buf);
            if (s.find("NaN") != std::string::npos) return NAN;
            if (s == "Infinity") return INFINITY;
            if (s == "-Infinity") return -INFINITY;
            return std::strtold(buf, nullptr);
        }
        default:
            return 0;
    }
}

bson_value_t decimalFrom(long double x) {
    bson_value_t out{};
    out.value_type = BSON_TYPE_DECIMAL128;
    std::string s;
    if (std::isnan(x))
        s = "NaN";
    else if (std::isinf(x))
        s = x > 0 ? "Infinity" : "-Infinity";
    else {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.18Lg", x);
        s = buf;
    }
    bson_decimal128_from_string(s.c_str(), &out.value.v_decimal128);
    return out;
}

std::string debugNumber(const bson_value_t& v) {
    switch (v.value_type) {
        case BSON_TYPE_INT32:
            return fmt::format("(NumberInt){}", v.value.v_int32);
        case BSON_TYPE_INT64:
            return fmt::format("(NumberLong){}", v.value.v_int64);
        case BSON_TYPE_DOUBLE:
            return fmt::format("(NumberDouble){}", v.value.v_double);
        case BSON_TYPE_DECIMAL128: {
            char buf[BSON_DECIMAL128_STRING];
            bson_decimal128_to_string(&v.value.v_decimal128, buf);
            return fmt::format("(NumberDecimal){}", buf);
        }
        default:
            return "(EOO)";
    }
}

int64_t asLong(const bson_value_t& v) {
    return v.value_type == BSON_TYPE_INT32 ? v.value.v_int32 : v.value.v_int64;
}

/// SafeNum-style arithmetic: int32 overflows into int64; int64 overflow is
/// invalid (returns false); doubles and decimals absorb the other operand.
bool arith(bool multiply, const bson_value_t& a, const bson_value_t& b, bson_value_t* result) {
    bson_value_t& out = *result;
    out = bson_value_t{};
    if (a.value_type == BSON_TYPE_DECIMAL128 || b.value_type == BSON_TYPE_DECIMAL128) {
        long double x = decimalToLongDouble(a), y = decimalToLongDouble(b);
        out = decimalFrom(multiply ? x * y : x + y);
        return true;
    }
    if (a.value_type == BSON_TYPE_DOUBLE || b.value_type == BSON_TYPE_DOUBLE) {
        double x = bson::toDouble(a), y = bson::toDouble(b);
        out.value_type = BSON_TYPE_DOUBLE;
        out.value.v_double = multiply ? x * y : x + y;
        return true;
    }
    if (a.value_type == BSON_TYPE_INT32 && b.value_type == BSON_TYPE_INT32) {
        int32_t r;
        bool ovf = multiply ? __builtin_mul_overflow(a.value.v_int32, b.value.v_int32, &r)
                            : __builtin_add_overflow(a.value.v_int32, b.value.v_int32, &r);
        if (!ovf) {
            out.value_type = BSON_TYPE_INT32;
            out.value.v_int32 = r;
            return true;
        }
    }
    int64_t r;
    bool ovf = multiply ? __builtin_mul_overflow(asLong(a), asLong(b), &r)
                        : __builtin_add_overflow(asLong(a), asLong(b), &r);
    if (ovf) return false;
    out.value_type = BSON_TYPE_INT64;
    out.value.v_int64 = r;
    return true;
}

class ArithmeticModifier final : public Modifier {
  public:
    ArithmeticModifier(bool multiply, const bson_value_t& v) : multiply_(multiply) {
        bson_value_copy(&v, &arg_);
    }
    ~ArithmeticModifier() override { bson_value_destroy(&arg_); }

    bool applyExisting(Element& e, const std::string& path, ApplyContext& ctx) const override {
        if (e.kind() != Element::Kind::kScalar || !bson::isNumber(e.type())) {
            uasserted(
                ErrorCode::TypeMismatch,
                fmt::format("Cannot apply {} to a value of non-numeric type. {} has the field "
                            "'{}' of non-numeric type {}",
                            opName(), ctx.idBraced, e.key(), bson::typeName(e.type())));
        }
        bson_value_t r;
        if (!arith(multiply_, e.scalar(), arg_, &r)) {
            uasserted(ErrorCode::BadValue,
                      fmt::format("Failed to apply {} operations to current value ({}) for "
                                  "document {}",
                                  opName(), debugNumber(e.scalar()), ctx.idBraced));
        }
        auto next = Element::fromValue("", r);
        if (binaryEqual(e, *next)) return false;
        e.setScalar(r);
        ctx.logUpdated(path);
        return true;
    }
    std::unique_ptr<Element> valueForMissing(const std::string&, ApplyContext&) const override {
        if (!multiply_) return Element::fromValue("", arg_);
        bson_value_t zero{};
        zero.value_type = BSON_TYPE_INT32;
        zero.value.v_int32 = 0;
        bson_value_t r;
        arith(true, zero, arg_, &r);  // 0 * x never overflows
        return Element::fromValue("", r);
    }

  private:
    const char* opName() const { return multiply_ ? "$mul" : "$inc"; }
    bool multiply_;
    bson_value_t arg_{};
};

class CompareModifier final : public Modifier {
  public:
    CompareModifier(bool isMax, const bson_value_t& v, Collation coll)
        : isMax_(isMax), value_(Element::fromValue("", v)), coll_(std::move(coll)) {}
    bool applyExisting(Element& e, const std::string& path, ApplyContext& ctx) const override {
        int c = compareElements(*value_, e, coll_.get());
        if (c == 0 || (isMax_ && c < 0) || (!isMax_ && c > 0)) return false;
        e.setValueFrom(*value_);
        ctx.logUpdated(path);
        return true;
    }
    std::unique_ptr<Element> valueForMissing(const std::string&, ApplyContext&) const override {
        return value_->clone("");
    }

  private:
    bool isMax_;
    std::unique_ptr<Element> value_;
    Collation coll_;
};

class BitModifier final : public Modifier {
  public:
    enum class Op { kAnd, kOr, kXor };
    struct Step {
        Op op;
        bson_value_t operand;  // int32 or int64
    };
    explicit BitModifier(std::vector<Step> steps) : steps_(std::move(steps)) {}

    bool applyExisting(Element& e, const std::string& path, ApplyContext& ctx) const override {
        if (e.type() != BSON_TYPE_INT32 && e.type() != BSON_TYPE_INT64) {
            uasserted(ErrorCode::BadValue,
                      fmt::format("Cannot apply $bit to a value of non-integral type.{} has the "
                                  "field {} of non-integer type {}",
                                  ctx.idBraced, e.key(), bson::typeName(e.type())));
        }
        bson_value_t r = run(e.scalar());
        auto next = Element::fromValue("", r);
        if (binaryEqual(e, *next)) return false;
        e.setScalar(r);
        ctx.logUpdated(path);
        return true;
    }
    std::unique_ptr<Element> valueForMissing(const std::string&, ApplyContext&) const override {
        bson_value_t zero{};
        zero.value_type = BSON_TYPE_INT32;
        return Element::fromValue("", run(zero));
    }

  private:
    bson_value_t run(bson_value_t cur) const {
        for (auto& s : steps_) {
            bool wide =
                cur.value_type == BSON_TYPE_INT64 || s.operand.value_type == BSON_TYPE_INT64;
            int64_t a = asLong(cur), b = asLong(s.operand);
            int64_t r = s.op == Op::kAnd ? (a & b) : s.op == Op::kOr ? (a | b) : (a ^ b);
            if (wide) {
                cur.value_type = BSON_TYPE_INT64;
                cur.value.v_int64 = r;
            } else {
                cur.value_type = BSON_TYPE_INT32;
                cur.value.v_int32 = static_cast<int32_t>(r);
            }
        }
        return cur;
    }
    std::vector<Step> steps_;
};

}  // namespace

std::unique_ptr<Modifier> makeArithmeticModifier(ModifierType t, std::string_view field,
                                                 const bson_value_t& v) {
    bool multiply = t == ModifierType::kMul;
    if (!bson::isNumber(v.value_type)) {
        uasserted(ErrorCode::TypeMismatch,
                  fmt::format("Cannot {} with non-numeric argument: {{{}}}",
                              multiply ? "multiply" : "increment", formatElement(field, v)));
    }
    return std::make_unique<ArithmeticModifier>(multiply, v);
}

std::unique_ptr<Modifier> makeCompareModifier(ModifierType t, const bson_value_t& v,
                                              const Collation& coll) {
    return std::make_unique<CompareModifier>(t == ModifierType::kMax, v, coll);
}

std::unique_ptr<Modifier> makeBitModifier(std::string_view field, const bson_value_t& v) {
    if (v.value_type != BSON_TYPE_DOCUMENT) {
        uasserted(ErrorCode::BadValue,
                  fmt::format("The $bit modifier is not compatible with a {}. You must pass in an "
                              "embedded document: {{$bit: {{field: {{and/or/xor: #}}}}",
                              bson::typeName(v.value_type)));
    }
    std::vector<BitModifier::Step> steps;
    bson_iter_t it;
    bson_iter_init_from_data(&it, v.value.v_doc.data, v.value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        std::string_view name = bson_iter_key(&it);
        const bson_value_t& operand = *bson_iter_value(&it);
        BitModifier::Op op;
        if (name == "and")
            op = BitModifier::Op::kAnd;
        else if (name == "or")
            op = BitModifier::Op::kOr;
        else if (name == "xor")
            op = BitModifier::Op::kXor;
        else {
            uasserted(ErrorCode::BadValue,
                      fmt::format("The $bit modifier only supports 'and', 'or', and 'xor', not "
                                  "'{}' which is an unknown operator: {{{}}}",
                                  name, formatElement(name, operand)));
        }
        if (operand.value_type != BSON_TYPE_INT32 && operand.value_type != BSON_TYPE_INT64) {
            uasserted(
                ErrorCode::BadValue,
                fmt::format("The $bit modifier field must be an Integer(32/64 bit); a '{}' "
                            "is not supported here: {{{}}}",
                            bson::typeName(operand.value_type), formatElement(name, operand)));
        }
        steps.push_back({op, operand});
    }
    if (steps.empty()) {
        uasserted(ErrorCode::BadValue,
                  "You must pass in at least one bitwise operation. The format is: "
                  "{$bit: {field: {and/or/xor: #}}");
    }
    return std::make_unique<BitModifier>(std::move(steps));
}

}  // namespace halo::update
