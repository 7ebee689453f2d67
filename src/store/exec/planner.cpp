#include "store/exec/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "bson/compare.h"
#include "store/query/collator.h"
#include "store/storage/key_string.h"

namespace halo::store {
namespace {

/// Index-usable facts about one field, from the filter's top-level conjunction.
struct FieldBounds {
    std::vector<bson_value_t> points;  // equality / $in values (views into the filter)
    bool havePoints = false;
    std::optional<bson_value_t> lo, hi;
    bool loIncl = true, hiIncl = true;
};

bool pointUsable(const bson_value_t& v) {
    // Arrays match by element or whole; regexes match by pattern: no point bounds.
    return v.value_type != BSON_TYPE_ARRAY && v.value_type != BSON_TYPE_REGEX;
}

bool isOperatorDoc(const bson_iter_t& it) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&it)) return false;
    bson_iter_t sub;
    bson_iter_recurse(&it, &sub);
    return bson_iter_next(&sub) && bson_iter_key(&sub)[0] == '$';
}

void collect(const bson_t* filter, std::map<std::string, FieldBounds>& out,
             const bson::StringComparator* coll) {
    bson_iter_t it;
    if (!bson_iter_init(&it, filter)) return;
    while (bson_iter_next(&it)) {
        std::string key = bson_iter_key(&it);
        if (key == "$and" && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t arr;
            bson_iter_recurse(&it, &arr);
            while (bson_iter_next(&arr)) {
                if (!BSON_ITER_HOLDS_DOCUMENT(&arr)) continue;
                uint32_t len;
                const uint8_t* data;
                bson_iter_document(&arr, &len, &data);
                bson_t sub;
                if (bson_init_static(&sub, data, len)) collect(&sub, out, coll);
            }
            continue;
        }
        if (key.empty() || key[0] == '$') continue;
        FieldBounds& fb = out[key];
        if (!isOperatorDoc(it)) {
            const bson_value_t* v = bson_iter_value(&it);
            if (pointUsable(*v) && !fb.havePoints) {
                fb.points = {*v};
                fb.havePoints = true;
            }
            continue;
        }
        bson_iter_t ops;
        bson_iter_recurse(&it, &ops);
        while (bson_iter_next(&ops)) {
            std::string_view op = bson_iter_key(&ops);
            const bson_value_t* v = bson_iter_value(&ops);
            if (op == "$eq") {
                if (pointUsable(*v) && !fb.havePoints) {
                    fb.points = {*v};
                    fb.havePoints = true;
                }
            } else if (op == "$in" && BSON_ITER_HOLDS_ARRAY(&ops) && !fb.havePoints) {
                std::vector<bson_value_t> pts;
                bool ok = true;
                bson_iter_t arr;
                bson_iter_recurse(&ops, &arr);
                while (bson_iter_next(&arr)) {
                    const bson_value_t* e = bson_iter_value(&arr);
                    if (!pointUsable(*e)) {
                        ok = false;
                        break;
                    }
                    pts.push_back(*e);
                }
                if (ok && !pts.empty() && pts.size() <= 1000) {
                    fb.points = std::move(pts);
                    fb.havePoints = true;
                }
            } else if ((op == "$gt" || op == "$gte") && pointUsable(*v)) {
                if (!fb.lo || bson::compareValues(*v, *fb.lo, coll) > 0) {
                    fb.lo = *v;
                    fb.loIncl = op == "$gte";
                }
            } else if ((op == "$lt" || op == "$lte") && pointUsable(*v)) {
                if (!fb.hi || bson::compareValues(*v, *fb.hi, coll) < 0) {
                    fb.hi = *v;
                    fb.hiIncl = op == "$lte";
                }
            }
        }
    }
}

/// True when `v` holds a string or symbol (also inside documents and arrays):
/// its place in an index depends on the index's collation.
bool collatable(const bson_value_t& v) {
    switch (v.value_type) {
        case BSON_TYPE_UTF8:
        case BSON_TYPE_SYMBOL:
            return true;
        case BSON_TYPE_DOCUMENT:
        case BSON_TYPE_ARRAY: {
            bson_iter_t it;
            if (!bson_iter_init_from_data(&it, v.value.v_doc.data, v.value.v_doc.data_len))
                return true;
            while (bson_iter_next(&it))
                if (collatable(*bson_iter_value(&it))) return true;
            return false;
        }
        default:
            return false;
    }
}

bool boundsCollatable(const FieldBounds& fb) {
    for (const auto& v : fb.points)
        if (collatable(v)) return true;
    return (fb.lo && collatable(*fb.lo)) || (fb.hi && collatable(*fb.hi));
}

/// How the query's collation relates to an index's: bounds on strings may be
/// built only when both compare strings alike; otherwise the index answers
/// only predicates without strings, and never provides a sort.
struct IndexCollation {
    const bson::StringComparator* encode = nullptr;  // the index's collator
    bool matchesQuery = true;
};

IndexCollation indexCollation(const IndexEntry& idx, const query::Collator* queryCollator) {
    return {idx.collator.get(), query::sameCollation(idx.collator.get(), queryCollator)};
}

bool sortMatchesIndex(const IndexEntry& idx, const bson_t* sort, int skipEqFields, bool* reverse,
                      const query::Collator* queryCollator) {
    if (!sort || bson_count_keys(sort) == 0) return false;
    if (!query::sameCollation(idx.collator.get(), queryCollator)) return false;
    if (idx.multikey.load()) return false;
    bson_iter_t it;
    bson_iter_init(&it, sort);
    size_t pos = static_cast<size_t>(skipEqFields);
    std::optional<bool> flip;
    while (bson_iter_next(&it)) {
        std::string field = bson_iter_key(&it);
        if (field == "$natural") return false;
        const bson_value_t* v = bson_iter_value(&it);
        if (!bson::isNumber(v->value_type)) return false;
        bool desc = bson::toDouble(*v) < 0;
        if (pos >= idx.pattern.fields.size() || idx.pattern.fields[pos].first != field)
            return false;
        bool f = desc != idx.pattern.fields[pos].second;
        if (flip && *flip != f) return false;
        flip = f;
        ++pos;
    }
    *reverse = flip.value_or(false);
    return true;
}

/// Builds the intervals for `idx` from the bounds; returns the number of
/// leading equality fields used, or -1 when the index's first field is unbounded.
bool nullish(const bson_value_t& v) {
    return v.value_type == BSON_TYPE_NULL || v.value_type == BSON_TYPE_UNDEFINED ||
           v.value_type == BSON_TYPE_MINKEY || v.value_type == BSON_TYPE_MAXKEY;
}

/// A sparse index lacks documents missing all its fields: it may answer only
/// predicates that a missing field can never satisfy.
bool sparseSafe(const FieldBounds& fb) {
    for (const auto& v : fb.points)
        if (nullish(v)) return false;
    if (fb.lo && nullish(*fb.lo)) return false;
    if (fb.hi && nullish(*fb.hi)) return false;
    return true;
}

int buildIntervals(const IndexEntry& idx, const std::map<std::string, FieldBounds>& bounds,
                   const IndexCollation& ic, std::vector<KeyInterval>* out, std::string* summary) {
    if (idx.sparse) {
        auto first = bounds.find(idx.pattern.fields.front().first);
        if (first == bounds.end() || !sparseSafe(first->second)) return -1;
        for (const auto& [field, desc] : idx.pattern.fields) {
            auto it = bounds.find(field);
            if (it != bounds.end() && !sparseSafe(it->second)) return -1;
        }
    }
    std::vector<std::string> prefixes = {""};
    int eq = 0;
    bool range = false;
    std::string sum;
    for (const auto& [field, desc] : idx.pattern.fields) {
        auto it = bounds.find(field);
        if (it == bounds.end()) break;
        const FieldBounds& fb = it->second;
        if (!ic.matchesQuery && boundsCollatable(fb)) break;
        if (fb.havePoints) {
            std::vector<std::string> next;
            for (const auto& p : prefixes)
                for (const auto& v : fb.points) {
                    std::string k = p;
                    keystring::appendValue(k, v, desc, ic.encode);
                    next.push_back(std::move(k));
                }
            if (next.size() > 4096) break;
            prefixes = std::move(next);
            std::sort(prefixes.begin(), prefixes.end());
            prefixes.erase(std::unique(prefixes.begin(), prefixes.end()), prefixes.end());
            // Plain appends, not fmt: this runs for every index of every query.
            if (!sum.empty()) sum += ", ";
            sum += field;
            sum += ": ";
            sum += std::to_string(fb.points.size());
            sum += " point(s)";
            ++eq;
            continue;
        }
        if (fb.lo || fb.hi) {
            std::optional<bson_value_t> lo = fb.lo, hi = fb.hi;
            bool loIncl = fb.loIncl, hiIncl = fb.hiIncl;
            // On a multikey index two range predicates may be satisfied by different
            // elements: only one side may bound the scan.
            if (idx.multikey.load() && lo && hi) hi.reset();
            for (const auto& p : prefixes) {
                KeyInterval iv;
                std::string a = p, b = p;
                bool aIncl = true, bIncl = true;
                // Ascending: [lo, hi]; a descending field reverses the encoded order.
                const auto& first = desc ? hi : lo;
                const auto& last = desc ? lo : hi;
                if (first) {
                    keystring::appendValue(a, *first, desc, ic.encode);
                    aIncl = desc ? hiIncl : loIncl;
                }
                if (last) {
                    keystring::appendValue(b, *last, desc, ic.encode);
                    bIncl = desc ? loIncl : hiIncl;
                }
                iv.start = std::move(a);
                iv.startInclusive = aIncl;
                iv.end = std::move(b);
                iv.endInclusive = bIncl;
                out->push_back(std::move(iv));
            }
            if (!sum.empty()) sum += ", ";
            sum += field;
            sum += ": range";
            range = true;
            break;
        }
        break;
    }
    if (!range) {
        if (eq == 0) return -1;
        for (const auto& p : prefixes) out->push_back(KeyInterval{p, true, p, true});
    }
    *summary = sum;
    return eq * 2 + (range ? 1 : 0);
}

}  // namespace

namespace {

/// The collection's natural order: a clustered collection's documents lie in
/// its cluster key's order (mongod stores them keyed by _id), so its natural
/// scan is the whole _id index; any other's is the record order.
QueryPlan naturalOrder(const CollectionEntry& coll, bool reverse) {
    QueryPlan p;
    p.reverse = reverse;
    if (!bson_has_field(coll.options.get(), "clusteredIndex")) return p;
    for (const auto& idx : coll.indexes) {
        if (!idx->isIdIndex()) continue;
        p.index = idx;
        p.intervals = {KeyInterval{"", true, "", true}};
        p.boundsSummary = "[MinKey, MaxKey]";
        break;
    }
    return p;
}

}  // namespace

QueryPlan planQuery(const CollectionEntry& coll, const bson_t* filter, const bson_t* sort,
                    const bson_t* hint, const query::Collator* collator) {
    std::map<std::string, FieldBounds> bounds;
    if (filter) collect(filter, bounds, collator);

    auto allKeys = [](QueryPlan& p) {
        p.intervals = {KeyInterval{"", true, "", true}};
        p.boundsSummary = "[MinKey, MaxKey]";
    };

    // An explicit hint wins.
    if (hint && bson_count_keys(hint) > 0) {
        bson_iter_t it;
        bson_iter_init(&it, hint);
        bson_iter_next(&it);
        std::shared_ptr<const IndexEntry> chosen;
        if (std::string_view(bson_iter_key(&it)) == "$hint" && BSON_ITER_HOLDS_UTF8(&it)) {
            std::string name = bson_iter_utf8(&it, nullptr);
            for (const auto& i : coll.indexes)
                if (i->name == name) chosen = i;
        } else if (std::string_view(bson_iter_key(&it)) == "$natural") {
            return naturalOrder(coll, bson::toDouble(*bson_iter_value(&it)) < 0);
        } else {
            for (const auto& i : coll.indexes)
                if (bson::compareDocs(i->keyPattern.get(), hint) == 0) chosen = i;
        }
        if (!chosen)
            uasserted(ErrorCode::BadValue,
                      "hint provided does not correspond to an existing index");
        QueryPlan p;
        p.index = chosen;
        std::string sum;
        int score =
            buildIntervals(*chosen, bounds, indexCollation(*chosen, collator), &p.intervals, &sum);
        if (score < 0) {
            p.intervals.clear();
            allKeys(p);
        } else {
            p.boundsSummary = sum;
        }
        bool rev = false;
        int eqSkip = score < 0 ? 0 : score / 2;
        if (sortMatchesIndex(*chosen, sort, eqSkip, &rev, collator) && p.intervals.size() == 1) {
            p.providesSort = true;
            p.reverse = rev;
        }
        return p;
    }

    QueryPlan best;
    int bestScore = 0;
    for (const auto& idx : coll.indexes) {
        // A partial index holds only documents matching its filter; without
        // proving the query implies that filter it may only be used by hint.
        if (idx->partialFilter) continue;
        QueryPlan p;
        p.index = idx;
        std::string sum;
        int score =
            buildIntervals(*idx, bounds, indexCollation(*idx, collator), &p.intervals, &sum);
        if (score < 0) continue;
        p.boundsSummary = sum;
        p.eqFields = score / 2;
        bool rev = false;
        if (p.intervals.size() == 1 && sortMatchesIndex(*idx, sort, p.eqFields, &rev, collator)) {
            p.providesSort = true;
            p.reverse = rev;
        }
        int total = score * 10 + (p.providesSort ? 5 : 0);
        if (idx->isIdIndex() && p.eqFields == 1 && p.intervals.size() == 1) {
            p.isIdPoint = true;
            total += 1000;
        }
        if (idx->unique && p.eqFields == static_cast<int>(idx->pattern.fields.size())) {
            total += 50;
            p.exactKeys = true;
        }
        if (total > bestScore) {
            bestScore = total;
            best = std::move(p);
        }
    }
    if (bestScore > 0) return best;

    // No bounds: an index can still provide the sort.
    if (sort && bson_count_keys(sort) > 0) {
        for (const auto& idx : coll.indexes) {
            bool rev = false;
            if (idx->partialFilter || idx->sparse) continue;
            if (sortMatchesIndex(*idx, sort, 0, &rev, collator)) {
                QueryPlan p;
                p.index = idx;
                allKeys(p);
                p.providesSort = true;
                p.reverse = rev;
                return p;
            }
        }
        bson_iter_t it;
        if (bson::find(sort, "$natural", &it)) {
            QueryPlan p = naturalOrder(coll, bson::toDouble(*bson_iter_value(&it)) < 0);
            p.providesSort = bson_count_keys(sort) == 1;
            return p;
        }
    }
    return naturalOrder(coll, false);
}

}  // namespace halo::store
