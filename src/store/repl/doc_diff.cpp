#include "store/repl/doc_diff.h"

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "bson/compare.h"

namespace halo::store {
namespace {

/// One step of a path: a field name, or an array index.
struct Component {
    std::string name;
    bool index = false;
};
using Components = std::vector<Component>;

struct Diff {
    bson::Doc updated;
    std::vector<std::string> removed;
    std::vector<std::pair<std::string, int32_t>> truncated;
    // Paths a dotted string reads two ways (a numeric field name, which could be
    // taken for an array index, or a dot inside a field name), with their steps.
    std::vector<std::pair<std::string, Components>> ambiguous;
};

/// A field name that, in a dotted path, could be taken for something else.
bool isAmbiguous(std::string_view field) {
    if (field.find('.') != std::string_view::npos) return true;
    if (field.empty()) return false;
    for (char c : field)
        if (c < '0' || c > '9') return false;
    return true;
}

/// Notes `path` when one of its field names is ambiguous (an array index is not:
/// mongod lists paths with a numeric field name or a dotted one, indexes as ints).
void noteAmbiguous(Diff& d, const std::string& path, const Components& components) {
    for (const auto& c : components) {
        if (!c.index && isAmbiguous(c.name)) {
            d.ambiguous.emplace_back(path, components);
            return;
        }
    }
}

bson_t view(const bson_value_t& v) {
    bson_t b;
    bson_init_static(&b, v.value.v_doc.data, v.value.v_doc.data_len);
    return b;
}

void diffInto(const bson_t* before, const bson_t* after, const std::string& prefix,
              Components& components, Diff& d);

/// Records that `path` (the last of `components`) changed from `ov` to `nv`:
/// documents and arrays are described by what changed inside them, anything
/// else is set whole.
void diffValue(const bson_value_t& ov, const bson_value_t& nv, const std::string& path,
               Components& components, Diff& d);

/// An array's changes as mongod describes them: the elements that differ, by
/// index (descending into documents and arrays), the new elements, and the new
/// length when it shrank; or the whole array when that description would not be
/// smaller than the array itself.
void diffArray(const bson_value_t& ov, const bson_value_t& nv, const std::string& path,
               Components& components, Diff& d) {
    bson_t a = view(ov), b = view(nv);
    Diff inner;
    bson_iter_t ia, ib;
    bson_iter_init(&ia, &a);
    bson_iter_init(&ib, &b);
    uint32_t n = 0;
    bool moreOld = bson_iter_next(&ia);
    bool moreNew = bson_iter_next(&ib);
    for (; moreOld && moreNew; ++n, moreOld = bson_iter_next(&ia), moreNew = bson_iter_next(&ib)) {
        const bson_value_t o = *bson_iter_value(&ia);
        const bson_value_t v = *bson_iter_value(&ib);
        if (o.value_type == v.value_type && bson::compareValues(o, v) == 0) continue;
        std::string at = path + "." + std::to_string(n);
        components.push_back({std::to_string(n), true});
        diffValue(o, v, at, components, inner);
        components.pop_back();
    }
    for (; moreNew; ++n, moreNew = bson_iter_next(&ib)) {
        std::string at = path + "." + std::to_string(n);
        bson::appendIter(inner.updated.mut(), at, ib);
        components.push_back({std::to_string(n), true});
        noteAmbiguous(inner, at, components);
        components.pop_back();
    }
    if (moreOld) inner.truncated.emplace_back(path, static_cast<int32_t>(n));
    // About the bytes the description takes (mongod's measure): the elements it
    // sets, a resize, the removed paths.
    size_t described = inner.updated.size() + 7 * inner.truncated.size();
    for (const auto& r : inner.removed) described += r.size() + 3;
    if (described > b.len) {
        bson_append_value(d.updated.mut(), path.c_str(), -1, &nv);
        noteAmbiguous(d, path, components);
        return;
    }
    bson_concat(d.updated.mut(), inner.updated.get());
    d.removed.insert(d.removed.end(), inner.removed.begin(), inner.removed.end());
    d.truncated.insert(d.truncated.end(), inner.truncated.begin(), inner.truncated.end());
    d.ambiguous.insert(d.ambiguous.end(), inner.ambiguous.begin(), inner.ambiguous.end());
}

void diffValue(const bson_value_t& ov, const bson_value_t& nv, const std::string& path,
               Components& components, Diff& d) {
    if (nv.value_type == BSON_TYPE_DOCUMENT && ov.value_type == BSON_TYPE_DOCUMENT) {
        bson_t a = view(ov), b = view(nv);
        diffInto(&a, &b, path, components, d);
        return;
    }
    if (nv.value_type == BSON_TYPE_ARRAY && ov.value_type == BSON_TYPE_ARRAY) {
        diffArray(ov, nv, path, components, d);
        return;
    }
    bson_append_value(d.updated.mut(), path.c_str(), -1, &nv);
    noteAmbiguous(d, path, components);
}

void diffInto(const bson_t* before, const bson_t* after, const std::string& prefix,
              Components& components, Diff& d) {
    std::map<std::string, bson_iter_t> old;
    bson_iter_t it;
    bson_iter_init(&it, before);
    while (bson_iter_next(&it)) old.emplace(bson_iter_key(&it), it);
    bson_iter_init(&it, after);
    while (bson_iter_next(&it)) {
        std::string key = bson_iter_key(&it);
        std::string path = prefix.empty() ? key : prefix + "." + key;
        components.push_back({key, false});
        struct Pop {
            Components& c;
            ~Pop() { c.pop_back(); }
        } pop{components};
        auto o = old.find(key);
        if (o == old.end()) {
            bson::appendIter(d.updated.mut(), path, it);
            noteAmbiguous(d, path, components);
            continue;
        }
        // Copy the value structs: bson_iter_value points into the iterator itself,
        // which erase() destroys (the data they point to lives in the documents).
        const bson_value_t nv = *bson_iter_value(&it);
        const bson_value_t ov = *bson_iter_value(&o->second);
        old.erase(o);
        if (nv.value_type == ov.value_type && bson::compareValues(nv, ov) == 0) continue;
        diffValue(ov, nv, path, components, d);
    }
    for (const auto& [key, _] : old) {
        std::string path = prefix.empty() ? key : prefix + "." + key;
        d.removed.push_back(path);
        components.push_back({key, false});
        noteAmbiguous(d, path, components);
        components.pop_back();
    }
}

}  // namespace

bson::Doc diffDocuments(const bson_t* before, const bson_t* after) {
    Diff d;
    Components components;
    diffInto(before, after, "", components, d);
    bson::Doc out;
    if (!d.updated.empty()) BSON_APPEND_DOCUMENT(out.mut(), "u", d.updated.get());
    if (!d.removed.empty()) {
        bson_t r;
        BSON_APPEND_DOCUMENT_BEGIN(out.mut(), "d", &r);
        for (const auto& p : d.removed) bson_append_bool(&r, p.c_str(), -1, false);
        bson_append_document_end(out.mut(), &r);
    }
    if (!d.truncated.empty()) {
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(out.mut(), "t", &arr);
        for (size_t i = 0; i < d.truncated.size(); ++i) {
            std::string k = std::to_string(i);
            bson_t e;
            BSON_APPEND_DOCUMENT_BEGIN(&arr, k.c_str(), &e);
            BSON_APPEND_UTF8(&e, "field", d.truncated[i].first.c_str());
            BSON_APPEND_INT32(&e, "newSize", d.truncated[i].second);
            bson_append_document_end(&arr, &e);
        }
        bson_append_array_end(out.mut(), &arr);
    }
    if (!d.ambiguous.empty()) {
        // {path: [step, ...]}: field names as strings, array indexes as ints.
        bson_t p;
        BSON_APPEND_DOCUMENT_BEGIN(out.mut(), "p", &p);
        for (const auto& [path, components] : d.ambiguous) {
            bson_t arr;
            bson_append_array_begin(&p, path.c_str(), -1, &arr);
            for (size_t i = 0; i < components.size(); ++i) {
                std::string k = std::to_string(i);
                if (components[i].index)
                    BSON_APPEND_INT32(&arr, k.c_str(), std::stoi(components[i].name));
                else
                    BSON_APPEND_UTF8(&arr, k.c_str(), components[i].name.c_str());
            }
            bson_append_array_end(&p, &arr);
        }
        bson_append_document_end(out.mut(), &p);
    }
    return out;
}

void appendUpdateDescription(bson_t* out, const bson_t* diff, bool disambiguatedPaths) {
    bson_t u, d, t;
    bson_t desc;
    BSON_APPEND_DOCUMENT_BEGIN(out, "updateDescription", &desc);
    if (bson::subDocument(diff, "u", &u))
        BSON_APPEND_DOCUMENT(&desc, "updatedFields", &u);
    else {
        bson_t empty = BSON_INITIALIZER;
        BSON_APPEND_DOCUMENT(&desc, "updatedFields", &empty);
    }
    bson_t removed;
    BSON_APPEND_ARRAY_BEGIN(&desc, "removedFields", &removed);
    if (bson::subDocument(diff, "d", &d)) {
        bson_iter_t it;
        bson_iter_init(&it, &d);
        int i = 0;
        while (bson_iter_next(&it)) {
            std::string k = std::to_string(i++);
            BSON_APPEND_UTF8(&removed, k.c_str(), bson_iter_key(&it));
        }
    }
    bson_append_array_end(&desc, &removed);
    if (bson::subDocument(diff, "t", &t))
        BSON_APPEND_ARRAY(&desc, "truncatedArrays", &t);
    else {
        bson_t empty;
        BSON_APPEND_ARRAY_BEGIN(&desc, "truncatedArrays", &empty);
        bson_append_array_end(&desc, &empty);
    }
    if (disambiguatedPaths) {
        bson_t p;
        if (bson::subDocument(diff, "p", &p)) {
            BSON_APPEND_DOCUMENT(&desc, "disambiguatedPaths", &p);
        } else {
            bson_t empty = BSON_INITIALIZER;
            BSON_APPEND_DOCUMENT(&desc, "disambiguatedPaths", &empty);
        }
    }
    bson_append_document_end(out, &desc);
}

}  // namespace halo::store
