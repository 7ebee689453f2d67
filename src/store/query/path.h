#pragma once
// Dotted-path traversal with MongoDB's query (matcher) semantics, shared by the
// matcher and sort-key extraction.
//
// For a path "a.b.c" the walk visits every value the path reaches:
//  - an absent field, or a scalar where a sub-document is needed, yields
//    "missing" (a bson_value_t of type BSON_TYPE_EOD);
//  - an array at an inner position is traversed: each element that is a
//    document continues the walk with the rest of the path; when the next
//    component is the element's index ("a.0.b"), the element itself continues
//    with the component after it; other elements yield nothing;
//  - an array at the leaf yields each element (when expandLeafArrays) and then
//    the array itself (when yieldWholeLeafArray); nested arrays are not expanded.
// Each value is reported with the index of the outermost array traversed to
// reach it (-1 when none), which is what the positional `$` operator uses.
#include <bson/bson.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace halo::query {

/// Splits "a.b.c" into {"a","b","c"} (an empty path yields no components).
std::vector<std::string> splitPath(std::string_view dotted);

struct PathWalkOptions {
    bool expandLeafArrays = true;
    bool yieldWholeLeafArray = true;
    /// Reports an empty leaf array as one `undefined` value (sort keys: [] sorts
    /// before null).
    bool emptyLeafArrayAsUndefined = false;
};

namespace detail {
inline bson_value_t missingValue() {
    bson_value_t v{};
    v.value_type = BSON_TYPE_EOD;
    return v;
}
inline bson_value_t undefinedValue() {
    bson_value_t v{};
    v.value_type = BSON_TYPE_UNDEFINED;
    return v;
}
inline bool isEmptyArray(const bson_value_t& v) {
    return v.value_type == BSON_TYPE_ARRAY && v.value.v_doc.data_len <= 5;
}
inline bool findIn(const bson_value_t& container, const std::string& key, bson_iter_t* it) {
    if (container.value_type != BSON_TYPE_DOCUMENT && container.value_type != BSON_TYPE_ARRAY)
        return false;
    if (!bson_iter_init_from_data(it, container.value.v_doc.data, container.value.v_doc.data_len))
        return false;
    return bson_iter_find_w_len(it, key.data(), static_cast<int>(key.size()));
}
}  // namespace detail

/// Walks `parts[i..]` from `container` (a document or array value). Calls
/// `f(const bson_value_t& v, int64_t outerArrayIndex)` for each reached value;
/// `f` returns true to stop the walk, in which case walkPath returns true.
template <class F>
bool walkPath(const bson_value_t& container, const std::vector<std::string>& parts, size_t i,
              const PathWalkOptions& opt, int64_t outer, F& f) {
    bson_iter_t it;
    if (!detail::findIn(container, parts[i], &it)) return f(detail::missingValue(), outer);
    const bson_value_t& v = *bson_iter_value(&it);
    const bool leaf = i + 1 == parts.size();
    if (leaf) {
        if (v.value_type == BSON_TYPE_ARRAY) {
            if (opt.emptyLeafArrayAsUndefined && detail::isEmptyArray(v))
                return f(detail::undefinedValue(), outer);
            if (opt.expandLeafArrays) {
                bson_iter_t ai;
                int64_t idx = 0;
                if (bson_iter_recurse(&it, &ai)) {
                    while (bson_iter_next(&ai)) {
                        if (f(*bson_iter_value(&ai), outer >= 0 ? outer : idx)) return true;
                        ++idx;
                    }
                }
            }
            if (opt.yieldWholeLeafArray) return f(v, outer);
            return false;
        }
        return f(v, outer);
    }
    if (v.value_type == BSON_TYPE_DOCUMENT) return walkPath(v, parts, i + 1, opt, outer, f);
    if (v.value_type != BSON_TYPE_ARRAY) return f(detail::missingValue(), outer);
    bson_iter_t ai;
    if (!bson_iter_recurse(&it, &ai)) return false;
    const std::string& next = parts[i + 1];
    int64_t idx = 0;
    while (bson_iter_next(&ai)) {
        const bson_value_t& e = *bson_iter_value(&ai);
        int64_t o = outer >= 0 ? outer : idx;
        ++idx;
        if (std::strcmp(bson_iter_key(&ai), next.c_str()) == 0) {
            // Positional component: "a.1" names element 1 of the array.
            if (i + 2 == parts.size()) {
                if (opt.emptyLeafArrayAsUndefined && detail::isEmptyArray(e)) {
                    if (f(detail::undefinedValue(), o)) return true;
                } else if (e.value_type == BSON_TYPE_ARRAY) {
                    // Treat the element as a leaf array value.
                    bson_iter_t ei;
                    if (opt.expandLeafArrays && bson_iter_recurse(&ai, &ei)) {
                        while (bson_iter_next(&ei)) {
                            if (f(*bson_iter_value(&ei), o)) return true;
                        }
                    }
                    if (opt.yieldWholeLeafArray && f(e, o)) return true;
                } else if (f(e, o)) {
                    return true;
                }
            } else if (e.value_type == BSON_TYPE_DOCUMENT || e.value_type == BSON_TYPE_ARRAY) {
                if (walkPath(e, parts, i + 2, opt, o, f)) return true;
            }
            continue;
        }
        if (e.value_type == BSON_TYPE_DOCUMENT) {
            if (walkPath(e, parts, i + 1, opt, o, f)) return true;
        }
    }
    return false;
}

/// Convenience overload: walks the whole path from a document value.
template <class F>
bool walkPath(const bson_value_t& root, const std::vector<std::string>& parts,
              const PathWalkOptions& opt, F& f) {
    if (parts.empty()) return f(root, -1);
    return walkPath(root, parts, 0, opt, -1, f);
}

}  // namespace halo::query
