// Scalar operators of the expression evaluator: arithmetic with mongod's type
// promotion, strings, type conversion ($convert), dates.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "bson/compare.h"
#include "store/query/expression_internal.h"

namespace halo::query::expr_detail {
namespace {

[[noreturn]] void fail(int code, std::string msg) {
    uasserted(static_cast<ErrorCode>(code), std::move(msg));
}

// ---- numbers ----

bool isDecimal(const Value& v) {
    return v.type() == BSON_TYPE_DECIMAL128;
}
bool isDouble(const Value& v) {
    return v.type() == BSON_TYPE_DOUBLE;
}
bool isIntegral(const Value& v) {
    return v.type() == BSON_TYPE_INT32 || v.type() == BSON_TYPE_INT64;
}
int64_t asLong(const Value& v) {
    return v.type() == BSON_TYPE_INT32 ? v.get().value.v_int32 : v.get().value.v_int64;
}

long double toLD(const bson_value_t& v) {
    if (v.value_type == BSON_TYPE_DECIMAL128) {
        char buf[BSON_DECIMAL128_STRING];
        bson_decimal128_to_string(&v.value.v_decimal128, buf);
        if (std::strstr(buf, "NaN")) return NAN;
        if (std::strstr(buf, "-Inf")) return -INFINITY;
        if (std::strstr(buf, "Inf")) return INFINITY;
        return std::strtold(buf, nullptr);
    }
    if (v.value_type == BSON_TYPE_INT64) return static_cast<long double>(v.value.v_int64);
    if (v.value_type == BSON_TYPE_INT32) return v.value.v_int32;
    if (v.value_type == BSON_TYPE_DOUBLE) return v.value.v_double;
    return 0;
}
long double toLD(const Value& v) {
    return toLD(v.get());
}

Value decimalFrom(long double x) {
    char buf[64];
    if (std::isnan(x)) {
        std::snprintf(buf, sizeof buf, "NaN");
    } else if (std::isinf(x)) {
        std::snprintf(buf, sizeof buf, x > 0 ? "Infinity" : "-Infinity");
    } else {
        std::snprintf(buf, sizeof buf, "%.18Lg", x);
    }
    bson_decimal128_t d;
    bson_decimal128_from_string(buf, &d);
    return Value::fromDecimal(d);
}

Value integerResult(int64_t r, bool bothInt32) {
    if (bothInt32 && r >= INT32_MIN && r <= INT32_MAX)
        return Value::fromInt32(static_cast<int32_t>(r));
    return Value::fromInt64(r);
}

enum class Arith { kAdd, kSub, kMul };

Value arith(Arith op, const Value& a, const Value& b) {
    if (isDecimal(a) || isDecimal(b)) {
        long double x = toLD(a), y = toLD(b);
        return decimalFrom(op == Arith::kAdd ? x + y : op == Arith::kSub ? x - y : x * y);
    }
    if (isDouble(a) || isDouble(b)) {
        double x = bson::toDouble(a.get()), y = bson::toDouble(b.get());
        return Value::fromDouble(op == Arith::kAdd ? x + y : op == Arith::kSub ? x - y : x * y);
    }
    int64_t x = asLong(a), y = asLong(b), r;
    bool overflow = op == Arith::kAdd   ? __builtin_add_overflow(x, y, &r)
                    : op == Arith::kSub ? __builtin_sub_overflow(x, y, &r)
                                        : __builtin_mul_overflow(x, y, &r);
    if (overflow) {
        double dx = static_cast<double>(x), dy = static_cast<double>(y);
        return Value::fromDouble(op == Arith::kAdd   ? dx + dy
                                 : op == Arith::kSub ? dx - dy
                                                     : dx * dy);
    }
    return integerResult(r, a.type() == BSON_TYPE_INT32 && b.type() == BSON_TYPE_INT32);
}

int64_t roundToLong(const Value& v) {
    if (isIntegral(v)) return asLong(v);
    long double d = toLD(v);
    if (std::isnan(d) || d >= 0x1p63 || d < -0x1p63) fail(15, "date overflow in $add");
    return static_cast<int64_t>(std::llround(d));
}

Value opAdd(const std::vector<Value>& args, std::string_view) {
    Value total = Value::fromInt32(0);
    bool haveDate = false;
    int64_t date = 0;
    for (const auto& a : args) {
        if (a.isNullish()) return Value::null();
        if (a.type() == BSON_TYPE_DATE_TIME) {
            if (haveDate) fail(16612, "only one date allowed in an $add expression");
            haveDate = true;
            date = a.get().value.v_datetime;
            continue;
        }
        if (!a.isNumber())
            fail(16554,
                 fmt::format("$add only supports numeric or date types, not {}", typeNameOf(a)));
        total = arith(Arith::kAdd, total, a);
    }
    if (haveDate) return Value::fromDate(date + roundToLong(total));
    return total;
}

Value opSubtract(const std::vector<Value>& args, std::string_view) {
    const Value &a = args[0], &b = args[1];
    if (a.isNullish() || b.isNullish()) return Value::null();
    if (a.isNumber() && b.isNumber()) return arith(Arith::kSub, a, b);
    if (a.type() == BSON_TYPE_DATE_TIME) {
        if (b.type() == BSON_TYPE_DATE_TIME)
            return Value::fromInt64(a.get().value.v_datetime - b.get().value.v_datetime);
        if (b.isNumber()) return Value::fromDate(a.get().value.v_datetime - roundToLong(b));
    }
    fail(16556, fmt::format("cant $subtract a {} from a {}", typeNameOf(b), typeNameOf(a)));
}

Value opMultiply(const std::vector<Value>& args, std::string_view) {
    Value total = Value::fromInt32(1);
    for (const auto& a : args) {
        if (a.isNullish()) return Value::null();
        if (!a.isNumber())
            fail(16555,
                 fmt::format("$multiply only supports numeric types, not {}", typeNameOf(a)));
        total = arith(Arith::kMul, total, a);
    }
    return total;
}

Value opDivide(const std::vector<Value>& args, std::string_view) {
    const Value &a = args[0], &b = args[1];
    if (a.isNullish() || b.isNullish()) return Value::null();
    if (!a.isNumber() || !b.isNumber())
        fail(16609, fmt::format("$divide only supports numeric types, not {} and {}", typeNameOf(a),
                                typeNameOf(b)));
    if (toLD(b) == 0) fail(16608, "can't $divide by zero");
    if (isDecimal(a) || isDecimal(b)) return decimalFrom(toLD(a) / toLD(b));
    return Value::fromDouble(bson::toDouble(a.get()) / bson::toDouble(b.get()));
}

Value opMod(const std::vector<Value>& args, std::string_view) {
    const Value &a = args[0], &b = args[1];
    if (a.isNullish() || b.isNullish()) return Value::null();
    if (!a.isNumber() || !b.isNumber())
        fail(16611, fmt::format("$mod only supports numeric types, not {} and {}", typeNameOf(a),
                                typeNameOf(b)));
    if (toLD(b) == 0) fail(16610, "can't $mod by zero");
    if (isDecimal(a) || isDecimal(b)) return decimalFrom(std::fmod(toLD(a), toLD(b)));
    if (isDouble(a) || isDouble(b))
        return Value::fromDouble(std::fmod(bson::toDouble(a.get()), bson::toDouble(b.get())));
    int64_t x = asLong(a), y = asLong(b);
    int64_t r = y == -1 ? 0 : x % y;
    return integerResult(r, a.type() == BSON_TYPE_INT32 && b.type() == BSON_TYPE_INT32);
}

/// Shared shape of $abs/$ceil/$floor/$sqrt/$exp/$ln/$log10.
template <class DoubleFn>
Value unaryNumeric(const Value& a, std::string_view name, DoubleFn fn, bool integralIdentity) {
    if (a.isNullish()) return Value::null();
    if (!a.isNumber())
        fail(28765, fmt::format("{} only supports numeric types, not {}", name, typeNameOf(a)));
    if (integralIdentity && isIntegral(a)) return a;
    if (isDecimal(a)) return decimalFrom(fn(toLD(a)));
    return Value::fromDouble(
        static_cast<double>(fn(static_cast<long double>(bson::toDouble(a.get())))));
}

Value opAbs(const std::vector<Value>& args, std::string_view name) {
    const Value& a = args[0];
    if (a.type() == BSON_TYPE_INT32) {
        int64_t v = a.get().value.v_int32;
        return integerResult(v < 0 ? -v : v, true);
    }
    if (a.type() == BSON_TYPE_INT64) {
        int64_t v = a.get().value.v_int64;
        if (v == INT64_MIN) fail(28680, "can't take $abs of long long min");
        return Value::fromInt64(v < 0 ? -v : v);
    }
    return unaryNumeric(
        a, name, [](long double x) { return std::fabs(x); }, false);
}
Value opCeil(const std::vector<Value>& args, std::string_view name) {
    return unaryNumeric(
        args[0], name, [](long double x) { return std::ceil(x); }, true);
}
Value opFloor(const std::vector<Value>& args, std::string_view name) {
    return unaryNumeric(
        args[0], name, [](long double x) { return std::floor(x); }, true);
}
Value opSqrt(const std::vector<Value>& args, std::string_view name) {
    if (args[0].isNumber() && toLD(args[0]) < 0)
        fail(28714, "$sqrt's argument must be greater than or equal to 0");
    if (isIntegral(args[0])) return Value::fromDouble(std::sqrt(bson::toDouble(args[0].get())));
    return unaryNumeric(
        args[0], name, [](long double x) { return std::sqrt(x); }, false);
}
Value opExp(const std::vector<Value>& args, std::string_view name) {
    if (isIntegral(args[0])) return Value::fromDouble(std::exp(bson::toDouble(args[0].get())));
    return unaryNumeric(
        args[0], name, [](long double x) { return std::exp(x); }, false);
}
Value opLn(const std::vector<Value>& args, std::string_view name) {
    if (args[0].isNumber() && !(toLD(args[0]) > 0))
        fail(28766, fmt::format("$ln's argument must be a positive number, but is {}",
                                args[0].toString()));
    if (isIntegral(args[0])) return Value::fromDouble(std::log(bson::toDouble(args[0].get())));
    return unaryNumeric(
        args[0], name, [](long double x) { return std::log(x); }, false);
}
Value opLog10(const std::vector<Value>& args, std::string_view name) {
    if (args[0].isNumber() && !(toLD(args[0]) > 0))
        fail(28761, fmt::format("$log10's argument must be a positive number, but is {}",
                                args[0].toString()));
    if (isIntegral(args[0])) return Value::fromDouble(std::log10(bson::toDouble(args[0].get())));
    return unaryNumeric(
        args[0], name, [](long double x) { return std::log10(x); }, false);
}

Value opPow(const std::vector<Value>& args, std::string_view) {
    const Value &b = args[0], &e = args[1];
    if (b.isNullish() || e.isNullish()) return Value::null();
    if (!b.isNumber())
        fail(28762, fmt::format("$pow's base must be numeric, not {}", typeNameOf(b)));
    if (!e.isNumber())
        fail(28763, fmt::format("$pow's exponent must be numeric, not {}", typeNameOf(e)));
    if (toLD(b) == 0 && toLD(e) < 0)
        fail(28764, "$pow cannot take a base of 0 and a negative exponent");
    if (isDecimal(b) || isDecimal(e)) return decimalFrom(std::pow(toLD(b), toLD(e)));
    if (isDouble(b) || isDouble(e))
        return Value::fromDouble(std::pow(bson::toDouble(b.get()), bson::toDouble(e.get())));
    int64_t base = asLong(b), exp = asLong(e);
    if (exp < 0) {
        if (base == 1)
            return integerResult(1, b.type() == BSON_TYPE_INT32 && e.type() == BSON_TYPE_INT32);
        if (base == -1)
            return integerResult(exp % 2 == 0 ? 1 : -1,
                                 b.type() == BSON_TYPE_INT32 && e.type() == BSON_TYPE_INT32);
        return Value::fromDouble(std::pow(static_cast<double>(base), static_cast<double>(exp)));
    }
    int64_t r = 1;
    for (int64_t i = 0; i < exp; ++i) {
        if (__builtin_mul_overflow(r, base, &r))
            return Value::fromDouble(std::pow(static_cast<double>(base), static_cast<double>(exp)));
        if (r == 0 || r == 1) break;
    }
    return integerResult(r, b.type() == BSON_TYPE_INT32 && e.type() == BSON_TYPE_INT32);
}

/// $round (half to even) and $trunc with an optional place in [-20, 100].
Value roundOrTrunc(const std::vector<Value>& args, std::string_view name, bool round) {
    const Value& a = args[0];
    if (a.isNullish()) return Value::null();
    if (!a.isNumber())
        fail(28765, fmt::format("{} only supports numeric types, not {}", name, typeNameOf(a)));
    int64_t place = 0;
    if (args.size() > 1) {
        if (args[1].isNullish()) return Value::null();
        if (!bson::toInt64Exact(args[1].get(), &place) || place < -20 || place > 100)
            fail(51083,
                 fmt::format("cannot apply {} with precision value {} value must be in [-20, 100]",
                             name, args[1].toString()));
    }
    auto apply = [&](long double x) -> long double {
        long double scale = std::pow(10.0L, static_cast<long double>(place));
        long double y = x * scale;
        y = round ? std::nearbyint(y) : std::trunc(y);
        return y / scale;
    };
    if (isIntegral(a)) {
        if (place >= 0) return a;
        long double r = apply(static_cast<long double>(asLong(a)));
        return integerResult(static_cast<int64_t>(std::llround(r)), a.type() == BSON_TYPE_INT32);
    }
    if (isDecimal(a)) return decimalFrom(apply(toLD(a)));
    double d = a.get().value.v_double;
    if (!std::isfinite(d)) return a;
    return Value::fromDouble(static_cast<double>(apply(d)));
}
Value opRound(const std::vector<Value>& args, std::string_view name) {
    return roundOrTrunc(args, name, true);
}
Value opTrunc(const std::vector<Value>& args, std::string_view name) {
    return roundOrTrunc(args, name, false);
}

// ---- comparisons ----

int cmp(const Value& a, const Value& b, const Coll* coll) {
    return compare(a, b, coll);
}
Value opCmp(const std::vector<Value>& args, std::string_view, const Coll* coll) {
    int c = cmp(args[0], args[1], coll);
    return Value::fromInt32(c < 0 ? -1 : (c > 0 ? 1 : 0));
}
Value opEq(const std::vector<Value>& a, std::string_view, const Coll* coll) {
    return Value::fromBool(cmp(a[0], a[1], coll) == 0);
}
Value opNe(const std::vector<Value>& a, std::string_view, const Coll* coll) {
    return Value::fromBool(cmp(a[0], a[1], coll) != 0);
}
Value opGt(const std::vector<Value>& a, std::string_view, const Coll* coll) {
    return Value::fromBool(cmp(a[0], a[1], coll) > 0);
}
Value opGte(const std::vector<Value>& a, std::string_view, const Coll* coll) {
    return Value::fromBool(cmp(a[0], a[1], coll) >= 0);
}
Value opLt(const std::vector<Value>& a, std::string_view, const Coll* coll) {
    return Value::fromBool(cmp(a[0], a[1], coll) < 0);
}
Value opLte(const std::vector<Value>& a, std::string_view, const Coll* coll) {
    return Value::fromBool(cmp(a[0], a[1], coll) <= 0);
}
Value opNot(const std::vector<Value>& a, std::string_view) {
    return Value::fromBool(!a[0].truthy());
}

// ---- strings ----

std::string coerceToString(const Value& v, std::string_view name) {
    switch (v.type()) {
        case BSON_TYPE_UTF8:
        case BSON_TYPE_SYMBOL:
            return std::string(v.str());
        case BSON_TYPE_EOD:
        case BSON_TYPE_NULL:
        case BSON_TYPE_UNDEFINED:
            return "";
        case BSON_TYPE_INT32:
        case BSON_TYPE_INT64:
        case BSON_TYPE_DOUBLE:
        case BSON_TYPE_DECIMAL128:
            return numberToString(v.get());
        case BSON_TYPE_DATE_TIME:
            return formatDate(v.get().value.v_datetime, "%Y-%m-%dT%H:%M:%S.%LZ", 0);
        case BSON_TYPE_TIMESTAMP:
            return fmt::format("Timestamp({}, {})", v.get().value.v_timestamp.timestamp,
                               v.get().value.v_timestamp.increment);
        default:
            fail(16007, fmt::format("can't convert from BSON type {} to String", typeNameOf(v)));
    }
}

Value opConcat(const std::vector<Value>& args, std::string_view) {
    std::string out;
    for (const auto& a : args) {
        if (a.isNullish()) return Value::null();
        if (a.type() != BSON_TYPE_UTF8)
            fail(16702, fmt::format("$concat only supports strings, not {}", typeNameOf(a)));
        out += a.str();
    }
    return Value::fromString(out);
}

Value opToLower(const std::vector<Value>& args, std::string_view name) {
    std::string s = coerceToString(args[0], name);
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return Value::fromString(s);
}
Value opToUpper(const std::vector<Value>& args, std::string_view name) {
    std::string s = coerceToString(args[0], name);
    for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return Value::fromString(s);
}

bool isContinuation(unsigned char c) {
    return (c & 0xC0) == 0x80;
}

int64_t substrIndex(const Value& v, int code, std::string_view name, std::string_view what) {
    if (!v.isNumber())
        fail(code, fmt::format("{}: {} must be a numeric type (is BSON type {})", name, what,
                               typeNameOf(v)));
    double d = bson::toDouble(v.get());
    if (std::isnan(d)) return 0;
    if (d > 9e18) return INT64_MAX;
    if (d < -9e18) return INT64_MIN;
    return isIntegral(v) ? asLong(v) : static_cast<int64_t>(d);
}

Value opSubstrBytes(const std::vector<Value>& args, std::string_view name) {
    std::string s = coerceToString(args[0], name);
    int64_t start = substrIndex(args[1], 16034, name, "starting index");
    int64_t len = substrIndex(args[2], 16035, name, "length");
    if (start < 0)
        fail(50752, fmt::format("{}: starting index must be non-negative (got: {})", name, start));
    if (static_cast<uint64_t>(start) >= s.size()) return Value::fromString("");
    if (isContinuation(static_cast<unsigned char>(s[start])))
        fail(28656,
             fmt::format("{}:  Invalid range, starting index is a UTF-8 continuation byte.", name));
    uint64_t avail = s.size() - start;
    uint64_t n = len < 0 ? avail : std::min<uint64_t>(avail, static_cast<uint64_t>(len));
    if (start + n < s.size() && isContinuation(static_cast<unsigned char>(s[start + n])))
        fail(28657,
             fmt::format("{}:  Invalid range, ending index is in the middle of a UTF-8 character.",
                         name));
    return Value::fromString(std::string_view(s).substr(start, n));
}

Value opSubstrCP(const std::vector<Value>& args, std::string_view name) {
    std::string s = coerceToString(args[0], name);
    const Value &sv = args[1], &lv = args[2];
    if (!sv.isNumber())
        fail(34450,
             fmt::format("$substrCP: starting index must be a numeric type (is BSON type {})",
                         typeNameOf(sv)));
    if (!lv.isNumber())
        fail(34452, fmt::format("$substrCP: length must be a numeric type (is BSON type {})",
                                typeNameOf(lv)));
    int64_t start, len;
    if (!bson::toInt64Exact(sv.get(), &start) || start > INT32_MAX || start < INT32_MIN)
        fail(34451, "$substrCP: starting index cannot be represented as a 32-bit integral value");
    if (!bson::toInt64Exact(lv.get(), &len) || len > INT32_MAX || len < INT32_MIN)
        fail(34453, "$substrCP: length cannot be represented as a 32-bit integral value");
    if (start < 0) fail(34454, "$substrCP: the starting index must be nonnegative integer.");
    if (len < 0) fail(34455, "$substrCP: length must be a nonnegative integer.");
    size_t i = 0;
    int64_t cp = 0;
    while (i < s.size() && cp < start) {
        ++i;
        while (i < s.size() && isContinuation(static_cast<unsigned char>(s[i]))) ++i;
        ++cp;
    }
    size_t begin = i;
    cp = 0;
    while (i < s.size() && cp < len) {
        ++i;
        while (i < s.size() && isContinuation(static_cast<unsigned char>(s[i]))) ++i;
        ++cp;
    }
    return Value::fromString(std::string_view(s).substr(begin, i - begin));
}

Value opStrLenBytes(const std::vector<Value>& args, std::string_view) {
    if (args[0].type() != BSON_TYPE_UTF8)
        fail(34473, fmt::format("$strLenBytes requires a string argument, found: {}",
                                typeNameOf(args[0])));
    return Value::fromInt32(static_cast<int32_t>(args[0].str().size()));
}

Value opStrLenCP(const std::vector<Value>& args, std::string_view) {
    if (args[0].type() != BSON_TYPE_UTF8)
        fail(34471,
             fmt::format("$strLenCP requires a string argument, found: {}", typeNameOf(args[0])));
    int32_t n = 0;
    for (unsigned char c : args[0].str()) n += !isContinuation(c);
    return Value::fromInt32(n);
}

Value opStrcasecmp(const std::vector<Value>& args, std::string_view name) {
    std::string a = coerceToString(args[0], name), b = coerceToString(args[1], name);
    for (auto& c : a) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    for (auto& c : b) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    int c = a.compare(b);
    return Value::fromInt32(c < 0 ? -1 : (c > 0 ? 1 : 0));
}

Value opSplit(const std::vector<Value>& args, std::string_view) {
    const Value &s = args[0], &sep = args[1];
    if (s.isNullish() || sep.isNullish()) return Value::null();
    if (s.type() != BSON_TYPE_UTF8)
        fail(40085,
             fmt::format("$split requires an expression that evaluates to a string as a first "
                         "argument, found: {}",
                         typeNameOf(s)));
    if (sep.type() != BSON_TYPE_UTF8)
        fail(40086,
             fmt::format("$split requires an expression that evaluates to a string as a second "
                         "argument, found: {}",
                         typeNameOf(sep)));
    std::string_view str = s.str(), d = sep.str();
    if (d.empty()) fail(40087, "$split requires a non-empty separator");
    std::vector<Value> parts;
    size_t pos = 0;
    while (true) {
        size_t f = str.find(d, pos);
        if (f == std::string_view::npos) {
            parts.push_back(Value::fromString(str.substr(pos)));
            break;
        }
        parts.push_back(Value::fromString(str.substr(pos, f - pos)));
        pos = f + d.size();
    }
    return Value::fromArray(parts);
}

int64_t indexArg(const Value& v, std::string_view name, const char* which) {
    int64_t n;
    if (!v.isNumber() || !bson::toInt64Exact(v.get(), &n))
        fail(40096,
             fmt::format("{} requires an integral {}, found a value of type: {}, with value: {}",
                         name, which, typeNameOf(v), v.toString()));
    if (n < 0) fail(40097, fmt::format("{} requires a nonnegative {}, found: {}", name, which, n));
    return n;
}

Value opIndexOfBytes(const std::vector<Value>& args, std::string_view name) {
    const Value &s = args[0], &sub = args[1];
    if (s.isNullish()) return Value::null();
    if (s.type() != BSON_TYPE_UTF8)
        fail(40091, fmt::format("{} requires a string as the first argument, found: {}", name,
                                typeNameOf(s)));
    if (sub.type() != BSON_TYPE_UTF8)
        fail(40092, fmt::format("{} requires a string as the second argument, found: {}", name,
                                typeNameOf(sub)));
    std::string_view str = s.str();
    int64_t start = args.size() > 2 ? indexArg(args[2], name, "starting index") : 0;
    int64_t end = args.size() > 3 ? indexArg(args[3], name, "ending index")
                                  : static_cast<int64_t>(str.size());
    end = std::min<int64_t>(end, static_cast<int64_t>(str.size()));
    if (start > end) return Value::fromInt32(-1);
    auto f = str.substr(0, end).find(sub.str(), start);
    return Value::fromInt32(f == std::string_view::npos ? -1 : static_cast<int32_t>(f));
}

// ---- types ----

Value opType(const std::vector<Value>& args, std::string_view) {
    return Value::fromString(typeNameOf(args[0]));
}
Value opIsNumber(const std::vector<Value>& args, std::string_view) {
    return Value::fromBool(args[0].isNumber());
}
Value opIsArray(const std::vector<Value>& args, std::string_view) {
    return Value::fromBool(args[0].isArray());
}

Value convertShorthand(const std::vector<Value>& args, bson_type_t to) {
    if (args[0].isNullish()) return Value::null();
    return convertValue(args[0], to);
}
Value opToString(const std::vector<Value>& a, std::string_view) {
    return convertShorthand(a, BSON_TYPE_UTF8);
}
Value opToInt(const std::vector<Value>& a, std::string_view) {
    return convertShorthand(a, BSON_TYPE_INT32);
}
Value opToLong(const std::vector<Value>& a, std::string_view) {
    return convertShorthand(a, BSON_TYPE_INT64);
}
Value opToDouble(const std::vector<Value>& a, std::string_view) {
    return convertShorthand(a, BSON_TYPE_DOUBLE);
}
Value opToDecimal(const std::vector<Value>& a, std::string_view) {
    return convertShorthand(a, BSON_TYPE_DECIMAL128);
}
Value opToBool(const std::vector<Value>& a, std::string_view) {
    return convertShorthand(a, BSON_TYPE_BOOL);
}
Value opToObjectId(const std::vector<Value>& a, std::string_view) {
    return convertShorthand(a, BSON_TYPE_OID);
}
Value opToDate(const std::vector<Value>& a, std::string_view) {
    return convertShorthand(a, BSON_TYPE_DATE_TIME);
}

// ---- dates ----

struct Civil {
    int64_t year;
    unsigned month, day;
};

// Days since 1970-01-01 <-> proleptic Gregorian date (Howard Hinnant's algorithms).
int64_t daysFromCivil(int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = static_cast<unsigned>(y - era * 400);
    const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

Civil civilFromDays(int64_t z) {
    z += 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const unsigned doe = static_cast<unsigned>(z - era * 146097);
    const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const int64_t y = static_cast<int64_t>(yoe) + era * 400;
    const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const unsigned mp = (5 * doy + 2) / 153;
    const unsigned d = doy - (153 * mp + 2) / 5 + 1;
    const unsigned m = mp < 10 ? mp + 3 : mp - 9;
    return {y + (m <= 2), m, d};
}

struct DateParts {
    int64_t year;
    unsigned month, day, hour, minute, second, millis;
    unsigned dayOfYear;  // 1-based
    unsigned dayOfWeek;  // 1 = Sunday
    int64_t days;        // since epoch
};

int64_t floorDiv(int64_t a, int64_t b) {
    return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

DateParts split(int64_t millis) {
    DateParts p;
    p.days = floorDiv(millis, 86400000);
    int64_t rem = millis - p.days * 86400000;
    Civil c = civilFromDays(p.days);
    p.year = c.year;
    p.month = c.month;
    p.day = c.day;
    p.hour = static_cast<unsigned>(rem / 3600000);
    p.minute = static_cast<unsigned>(rem / 60000 % 60);
    p.second = static_cast<unsigned>(rem / 1000 % 60);
    p.millis = static_cast<unsigned>(rem % 1000);
    p.dayOfYear = static_cast<unsigned>(p.days - daysFromCivil(c.year, 1, 1) + 1);
    int64_t dow = (p.days + 4) % 7;  // 1970-01-01 was a Thursday
    if (dow < 0) dow += 7;
    p.dayOfWeek = static_cast<unsigned>(dow) + 1;
    return p;
}

bool isLeap(int64_t y) {
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

void isoWeek(const DateParts& p, int64_t* isoYear, unsigned* week, unsigned* isoDow) {
    unsigned u = p.dayOfWeek == 1 ? 7 : p.dayOfWeek - 1;  // 1 = Monday
    *isoDow = u;
    auto weeksIn = [](int64_t y) {
        auto pp = [](int64_t yy) { return ((yy + yy / 4 - yy / 100 + yy / 400) % 7 + 7) % 7; };
        return (pp(y) == 4 || pp(y - 1) == 3) ? 53u : 52u;
    };
    int64_t w = (static_cast<int64_t>(p.dayOfYear) - u + 10) / 7;
    *isoYear = p.year;
    if (w < 1) {
        *isoYear = p.year - 1;
        w = weeksIn(*isoYear);
    } else if (w > weeksIn(p.year)) {
        *isoYear = p.year + 1;
        w = 1;
    }
    *week = static_cast<unsigned>(w);
}

/// Date operators accept a date-like value or {date: <d>, timezone: <tz>}.
bool dateArg(const Value& arg, std::string_view name, DateParts* out) {
    Value date = arg;
    int64_t offset = 0;
    if (arg.isDocument()) {
        bson_t doc;
        arg.view(&doc);
        bson_iter_t it;
        bson_iter_init(&it, &doc);
        Value d, tz;
        bool haveDate = false;
        while (bson_iter_next(&it)) {
            std::string_view k = bson_iter_key(&it);
            if (k == "date") {
                d = Value::fromIter(it);
                haveDate = true;
            } else if (k == "timezone") {
                tz = Value::fromIter(it);
            } else {
                fail(40535, fmt::format("unrecognized option to {}: \"{}\"", name, k));
            }
        }
        if (!haveDate) fail(40539, fmt::format("missing 'date' argument to {}", name));
        date = d;
        if (!tz.isMissing()) {
            if (tz.isNullish()) return false;
            offset = parseTimezoneOffsetMillis(tz);
        }
    }
    if (date.isNullish()) return false;
    *out = split(toDateMillis(date) + offset);
    return true;
}

template <unsigned DateParts::*Field>
Value datePart(const std::vector<Value>& args, std::string_view name) {
    DateParts p;
    if (!dateArg(args[0], name, &p)) return Value::null();
    return Value::fromInt32(static_cast<int32_t>(p.*Field));
}
Value opYear(const std::vector<Value>& args, std::string_view name) {
    DateParts p;
    if (!dateArg(args[0], name, &p)) return Value::null();
    return Value::fromInt32(static_cast<int32_t>(p.year));
}
Value opWeek(const std::vector<Value>& args, std::string_view name) {
    DateParts p;
    if (!dateArg(args[0], name, &p)) return Value::null();
    unsigned dow0 = p.dayOfWeek - 1;
    return Value::fromInt32(static_cast<int32_t>((p.dayOfYear - 1 + 7 - dow0) / 7));
}

// ---- parsing of strings for $convert ----

bool parseDateString(std::string_view s, int64_t* out) {
    auto num = [&](size_t& i, int digits, int* v) {
        if (i + digits > s.size()) return false;
        int r = 0;
        for (int k = 0; k < digits; ++k) {
            char c = s[i + k];
            if (c < '0' || c > '9') return false;
            r = r * 10 + (c - '0');
        }
        i += digits;
        *v = r;
        return true;
    };
    size_t i = 0;
    int y, mo, d, h = 0, mi = 0, sec = 0, ms = 0;
    if (!num(i, 4, &y) || i >= s.size() || s[i++] != '-' || !num(i, 2, &mo) || i >= s.size() ||
        s[i++] != '-' || !num(i, 2, &d))
        return false;
    if (mo < 1 || mo > 12 || d < 1 || d > 31) return false;
    int64_t tz = 0;
    if (i < s.size() && (s[i] == 'T' || s[i] == ' ')) {
        ++i;
        if (!num(i, 2, &h) || i >= s.size() || s[i++] != ':' || !num(i, 2, &mi)) return false;
        if (i < s.size() && s[i] == ':') {
            ++i;
            if (!num(i, 2, &sec)) return false;
            if (i < s.size() && s[i] == '.') {
                ++i;
                int digits = 0;
                ms = 0;
                while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
                    if (digits < 3) ms = ms * 10 + (s[i] - '0');
                    ++digits;
                    ++i;
                }
                if (digits == 0) return false;
                for (; digits < 3; ++digits) ms *= 10;
            }
        }
        if (h > 23 || mi > 59 || sec > 60) return false;
    }
    if (i < s.size()) {
        if (s[i] == 'Z') {
            ++i;
        } else if (s[i] == '+' || s[i] == '-') {
            int sign = s[i] == '-' ? -1 : 1;
            ++i;
            int th, tm = 0;
            if (!num(i, 2, &th)) return false;
            if (i < s.size() && s[i] == ':') ++i;
            if (i < s.size() && !num(i, 2, &tm)) return false;
            tz = sign * (th * 3600000LL + tm * 60000LL);
        }
    }
    if (i != s.size()) return false;
    *out = daysFromCivil(y, mo, d) * 86400000LL + h * 3600000LL + mi * 60000LL + sec * 1000LL + ms -
           tz;
    return true;
}

[[noreturn]] void conversionFailure(const std::string& msg) {
    fail(241, msg);
}

std::string unsupported(const Value& in, bson_type_t to) {
    return fmt::format("Unsupported conversion from {} to {} in $convert with no onError value",
                       typeNameOf(in), bson::typeName(to));
}

int64_t parseIntegral(std::string_view s, bson_type_t to) {
    int64_t v;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec == std::errc::invalid_argument || p != s.data() + s.size())
        conversionFailure(
            fmt::format("Failed to parse number '{}' in $convert with no onError value: "
                        "Did not consume whole string.",
                        s));
    if (ec == std::errc::result_out_of_range ||
        (to == BSON_TYPE_INT32 && (v > INT32_MAX || v < INT32_MIN)))
        conversionFailure(
            fmt::format("Failed to parse number '{}' in $convert with no onError value: "
                        "Overflow",
                        s));
    return v;
}

double parseDouble(std::string_view s) {
    std::string str(s);
    char* end = nullptr;
    double d = std::strtod(str.c_str(), &end);
    if (str.empty() || end != str.c_str() + str.size() ||
        std::isspace(static_cast<unsigned char>(str[0])))
        conversionFailure(
            fmt::format("Failed to parse number '{}' in $convert with no onError value: "
                        "Did not consume whole string.",
                        s));
    return d;
}

Value toIntegral(const Value& in, bson_type_t to) {
    const bool toInt = to == BSON_TYPE_INT32;
    auto fits = [&](long double d) {
        return toInt ? (d >= INT32_MIN && d <= INT32_MAX) : (d >= -0x1p63 && d < 0x1p63);
    };
    auto make = [&](int64_t v) {
        return toInt ? Value::fromInt32(static_cast<int32_t>(v)) : Value::fromInt64(v);
    };
    switch (in.type()) {
        case BSON_TYPE_BOOL:
            return make(in.get().value.v_bool ? 1 : 0);
        case BSON_TYPE_INT32:
            return make(in.get().value.v_int32);
        case BSON_TYPE_INT64: {
            int64_t v = in.get().value.v_int64;
            if (toInt && (v > INT32_MAX || v < INT32_MIN))
                conversionFailure(fmt::format(
                    "Conversion would overflow target type in $convert with no onError value: {}",
                    v));
            return make(v);
        }
        case BSON_TYPE_DOUBLE:
        case BSON_TYPE_DECIMAL128: {
            long double d = toLD(in);
            if (std::isnan(d) || std::isinf(d))
                conversionFailure(
                    fmt::format("Attempt to convert NaN or infinity value to integer type in "
                                "$convert with no onError "
                                "value: {}",
                                in.toString()));
            d = std::trunc(d);
            if (!fits(d))
                conversionFailure(fmt::format(
                    "Conversion would overflow target type in $convert with no onError value: {}",
                    in.toString()));
            return make(static_cast<int64_t>(d));
        }
        case BSON_TYPE_UTF8:
            return make(parseIntegral(in.str(), to));
        case BSON_TYPE_DATE_TIME:
            if (!toInt) return make(in.get().value.v_datetime);
            [[fallthrough]];
        default:
            conversionFailure(unsupported(in, to));
    }
}

}  // namespace

std::string_view typeNameOf(const Value& v) {
    return bson::typeName(v.type());
}

std::string numberToString(const bson_value_t& v) {
    switch (v.value_type) {
        case BSON_TYPE_INT32:
            return std::to_string(v.value.v_int32);
        case BSON_TYPE_INT64:
            return std::to_string(v.value.v_int64);
        case BSON_TYPE_DOUBLE: {
            double d = v.value.v_double;
            if (std::isnan(d)) return "NaN";
            if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
            char buf[64];
            auto [p, ec] = std::to_chars(buf, buf + sizeof buf, d);
            return std::string(buf, p);
        }
        case BSON_TYPE_DECIMAL128: {
            char buf[BSON_DECIMAL128_STRING];
            bson_decimal128_to_string(&v.value.v_decimal128, buf);
            return buf;
        }
        default:
            return "";
    }
}

Value addNumbers(const Value& a, const Value& b) {
    return arith(Arith::kAdd, a, b);
}

Value divideNumbers(const Value& a, double divisor) {
    if (isDecimal(a)) return decimalFrom(toLD(a) / divisor);
    return Value::fromDouble(bson::toDouble(a.get()) / divisor);
}

std::string trimString(std::string_view in, const std::optional<std::string>& chars, bool left,
                       bool right) {
    // Split into code points.
    auto cps = [](std::string_view s) {
        std::vector<std::string_view> out;
        size_t i = 0;
        while (i < s.size()) {
            size_t j = i + 1;
            while (j < s.size() && isContinuation(static_cast<unsigned char>(s[j]))) ++j;
            out.push_back(s.substr(i, j - i));
            i = j;
        }
        return out;
    };
    std::vector<std::string_view> trimSet;
    static const std::string_view kWhitespace[] = {std::string_view("\0", 1),
                                                   " ",
                                                   "\t",
                                                   "\n",
                                                   "\v",
                                                   "\f",
                                                   "\r",
                                                   "\xC2\xA0",
                                                   "\xE1\x9A\x80",
                                                   "\xE2\x80\x80",
                                                   "\xE2\x80\x81",
                                                   "\xE2\x80\x82",
                                                   "\xE2\x80\x83",
                                                   "\xE2\x80\x84",
                                                   "\xE2\x80\x85",
                                                   "\xE2\x80\x86",
                                                   "\xE2\x80\x87",
                                                   "\xE2\x80\x88",
                                                   "\xE2\x80\x89",
                                                   "\xE2\x80\x8A",
                                                   "\xE2\x80\xAF",
                                                   "\xE2\x81\x9F",
                                                   "\xE3\x80\x80"};
    if (chars) {
        trimSet = cps(*chars);
    } else {
        trimSet.assign(std::begin(kWhitespace), std::end(kWhitespace));
    }
    auto inSet = [&](std::string_view cp) {
        return std::find(trimSet.begin(), trimSet.end(), cp) != trimSet.end();
    };
    auto parts = cps(in);
    size_t b = 0, e = parts.size();
    if (left)
        while (b < e && inSet(parts[b])) ++b;
    if (right)
        while (e > b && inSet(parts[e - 1])) --e;
    std::string out;
    for (size_t i = b; i < e; ++i) out += parts[i];
    return out;
}

bool parseConvertTarget(const Value& to, bson_type_t* out) {
    if (to.type() == BSON_TYPE_UTF8) {
        static const std::pair<std::string_view, bson_type_t> kNames[] = {
            {"double", BSON_TYPE_DOUBLE},      {"string", BSON_TYPE_UTF8},
            {"objectId", BSON_TYPE_OID},       {"bool", BSON_TYPE_BOOL},
            {"date", BSON_TYPE_DATE_TIME},     {"int", BSON_TYPE_INT32},
            {"long", BSON_TYPE_INT64},         {"decimal", BSON_TYPE_DECIMAL128},
            {"null", BSON_TYPE_NULL},          {"object", BSON_TYPE_DOCUMENT},
            {"array", BSON_TYPE_ARRAY},        {"binData", BSON_TYPE_BINARY},
            {"regex", BSON_TYPE_REGEX},        {"timestamp", BSON_TYPE_TIMESTAMP},
            {"minKey", BSON_TYPE_MINKEY},      {"maxKey", BSON_TYPE_MAXKEY},
            {"undefined", BSON_TYPE_UNDEFINED}};
        for (const auto& [n, t] : kNames) {
            if (n == to.str()) {
                *out = t;
                return true;
            }
        }
        fail(2, fmt::format("Unknown type name: {}", to.str()));
    }
    int64_t code;
    if (to.isNumber() && bson::toInt64Exact(to.get(), &code)) {
        if ((code >= 1 && code <= 19) || code == -1 || code == 127) {
            *out = code == -1 ? BSON_TYPE_MINKEY : static_cast<bson_type_t>(code);
            return true;
        }
        fail(2, fmt::format("Invalid numeric type code: {}", code));
    }
    return false;
}

Value convertValue(const Value& in, bson_type_t to) {
    if (in.type() == to) return in;
    switch (to) {
        case BSON_TYPE_BOOL:
            switch (in.type()) {
                case BSON_TYPE_INT32:
                case BSON_TYPE_INT64:
                case BSON_TYPE_DOUBLE:
                case BSON_TYPE_DECIMAL128:
                    return Value::fromBool(toLD(in) != 0 || std::isnan(toLD(in)));
                case BSON_TYPE_UTF8:
                case BSON_TYPE_OID:
                case BSON_TYPE_DATE_TIME:
                case BSON_TYPE_DOCUMENT:
                case BSON_TYPE_ARRAY:
                case BSON_TYPE_BINARY:
                case BSON_TYPE_REGEX:
                case BSON_TYPE_TIMESTAMP:
                case BSON_TYPE_MINKEY:
                case BSON_TYPE_MAXKEY:
                case BSON_TYPE_CODE:
                case BSON_TYPE_SYMBOL:
                    return Value::fromBool(true);
                default:
                    conversionFailure(unsupported(in, to));
            }
        case BSON_TYPE_INT32:
        case BSON_TYPE_INT64:
            return toIntegral(in, to);
        case BSON_TYPE_DOUBLE:
            switch (in.type()) {
                case BSON_TYPE_BOOL:
                    return Value::fromDouble(in.get().value.v_bool ? 1 : 0);
                case BSON_TYPE_INT32:
                case BSON_TYPE_INT64:
                case BSON_TYPE_DECIMAL128: {
                    long double d = toLD(in);
                    if (in.type() == BSON_TYPE_DECIMAL128 && std::isfinite(d) &&
                        std::fabs(d) > std::numeric_limits<double>::max())
                        conversionFailure(
                            fmt::format("Conversion would overflow target type in $convert with no "
                                        "onError value: {}",
                                        in.toString()));
                    return Value::fromDouble(static_cast<double>(d));
                }
                case BSON_TYPE_UTF8:
                    return Value::fromDouble(parseDouble(in.str()));
                case BSON_TYPE_DATE_TIME:
                    return Value::fromDouble(static_cast<double>(in.get().value.v_datetime));
                default:
                    conversionFailure(unsupported(in, to));
            }
        case BSON_TYPE_DECIMAL128:
            switch (in.type()) {
                case BSON_TYPE_BOOL:
                    return decimalFrom(in.get().value.v_bool ? 1 : 0);
                case BSON_TYPE_INT32:
                case BSON_TYPE_INT64: {
                    bson_decimal128_t d;
                    bson_decimal128_from_string(numberToString(in.get()).c_str(), &d);
                    return Value::fromDecimal(d);
                }
                case BSON_TYPE_DOUBLE: {
                    double x = in.get().value.v_double;
                    char buf[64];
                    std::snprintf(buf, sizeof buf, "%.15g", x);
                    if (std::isnan(x)) std::snprintf(buf, sizeof buf, "NaN");
                    if (std::isinf(x))
                        std::snprintf(buf, sizeof buf, x > 0 ? "Infinity" : "-Infinity");
                    bson_decimal128_t d;
                    bson_decimal128_from_string(buf, &d);
                    return Value::fromDecimal(d);
                }
                case BSON_TYPE_UTF8: {
                    std::string s(in.str());
                    bson_decimal128_t d;
                    if (!bson_decimal128_from_string(s.c_str(), &d))
                        conversionFailure(
                            fmt::format("Failed to parse number '{}' in $convert with no onError "
                                        "value: Failed to "
                                        "parse string to decimal",
                                        s));
                    return Value::fromDecimal(d);
                }
                case BSON_TYPE_DATE_TIME:
                    return convertValue(Value::fromInt64(in.get().value.v_datetime), to);
                default:
                    conversionFailure(unsupported(in, to));
            }
        case BSON_TYPE_UTF8:
            switch (in.type()) {
                case BSON_TYPE_BOOL:
                    return Value::fromString(in.get().value.v_bool ? "true" : "false");
                case BSON_TYPE_INT32:
                case BSON_TYPE_INT64:
                case BSON_TYPE_DOUBLE:
                case BSON_TYPE_DECIMAL128:
                    return Value::fromString(numberToString(in.get()));
                case BSON_TYPE_OID: {
                    char hex[25];
                    bson_oid_to_string(&in.get().value.v_oid, hex);
                    return Value::fromString(hex);
                }
                case BSON_TYPE_DATE_TIME:
                    return Value::fromString(
                        formatDate(in.get().value.v_datetime, "%Y-%m-%dT%H:%M:%S.%LZ", 0));
                case BSON_TYPE_SYMBOL:
                    return Value::fromString(in.str());
                default:
                    conversionFailure(unsupported(in, to));
            }
        case BSON_TYPE_OID: {
            if (in.type() != BSON_TYPE_UTF8) conversionFailure(unsupported(in, to));
            std::string s(in.str());
            if (s.size() != 24)
                conversionFailure(
                    fmt::format("Failed to parse objectId '{}' in $convert with no onError value: "
                                "Invalid string "
                                "length for parsing to OID, expected 24 but found {}",
                                s, s.size()));
            if (!bson_oid_is_valid(s.c_str(), s.size()))
                conversionFailure(
                    fmt::format("Failed to parse objectId '{}' in $convert with no onError value: "
                                "Invalid character "
                                "found in hex string: {}",
                                s, s));
            bson_oid_t oid;
            bson_oid_init_from_string(&oid, s.c_str());
            return Value::fromOid(oid);
        }
        case BSON_TYPE_DATE_TIME:
            switch (in.type()) {
                case BSON_TYPE_INT64:
                    return Value::fromDate(in.get().value.v_int64);
                case BSON_TYPE_DOUBLE:
                case BSON_TYPE_DECIMAL128: {
                    long double d = toLD(in);
                    if (!std::isfinite(d) || d >= 0x1p63 || d < -0x1p63)
                        conversionFailure(
                            fmt::format("Conversion would overflow target type in $convert with no "
                                        "onError value: {}",
                                        in.toString()));
                    return Value::fromDate(static_cast<int64_t>(std::trunc(d)));
                }
                case BSON_TYPE_OID:
                case BSON_TYPE_TIMESTAMP:
                    return Value::fromDate(toDateMillis(in));
                case BSON_TYPE_UTF8: {
                    int64_t ms;
                    if (!parseDateString(in.str(), &ms))
                        conversionFailure(
                            fmt::format("Error parsing date string '{}'; 0: passing a time zone "
                                        "identifier as part of "
                                        "the string is not allowed",
                                        in.str()));
                    return Value::fromDate(ms);
                }
                default:
                    conversionFailure(unsupported(in, to));
            }
        default:
            conversionFailure(unsupported(in, to));
    }
}

int64_t parseTimezoneOffsetMillis(const Value& tz) {
    if (tz.type() != BSON_TYPE_UTF8)
        fail(40517, fmt::format("timezone must evaluate to a string, found {}", typeNameOf(tz)));
    std::string_view s = tz.str();
    if (s == "UTC" || s == "GMT" || s == "Z" || s == "Etc/UTC" || s == "Etc/GMT") return 0;
    if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
        int sign = s[0] == '-' ? -1 : 1;
        std::string digits;
        for (char c : s.substr(1)) {
            if (c != ':') digits += c;
        }
        bool ok =
            (digits.size() == 2 || digits.size() == 4) &&
            std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (ok) {
            int h = std::stoi(digits.substr(0, 2));
            int m = digits.size() == 4 ? std::stoi(digits.substr(2, 2)) : 0;
            return sign * (h * 3600000LL + m * 60000LL);
        }
    }
    fail(40485, fmt::format("unrecognized time zone identifier: \"{}\"", s));
}

int64_t toDateMillis(const Value& v) {
    switch (v.type()) {
        case BSON_TYPE_DATE_TIME:
            return v.get().value.v_datetime;
        case BSON_TYPE_TIMESTAMP:
            return static_cast<int64_t>(v.get().value.v_timestamp.timestamp) * 1000;
        case BSON_TYPE_OID:
            return static_cast<int64_t>(bson_oid_get_time_t(&v.get().value.v_oid)) * 1000;
        default:
            fail(16006, fmt::format("can't convert from BSON type {} to Date", typeNameOf(v)));
    }
}

std::string formatDate(int64_t millis, std::string_view format, int64_t tzOffsetMillis) {
    DateParts p = split(millis + tzOffsetMillis);
    std::string out;
    for (size_t i = 0; i < format.size(); ++i) {
        char c = format[i];
        if (c != '%') {
            out += c;
            continue;
        }
        if (i + 1 >= format.size()) fail(18535, "Unmatched '%' at end of format string");
        char f = format[++i];
        switch (f) {
            case '%':
                out += '%';
                break;
            case 'Y':
                if (p.year < 0 || p.year > 9999)
                    fail(18537,
                         "Could not convert date to string: date component was outside the "
                         "supported range of 0-9999");
                out += fmt::format("{:04}", p.year);
                break;
            case 'm':
                out += fmt::format("{:02}", p.month);
                break;
            case 'd':
                out += fmt::format("{:02}", p.day);
                break;
            case 'H':
                out += fmt::format("{:02}", p.hour);
                break;
            case 'M':
                out += fmt::format("{:02}", p.minute);
                break;
            case 'S':
                out += fmt::format("{:02}", p.second);
                break;
            case 'L':
                out += fmt::format("{:03}", p.millis);
                break;
            case 'j':
                out += fmt::format("{:03}", p.dayOfYear);
                break;
            case 'w':
                out += fmt::format("{}", p.dayOfWeek);
                break;
            case 'U':
                out += fmt::format("{:02}", (p.dayOfYear - 1 + 7 - (p.dayOfWeek - 1)) / 7);
                break;
            case 'u':
            case 'V':
            case 'G': {
                int64_t isoYear;
                unsigned week, isoDow;
                isoWeek(p, &isoYear, &week, &isoDow);
                if (f == 'u') out += fmt::format("{}", isoDow);
                if (f == 'V') out += fmt::format("{:02}", week);
                if (f == 'G') out += fmt::format("{:04}", isoYear);
                break;
            }
            case 'z': {
                int64_t m = tzOffsetMillis / 60000;
                out += fmt::format("{}{:02}{:02}", m < 0 ? '-' : '+', std::abs(m) / 60,
                                   std::abs(m) % 60);
                break;
            }
            case 'Z': {
                int64_t m = tzOffsetMillis / 60000;
                out += fmt::format("{}{}", m < 0 ? '-' : '+', std::abs(m));
                break;
            }
            default:
                fail(18536, fmt::format("Invalid format character '%{}' in format string", f));
        }
    }
    (void)isLeap;
    return out;
}

const ScalarOp* findScalarOp(std::string_view name) {
    static const ScalarOp kOps[] = {
        {"$add", opAdd, 0, -1},
        {"$subtract", opSubtract, 2, 2},
        {"$multiply", opMultiply, 0, -1},
        {"$divide", opDivide, 2, 2},
        {"$mod", opMod, 2, 2},
        {"$abs", opAbs, 1, 1},
        {"$ceil", opCeil, 1, 1},
        {"$floor", opFloor, 1, 1},
        {"$sqrt", opSqrt, 1, 1},
        {"$exp", opExp, 1, 1},
        {"$ln", opLn, 1, 1},
        {"$log10", opLog10, 1, 1},
        {"$pow", opPow, 2, 2},
        {"$round", opRound, 1, 2},
        {"$trunc", opTrunc, 1, 2},
        {"$cmp", nullptr, 2, 2, opCmp},
        {"$eq", nullptr, 2, 2, opEq},
        {"$ne", nullptr, 2, 2, opNe},
        {"$gt", nullptr, 2, 2, opGt},
        {"$gte", nullptr, 2, 2, opGte},
        {"$lt", nullptr, 2, 2, opLt},
        {"$lte", nullptr, 2, 2, opLte},
        {"$not", opNot, 1, 1},
        {"$concat", opConcat, 0, -1},
        {"$toLower", opToLower, 1, 1},
        {"$toUpper", opToUpper, 1, 1},
        {"$substr", opSubstrBytes, 3, 3},
        {"$substrBytes", opSubstrBytes, 3, 3},
        {"$substrCP", opSubstrCP, 3, 3},
        {"$strLenBytes", opStrLenBytes, 1, 1},
        {"$strLenCP", opStrLenCP, 1, 1},
        {"$strcasecmp", opStrcasecmp, 2, 2},
        {"$split", opSplit, 2, 2},
        {"$indexOfBytes", opIndexOfBytes, 2, 4},
        {"$type", opType, 1, 1},
        {"$isNumber", opIsNumber, 1, 1},
        {"$isArray", opIsArray, 1, 1},
        {"$toString", opToString, 1, 1},
        {"$toInt", opToInt, 1, 1},
        {"$toLong", opToLong, 1, 1},
        {"$toDouble", opToDouble, 1, 1},
        {"$toDecimal", opToDecimal, 1, 1},
        {"$toBool", opToBool, 1, 1},
        {"$toObjectId", opToObjectId, 1, 1},
        {"$toDate", opToDate, 1, 1},
        {"$year", opYear, 1, 1},
        {"$month", datePart<&DateParts::month>, 1, 1},
        {"$dayOfMonth", datePart<&DateParts::day>, 1, 1},
        {"$hour", datePart<&DateParts::hour>, 1, 1},
        {"$minute", datePart<&DateParts::minute>, 1, 1},
        {"$second", datePart<&DateParts::second>, 1, 1},
        {"$millisecond", datePart<&DateParts::millis>, 1, 1},
        {"$dayOfWeek", datePart<&DateParts::dayOfWeek>, 1, 1},
        {"$dayOfYear", datePart<&DateParts::dayOfYear>, 1, 1},
        {"$week", opWeek, 1, 1},
    };
    for (const auto& op : kOps) {
        if (op.name == name) return &op;
    }
    return nullptr;
}

}  // namespace halo::query::expr_detail
