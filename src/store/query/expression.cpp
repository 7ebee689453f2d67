// Expression parsing, variables and field paths, control flow ($cond, $switch,
// $let, $map, $filter, $reduce), arrays, objects and sets. Scalar operators
// live in expression_scalar.cpp.
#include "store/query/expression.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <random>

#include "bson/compare.h"
#include "store/query/expression_internal.h"
#include "store/query/path.h"

namespace halo::query {

using namespace expr_detail;

namespace {

[[noreturn]] void fail(int code, std::string msg) {
    uasserted(static_cast<ErrorCode>(code), std::move(msg));
}

using ExprPtr = std::unique_ptr<Expression>;

// ---- nodes ----

class ConstantNode : public Expression {
  public:
    explicit ConstantNode(Value v) : v_(std::move(v)) {}
    Value eval(EvalContext&) const override { return v_; }
    bool isConstant() const override { return true; }

  private:
    Value v_;
};

Value traverse(const bson_value_t& v, const std::vector<std::string>& parts, size_t i) {
    if (i == parts.size()) return Value(v);
    if (v.value_type == BSON_TYPE_DOCUMENT) {
        bson_iter_t it;
        if (!detail::findIn(v, parts[i], &it)) return Value();
        return traverse(*bson_iter_value(&it), parts, i + 1);
    }
    if (v.value_type == BSON_TYPE_ARRAY) {
        std::vector<Value> out;
        bson_iter_t it;
        bson_iter_init_from_data(&it, v.value.v_doc.data, v.value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            bson_value_t e = *bson_iter_value(&it);
            if (e.value_type != BSON_TYPE_DOCUMENT && e.value_type != BSON_TYPE_ARRAY) continue;
            Value r = traverse(e, parts, i);
            if (!r.isMissing()) out.push_back(std::move(r));
        }
        return Value::fromArray(out);
    }
    return Value();
}

/// "$a.b", "$$ROOT.a", "$$var.a", "$$NOW".
class PathNode : public Expression {
  public:
    enum class Base { kCurrent, kNow, kRemove, kSlot, kUser };
    PathNode(Base base, int slot, std::string user, std::vector<std::string> parts)
        : base_(base), slot_(slot), user_(std::move(user)), parts_(std::move(parts)) {}

    Value eval(EvalContext& ctx) const override {
        switch (base_) {
            case Base::kCurrent:
                if (parts_.empty()) return Value(ctx.root);
                return traverse(ctx.root, parts_, 0);
            case Base::kNow:
                return Value::fromDate(ctx.now);
            case Base::kRemove:
                return Value();
            case Base::kSlot:
                return from(ctx.slots[slot_]);
            case Base::kUser: {
                const Value* v = ctx.vars ? ctx.vars->get(user_) : nullptr;
                if (!v) fail(17276, fmt::format("Use of undefined variable: {}", user_));
                return from(*v);
            }
        }
        return Value();
    }

  private:
    Value from(const Value& v) const {
        if (parts_.empty()) return v;
        return traverse(v.get(), parts_, 0);
    }
    Base base_;
    int slot_;
    std::string user_;
    std::vector<std::string> parts_;
};

class ObjectNode : public Expression {
  public:
    std::vector<std::pair<std::string, ExprPtr>> fields;
    Value eval(EvalContext& ctx) const override {
        bson::Doc out;
        for (const auto& [k, e] : fields) {
            Value v = e->eval(ctx);
            if (!v.isMissing()) bson::appendValue(out.mut(), k, v.get());
        }
        return Value::fromDocument(out.get());
    }
};

class ArrayNode : public Expression {
  public:
    std::vector<ExprPtr> elems;
    Value eval(EvalContext& ctx) const override {
        std::vector<Value> out;
        out.reserve(elems.size());
        for (const auto& e : elems) out.push_back(e->eval(ctx));  // missing becomes null
        return Value::fromArray(out);
    }
};

class FunctionNode : public Expression {
  public:
    FunctionNode(std::string name, const ScalarOp& op, std::vector<ExprPtr> args,
                 std::shared_ptr<const bson::StringComparator> coll)
        : name_(std::move(name)),
          fn_(op.fn),
          collated_(op.collated),
          args_(std::move(args)),
          coll_(op.collated ? std::move(coll) : nullptr) {}
    Value eval(EvalContext& ctx) const override {
        std::vector<Value> vals;
        vals.reserve(args_.size());
        for (const auto& a : args_) vals.push_back(a->eval(ctx));
        if (collated_) return collated_(vals, name_, coll_.get());
        return fn_(vals, name_);
    }

  private:
    std::string name_;
    ScalarFn fn_;
    CollatedFn collated_;
    std::vector<ExprPtr> args_;
    std::shared_ptr<const bson::StringComparator> coll_;  // comparing operators only
};

class AndOrNode : public Expression {
  public:
    AndOrNode(bool isAnd, std::vector<ExprPtr> args) : and_(isAnd), args_(std::move(args)) {}
    Value eval(EvalContext& ctx) const override {
        for (const auto& a : args_) {
            bool t = a->eval(ctx).truthy();
            if (and_ && !t) return Value::fromBool(false);
            if (!and_ && t) return Value::fromBool(true);
        }
        return Value::fromBool(and_);
    }

  private:
    bool and_;
    std::vector<ExprPtr> args_;
};

class CondNode : public Expression {
  public:
    ExprPtr cond, then, otherwise;
    Value eval(EvalContext& ctx) const override {
        return cond->eval(ctx).truthy() ? then->eval(ctx) : otherwise->eval(ctx);
    }
};

class IfNullNode : public Expression {
  public:
    std::vector<ExprPtr> args;
    Value eval(EvalContext& ctx) const override {
        for (size_t i = 0; i + 1 < args.size(); ++i) {
            Value v = args[i]->eval(ctx);
            if (!v.isNullish()) return v;
        }
        return args.back()->eval(ctx);
    }
};

class SwitchNode : public Expression {
  public:
    std::vector<std::pair<ExprPtr, ExprPtr>> branches;
    ExprPtr defaultExpr;
    Value eval(EvalContext& ctx) const override {
        for (const auto& [c, t] : branches) {
            if (c->eval(ctx).truthy()) return t->eval(ctx);
        }
        if (!defaultExpr)
            fail(40066,
                 "$switch could not find a matching branch for an input, and no default was "
                 "specified.");
        return defaultExpr->eval(ctx);
    }
};

class LetNode : public Expression {
  public:
    std::vector<std::pair<int, ExprPtr>> vars;
    ExprPtr in;
    Value eval(EvalContext& ctx) const override {
        std::vector<Value> vals;
        for (const auto& [slot, e] : vars)
            vals.push_back(e->eval(ctx));  // evaluated in outer scope
        for (size_t i = 0; i < vars.size(); ++i) ctx.slots[vars[i].first] = std::move(vals[i]);
        return in->eval(ctx);
    }
};

class MapFilterNode : public Expression {
  public:
    bool isMap = true;
    ExprPtr input, body, limit;
    int slot = 0;
    Value eval(EvalContext& ctx) const override {
        Value in = input->eval(ctx);
        if (in.isNullish()) return Value::null();
        if (!in.isArray()) {
            if (isMap)
                fail(16883, fmt::format("input to $map must be an array not {}", typeNameOf(in)));
            fail(28651, fmt::format("input to $filter must be an array not {}", typeNameOf(in)));
        }
        int64_t max = -1;
        if (limit) {
            Value l = limit->eval(ctx);
            if (!l.isNullish()) {
                if (!l.isNumber() || !bson::toInt64Exact(l.get(), &max) || max > INT32_MAX ||
                    max < INT32_MIN)
                    fail(327391,
                         fmt::format("$filter: limit must be represented as a 32-bit integral "
                                     "value, but was: {}",
                                     l.toString()));
                if (max < 1)
                    fail(327392,
                         fmt::format("$filter: limit must be greater than 0, but was: {}", max));
            }
        }
        std::vector<Value> out;
        for (auto& e : in.arrayElements()) {
            ctx.slots[slot] = e;
            if (isMap) {
                out.push_back(body->eval(ctx));
            } else if (body->eval(ctx).truthy()) {
                out.push_back(std::move(e));
                if (max > 0 && static_cast<int64_t>(out.size()) >= max) break;
            }
        }
        return Value::fromArray(out);
    }
};

class ReduceNode : public Expression {
  public:
    ExprPtr input, initial, in;
    int thisSlot = 0, valueSlot = 0;
    Value eval(EvalContext& ctx) const override {
        Value arr = input->eval(ctx);
        if (arr.isNullish()) return Value::null();
        if (!arr.isArray())
            fail(40080, fmt::format("$reduce requires that 'input' be an array, found: {}",
                                    arr.toString()));
        Value acc = initial->eval(ctx);
        for (auto& e : arr.arrayElements()) {
            ctx.slots[thisSlot] = std::move(e);
            ctx.slots[valueSlot] = std::move(acc);
            acc = in->eval(ctx);
        }
        return acc;
    }
};

class ConvertNode : public Expression {
  public:
    ExprPtr input, to, onError, onNull;
    Value eval(EvalContext& ctx) const override {
        Value in = input->eval(ctx);
        Value target = to->eval(ctx);
        if (target.isNullish()) return Value::null();
        bson_type_t t;
        if (!parseConvertTarget(target, &t))
            fail(2, fmt::format("$convert's 'to' argument must be a string or number, but is {}",
                                typeNameOf(target)));
        if (in.isNullish()) return onNull ? onNull->eval(ctx) : Value::null();
        if (!onError) return convertValue(in, t);
        try {
            return convertValue(in, t);
        } catch (const DBException& e) {
            if (e.code() != ErrorCode::ConversionFailure) throw;
            return onError->eval(ctx);
        }
    }
};

class DateToStringNode : public Expression {
  public:
    ExprPtr date, format, timezone, onNull;
    Value eval(EvalContext& ctx) const override {
        std::string fmtStr = "%Y-%m-%dT%H:%M:%S.%LZ";
        if (format) {
            Value f = format->eval(ctx);
            if (f.isNullish()) return Value::null();
            if (f.type() != BSON_TYPE_UTF8)
                fail(18533,
                     fmt::format("$dateToString requires that 'format' be a string, found: {} with "
                                 "value {}",
                                 typeNameOf(f), f.toString()));
            fmtStr = std::string(f.str());
        }
        int64_t offset = 0;
        if (timezone) {
            Value tz = timezone->eval(ctx);
            if (tz.isNullish()) return Value::null();
            offset = parseTimezoneOffsetMillis(tz);
            if (!format) fmtStr = "%Y-%m-%dT%H:%M:%S.%L";
        }
        Value d = date->eval(ctx);
        if (d.isNullish()) return onNull ? onNull->eval(ctx) : Value::null();
        return Value::fromString(formatDate(toDateMillis(d), fmtStr, offset));
    }
};

class TrimNode : public Expression {
  public:
    std::string name;
    bool left = true, right = true;
    ExprPtr input, chars;
    Value eval(EvalContext& ctx) const override {
        Value in = input->eval(ctx);
        if (in.isNullish()) return Value::null();
        if (in.type() != BSON_TYPE_UTF8)
            fail(50699,
                 fmt::format("{} requires its input to be a string, got {} (of type {}) instead.",
                             name, in.toString(), typeNameOf(in)));
        std::optional<std::string> cs;
        if (chars) {
            Value c = chars->eval(ctx);
            if (c.isNullish()) return Value::null();
            if (c.type() != BSON_TYPE_UTF8)
                fail(50700,
                     fmt::format("{} requires 'chars' to be a string, got {} (of type {}) instead.",
                                 name, c.toString(), typeNameOf(c)));
            cs = std::string(c.str());
        }
        return Value::fromString(trimString(in.str(), cs, left, right));
    }
};

/// $rand (mongod 4.4.2+): a double in [0, 1), drawn anew for every evaluation.
class RandNode : public Expression {
  public:
    Value eval(EvalContext&) const override {
        thread_local std::mt19937_64 gen{std::random_device{}()};
        return Value::fromDouble(std::uniform_real_distribution<double>(0.0, 1.0)(gen));
    }
};

/// $getField (mongod 5.0+): the value of a field of `input` ($$CURRENT by
/// default) by its literal name, dots and '$' included.
class GetFieldNode : public Expression {
  public:
    ExprPtr field, input;
    Value eval(EvalContext& ctx) const override {
        Value f = field->eval(ctx);
        if (f.type() != BSON_TYPE_UTF8)
            fail(5654602,
                 fmt::format("$getField requires 'field' to evaluate to type String, but got {}",
                             typeNameOf(f)));
        Value in = input->eval(ctx);
        if (in.isNullish()) return Value::null();
        if (!in.isDocument())
            fail(3041705,
                 fmt::format("$getField requires 'input' to evaluate to type Object, but got {}",
                             typeNameOf(in)));
        const bson_value_t& d = in.get();
        bson_iter_t it;
        if (!bson_iter_init_from_data(&it, d.value.v_doc.data, d.value.v_doc.data_len))
            return Value::missing();
        std::string_view name = f.str();
        while (bson_iter_next(&it))
            if (std::string_view(bson_iter_key(&it)) == name) return Value::fromIter(it);
        return Value::missing();
    }
};

/// $setField / $unsetField (mongod 5.0+): `input` with the field of that
/// literal name replaced, added at the end, or (value $$REMOVE, $unsetField)
/// removed.
class SetFieldNode : public Expression {
  public:
    std::string name;  // the operator, for messages
    std::string field;
    ExprPtr input, value;  // value null: $unsetField
    Value eval(EvalContext& ctx) const override {
        Value in = input->eval(ctx);
        if (in.isNullish()) return Value::null();
        if (!in.isDocument())
            fail(4161105, fmt::format("{} requires 'input' to evaluate to type Object", name));
        Value v = value ? value->eval(ctx) : Value::missing();
        const bson_value_t& d = in.get();
        bson_iter_t it;
        bson_t out = BSON_INITIALIZER;
        bool placed = false;
        if (bson_iter_init_from_data(&it, d.value.v_doc.data, d.value.v_doc.data_len)) {
            while (bson_iter_next(&it)) {
                if (std::string_view(bson_iter_key(&it)) == field) {
                    placed = true;
                    if (!v.isMissing())
                        bson_append_value(&out, field.data(), static_cast<int>(field.size()),
                                          &v.get());
                    continue;
                }
                bson_append_iter(&out, bson_iter_key(&it), -1, &it);
            }
        }
        if (!placed && !v.isMissing())
            bson_append_value(&out, field.data(), static_cast<int>(field.size()), &v.get());
        Value result = Value::fromDocument(&out);
        bson_destroy(&out);
        return result;
    }
};

// ---- array, object and set functions ----

Value fnIn(const std::vector<Value>& a, std::string_view, const Coll* coll) {
    if (!a[1].isArray())
        fail(40081, fmt::format("$in requires an array as a second argument, found: {}",
                                typeNameOf(a[1])));
    for (const auto& e : a[1].arrayElements()) {
        if (compare(e, a[0], coll) == 0) return Value::fromBool(true);
    }
    return Value::fromBool(false);
}

Value fnSize(const std::vector<Value>& a, std::string_view) {
    if (!a[0].isArray())
        fail(17124,
             fmt::format("The argument to $size must be an array. Type of the argument was: {}",
                         typeNameOf(a[0])));
    return Value::fromInt32(static_cast<int32_t>(a[0].arrayElements().size()));
}

Value fnArrayElemAt(const std::vector<Value>& a, std::string_view) {
    if (a[0].isNullish() || a[1].isNullish()) return Value::null();
    if (!a[0].isArray())
        fail(28689, fmt::format("$arrayElemAt's first argument must be an array, but is {}",
                                typeNameOf(a[0])));
    if (!a[1].isNumber())
        fail(28690, fmt::format("$arrayElemAt's second argument must be a numeric value, but is {}",
                                typeNameOf(a[1])));
    int64_t idx;
    if (!bson::toInt64Exact(a[1].get(), &idx) || idx > INT32_MAX || idx < INT32_MIN)
        fail(28691,
             fmt::format(
                 "$arrayElemAt's second argument must be representable as a 32-bit integer: {}",
                 a[1].toString()));
    auto elems = a[0].arrayElements();
    int64_t n = static_cast<int64_t>(elems.size());
    if (idx < 0) idx += n;
    if (idx < 0 || idx >= n) return Value();
    return elems[idx];
}

Value firstLast(const std::vector<Value>& a, std::string_view name, bool first) {
    if (a[0].isNullish()) return Value::null();
    if (!a[0].isArray())
        fail(28689,
             fmt::format("{}'s argument must be an array, but is {}", name, typeNameOf(a[0])));
    auto elems = a[0].arrayElements();
    if (elems.empty()) return Value();
    return first ? elems.front() : elems.back();
}
Value fnFirst(const std::vector<Value>& a, std::string_view n) {
    return firstLast(a, n, true);
}
Value fnLast(const std::vector<Value>& a, std::string_view n) {
    return firstLast(a, n, false);
}

Value fnSlice(const std::vector<Value>& a, std::string_view) {
    for (const auto& v : a) {
        if (v.isNullish()) return Value::null();
    }
    if (!a[0].isArray())
        fail(28724, fmt::format("First argument to $slice must be an array, but is of type: {}",
                                typeNameOf(a[0])));
    int64_t second;
    if (!a[1].isNumber())
        fail(28725,
             fmt::format("Second argument to $slice must be a numeric value, but is of type: {}",
                         typeNameOf(a[1])));
    if (!bson::toInt64Exact(a[1].get(), &second) || second > INT32_MAX || second < INT32_MIN)
        fail(28726,
             fmt::format("Second argument to $slice can't be represented as a 32-bit integer: {}",
                         a[1].toString()));
    auto elems = a[0].arrayElements();
    const int64_t n = static_cast<int64_t>(elems.size());
    int64_t start, count;
    if (a.size() == 2) {
        if (second >= 0) {
            start = 0;
            count = std::min(second, n);
        } else {
            start = std::max<int64_t>(0, n + second);
            count = n - start;
        }
    } else {
        int64_t third;
        if (!a[2].isNumber())
            fail(28727, fmt::format("Third argument to $slice must be numeric, but is of type: {}",
                                    typeNameOf(a[2])));
        if (!bson::toInt64Exact(a[2].get(), &third) || third > INT32_MAX)
            fail(28728, fmt::format(
                            "Third argument to $slice can't be represented as a 32-bit integer: {}",
                            a[2].toString()));
        if (third <= 0)
            fail(28729, fmt::format("Third argument to $slice must be positive: {}", third));
        start = second < 0 ? std::max<int64_t>(0, n + second) : std::min(second, n);
        count = std::min(third, n - start);
    }
    return Value::fromArray(
        std::vector<Value>(elems.begin() + start, elems.begin() + start + count));
}

Value fnConcatArrays(const std::vector<Value>& a, std::string_view) {
    std::vector<Value> out;
    for (const auto& v : a) {
        if (v.isNullish()) return Value::null();
        if (!v.isArray())
            fail(28664, fmt::format("$concatArrays only supports arrays, not {}", typeNameOf(v)));
        for (auto& e : v.arrayElements()) out.push_back(std::move(e));
    }
    return Value::fromArray(out);
}

Value fnReverseArray(const std::vector<Value>& a, std::string_view) {
    if (a[0].isNullish()) return Value::null();
    if (!a[0].isArray())
        fail(34435,
             fmt::format("The argument to $reverseArray must be an array, but was of type: {}",
                         typeNameOf(a[0])));
    auto e = a[0].arrayElements();
    std::reverse(e.begin(), e.end());
    return Value::fromArray(e);
}

Value fnIndexOfArray(const std::vector<Value>& a, std::string_view, const Coll* coll) {
    if (a[0].isNullish()) return Value::null();
    if (!a[0].isArray())
        fail(40090, fmt::format("$indexOfArray requires an array as a first argument, found: {}",
                                typeNameOf(a[0])));
    auto elems = a[0].arrayElements();
    auto idx = [&](size_t i, int64_t def) {
        if (a.size() <= i) return def;
        int64_t n;
        if (!a[i].isNumber() || !bson::toInt64Exact(a[i].get(), &n))
            fail(
                40096,
                fmt::format(
                    "$indexOfArray requires an integral {}, found a value of type: {}, with "
                    "value: {}",
                    i == 2 ? "starting index" : "ending index", typeNameOf(a[i]), a[i].toString()));
        if (n < 0)
            fail(40097, fmt::format("$indexOfArray requires a nonnegative {}, found: {}",
                                    i == 2 ? "starting index" : "ending index", n));
        return n;
    };
    int64_t start = idx(2, 0), end = std::min<int64_t>(idx(3, static_cast<int64_t>(elems.size())),
                                                       static_cast<int64_t>(elems.size()));
    for (int64_t i = start; i < end; ++i) {
        if (compare(elems[i], a[1], coll) == 0) return Value::fromInt32(static_cast<int32_t>(i));
    }
    return Value::fromInt32(-1);
}

Value fnRange(const std::vector<Value>& a, std::string_view) {
    auto asInt = [&](size_t i, int code, const char* what) {
        int64_t n;
        if (!a[i].isNumber())
            fail(code, fmt::format("$range requires a numeric {}, found value of type: {}", what,
                                   typeNameOf(a[i])));
        if (!bson::toInt64Exact(a[i].get(), &n) || n > INT32_MAX || n < INT32_MIN)
            fail(code + 1,
                 fmt::format(
                     "$range requires a {} that can be represented as a 32-bit integer, found "
                     "value: {}",
                     what, a[i].toString()));
        return n;
    };
    int64_t start = asInt(0, 34443, "starting value"), end = asInt(1, 34445, "ending value");
    int64_t step = a.size() > 2 ? asInt(2, 34447, "step value") : 1;
    if (step == 0) fail(34449, "$range requires a non-zero step value");
    std::vector<Value> out;
    for (int64_t i = start; step > 0 ? i < end : i > end; i += step)
        out.push_back(Value::fromInt32(static_cast<int32_t>(i)));
    return Value::fromArray(out);
}

Value fnMergeObjects(const std::vector<Value>& a, std::string_view) {
    // Later fields overwrite earlier ones in place.
    std::vector<std::pair<std::string, Value>> fields;
    auto mergeOne = [&](const Value& v, size_t pos) {
        if (v.isNullish()) return;
        if (!v.isDocument())
            fail(40400,
                 fmt::format("$mergeObjects requires object inputs, but input {} is of type {}",
                             v.toString(), typeNameOf(v)));
        bson_t doc;
        v.view(&doc);
        bson_iter_t it;
        bson_iter_init(&it, &doc);
        while (bson_iter_next(&it)) {
            std::string k(bson_iter_key(&it), bson_iter_key_len(&it));
            auto f = std::find_if(fields.begin(), fields.end(),
                                  [&](const auto& p) { return p.first == k; });
            if (f != fields.end()) {
                f->second = Value::fromIter(it);
            } else {
                fields.emplace_back(std::move(k), Value::fromIter(it));
            }
        }
        (void)pos;
    };
    for (size_t i = 0; i < a.size(); ++i) mergeOne(a[i], i);
    bson::Doc out;
    for (const auto& [k, v] : fields) bson::appendValue(out.mut(), k, v.get());
    return Value::fromDocument(out.get());
}

Value fnObjectToArray(const std::vector<Value>& a, std::string_view) {
    if (a[0].isNullish()) return Value::null();
    if (!a[0].isDocument())
        fail(40390,
             fmt::format("$objectToArray requires a document input, found: {}", typeNameOf(a[0])));
    bson_t doc;
    a[0].view(&doc);
    bson_iter_t it;
    bson_iter_init(&it, &doc);
    std::vector<Value> out;
    while (bson_iter_next(&it)) {
        bson::Doc kv;
        BSON_APPEND_UTF8(kv.mut(), "k", bson_iter_key(&it));
        bson::appendIter(kv.mut(), "v", it);
        out.push_back(Value::fromDocument(kv.get()));
    }
    return Value::fromArray(out);
}

Value fnArrayToObject(const std::vector<Value>& a, std::string_view) {
    if (a[0].isNullish()) return Value::null();
    if (!a[0].isArray())
        fail(40386,
             fmt::format("$arrayToObject requires an array input, found: {}", typeNameOf(a[0])));
    std::vector<std::pair<std::string, Value>> fields;
    auto put = [&](const Value& k, Value v) {
        if (k.type() != BSON_TYPE_UTF8)
            fail(40395,
                 fmt::format(
                     "$arrayToObject requires an array of key-value pairs, where the key must be "
                     "of type string. Found key type: {}",
                     typeNameOf(k)));
        std::string key(k.str());
        if (key.find('\0') != std::string::npos)
            fail(4940401, "Key field cannot contain an embedded null byte");
        auto f = std::find_if(fields.begin(), fields.end(),
                              [&](const auto& p) { return p.first == key; });
        if (f != fields.end()) {
            f->second = std::move(v);
        } else {
            fields.emplace_back(std::move(key), std::move(v));
        }
    };
    auto elems = a[0].arrayElements();
    int form = 0;  // 1: [k, v] arrays, 2: {k, v} documents
    for (const auto& e : elems) {
        int f = e.isArray() ? 1 : e.isDocument() ? 2 : 0;
        if (f == 0)
            fail(40398, fmt::format("Unrecognised input type format for $arrayToObject: {}",
                                    typeNameOf(e)));
        if (form != 0 && f != form)
            fail(40391,
                 "$arrayToObject requires a consistent input format. Elements must"
                 " all be arrays or all be objects");
        form = f;
        if (f == 1) {
            auto kv = e.arrayElements();
            if (kv.size() != 2)
                fail(
                    40397,
                    fmt::format(
                        "$arrayToObject requires an array of size 2 arrays,found array of size: {}",
                        kv.size()));
            put(kv[0], std::move(kv[1]));
        } else {
            bson_t doc;
            e.view(&doc);
            if (bson_count_keys(&doc) != 2)
                fail(40392,
                     fmt::format(
                         "$arrayToObject requires an object keys of 'k' and 'v'. Found incorrect "
                         "number of keys:{}",
                         bson_count_keys(&doc)));
            bson_iter_t ki, vi;
            if (!bson_iter_init_find(&ki, &doc, "k") || !bson_iter_init_find(&vi, &doc, "v"))
                fail(40393,
                     fmt::format(
                         "$arrayToObject requires an object with keys 'k' and 'v'. Missing either "
                         "or both keys from: {}",
                         e.toString()));
            put(Value::fromIter(ki), Value::fromIter(vi));
        }
    }
    bson::Doc out;
    for (const auto& [k, v] : fields) bson::appendValue(out.mut(), k, v.get());
    return Value::fromDocument(out.get());
}

std::vector<Value> asSet(std::vector<Value> v, const Coll* coll) {
    std::sort(v.begin(), v.end(),
              [coll](const Value& x, const Value& y) { return compare(x, y, coll) < 0; });
    v.erase(
        std::unique(v.begin(), v.end(),
                    [coll](const Value& x, const Value& y) { return compare(x, y, coll) == 0; }),
        v.end());
    return v;
}
bool setContains(const std::vector<Value>& set, const Value& v, const Coll* coll) {
    return std::binary_search(set.begin(), set.end(), v, [coll](const Value& x, const Value& y) {
        return compare(x, y, coll) < 0;
    });
}

Value fnSetUnion(const std::vector<Value>& a, std::string_view, const Coll* coll) {
    std::vector<Value> all;
    for (const auto& v : a) {
        if (v.isNullish()) return Value::null();
        if (!v.isArray())
            fail(17043, fmt::format(
                            "All operands of $setUnion must be arrays. One argument is of type: {}",
                            typeNameOf(v)));
        for (auto& e : v.arrayElements()) all.push_back(std::move(e));
    }
    return Value::fromArray(asSet(std::move(all), coll));
}

Value fnSetIntersection(const std::vector<Value>& a, std::string_view, const Coll* coll) {
    std::optional<std::vector<Value>> acc;
    for (const auto& v : a) {
        if (v.isNullish()) return Value::null();
        if (!v.isArray())
            fail(17047,
                 fmt::format(
                     "All operands of $setIntersection must be arrays. One argument is of type: {}",
                     typeNameOf(v)));
        auto s = asSet(v.arrayElements(), coll);
        if (!acc) {
            acc = std::move(s);
            continue;
        }
        std::vector<Value> next;
        for (auto& e : *acc) {
            if (setContains(s, e, coll)) next.push_back(std::move(e));
        }
        acc = std::move(next);
    }
    return Value::fromArray(acc ? *acc : std::vector<Value>{});
}

Value fnSetDifference(const std::vector<Value>& a, std::string_view, const Coll* coll) {
    if (a[0].isNullish() || a[1].isNullish()) return Value::null();
    if (!a[0].isArray())
        fail(17048,
             fmt::format(
                 "both operands of $setDifference must be arrays. First argument is of type: {}",
                 typeNameOf(a[0])));
    if (!a[1].isArray())
        fail(17049,
             fmt::format(
                 "both operands of $setDifference must be arrays. Second argument is of type: {}",
                 typeNameOf(a[1])));
    auto rhs = asSet(a[1].arrayElements(), coll);
    std::vector<Value> out;
    for (auto& e : asSet(a[0].arrayElements(), coll)) {
        if (!setContains(rhs, e, coll)) out.push_back(std::move(e));
    }
    return Value::fromArray(out);
}

Value fnSetIsSubset(const std::vector<Value>& a, std::string_view, const Coll* coll) {
    if (!a[0].isArray())
        fail(17046,
             fmt::format(
                 "both operands of $setIsSubset must be arrays. First argument is of type: {}",
                 typeNameOf(a[0])));
    if (!a[1].isArray())
        fail(17042,
             fmt::format(
                 "both operands of $setIsSubset must be arrays. Second argument is of type: {}",
                 typeNameOf(a[1])));
    auto rhs = asSet(a[1].arrayElements(), coll);
    for (const auto& e : a[0].arrayElements()) {
        if (!setContains(rhs, e, coll)) return Value::fromBool(false);
    }
    return Value::fromBool(true);
}

Value fnSetEquals(const std::vector<Value>& a, std::string_view, const Coll* coll) {
    std::optional<std::vector<Value>> first;
    for (const auto& v : a) {
        if (!v.isArray())
            fail(17044,
                 fmt::format(
                     "All operands of $setEquals must be arrays. One argument is of type: {}",
                     typeNameOf(v)));
        auto s = asSet(v.arrayElements(), coll);
        if (!first) {
            first = std::move(s);
            continue;
        }
        if (s.size() != first->size()) return Value::fromBool(false);
        for (size_t i = 0; i < s.size(); ++i) {
            if (compare(s[i], (*first)[i], coll) != 0) return Value::fromBool(false);
        }
    }
    return Value::fromBool(true);
}

Value elementsTrue(const std::vector<Value>& a, std::string_view name, bool all) {
    if (!a[0].isArray())
        fail(all ? 17040 : 17041,
             fmt::format("{}'s argument must be an array, but is {}", name, typeNameOf(a[0])));
    for (const auto& e : a[0].arrayElements()) {
        if (e.truthy() != all) return Value::fromBool(!all);
    }
    return Value::fromBool(all);
}
Value fnAllElementsTrue(const std::vector<Value>& a, std::string_view n) {
    return elementsTrue(a, n, true);
}
Value fnAnyElementTrue(const std::vector<Value>& a, std::string_view n) {
    return elementsTrue(a, n, false);
}

/// $sum/$avg/$max/$min expression forms: one array argument means its elements.
std::vector<Value> accumulatorInputs(const std::vector<Value>& a) {
    if (a.size() == 1 && a[0].isArray()) return a[0].arrayElements();
    return a;
}
Value fnSum(const std::vector<Value>& a, std::string_view) {
    Value total = Value::fromInt32(0);
    for (const auto& v : accumulatorInputs(a)) {
        if (v.isNumber()) total = addNumbers(total, v);
    }
    return total;
}
Value fnAvg(const std::vector<Value>& a, std::string_view) {
    Value total = Value::fromInt32(0);
    int64_t n = 0;
    for (const auto& v : accumulatorInputs(a)) {
        if (!v.isNumber()) continue;
        total = addNumbers(total, v);
        ++n;
    }
    if (n == 0) return Value::null();
    return divideNumbers(total, static_cast<double>(n));
}
Value minMax(const std::vector<Value>& a, bool max, const Coll* coll) {
    std::optional<Value> best;
    for (auto& v : accumulatorInputs(a)) {
        if (v.isNullish()) continue;
        if (!best || (max ? compare(v, *best, coll) > 0 : compare(v, *best, coll) < 0))
            best = std::move(v);
    }
    return best ? *best : Value::null();
}
Value fnMax(const std::vector<Value>& a, std::string_view, const Coll* coll) {
    return minMax(a, true, coll);
}
Value fnMin(const std::vector<Value>& a, std::string_view, const Coll* coll) {
    return minMax(a, false, coll);
}

const ScalarOp* findCoreOp(std::string_view name) {
    static const ScalarOp kOps[] = {
        {"$in", nullptr, 2, 2, fnIn},
        {"$size", fnSize, 1, 1},
        {"$arrayElemAt", fnArrayElemAt, 2, 2},
        {"$first", fnFirst, 1, 1},
        {"$last", fnLast, 1, 1},
        {"$slice", fnSlice, 2, 3},
        {"$concatArrays", fnConcatArrays, 0, -1},
        {"$reverseArray", fnReverseArray, 1, 1},
        {"$indexOfArray", nullptr, 2, 4, fnIndexOfArray},
        {"$range", fnRange, 2, 3},
        {"$mergeObjects", fnMergeObjects, 0, -1},
        {"$objectToArray", fnObjectToArray, 1, 1},
        {"$arrayToObject", fnArrayToObject, 1, 1},
        {"$setUnion", nullptr, 0, -1, fnSetUnion},
        {"$setIntersection", nullptr, 0, -1, fnSetIntersection},
        {"$setDifference", nullptr, 2, 2, fnSetDifference},
        {"$setIsSubset", nullptr, 2, 2, fnSetIsSubset},
        {"$setEquals", nullptr, 2, -1, fnSetEquals},
        {"$allElementsTrue", fnAllElementsTrue, 1, 1},
        {"$anyElementTrue", fnAnyElementTrue, 1, 1},
        {"$sum", fnSum, 0, -1},
        {"$avg", fnAvg, 0, -1},
        {"$max", nullptr, 0, -1, fnMax},
        {"$min", nullptr, 0, -1, fnMin},
    };
    for (const auto& op : kOps) {
        if (op.name == name) return &op;
    }
    return nullptr;
}

// ---- parser ----

void validateFieldName(std::string_view k) {
    if (k.empty()) fail(16410, "FieldPath field names may not be empty strings.");
    if (k[0] == '$')
        fail(
            16410,
            "FieldPath field names may not start with '$'. Consider using $getField or $setField.");
    if (k.find('.') != std::string_view::npos)
        fail(16412,
             "FieldPath field names may not contain '.'. Consider using $getField or $setField.");
}

void validateUserVarName(std::string_view n) {
    if (n.empty()) fail(16866, "empty variable names are not allowed");
    unsigned char c0 = static_cast<unsigned char>(n[0]);
    if (!((c0 >= 'a' && c0 <= 'z') || c0 >= 0x80))
        fail(16867,
             fmt::format("'{}' starts with an invalid character for a user variable name", n));
    for (unsigned char c : n) {
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c >= 0x80))
            fail(16868, fmt::format("'{}' contains an invalid character for a variable name: '{}'",
                                    n, static_cast<char>(c)));
    }
}

std::string_view keyOf(const bson_iter_t& it) {
    return {bson_iter_key(&it), bson_iter_key_len(&it)};
}

struct Parser {
    const ExpressionParseOptions& opts;
    std::vector<std::pair<std::string, int>> scope;
    int nextSlot = 0;

    int bind(const std::string& name) {
        scope.emplace_back(name, nextSlot);
        return nextSlot++;
    }

    ExprPtr parse(const bson_value_t& v) {
        switch (v.value_type) {
            case BSON_TYPE_UTF8: {
                std::string_view s(v.value.v_utf8.str, v.value.v_utf8.len);
                if (!s.empty() && s[0] == '$') return parsePath(s);
                return std::make_unique<ConstantNode>(Value(v));
            }
            case BSON_TYPE_DOCUMENT: {
                bson_t doc;
                viewOf(v, &doc);
                return parseObject(&doc);
            }
            case BSON_TYPE_ARRAY: {
                auto arr = std::make_unique<ArrayNode>();
                bson_iter_t it;
                bson_iter_init_from_data(&it, v.value.v_doc.data, v.value.v_doc.data_len);
                while (bson_iter_next(&it)) arr->elems.push_back(parse(*bson_iter_value(&it)));
                return arr;
            }
            default:
                return std::make_unique<ConstantNode>(Value(v));
        }
    }

    ExprPtr parsePath(std::string_view s) {
        if (s.size() >= 2 && s[1] == '$') {
            std::string_view rest = s.substr(2);
            auto parts = splitPath(rest);
            if (parts.empty() || parts[0].empty())
                fail(16869, "empty variable names are not allowed");
            std::string var = parts[0];
            parts.erase(parts.begin());
            checkPathParts(parts);
            if (var == "ROOT" || var == "CURRENT")
                return std::make_unique<PathNode>(PathNode::Base::kCurrent, 0, "",
                                                  std::move(parts));
            if (var == "NOW")
                return std::make_unique<PathNode>(PathNode::Base::kNow, 0, "", std::move(parts));
            if (var == "REMOVE")
                return std::make_unique<PathNode>(PathNode::Base::kRemove, 0, "", std::move(parts));
            for (auto it = scope.rbegin(); it != scope.rend(); ++it) {
                if (it->first == var)
                    return std::make_unique<PathNode>(PathNode::Base::kSlot, it->second, "",
                                                      std::move(parts));
            }
            if (std::find(opts.userVariables.begin(), opts.userVariables.end(), var) !=
                opts.userVariables.end())
                return std::make_unique<PathNode>(PathNode::Base::kUser, 0, var, std::move(parts));
            fail(17276, fmt::format("Use of undefined variable: {}", var));
        }
        if (s.size() == 1) fail(16872, "'$' by itself is not a valid FieldPath");
        auto parts = splitPath(s.substr(1));
        checkPathParts(parts);
        return std::make_unique<PathNode>(PathNode::Base::kCurrent, 0, "", std::move(parts));
    }

    void checkPathParts(const std::vector<std::string>& parts) {
        for (const auto& p : parts) {
            if (p.empty()) fail(15998, "FieldPath field names may not be empty strings.");
            if (p[0] == '$')
                fail(16410,
                     "FieldPath field names may not start with '$'. Consider using $getField or "
                     "$setField.");
        }
    }

    ExprPtr parseObject(const bson_t* doc) {
        bson_iter_t it;
        bson_iter_init(&it, doc);
        uint32_t n = bson_count_keys(doc);
        if (n == 0) return std::make_unique<ObjectNode>();
        bson_iter_next(&it);
        std::string_view first = keyOf(it);
        if (!first.empty() && first[0] == '$') {
            if (n != 1)
                fail(15983,
                     fmt::format(
                         "an expression specification must contain exactly one field, the name "
                         "of the expression. Found {} fields in {}",
                         n, bson::toJson(doc)));
            return parseOperator(first, *bson_iter_value(&it));
        }
        auto obj = std::make_unique<ObjectNode>();
        do {
            std::string_view k = keyOf(it);
            validateFieldName(k);
            obj->fields.emplace_back(std::string(k), parse(*bson_iter_value(&it)));
        } while (bson_iter_next(&it));
        return obj;
    }

    std::vector<ExprPtr> parseArgs(const bson_value_t& v) {
        std::vector<ExprPtr> args;
        if (v.value_type == BSON_TYPE_ARRAY) {
            bson_iter_t it;
            bson_iter_init_from_data(&it, v.value.v_doc.data, v.value.v_doc.data_len);
            while (bson_iter_next(&it)) args.push_back(parse(*bson_iter_value(&it)));
        } else {
            args.push_back(parse(v));
        }
        return args;
    }

    static void checkArity(std::string_view name, size_t n, int min, int max) {
        if (min == max && static_cast<int>(n) != min)
            fail(16020, fmt::format("Expression {} takes exactly {} arguments. {} were passed in.",
                                    name, min, n));
        if (static_cast<int>(n) < min || (max >= 0 && static_cast<int>(n) > max)) {
            if (max < 0)
                fail(16020, fmt::format(
                                "Expression {} takes at least {} arguments, but {} were passed in.",
                                name, min, n));
            fail(28667,
                 fmt::format(
                     "Expression {} takes at least {} arguments, and at most {}, but {} were "
                     "passed in.",
                     name, min, max, n));
        }
    }

    /// Named-argument operators: {input: ..., as: ..., ...}.
    struct NamedArgs {
        std::vector<std::pair<std::string, Value>> args;
        const bson_value_t* get(std::string_view k) const {
            for (const auto& [n, v] : args) {
                if (n == k) return &v.get();
            }
            return nullptr;
        }
    };

    static NamedArgs namedArgs(const bson_value_t& v, std::string_view name, int notObjectCode,
                               const char* notObjectMsg,
                               std::initializer_list<std::string_view> allowed, int unknownCode,
                               const char* unknownFmt) {
        if (v.value_type != BSON_TYPE_DOCUMENT)
            fail(notObjectCode,
                 fmt::format(fmt::runtime(notObjectMsg), name, typeNameOf(Value(v))));
        NamedArgs out;
        bson_iter_t it;
        bson_iter_init_from_data(&it, v.value.v_doc.data, v.value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            std::string k(keyOf(it));
            if (std::find(allowed.begin(), allowed.end(), k) == allowed.end())
                fail(unknownCode, fmt::format(fmt::runtime(unknownFmt), name, k));
            out.args.emplace_back(std::move(k), Value::fromIter(it));
        }
        return out;
    }

    ExprPtr parseOperator(std::string_view name, const bson_value_t& v) {
        if (name == "$literal") return std::make_unique<ConstantNode>(Value(v));
        if (name == "$and" || name == "$or")
            return std::make_unique<AndOrNode>(name == "$and", parseArgs(v));
        if (name == "$cond") return parseCond(v);
        if (name == "$ifNull") {
            auto node = std::make_unique<IfNullNode>();
            node->args = parseArgs(v);
            if (node->args.size() < 2)
                fail(1257300, fmt::format("$ifNull needs at least two arguments, had: {}",
                                          node->args.size()));
            return node;
        }
        if (name == "$switch") return parseSwitch(v);
        if (name == "$let") return parseLet(v);
        if (name == "$map" || name == "$filter") return parseMapFilter(name, v);
        if (name == "$reduce") return parseReduce(v);
        if (name == "$convert") return parseConvert(v);
        if (name == "$dateToString") return parseDateToString(v);
        if (name == "$trim" || name == "$ltrim" || name == "$rtrim") return parseTrim(name, v);
        if (name == "$getField") return parseGetField(v);
        if (name == "$rand") {
            if (v.value_type != BSON_TYPE_DOCUMENT || v.value.v_doc.data_len > 5)
                fail(3040501, "$rand does not currently accept arguments");
            return std::make_unique<RandNode>();
        }
        if (name == "$setField" || name == "$unsetField") return parseSetField(name, v);
        const ScalarOp* op = findCoreOp(name);
        if (!op) op = findScalarOp(name);
        if (!op) fail(168, fmt::format("Unrecognized expression '{}'", name));
        auto args = parseArgs(v);
        // Accumulator-style operators take their single argument as is.
        checkArity(name, args.size(), op->minArgs, op->maxArgs);
        return std::make_unique<FunctionNode>(std::string(name), *op, std::move(args),
                                              opts.collator);
    }

    ExprPtr parseCond(const bson_value_t& v) {
        auto node = std::make_unique<CondNode>();
        if (v.value_type == BSON_TYPE_DOCUMENT) {
            auto a = namedArgs(v, "$cond", 17080, "{} requires an object, found {}",
                               {"if", "then", "else"}, 17083, "Unrecognized parameter to {}: {}");
            if (!a.get("if")) fail(17080, "Missing 'if' parameter to $cond");
            if (!a.get("then")) fail(17081, "Missing 'then' parameter to $cond");
            if (!a.get("else")) fail(17082, "Missing 'else' parameter to $cond");
            node->cond = parse(*a.get("if"));
            node->then = parse(*a.get("then"));
            node->otherwise = parse(*a.get("else"));
            return node;
        }
        auto args = parseArgs(v);
        checkArity("$cond", args.size(), 3, 3);
        node->cond = std::move(args[0]);
        node->then = std::move(args[1]);
        node->otherwise = std::move(args[2]);
        return node;
    }

    ExprPtr parseSwitch(const bson_value_t& v) {
        if (v.value_type != BSON_TYPE_DOCUMENT)
            fail(40060, fmt::format("$switch requires an object as an argument, found: {}",
                                    typeNameOf(Value(v))));
        auto node = std::make_unique<SwitchNode>();
        bson_iter_t it;
        bson_iter_init_from_data(&it, v.value.v_doc.data, v.value.v_doc.data_len);
        bool haveBranches = false;
        while (bson_iter_next(&it)) {
            std::string_view k = keyOf(it);
            const bson_value_t& val = *bson_iter_value(&it);
            if (k == "branches") {
                haveBranches = true;
                if (val.value_type != BSON_TYPE_ARRAY)
                    fail(40061, fmt::format("$switch expected an array for 'branches', found: {}",
                                            typeNameOf(Value(val))));
                bson_iter_t bi;
                bson_iter_recurse(&it, &bi);
                while (bson_iter_next(&bi)) {
                    const bson_value_t& b = *bson_iter_value(&bi);
                    if (b.value_type != BSON_TYPE_DOCUMENT)
                        fail(40062,
                             fmt::format("$switch expected each branch to be an object, found: {}",
                                         typeNameOf(Value(b))));
                    ExprPtr c, t;
                    bson_iter_t ci;
                    bson_iter_recurse(&bi, &ci);
                    while (bson_iter_next(&ci)) {
                        std::string_view bk = keyOf(ci);
                        if (bk == "case") {
                            c = parse(*bson_iter_value(&ci));
                        } else if (bk == "then") {
                            t = parse(*bson_iter_value(&ci));
                        } else {
                            fail(40063,
                                 fmt::format("$switch found an unknown argument to a branch: {}",
                                             bk));
                        }
                    }
                    if (!c) fail(40064, "$switch requires each branch have a 'case' expression");
                    if (!t) fail(40065, "$switch requires each branch have a 'then' expression.");
                    node->branches.emplace_back(std::move(c), std::move(t));
                }
            } else if (k == "default") {
                node->defaultExpr = parse(val);
            } else {
                fail(40067, fmt::format("$switch found an unknown argument: {}", k));
            }
        }
        if (!haveBranches || node->branches.empty())
            fail(40068, "$switch requires at least one branch.");
        return node;
    }

    ExprPtr parseLet(const bson_value_t& v) {
        auto a = namedArgs(v, "$let", 16874, "{} only supports an object as its argument",
                           {"vars", "in"}, 16875, "Unrecognized parameter to {}: {}");
        const bson_value_t* vars = a.get("vars");
        const bson_value_t* in = a.get("in");
        if (!vars) fail(16876, "Missing 'vars' parameter to $let");
        if (!in) fail(16877, "Missing 'in' parameter to $let");
        if (vars->value_type != BSON_TYPE_DOCUMENT)
            fail(10065, fmt::format("invalid parameter: expected an object (vars)"));
        auto node = std::make_unique<LetNode>();
        std::vector<std::pair<std::string, ExprPtr>> defs;
        bson_iter_t it;
        bson_iter_init_from_data(&it, vars->value.v_doc.data, vars->value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            std::string name(keyOf(it));
            validateUserVarName(name);
            defs.emplace_back(name, parse(*bson_iter_value(&it)));  // outer scope
        }
        size_t mark = scope.size();
        for (auto& [name, e] : defs) node->vars.emplace_back(bind(name), std::move(e));
        node->in = parse(*in);
        scope.resize(mark);
        return node;
    }

    ExprPtr parseMapFilter(std::string_view name, const bson_value_t& v) {
        const bool isMap = name == "$map";
        auto a = isMap ? namedArgs(v, name, 16878, "{} only supports an object as its argument",
                                   {"input", "as", "in"}, 16879, "Unrecognized parameter to {}: {}")
                       : namedArgs(v, name, 28646, "{} only supports an object as its argument",
                                   {"input", "as", "cond", "limit"}, 28647,
                                   "Unrecognized parameter to {}: {}");
        const bson_value_t* input = a.get("input");
        const bson_value_t* as = a.get("as");
        const bson_value_t* body = a.get(isMap ? "in" : "cond");
        if (!input)
            fail(isMap ? 16880 : 28648, fmt::format("Missing 'input' parameter to {}", name));
        if (!body)
            fail(isMap ? 16882 : 28650,
                 fmt::format("Missing '{}' parameter to {}", isMap ? "in" : "cond", name));
        std::string var = "this";
        if (as) {
            if (as->value_type != BSON_TYPE_UTF8)
                fail(16866, "empty variable names are not allowed");
            var = as->value.v_utf8.str;
            validateUserVarName(var);
        }
        auto node = std::make_unique<MapFilterNode>();
        node->isMap = isMap;
        node->input = parse(*input);
        if (const bson_value_t* l = a.get("limit")) node->limit = parse(*l);
        size_t mark = scope.size();
        node->slot = bind(var);
        node->body = parse(*body);
        scope.resize(mark);
        return node;
    }

    ExprPtr parseReduce(const bson_value_t& v) {
        auto a =
            namedArgs(v, "$reduce", 40075, "{} requires an object as an argument, found: {}",
                      {"input", "initialValue", "in"}, 40076, "{} found an unknown argument: {}");
        if (!a.get("input")) fail(40077, "$reduce requires 'input' to be specified");
        if (!a.get("initialValue")) fail(40078, "$reduce requires 'initialValue' to be specified");
        if (!a.get("in")) fail(40079, "$reduce requires 'in' to be specified");
        auto node = std::make_unique<ReduceNode>();
        node->input = parse(*a.get("input"));
        node->initial = parse(*a.get("initialValue"));
        size_t mark = scope.size();
        node->thisSlot = bind("this");
        node->valueSlot = bind("value");
        node->in = parse(*a.get("in"));
        scope.resize(mark);
        return node;
    }

    ExprPtr parseConvert(const bson_value_t& v) {
        auto a = namedArgs(
            v, "$convert", 34181, "{} expects an object of named arguments but found: {}",
            {"input", "to", "onError", "onNull"}, 34182, "{} found an unknown argument: {}");
        if (!a.get("input")) fail(34183, "Missing 'input' parameter to $convert");
        if (!a.get("to")) fail(34184, "Missing 'to' parameter to $convert");
        auto node = std::make_unique<ConvertNode>();
        node->input = parse(*a.get("input"));
        node->to = parse(*a.get("to"));
        if (auto* e = a.get("onError")) node->onError = parse(*e);
        if (auto* e = a.get("onNull")) node->onNull = parse(*e);
        return node;
    }

    ExprPtr parseDateToString(const bson_value_t& v) {
        auto a = namedArgs(
            v, "$dateToString", 18629, "{} only supports an object as its argument, found {}",
            {"date", "format", "timezone", "onNull"}, 18534, "Unrecognized argument to {}: {}");
        if (!a.get("date")) fail(18628, "Missing 'date' parameter to $dateToString");
        auto node = std::make_unique<DateToStringNode>();
        node->date = parse(*a.get("date"));
        if (auto* e = a.get("format")) node->format = parse(*e);
        if (auto* e = a.get("timezone")) node->timezone = parse(*e);
        if (auto* e = a.get("onNull")) node->onNull = parse(*e);
        return node;
    }

    ExprPtr currentDocument() {
        bson_value_t cur;
        cur.value_type = BSON_TYPE_UTF8;
        static char text[] = "$$CURRENT";
        cur.value.v_utf8.str = text;
        cur.value.v_utf8.len = sizeof text - 1;
        return parse(cur);
    }

    ExprPtr parseGetField(const bson_value_t& v) {
        auto node = std::make_unique<GetFieldNode>();
        if (v.value_type != BSON_TYPE_DOCUMENT) {
            // {$getField: "name"}: the field of $$CURRENT.
            node->field = parse(v);
            node->input = currentDocument();
        } else {
            auto a = namedArgs(v, "$getField", 3041703, "{} requires an object, found {}",
                               {"field", "input"}, 3041701, "{} found an unknown argument: {}");
            if (!a.get("field")) fail(3041702, "$getField requires 'field' to be specified");
            node->field = parse(*a.get("field"));
            node->input = a.get("input") ? parse(*a.get("input")) : currentDocument();
        }
        return node;  // a non-string 'field' fails when evaluated
    }

    ExprPtr parseSetField(std::string_view name, const bson_value_t& v) {
        const bool unset = name == "$unsetField";
        auto a = unset ? namedArgs(v, name, 4161100, "{} only supports an object as its argument",
                                   {"field", "input"}, 4161101, "{} found an unknown argument: {}")
                       : namedArgs(v, name, 4161100, "{} only supports an object as its argument",
                                   {"field", "input", "value"}, 4161101,
                                   "{} found an unknown argument: {}");
        if (!a.get("field"))
            fail(4161102, fmt::format("{} requires 'field' to be specified", name));
        if (!unset && !a.get("value"))
            fail(4161103, fmt::format("{} requires 'value' to be specified", name));
        if (!a.get("input"))
            fail(4161109, fmt::format("{} requires 'input' to be specified", name));
        // The field name must be a constant string ({$literal: "..."} for one
        // starting with '$'), as in mongod.
        auto f = parse(*a.get("field"));
        EvalContext none{};
        Value fv = f->isConstant() ? f->eval(none) : Value::missing();
        if (!f->isConstant() || fv.type() != BSON_TYPE_UTF8)
            fail(4161106, fmt::format("{} requires 'field' to evaluate to a constant, but got a "
                                      "non-constant argument",
                                      name));
        auto node = std::make_unique<SetFieldNode>();
        node->name = std::string(name);
        node->field = std::string(fv.str());
        node->input = parse(*a.get("input"));
        if (!unset) node->value = parse(*a.get("value"));
        return node;
    }

    ExprPtr parseTrim(std::string_view name, const bson_value_t& v) {
        auto a = namedArgs(v, name, 50696, "{} only supports an object as an argument, found: {}",
                           {"input", "chars"}, 50694, "{} found an unknown argument: {}");
        if (!a.get("input")) fail(50695, fmt::format("{} requires an 'input' field", name));
        auto node = std::make_unique<TrimNode>();
        node->name = std::string(name);
        node->left = name != "$rtrim";
        node->right = name != "$ltrim";
        node->input = parse(*a.get("input"));
        if (auto* e = a.get("chars")) node->chars = parse(*e);
        return node;
    }
};

int64_t wallClockMillis() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::unique_ptr<Expression> Expression::parse(const bson_value_t& spec,
                                              const ExpressionParseOptions& opts) {
    Parser p{opts};
    auto e = p.parse(spec);
    e->setSlotCount(p.nextSlot);
    return e;
}

std::unique_ptr<Expression> Expression::parseObject(const bson_t* spec,
                                                    const ExpressionParseOptions& opts) {
    return parse(borrowDocument(spec), opts);
}

Value Expression::evaluate(const bson_t* root, const Variables* vars) const {
    EvalContext ctx{borrowDocument(root), vars,
                    std::vector<Value>(static_cast<size_t>(slotCount())),
                    vars && vars->now() >= 0 ? vars->now() : wallClockMillis()};
    return eval(ctx);
}

}  // namespace halo::query
