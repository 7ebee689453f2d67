#include "store/query/match_expression.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "bson/compare.h"
#include "store/query/path.h"

namespace halo::query {
namespace {

bool isNaN(const bson_value_t& v) {
    if (v.value_type == BSON_TYPE_DOUBLE) return std::isnan(v.value.v_double);
    if (v.value_type == BSON_TYPE_DECIMAL128) return std::isnan(bson::toDouble(v));
    return false;
}

bson_value_t nullValue() {
    bson_value_t v{};
    v.value_type = BSON_TYPE_NULL;
    return v;
}

}  // namespace

bool ComparisonPredicate::matches(const bson_value_t& in, int64_t*) const {
    // A missing field compares as null (so {$gte: null} and {$eq: null} match it).
    const bson_value_t nv = nullValue();
    const bson_value_t& v = in.value_type == BSON_TYPE_EOD ? nv : in;
    const bson_value_t& r = rhs_.get();
    if (bson::canonicalRank(v.value_type) != bson::canonicalRank(r.value_type)) {
        if (r.value_type == BSON_TYPE_MINKEY) return op() == Op::kGt || op() == Op::kGte;
        if (r.value_type == BSON_TYPE_MAXKEY) return op() == Op::kLt || op() == Op::kLte;
        return false;
    }
    if (isNaN(v) || isNaN(r)) {
        return isNaN(v) && isNaN(r) && (op() == Op::kEq || op() == Op::kLte || op() == Op::kGte);
    }
    int c = bson::compareValues(v, r, coll_);
    switch (op()) {
        case Op::kEq:
            return c == 0;
        case Op::kLt:
            return c < 0;
        case Op::kLte:
            return c <= 0;
        case Op::kGt:
            return c > 0;
        case Op::kGte:
            return c >= 0;
        default:
            return false;
    }
}

bool RegexPredicate::matches(const bson_value_t& v, int64_t*) const {
    switch (v.value_type) {
        case BSON_TYPE_UTF8:
            return re_.matches({v.value.v_utf8.str, v.value.v_utf8.len});
        case BSON_TYPE_SYMBOL:
            return re_.matches({v.value.v_symbol.symbol, v.value.v_symbol.len});
        case BSON_TYPE_REGEX:
            return re_.pattern() == v.value.v_regex.regex &&
                   re_.options() == (v.value.v_regex.options ? v.value.v_regex.options : "");
        default:
            return false;
    }
}

InPredicate::InPredicate(std::vector<Value> values, std::vector<Regex> regexes,
                         const bson::StringComparator* coll)
    : ElemPredicate(Op::kIn),
      values_(std::move(values)),
      regexes_(std::move(regexes)),
      coll_(coll) {
    std::sort(values_.begin(), values_.end(),
              [coll](const Value& a, const Value& b) { return compare(a, b, coll) < 0; });
    values_.erase(
        std::unique(values_.begin(), values_.end(),
                    [coll](const Value& a, const Value& b) { return compare(a, b, coll) == 0; }),
        values_.end());
    for (const auto& v : values_) hasNull_ |= v.type() == BSON_TYPE_NULL;
}

bool InPredicate::matches(const bson_value_t& v, int64_t*) const {
    if (v.value_type == BSON_TYPE_EOD) return hasNull_;
    auto it = std::lower_bound(values_.begin(), values_.end(), v,
                               [this](const Value& a, const bson_value_t& b) {
                                   return bson::compareValues(a.get(), b, coll_) < 0;
                               });
    if (it != values_.end() && bson::compareValues(it->get(), v, coll_) == 0) return true;
    if (!regexes_.empty()) {
        for (const auto& re : regexes_) {
            if (RegexPredicate(re).matches(v, nullptr)) return true;
        }
    }
    return false;
}

bool TypePredicate::matches(const bson_value_t& v, int64_t*) const {
    if (v.value_type == BSON_TYPE_EOD) return false;
    if (number_ && bson::isNumber(v.value_type)) return true;
    int t = static_cast<int>(v.value_type);
    if (v.value_type == BSON_TYPE_MINKEY) t = -1;
    if (v.value_type == BSON_TYPE_MAXKEY) t = 127;
    return std::find(types_.begin(), types_.end(), t) != types_.end();
}

bool SizePredicate::matches(const bson_value_t& v, int64_t*) const {
    if (v.value_type != BSON_TYPE_ARRAY) return false;
    bson_iter_t it;
    if (!bson_iter_init_from_data(&it, v.value.v_doc.data, v.value.v_doc.data_len)) return false;
    int64_t n = 0;
    while (bson_iter_next(&it)) ++n;
    return n == n_;
}

bool ModPredicate::matches(const bson_value_t& v, int64_t*) const {
    int64_t x;
    switch (v.value_type) {
        case BSON_TYPE_INT32:
            x = v.value.v_int32;
            break;
        case BSON_TYPE_INT64:
            x = v.value.v_int64;
            break;
        case BSON_TYPE_DOUBLE:
        case BSON_TYPE_DECIMAL128: {
            double d = bson::toDouble(v);
            if (!std::isfinite(d)) return false;
            d = std::trunc(d);
            if (d < -0x1p63 || d >= 0x1p63) return false;
            x = static_cast<int64_t>(d);
            break;
        }
        default:
            return false;
    }
    if (divisor_ == -1) return remainder_ == 0;
    return x % divisor_ == remainder_;
}

ElemMatchPredicate::ElemMatchPredicate(Op op, std::unique_ptr<MatchExpr> sub)
    : ElemPredicate(op), sub_(std::move(sub)) {}
ElemMatchPredicate::~ElemMatchPredicate() = default;

bool ElemMatchPredicate::matches(const bson_value_t& v, int64_t* index) const {
    if (v.value_type != BSON_TYPE_ARRAY) return false;
    bson_iter_t it;
    if (!bson_iter_init_from_data(&it, v.value.v_doc.data, v.value.v_doc.data_len)) return false;
    int64_t i = 0;
    while (bson_iter_next(&it)) {
        const bson_value_t& e = *bson_iter_value(&it);
        bool objectLike = e.value_type == BSON_TYPE_DOCUMENT || e.value_type == BSON_TYPE_ARRAY;
        if ((op() == Op::kElemMatchValue || objectLike) && sub_->matches(e, nullptr)) {
            if (index) *index = i;
            return true;
        }
        ++i;
    }
    return false;
}

bool LogicalExpr::matches(const bson_value_t& input, MatchDetails* details) const {
    switch (kind()) {
        case Kind::kAnd:
            for (const auto& c : children) {
                if (!c->matches(input, details)) return false;
            }
            return true;
        case Kind::kOr:
            for (const auto& c : children) {
                MatchDetails local;
                if (c->matches(input, details ? &local : nullptr)) {
                    if (details && !details->elemMatchKey)
                        details->elemMatchKey = local.elemMatchKey;
                    return true;
                }
            }
            return false;
        case Kind::kNor:
            for (const auto& c : children) {
                if (c->matches(input, nullptr)) return false;
            }
            return true;
        default:
            return false;
    }
}

bool ExprExpr::matches(const bson_value_t& input, MatchDetails*) const {
    bson_t doc;
    if (!viewOf(input, &doc)) return false;
    return expr->evaluate(&doc).truthy();
}

PathExpr::PathExpr(std::string path, std::unique_ptr<ElemPredicate> pred)
    : MatchExpr(Kind::kPath),
      path_(std::move(path)),
      parts_(splitPath(path_)),
      pred_(std::move(pred)) {}

bool PathExpr::matches(const bson_value_t& input, MatchDetails* details) const {
    if (parts_.empty()) {
        int64_t idx = -1;
        return pred_->matches(input, &idx);
    }
    if (input.value_type != BSON_TYPE_DOCUMENT && input.value_type != BSON_TYPE_ARRAY) {
        return pred_->matches(detail::missingValue(), nullptr);
    }
    PathWalkOptions opt;
    opt.expandLeafArrays = pred_->expandsLeafArrays();
    int64_t found = -1;
    auto visit = [&](const bson_value_t& v, int64_t outer) {
        int64_t inner = -1;
        if (!pred_->matches(v, &inner)) return false;
        found = outer >= 0 ? outer : inner;
        return true;
    };
    if (!walkPath(input, parts_, 0, opt, -1, visit)) return false;
    if (details && found >= 0 && !details->elemMatchKey)
        details->elemMatchKey = std::to_string(found);
    return true;
}

std::vector<std::string> splitPath(std::string_view dotted) {
    std::vector<std::string> out;
    if (dotted.empty()) return out;
    size_t start = 0;
    while (true) {
        size_t dot = dotted.find('.', start);
        if (dot == std::string_view::npos) {
            out.emplace_back(dotted.substr(start));
            break;
        }
        out.emplace_back(dotted.substr(start, dot - start));
        start = dot + 1;
    }
    return out;
}

}  // namespace halo::query
