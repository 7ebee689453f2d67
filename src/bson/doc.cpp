#include "bson/doc.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bson/compare.h"

namespace halo::bson {

Doc Doc::copyOf(const uint8_t* data, size_t len) {
    bson_t* b = bson_new_from_data(data, len);
    return Doc(b ? b : bson_new());
}

StatusWith<Doc> Doc::fromJson(std::string_view json) {
    bson_error_t err;
    bson_t* b = bson_new_from_json(reinterpret_cast<const uint8_t*>(json.data()),
                                   static_cast<ssize_t>(json.size()), &err);
    if (!b) return Status(ErrorCode::FailedToParse, err.message);
    return Doc(b);
}

Doc Doc::fromJsonOrDie(std::string_view json) {
    auto sw = fromJson(json);
    if (!sw.isOK()) {
        std::fprintf(stderr, "bad JSON literal: %s: %.*s\n", sw.getStatus().reason().c_str(),
                     static_cast<int>(json.size()), json.data());
        std::abort();
    }
    return std::move(sw.getValue());
}

std::string Doc::toJson() const {
    return bson::toJson(b_);
}

std::string toJson(const bson_t* b) {
    size_t len = 0;
    char* s = bson_as_relaxed_extended_json(b, &len);
    if (!s) return "{}";
    std::string out(s, len);
    bson_free(s);
    return out;
}

std::string valueToString(const bson_value_t& v) {
    bson_t tmp = BSON_INITIALIZER;
    bson_append_value(&tmp, "v", 1, &v);
    std::string json = toJson(&tmp);
    bson_destroy(&tmp);
    // json is {"v" : X }
    auto pos = json.find(':');
    if (pos == std::string::npos || json.size() < pos + 3) return json;
    std::string inner = json.substr(pos + 1, json.size() - pos - 2);
    while (!inner.empty() && inner.front() == ' ') inner.erase(inner.begin());
    while (!inner.empty() && inner.back() == ' ') inner.pop_back();
    return inner;
}

namespace {

/// mongod's maximum nesting of embedded documents and arrays (maxBSONDepth).
constexpr size_t kMaxDepth = 200;

/// One open document while validating (bson_iter_t's alignment exceeds its
/// size, so it cannot be a vector's element type itself).
struct OpenDocument {
    bson_iter_t it;
};

}  // namespace

Status validate(const uint8_t* data, size_t len) {
    if (len < 5) return {ErrorCode::InvalidBSON, "BSON document too small"};
    int32_t declared;
    std::memcpy(&declared, data, 4);
    if (declared < 5 || static_cast<size_t>(declared) != len)
        return {ErrorCode::InvalidBSON, "BSON document length mismatch"};
    bson_t b;
    if (!bson_init_static(&b, data, len)) return {ErrorCode::InvalidBSON, "invalid BSON document"};
    // Structure only, as mongod validates what it receives: bson_iter_next
    // checks each element's type and lengths; every embedded document, array
    // and code-with-scope scope is checked the same way, without recursion
    // (nesting comes from the network) and at most kMaxDepth deep. Keys and
    // strings are not checked as UTF-8 (mongod does not; bson_validate checks
    // every key, which cost a third of the whole validation).
    std::vector<OpenDocument> open(1);
    bson_iter_init(&open[0].it, &b);
    while (!open.empty()) {
        bson_iter_t* it = &open.back().it;
        if (!bson_iter_next(it)) {
            // The end of a document leaves err_off 0; anything malformed sets it.
            if (it->err_off != 0)
                return {ErrorCode::InvalidBSON,
                        fmt::format("invalid BSON at offset {}", it->err_off)};
            open.pop_back();
            continue;
        }
        const uint8_t* sub = nullptr;
        uint32_t subLen = 0;
        switch (bson_iter_type(it)) {
            case BSON_TYPE_DOCUMENT:
                bson_iter_document(it, &subLen, &sub);
                break;
            case BSON_TYPE_ARRAY:
                bson_iter_array(it, &subLen, &sub);
                break;
            case BSON_TYPE_CODEWSCOPE: {
                uint32_t codeLen = 0;
                bson_iter_codewscope(it, &codeLen, &subLen, &sub);
                break;
            }
            default:
                continue;
        }
        bson_t child;
        if (!sub || !bson_init_static(&child, sub, subLen))
            return {ErrorCode::InvalidBSON,
                    fmt::format("invalid BSON at offset {}", bson_iter_offset(it))};
        if (open.size() > kMaxDepth)
            return {ErrorCode::Overflow,
                    fmt::format("BSONObj exceeds maximum nested object depth: {}", kMaxDepth)};
        open.emplace_back();
        bson_iter_init(&open.back().it, &child);
    }
    return Status::OK();
}

bool find(const bson_t* doc, std::string_view field, bson_iter_t* out) {
    if (!bson_iter_init(out, doc)) return false;
    return bson_iter_find_w_len(out, field.data(), static_cast<int>(field.size()));
}

std::string stringField(const bson_t* doc, std::string_view field) {
    bson_iter_t it;
    if (find(doc, field, &it) && BSON_ITER_HOLDS_UTF8(&it)) {
        uint32_t len;
        const char* s = bson_iter_utf8(&it, &len);
        return std::string(s, len);
    }
    return {};
}

bool findDotted(const bson_t* doc, std::string_view path, bson_iter_t* out) {
    bson_iter_t it;
    if (!bson_iter_init(&it, doc)) return false;
    std::string p(path);
    if (!bson_iter_find_descendant(&it, p.c_str(), out)) return false;
    return true;
}

Doc copyWithout(const bson_t* src, std::initializer_list<std::string_view> drop,
                const std::function<void(const bson_iter_t&)>& dropped) {
    const uint8_t* data = bson_get_data(src);
    const uint32_t len = src->len;
    std::vector<uint8_t> buf(len);
    size_t out = 4;
    const uint8_t* start = nullptr;  // the element before the iterator's
    bool keep = false;
    auto flush = [&](const uint8_t* end) {
        if (!start || !keep) return;
        std::memcpy(buf.data() + out, start, static_cast<size_t>(end - start));
        out += static_cast<size_t>(end - start);
    };
    bson_iter_t it;
    if (bson_iter_init(&it, src)) {
        while (bson_iter_next(&it)) {
            // An element is its type byte, then its key: it starts just before the key.
            const uint8_t* element = reinterpret_cast<const uint8_t*>(bson_iter_key(&it)) - 1;
            flush(element);
            start = element;
            std::string_view k(bson_iter_key(&it), bson_iter_key_len(&it));
            keep = std::find(drop.begin(), drop.end(), k) == drop.end();
            if (!keep && dropped) dropped(it);
        }
        flush(data + len - 1);
    }
    buf[out++] = 0;
    const uint32_t total = BSON_UINT32_TO_LE(static_cast<uint32_t>(out));
    std::memcpy(buf.data(), &total, 4);
    return Doc::copyOf(buf.data(), out);
}

bool patchInt64(Doc& doc, std::string_view path, int64_t value) {
    bson_iter_t it, at;
    std::string dotted(path);
    if (!bson_iter_init(&it, doc.get()) || !bson_iter_find_descendant(&it, dotted.c_str(), &at) ||
        !BSON_ITER_HOLDS_INT64(&at))
        return false;
    // The value follows the element's key and its terminating zero.
    auto* v = const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(bson_iter_key(&at)) +
                                   bson_iter_key_len(&at) + 1);
    const int64_t le = BSON_UINT64_TO_LE(value);
    std::memcpy(v, &le, sizeof le);
    return true;
}

bool subDocument(const bson_t* doc, std::string_view field, bson_t* out) {
    bson_iter_t it;
    return find(doc, field, &it) && subDocumentAt(it, out);
}

std::string binaryBytes(const bson_iter_t& it) {
    bson_subtype_t st;
    uint32_t len;
    const uint8_t* data;
    bson_iter_binary(&it, &st, &len, &data);
    return std::string(reinterpret_cast<const char*>(data), len);
}

std::string lsidIdBytes(const bson_t* doc) {
    bson_t lsid;
    bson_iter_t id;
    if (!subDocument(doc, "lsid", &lsid) || !bson_iter_init_find(&id, &lsid, "id") ||
        !BSON_ITER_HOLDS_BINARY(&id))
        return {};
    return binaryBytes(id);
}

bool bytesField(const bson_t* doc, std::string_view field, std::string* out) {
    out->clear();
    bson_iter_t it;
    if (!find(doc, field, &it)) return true;
    if (BSON_ITER_HOLDS_BINARY(&it)) {
        *out = binaryBytes(it);
        return true;
    }
    if (BSON_ITER_HOLDS_UTF8(&it)) {
        uint32_t len;
        const char* s = bson_iter_utf8(&it, &len);
        out->assign(s, len);
        return true;
    }
    return false;
}

void appendBinary(bson_t* b, std::string_view key, std::string_view bytes) {
    bson_append_binary(b, key.data(), static_cast<int>(key.size()), BSON_SUBTYPE_BINARY,
                       reinterpret_cast<const uint8_t*>(bytes.data()),
                       static_cast<uint32_t>(bytes.size()));
}

bool subDocumentAt(const bson_iter_t& it, bson_t* out) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&it) && !BSON_ITER_HOLDS_ARRAY(&it)) return false;
    uint32_t len;
    const uint8_t* data;
    if (BSON_ITER_HOLDS_DOCUMENT(&it))
        bson_iter_document(&it, &len, &data);
    else
        bson_iter_array(&it, &len, &data);
    return bson_init_static(out, data, len);
}

bool isNumber(bson_type_t t) {
    return t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 || t == BSON_TYPE_DOUBLE ||
           t == BSON_TYPE_DECIMAL128;
}

double toDouble(const bson_value_t& v) {
    return static_cast<double>(toLongDouble(v));
}

bool toInt64Exact(const bson_value_t& v, int64_t* out) {
    switch (v.value_type) {
        case BSON_TYPE_INT32:
            *out = v.value.v_int32;
            return true;
        case BSON_TYPE_INT64:
            *out = v.value.v_int64;
            return true;
        case BSON_TYPE_DOUBLE:
        case BSON_TYPE_DECIMAL128: {
            double d = toDouble(v);
            if (std::isnan(d) || d != std::trunc(d) || d < -0x1p63 || d >= 0x1p63) return false;
            *out = static_cast<int64_t>(d);
            return true;
        }
        default:
            return false;
    }
}

bool isTruthy(const bson_value_t& v) {
    switch (v.value_type) {
        case BSON_TYPE_BOOL:
            return v.value.v_bool;
        case BSON_TYPE_NULL:
        case BSON_TYPE_UNDEFINED:
        case BSON_TYPE_EOD:
            return false;
        case BSON_TYPE_INT32:
            return v.value.v_int32 != 0;
        case BSON_TYPE_INT64:
            return v.value.v_int64 != 0;
        case BSON_TYPE_DOUBLE:
            return v.value.v_double != 0;
        case BSON_TYPE_DECIMAL128:
            return toDouble(v) != 0;
        default:
            return true;
    }
}

void appendNumber(bson_t* b, std::string_view key, int64_t n) {
    if (n >= INT32_MIN && n <= INT32_MAX)
        bson_append_int32(b, key.data(), static_cast<int>(key.size()), static_cast<int32_t>(n));
    else
        bson_append_int64(b, key.data(), static_cast<int>(key.size()), n);
}

void appendDocArray(bson_t* b, std::string_view key, const std::vector<Doc>& docs) {
    bson_t arr;
    bson_append_array_begin(b, key.data(), static_cast<int>(key.size()), &arr);
    for (size_t i = 0; i < docs.size(); ++i) {
        std::string k = std::to_string(i);
        bson_append_document(&arr, k.c_str(), -1, docs[i].get());
    }
    bson_append_array_end(b, &arr);
}

void appendStringArray(bson_t* b, std::string_view key, const std::vector<std::string>& values) {
    bson_t arr;
    bson_append_array_begin(b, key.data(), static_cast<int>(key.size()), &arr);
    for (size_t i = 0; i < values.size(); ++i) {
        std::string k = std::to_string(i);
        bson_append_utf8(&arr, k.c_str(), -1, values[i].c_str(),
                         static_cast<int>(values[i].size()));
    }
    bson_append_array_end(b, &arr);
}

std::string_view typeName(bson_type_t t) {
    switch (t) {
        case BSON_TYPE_DOUBLE:
            return "double";
        case BSON_TYPE_UTF8:
            return "string";
        case BSON_TYPE_DOCUMENT:
            return "object";
        case BSON_TYPE_ARRAY:
            return "array";
        case BSON_TYPE_BINARY:
            return "binData";
        case BSON_TYPE_UNDEFINED:
            return "undefined";
        case BSON_TYPE_OID:
            return "objectId";
        case BSON_TYPE_BOOL:
            return "bool";
        case BSON_TYPE_DATE_TIME:
            return "date";
        case BSON_TYPE_NULL:
            return "null";
        case BSON_TYPE_REGEX:
            return "regex";
        case BSON_TYPE_DBPOINTER:
            return "dbPointer";
        case BSON_TYPE_CODE:
            return "javascript";
        case BSON_TYPE_SYMBOL:
            return "symbol";
        case BSON_TYPE_CODEWSCOPE:
            return "javascriptWithScope";
        case BSON_TYPE_INT32:
            return "int";
        case BSON_TYPE_TIMESTAMP:
            return "timestamp";
        case BSON_TYPE_INT64:
            return "long";
        case BSON_TYPE_DECIMAL128:
            return "decimal";
        case BSON_TYPE_MINKEY:
            return "minKey";
        case BSON_TYPE_MAXKEY:
            return "maxKey";
        case BSON_TYPE_EOD:
            return "missing";
    }
    return "unknown";
}

std::string printableUtf8(std::string_view s) {
    if (bson_utf8_validate(s.data(), s.size(), false)) return std::string(s);
    std::string out;
    out.reserve(s.size() * 2);
    for (unsigned char c : s) {
        if (c < 0x80 && c != 0)
            out.push_back(static_cast<char>(c));
        else
            out += fmt::format("\\x{:02x}", c);
    }
    return out;
}

Status commandTargetUtf8(const bson_t* cmd, std::string_view db) {
    bson_iter_t it;
    if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_UTF8(&it))
        return Status::OK();
    uint32_t len = 0;
    const char* name = bson_iter_utf8(&it, &len);
    if (bson_utf8_validate(name, len, false)) return Status::OK();
    return Status(ErrorCode::InvalidNamespace,
                  fmt::format("Invalid namespace specified '{}.{}': names must be valid UTF-8",
                              printableUtf8(db), printableUtf8(std::string_view(name, len))));
}

void appendMessage(bson_t* b, const char* key, std::string_view msg) {
    std::string text = printableUtf8(msg);
    bson_append_utf8(b, key, -1, text.data(), static_cast<int>(text.size()));
}

}  // namespace halo::bson
