#include "bson/fields.h"

#include <cstring>

#include "bson/doc.h"

namespace halo::bson {

Fields::Fields(const bson_t* doc) : doc_(doc) {
    bson_iter_t it;
    if (!bson_iter_init(&it, doc)) return;
    while (bson_iter_next(&it)) {
        Field f{it, bson_iter_key(&it), bson_iter_key_len(&it)};
        if (n_ < kInline)
            inline_[n_] = f;
        else
            more_.push_back(f);
        ++n_;
    }
}

std::string_view Fields::key(size_t i) const {
    const Field& f = field(i);
    return {f.key, f.keyLen};
}

const bson_iter_t* Fields::findIter(std::string_view key) const {
    for (size_t i = 0; i < n_; ++i) {
        const Field& f = field(i);
        if (f.keyLen == key.size() && std::memcmp(f.key, key.data(), key.size()) == 0) return &f.it;
    }
    return nullptr;
}

bool Fields::find(std::string_view key, bson_iter_t* out) const {
    const bson_iter_t* it = findIter(key);
    if (!it) return false;
    *out = *it;
    return true;
}

bool Fields::has(std::string_view key) const {
    return findIter(key) != nullptr;
}

bool Fields::subDocument(std::string_view key, bson_t* out) const {
    const bson_iter_t* it = findIter(key);
    return it && subDocumentAt(*it, out);
}

}  // namespace halo::bson
