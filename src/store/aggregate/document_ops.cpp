#include "store/aggregate/document_ops.h"

namespace halo::aggregate {

void appendValue(bson_t* out, std::string_view key, const query::Value& v) {
    if (v.isMissing()) return;
    bson::appendValue(out, key, v.get());
}

query::Value getPath(const bson_t* doc, const std::vector<std::string>& parts) {
    bson_t cur;
    if (!bson_init_static(&cur, bson_get_data(doc), doc->len)) return {};
    for (size_t i = 0; i < parts.size(); ++i) {
        bson_iter_t it;
        if (!bson_iter_init_find_w_len(&it, &cur, parts[i].data(),
                                       static_cast<int>(parts[i].size())))
            return {};
        if (i + 1 == parts.size()) return query::Value::fromIter(it);
        if (!BSON_ITER_HOLDS_DOCUMENT(&it)) return {};
        uint32_t len;
        const uint8_t* data;
        bson_iter_document(&it, &len, &data);
        if (!bson_init_static(&cur, data, len)) return {};
    }
    return {};
}

namespace {

void setPathInto(const bson_t* src, const std::vector<std::string>& parts, size_t i,
                 const query::Value& v, bson_t* out) {
    const std::string& key = parts[i];
    const bool leaf = i + 1 == parts.size();
    bool found = false;
    bson_iter_t it;
    if (src && bson_iter_init(&it, src)) {
        while (bson_iter_next(&it)) {
            if (key != bson_iter_key(&it)) {
                bson_append_iter(out, bson_iter_key(&it), -1, &it);
                continue;
            }
            found = true;
            if (leaf) {
                appendValue(out, key, v);
                continue;
            }
            if (v.isMissing() && !BSON_ITER_HOLDS_DOCUMENT(&it)) {
                bson_append_iter(out, bson_iter_key(&it), -1, &it);
                continue;
            }
            bson_t child, sub;
            const bson_t* subp = nullptr;
            if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
                uint32_t len;
                const uint8_t* data;
                bson_iter_document(&it, &len, &data);
                if (bson_init_static(&sub, data, len)) subp = &sub;
            }
            bson_append_document_begin(out, key.c_str(), static_cast<int>(key.size()), &child);
            setPathInto(subp, parts, i + 1, v, &child);
            bson_append_document_end(out, &child);
        }
    }
    if (found || v.isMissing()) return;
    if (leaf) {
        appendValue(out, key, v);
        return;
    }
    bson_t child;
    bson_append_document_begin(out, key.c_str(), static_cast<int>(key.size()), &child);
    setPathInto(nullptr, parts, i + 1, v, &child);
    bson_append_document_end(out, &child);
}

}  // namespace

bson::Doc setPath(const bson_t* doc, const std::vector<std::string>& parts, const query::Value& v) {
    bson::Doc out;
    if (parts.empty()) return bson::Doc::copyOf(doc);
    setPathInto(doc, parts, 0, v, out.mut());
    return out;
}

bson::Doc toDoc(const query::Value& v) {
    bson_t view;
    if (v.isDocument() && v.view(&view)) return bson::Doc::copyOf(&view);
    return bson::Doc();
}

const char* ArrayKey::operator()(size_t i) {
    const char* key;
    bson_uint32_to_string(static_cast<uint32_t>(i), &key, buf_, sizeof buf_);
    return key;
}

}  // namespace halo::aggregate
