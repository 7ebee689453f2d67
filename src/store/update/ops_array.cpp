// $push (with $each/$slice/$sort/$position), $addToSet, $pull, $pullAll, $pop.
#include <fmt/format.h>

#include <algorithm>

#include "bson/compare.h"
#include "bson/doc.h"
#include "common/status.h"
#include "store/query/collator.h"
#include "store/query/matcher.h"
#include "store/update/format.h"
#include "store/update/modifier.h"

namespace halo::update {
namespace {

std::vector<std::unique_ptr<Element>> elementsOf(const bson_value_t& arr) {
    std::vector<std::unique_ptr<Element>> out;
    bson_iter_t it;
    if (bson_iter_init_from_data(&it, arr.value.v_doc.data, arr.value.v_doc.data_len)) {
        while (bson_iter_next(&it)) out.push_back(Element::fromValue("", *bson_iter_value(&it)));
    }
    return out;
}

bool isIntegral(const bson_value_t& v, int64_t* out) {
    return bson::isNumber(v.value_type) && bson::toInt64Exact(v, out);
}

/// $push's $sort: whole elements (pattern empty) or by fields of embedded documents.
struct SortSpec {
    int wholeDirection = 0;  // 1/-1 when sorting whole elements
    std::vector<std::pair<std::vector<std::string>, int>> fields;  // dotted path, direction
};

const char kSortInvalid[] =
    "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort embedded "
    "fields";

bool isPlusMinusOne(const bson_value_t& v, int* dir) {
    int64_t n;
    if (!isIntegral(v, &n) || (n != 1 && n != -1)) return false;
    *dir = static_cast<int>(n);
    return true;
}

SortSpec parseSort(const bson_value_t& v) {
    SortSpec spec;
    if (bson::isNumber(v.value_type)) {
        if (!isPlusMinusOne(v, &spec.wholeDirection)) uasserted(ErrorCode::BadValue, kSortInvalid);
        return spec;
    }
    if (v.value_type != BSON_TYPE_DOCUMENT) uasserted(ErrorCode::BadValue, kSortInvalid);
    bson_iter_t it;
    bson_iter_init_from_data(&it, v.value.v_doc.data, v.value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        std::string name = bson_iter_key(&it);
        int dir = 0;
        if (!isPlusMinusOne(*bson_iter_value(&it), &dir)) {
            uasserted(ErrorCode::BadValue, "The $sort element value must be either 1 or -1");
        }
        std::vector<std::string> parts;
        size_t start = 0;
        while (true) {
            auto dot = name.find('.', start);
            parts.push_back(name.substr(start, dot == std::string::npos ? dot : dot - start));
            if (parts.back().empty()) {
                uasserted(ErrorCode::BadValue,
                          fmt::format("The $sort field is a dotted field but has an empty part: {}",
                                      name));
            }
            if (dot == std::string::npos) break;
            start = dot + 1;
        }
        spec.fields.emplace_back(std::move(parts), dir);
    }
    if (spec.fields.empty()) {
        uasserted(ErrorCode::BadValue,
                  "The $sort pattern is empty when it should be a set of fields.");
    }
    return spec;
}

/// The sort key of `e` for one pattern path: scalars and missing fields sort as null.
const Element* sortKey(const Element& e, const std::vector<std::string>& path) {
    const Element* cur = &e;
    for (auto& p : path) {
        if (!cur->isObject() && !cur->isArray()) return nullptr;
        cur = cur->findChild(p);
        if (!cur) return nullptr;
    }
    return cur;
}

void sortArray(std::vector<std::unique_ptr<Element>>& elems, const SortSpec& spec,
               const bson::StringComparator* coll) {
    static const auto kNull = Element::makeNull("");
    std::stable_sort(elems.begin(), elems.end(), [&](const auto& a, const auto& b) {
        if (spec.wholeDirection != 0)
            return compareElements(*a, *b, coll) * spec.wholeDirection < 0;
        for (auto& [path, dir] : spec.fields) {
            const Element* ka = a->isObject() ? sortKey(*a, path) : nullptr;
            const Element* kb = b->isObject() ? sortKey(*b, path) : nullptr;
            int c = compareElements(ka ? *ka : *kNull, kb ? *kb : *kNull, coll);
            if (c != 0) return c * dir < 0;
        }
        return false;
    });
}

class PushModifier final : public Modifier {
  public:
    std::vector<std::unique_ptr<Element>> each;
    Collation coll;
    std::optional<int64_t> slice;
    std::optional<SortSpec> sort;
    std::optional<int64_t> position;

    bool applyExisting(Element& e, const std::string& path, ApplyContext& ctx) const override {
        if (!e.isArray()) {
            uasserted(
                ErrorCode::BadValue,
                fmt::format("The field '{}' must be an array but is of type {} in document {}",
                            e.key(), bson::typeName(e.type()), ctx.idBraced));
        }
        bool reshapes = slice || sort;
        std::unique_ptr<Element> before;
        if (reshapes || ctx.log) before = e.clone("");
        auto elems = e.takeChildren();
        size_t pos = elems.size();
        if (position) {
            int64_t p = *position;
            int64_t n = static_cast<int64_t>(elems.size());
            pos = static_cast<size_t>(p < 0 ? std::max<int64_t>(0, n + p) : std::min(p, n));
        }
        std::vector<std::unique_ptr<Element>> added;
        for (auto& v : each) added.push_back(v->clone(""));
        elems.insert(elems.begin() + static_cast<std::ptrdiff_t>(pos),
                     std::make_move_iterator(added.begin()), std::make_move_iterator(added.end()));
        finish(elems);
        for (auto& c : elems) e.appendChild(std::move(c));
        bool changed = reshapes ? !binaryEqual(*before, e) : !each.empty();
        if (changed) ctx.logArrayChange(path, before.get(), e);
        return changed;
    }
    std::unique_ptr<Element> valueForMissing(const std::string&, ApplyContext&) const override {
        std::vector<std::unique_ptr<Element>> elems;
        for (auto& v : each) elems.push_back(v->clone(""));
        finish(elems);
        auto arr = Element::makeArray("");
        for (auto& c : elems) arr->appendChild(std::move(c));
        return arr;
    }

  private:
    void finish(std::vector<std::unique_ptr<Element>>& elems) const {
        if (sort) sortArray(elems, *sort, coll.get());
        if (slice) {
            auto n = static_cast<int64_t>(elems.size());
            int64_t s = *slice;
            if (s >= 0 && s < n)
                elems.resize(static_cast<size_t>(s));
            else if (s < 0 && -s < n)
                elems.erase(elems.begin(), elems.begin() + (n + s));
        }
    }
};

bool containsEqual(const std::vector<std::unique_ptr<Element>>& v, const Element& x,
                   const bson::StringComparator* coll) {
    for (auto& e : v) {
        if (compareElements(*e, x, coll) == 0) return true;
    }
    return false;
}

class AddToSetModifier final : public Modifier {
  public:
    std::vector<std::unique_ptr<Element>> values;  // deduplicated
    Collation coll;

    bool applyExisting(Element& e, const std::string& path, ApplyContext& ctx) const override {
        if (!e.isArray()) {
            uasserted(ErrorCode::BadValue,
                      fmt::format("Cannot apply $addToSet to non-array field. Field named '{}' has "
                                  "non-array type {}",
                                  e.key(), bson::typeName(e.type())));
        }
        size_t oldSize = e.size();
        for (auto& v : values) {
            bool present = false;
            for (size_t i = 0; i < oldSize && !present; ++i) {
                present = compareElements(*e.child(i), *v, coll.get()) == 0;
            }
            if (!present) e.appendChild(v->clone(""));
        }
        for (size_t i = oldSize; i < e.size(); ++i) ctx.logUpdated(fmt::format("{}.{}", path, i));
        return e.size() != oldSize;
    }
    std::unique_ptr<Element> valueForMissing(const std::string&, ApplyContext&) const override {
        auto arr = Element::makeArray("");
        for (auto& v : values) arr->appendChild(v->clone(""));
        return arr;
    }
};

/// Shared by $pull and $pullAll: removes the elements `shouldRemove` selects.
class ArrayCullingModifier : public Modifier {
  public:
    bool createsMissing() const override { return false; }
    bool applyExisting(Element& e, const std::string& path, ApplyContext& ctx) const override {
        if (!e.isArray()) uasserted(ErrorCode::BadValue, "Cannot apply $pull to a non-array value");
        std::unique_ptr<Element> before = ctx.log ? e.clone("") : nullptr;
        bool changed = false;
        for (size_t i = e.size(); i-- > 0;) {
            if (shouldRemove(*e.child(i))) {
                e.removeChild(i);
                changed = true;
            }
        }
        if (changed) ctx.logArrayChange(path, before.get(), e);
        return changed;
    }
    std::unique_ptr<Element> valueForMissing(const std::string&, ApplyContext&) const override {
        return nullptr;
    }

  protected:
    virtual bool shouldRemove(const Element& elem) const = 0;
};

class PullModifier final : public ArrayCullingModifier {
  public:
    enum class Mode { kEquality, kObject, kWrapped };
    static constexpr const char* kWrapKey = "v";

    PullModifier(Mode mode, const bson_value_t& v, Collation coll)
        : mode_(mode), value_(Element::fromValue("", v)), coll_(std::move(coll)) {
        if (mode == Mode::kEquality) return;
        bson::Doc filter;
        if (mode == Mode::kObject)
            filter = bson::Doc::copyOf(value_->toDoc().get());
        else
            bson::appendValue(filter.mut(), kWrapKey, v);
        query::MatcherParseOptions mo;
        mo.collator = coll_;
        matcher_ = uassertStatusOK(query::Matcher::parse(filter.get(), mo));
    }

  protected:
    bool shouldRemove(const Element& elem) const override {
        switch (mode_) {
            case Mode::kEquality:
                return compareElements(elem, *value_, coll_.get()) == 0;
            case Mode::kObject: {
                if (!elem.isObject()) return false;
                return matcher_->matches(elem.toDoc().get());
            }
            case Mode::kWrapped: {
                bson::Doc wrapped;
                elem.appendTo(wrapped.mut(), kWrapKey);
                return matcher_->matches(wrapped.get());
            }
        }
        return false;
    }

  private:
    Mode mode_;
    std::unique_ptr<Element> value_;
    Collation coll_;
    std::unique_ptr<query::Matcher> matcher_;
};

class PullAllModifier final : public ArrayCullingModifier {
  public:
    PullAllModifier(std::vector<std::unique_ptr<Element>> v, Collation coll)
        : values_(std::move(v)), coll_(std::move(coll)) {}

  protected:
    bool shouldRemove(const Element& elem) const override {
        return containsEqual(values_, elem, coll_.get());
    }

  private:
    std::vector<std::unique_ptr<Element>> values_;
    Collation coll_;
};

class PopModifier final : public Modifier {
  public:
    explicit PopModifier(bool fromFront) : fromFront_(fromFront) {}
    bool createsMissing() const override { return false; }
    bool applyExisting(Element& e, const std::string& path, ApplyContext& ctx) const override {
        if (!e.isArray()) {
            uasserted(ErrorCode::TypeMismatch,
                      fmt::format("Path '{}' contains an element of non-array type '{}'", path,
                                  bson::typeName(e.type())));
        }
        if (e.size() == 0) return false;
        std::unique_ptr<Element> before = ctx.log ? e.clone("") : nullptr;
        e.removeChild(fromFront_ ? 0 : e.size() - 1);
        ctx.logArrayChange(path, before.get(), e);
        return true;
    }
    std::unique_ptr<Element> valueForMissing(const std::string&, ApplyContext&) const override {
        return nullptr;
    }

  private:
    bool fromFront_;
};

}  // namespace

std::unique_ptr<Modifier> makePushModifier(const bson_value_t& v, const Collation& coll) {
    auto m = std::make_unique<PushModifier>();
    m->coll = coll;
    bson_iter_t it;
    bool modifierForm = false;
    if (v.value_type == BSON_TYPE_DOCUMENT &&
        bson_iter_init_from_data(&it, v.value.v_doc.data, v.value.v_doc.data_len) &&
        bson_iter_find(&it, "$each")) {
        modifierForm = true;
    }
    if (!modifierForm) {
        m->each.push_back(Element::fromValue("", v));
        return m;
    }
    bson_iter_init_from_data(&it, v.value.v_doc.data, v.value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        std::string_view key = bson_iter_key(&it);
        const bson_value_t& arg = *bson_iter_value(&it);
        if (key == "$each") {
            if (arg.value_type != BSON_TYPE_ARRAY) {
                uasserted(ErrorCode::BadValue,
                          fmt::format("The argument to $each in $push must be an array but it was "
                                      "of type: {}",
                                      bson::typeName(arg.value_type)));
            }
            m->each = elementsOf(arg);
        } else if (key == "$slice") {
            int64_t n;
            if (!isIntegral(arg, &n)) {
                uasserted(ErrorCode::BadValue,
                          fmt::format("The value for $slice must be an integer value but was given "
                                      "type: {}",
                                      bson::typeName(arg.value_type)));
            }
            m->slice = n;
        } else if (key == "$sort") {
            m->sort = parseSort(arg);
        } else if (key == "$position") {
            int64_t n;
            if (!isIntegral(arg, &n)) {
                uasserted(ErrorCode::BadValue,
                          fmt::format("The value for $position must be an integer value, not of "
                                      "type: {}",
                                      bson::typeName(arg.value_type)));
            }
            m->position = n;
        } else {
            uasserted(ErrorCode::BadValue, fmt::format("Unrecognized clause in $push: {}", key));
        }
    }
    return m;
}

std::unique_ptr<Modifier> makeAddToSetModifier(const bson_value_t& v, const Collation& coll) {
    auto m = std::make_unique<AddToSetModifier>();
    m->coll = coll;
    std::vector<std::unique_ptr<Element>> candidates;
    bson_iter_t it;
    if (v.value_type == BSON_TYPE_DOCUMENT &&
        bson_iter_init_from_data(&it, v.value.v_doc.data, v.value.v_doc.data_len) &&
        bson_iter_next(&it) && std::string_view(bson_iter_key(&it)) == "$each") {
        const bson_value_t& each = *bson_iter_value(&it);
        if (each.value_type != BSON_TYPE_ARRAY) {
            uasserted(ErrorCode::TypeMismatch,
                      fmt::format("The argument to $each in $addToSet must be an array but it was "
                                  "of type {}",
                                  bson::typeName(each.value_type)));
        }
        if (bson_iter_next(&it)) {
            bson_t obj;
            bson_init_static(&obj, v.value.v_doc.data, v.value.v_doc.data_len);
            uasserted(ErrorCode::BadValue,
                      fmt::format("Found unexpected fields after $each in $addToSet: {}",
                                  formatDoc(&obj)));
        }
        candidates = elementsOf(each);
    } else {
        candidates.push_back(Element::fromValue("", v));
    }
    for (auto& c : candidates) {
        if (!containsEqual(m->values, *c, coll.get())) m->values.push_back(std::move(c));
    }
    return m;
}

std::unique_ptr<Modifier> makePullModifier(const bson_value_t& v, const Collation& coll) {
    using Mode = PullModifier::Mode;
    Mode mode = Mode::kEquality;
    if (v.value_type == BSON_TYPE_DOCUMENT) {
        // An "expression document" ({$gte: 6}) applies to each element; other documents
        // are queries on embedded-document elements.
        bson_iter_t it;
        bool expression =
            bson_iter_init_from_data(&it, v.value.v_doc.data, v.value.v_doc.data_len) &&
            bson_iter_next(&it) && bson_iter_key(&it)[0] == '$';
        if (expression) {
            std::string_view k = bson_iter_key(&it);
            if (k == "$ref" || k == "$id" || k == "$db") expression = false;
        }
        mode = expression ? Mode::kWrapped : Mode::kObject;
    } else if (v.value_type == BSON_TYPE_REGEX) {
        mode = Mode::kWrapped;
    }
    return std::make_unique<PullModifier>(mode, v, coll);
}

std::unique_ptr<Modifier> makePullAllModifier(const bson_value_t& v, const Collation& coll) {
    if (v.value_type != BSON_TYPE_ARRAY) {
        uasserted(ErrorCode::BadValue,
                  fmt::format("$pullAll requires an array argument but was given a {}",
                              bson::typeName(v.value_type)));
    }
    return std::make_unique<PullAllModifier>(elementsOf(v), coll);
}

std::unique_ptr<Modifier> makePopModifier(std::string_view field, const bson_value_t& v) {
    if (!bson::isNumber(v.value_type)) {
        uasserted(ErrorCode::FailedToParse,
                  fmt::format("Expected a number in: {}", formatElement(field, v)));
    }
    int64_t n;
    if (!bson::toInt64Exact(v, &n)) {
        uasserted(ErrorCode::FailedToParse,
                  fmt::format("Expected an integer: {}", formatElement(field, v)));
    }
    if (n != 1 && n != -1) {
        uasserted(ErrorCode::FailedToParse, fmt::format("$pop expects 1 or -1, found: {}", n));
    }
    return std::make_unique<PopModifier>(n == -1);
}

}  // namespace halo::update
