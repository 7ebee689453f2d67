#include "store/query/sort.h"

#include <fmt/format.h>

#include "bson/compare.h"
#include "store/query/path.h"

namespace halo::query {

StatusWith<SortPattern> SortPattern::parse(const bson_t* spec,
                                           std::shared_ptr<const bson::StringComparator> coll) {
    SortPattern sp;
    sp.coll_ = std::move(coll);
    bson_iter_t it;
    if (!bson_iter_init(&it, spec)) return Status(ErrorCode::InvalidBSON, "invalid sort document");
    while (bson_iter_next(&it)) {
        std::string key(bson_iter_key(&it), bson_iter_key_len(&it));
        const bson_value_t& v = *bson_iter_value(&it);
        if (v.value_type == BSON_TYPE_DOCUMENT) {
            bson_t sub;
            viewOf(v, &sub);
            bson_iter_t si;
            if (bson_iter_init_find(&si, &sub, "$meta"))
                return Status(ErrorCode::BadValue, "$meta sort is not supported");
            return Status(ErrorCode::Location17312,
                          "$meta is the only expression supported by $sort right now");
        }
        if (!bson::isNumber(v.value_type))
            return Status(ErrorCode::Location15974,
                          fmt::format("Illegal key in $sort specification: {}: {}", key,
                                      bson::valueToString(v)));
        double d = bson::toDouble(v);
        if (d != 1 && d != -1)
            return Status(ErrorCode::Location15975,
                          "$sort key ordering must be 1 (for ascending) or -1 (for descending)");
        if (key.empty())
            return Status(ErrorCode::Location40352,
                          "FieldPath cannot be constructed with empty string");
        Field f;
        f.parts = splitPath(key);
        for (const auto& p : f.parts) {
            if (p.empty())
                return Status(ErrorCode::Location15998,
                              "FieldPath field names may not be empty strings.");
            if (p[0] == '$')
                return Status(ErrorCode::Location16410,
                              fmt::format("FieldPath field names may not start with '$'. Consider "
                                          "using $getField or $setField."));
        }
        f.path = std::move(key);
        f.ascending = d > 0;
        sp.fields_.push_back(std::move(f));
    }
    return sp;
}

SortKey SortPattern::sortKey(const bson_t* doc) const {
    SortKey key;
    key.values.reserve(fields_.size());
    const bson_value_t root = borrowDocument(doc);
    PathWalkOptions opt;
    opt.expandLeafArrays = true;
    opt.yieldWholeLeafArray = false;
    opt.emptyLeafArrayAsUndefined = true;
    for (const auto& f : fields_) {
        const bson_value_t* best = nullptr;
        bson_value_t nullv{};
        nullv.value_type = BSON_TYPE_NULL;
        bson_value_t bestCopy{};
        auto visit = [&](const bson_value_t& v, int64_t) {
            const bson_value_t& c = v.value_type == BSON_TYPE_EOD ? nullv : v;
            if (!best) {
                bestCopy = c;
                best = &bestCopy;
            } else {
                int cmp = bson::compareValues(c, *best, coll_.get());
                if (f.ascending ? cmp < 0 : cmp > 0) bestCopy = c;
            }
            return false;
        };
        walkPath(root, f.parts, 0, opt, -1, visit);
        key.values.emplace_back(best ? *best : nullv);
    }
    return key;
}

int SortPattern::compareKeys(const SortKey& a, const SortKey& b) const {
    for (size_t i = 0; i < fields_.size() && i < a.values.size() && i < b.values.size(); ++i) {
        int c = query::compare(a.values[i], b.values[i], coll_.get());
        if (c != 0) return fields_[i].ascending ? c : -c;
    }
    return 0;
}

int SortPattern::compare(const bson_t* a, const bson_t* b) const {
    return compareKeys(sortKey(a), sortKey(b));
}

bson::Doc SortPattern::sortKeyDoc(const bson_t* doc) const {
    bson::Doc out;
    for (const auto& v : sortKey(doc).values) bson::appendValue(out.mut(), "", v.get());
    return out;
}

}  // namespace halo::query
