#include "store/repl/doc_diff.h"

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "bson/compare.h"

namespace halo::store {
namespace {

struct Diff {
    bson::Doc updated;
    std::vector<std::string> removed;
    std::vector<std::pair<std::string, int32_t>> truncated;
    // Paths a dotted string reads two ways (a numeric field name, which could be
    // an array index, or a dot inside a field name), with their real components.
    std::vector<std::pair<std::string, std::vector<std::string>>> ambiguous;
};

/// A field name that, in a dotted path, could be taken for something else.
bool isAmbiguous(std::string_view field) {
    if (field.find('.') != std::string_view::npos) return true;
    if (field.empty()) return false;
    for (char c : field)
        if (c < '0' || c > '9') return false;
    return true;
}

/// Notes `path` (made of `components`) when some component is ambiguous.
void noteAmbiguous(Diff& d, const std::string& path, const std::vector<std::string>& components) {
    for (const auto& c : components) {
        if (isAmbiguous(c)) {
            d.ambiguous.emplace_back(path, components);
            return;
        }
    }
}

bool isPrefixOf(const bson_value_t& shorter, const bson_value_t& longer, uint32_t* shortLen) {
    bson_t a, b;
    if (!bson_init_static(&a, shorter.value.v_doc.data, shorter.value.v_doc.data_len) ||
        !bson_init_static(&b, longer.value.v_doc.data, longer.value.v_doc.data_len))
        return false;
    bson_iter_t ia, ib;
    bson_iter_init(&ia, &a);
    bson_iter_init(&ib, &b);
    uint32_t n = 0;
    while (bson_iter_next(&ia)) {
        if (!bson_iter_next(&ib)) return false;
        if (bson::compareValues(*bson_iter_value(&ia), *bson_iter_value(&ib)) != 0) return false;
        ++n;
    }
    *shortLen = n;
    return true;
}

void diffInto(const bson_t* before, const bson_t* after, const std::string& prefix,
              std::vector<std::string>& components, Diff& d) {
    std::map<std::string, bson_iter_t> old;
    bson_iter_t it;
    bson_iter_init(&it, before);
    while (bson_iter_next(&it)) old.emplace(bson_iter_key(&it), it);
    bson_iter_init(&it, after);
    while (bson_iter_next(&it)) {
        std::string key = bson_iter_key(&it);
        std::string path = prefix.empty() ? key : prefix + "." + key;
        components.push_back(key);
        struct Pop {
            std::vector<std::string>& c;
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
        const bson_value_t nvCopy = *bson_iter_value(&it);
        const bson_value_t ovCopy = *bson_iter_value(&o->second);
        const bson_value_t* nv = &nvCopy;
        const bson_value_t* ov = &ovCopy;
        old.erase(o);
        if (nv->value_type == ov->value_type && bson::compareValues(*nv, *ov) == 0) continue;
        if (nv->value_type == BSON_TYPE_DOCUMENT && ov->value_type == BSON_TYPE_DOCUMENT) {
            bson_t a, b;
            bson_init_static(&a, ov->value.v_doc.data, ov->value.v_doc.data_len);
            bson_init_static(&b, nv->value.v_doc.data, nv->value.v_doc.data_len);
            diffInto(&a, &b, path, components, d);
            continue;
        }
        uint32_t newSize = 0;
        if (nv->value_type == BSON_TYPE_ARRAY && ov->value_type == BSON_TYPE_ARRAY &&
            isPrefixOf(*nv, *ov, &newSize)) {
            d.truncated.emplace_back(path, static_cast<int32_t>(newSize));
            noteAmbiguous(d, path, components);
            continue;
        }
        bson::appendIter(d.updated.mut(), path, it);
        noteAmbiguous(d, path, components);
    }
    for (const auto& [key, _] : old) {
        std::string path = prefix.empty() ? key : prefix + "." + key;
        d.removed.push_back(path);
        components.push_back(key);
        noteAmbiguous(d, path, components);
        components.pop_back();
    }
}

}  // namespace

bson::Doc diffDocuments(const bson_t* before, const bson_t* after) {
    Diff d;
    std::vector<std::string> components;
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
        // {path: [component, ...]}: every component is a field name (arrays are
        // compared whole, never by index).
        bson_t p;
        BSON_APPEND_DOCUMENT_BEGIN(out.mut(), "p", &p);
        for (const auto& [path, components] : d.ambiguous)
            bson::appendStringArray(&p, path, components);
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
