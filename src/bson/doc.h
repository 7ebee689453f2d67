#pragma once
// Thin RAII wrappers over libbson. A Doc owns a bson_t; pass `const bson_t*` to
// read. libbson does the parsing, validation and JSON conversion.
#include <bson/bson.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace halo::bson {

/// Owns one heap bson_t. Move-only; copy() for an explicit deep copy.
class Doc {
  public:
    Doc() : b_(bson_new()) {}
    /// Takes ownership of a bson_t allocated with bson_new()/bson_new_from_data().
    explicit Doc(bson_t* owned) : b_(owned) {}
    Doc(Doc&& o) noexcept : b_(std::exchange(o.b_, nullptr)) {}
    Doc& operator=(Doc&& o) noexcept {
        if (this != &o) {
            reset();
            b_ = std::exchange(o.b_, nullptr);
        }
        return *this;
    }
    Doc(const Doc&) = delete;
    Doc& operator=(const Doc&) = delete;
    ~Doc() { reset(); }

    /// Deep copy of the bytes [data, data+len); the caller has validated them.
    static Doc copyOf(const uint8_t* data, size_t len);
    static Doc copyOf(const bson_t* b) { return copyOf(bson_get_data(b), b->len); }
    /// Parses relaxed/canonical extended JSON.
    static StatusWith<Doc> fromJson(std::string_view json);
    /// Like fromJson but aborts on error: for literals in code and tests only.
    static Doc fromJsonOrDie(std::string_view json);

    Doc copy() const { return copyOf(b_); }
    const bson_t* get() const { return b_; }
    bson_t* mut() { return b_; }
    const uint8_t* data() const { return bson_get_data(b_); }
    uint32_t size() const { return b_->len; }
    bool empty() const { return bson_count_keys(b_) == 0; }
    std::string toJson() const;  // relaxed extended JSON

  private:
    void reset() {
        if (b_) bson_destroy(b_);
        b_ = nullptr;
    }
    bson_t* b_;
};

/// Relaxed extended JSON of any document (for logs, errors and tests).
std::string toJson(const bson_t* b);
/// JSON-ish rendering of one value (for error messages).
std::string valueToString(const bson_value_t& v);

/// Validates untrusted bytes as one BSON document (structure, UTF-8 is not enforced,
/// as mongod does not). Returns InvalidBSON on failure.
Status validate(const uint8_t* data, size_t len);

/// A read-only view of BSON bytes that live elsewhere (no copy, no ownership).
class View {
  public:
    View() { bson_init(&b_); }
    /// The caller guarantees [data, data+len) is valid BSON that outlives the view.
    View(const uint8_t* data, size_t len) {
        if (!bson_init_static(&b_, data, len)) bson_init(&b_);
    }
    const bson_t* get() const { return &b_; }

  private:
    bson_t b_;
};

/// Reads a top-level field. Returns false when absent.
bool find(const bson_t* doc, std::string_view field, bson_iter_t* out);
/// The string at a top-level field; empty when absent or not a string.
std::string stringField(const bson_t* doc, std::string_view field);
/// Reads a dotted path through embedded documents (no array traversal).
bool findDotted(const bson_t* doc, std::string_view path, bson_iter_t* out);

/// Reads an embedded document or array field as a static (non-owning) bson_t.
/// Returns false when absent or of another type.
bool subDocument(const bson_t* doc, std::string_view field, bson_t* out);
/// A copy of `src` without its top-level fields named in `drop`; the other
/// elements' bytes are copied as they are, in order, not re-encoded. Each
/// dropped element is shown to `dropped` (when given) first.
Doc copyWithout(const bson_t* src, std::initializer_list<std::string_view> drop,
                const std::function<void(const bson_iter_t&)>& dropped = {});
/// Overwrites, in place, the int64 value at dotted `path` of `doc`; false
/// when there is no int64 there.
bool patchInt64(Doc& doc, std::string_view path, int64_t value);

/// The same for the field `it` points at.
bool subDocumentAt(const bson_iter_t& it, bson_t* out);

/// Calls `visit(const bson_value_t&)` for every value at a dotted path, arrays
/// unwound one level, as the distinct command collects them (the values point
/// into `doc`).
template <class Visit>
void forEachValueAtPath(const bson_t* doc, std::string_view path, Visit&& visit) {
    const auto dot = path.find('.');
    const bool last = dot == std::string_view::npos;
    bson_iter_t it;
    if (!find(doc, path.substr(0, dot), &it)) return;
    bson_t sub;
    if (last && !BSON_ITER_HOLDS_ARRAY(&it)) {
        visit(*bson_iter_value(&it));
    } else if (!last && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        if (subDocumentAt(it, &sub)) forEachValueAtPath(&sub, path.substr(dot + 1), visit);
    } else if (BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_iter_t a;
        bson_iter_recurse(&it, &a);
        while (bson_iter_next(&a)) {
            if (last)
                visit(*bson_iter_value(&a));
            else if (BSON_ITER_HOLDS_DOCUMENT(&a) && subDocumentAt(a, &sub))
                forEachValueAtPath(&sub, path.substr(dot + 1), visit);
        }
    }
}

/// The bytes of a BinData or string field (a SASL payload): "" when absent;
/// false when the field holds another type.
bool bytesField(const bson_t* doc, std::string_view field, std::string* out);
/// The bytes of the BinData value `it` is at.
std::string binaryBytes(const bson_iter_t& it);
/// The bytes of `doc.lsid.id` (a command's logical session id): "" when the
/// command names no session or its id is not BinData.
std::string lsidIdBytes(const bson_t* doc);
/// Appends `bytes` as BinData of the generic subtype.
void appendBinary(bson_t* b, std::string_view key, std::string_view bytes);

/// Appends a bson_value_t under `key`.
inline void appendValue(bson_t* b, std::string_view key, const bson_value_t& v) {
    bson_append_value(b, key.data(), static_cast<int>(key.size()), &v);
}
inline void appendIter(bson_t* b, std::string_view key, const bson_iter_t& it) {
    bson_append_iter(b, key.data(), static_cast<int>(key.size()), &it);
}

/// Appends an integer as mongod's BSONObjBuilder::appendNumber does: int32
/// when it fits, else int64.
void appendNumber(bson_t* b, std::string_view key, int64_t n);

/// `s` when it is valid UTF-8, else a copy with every byte above 0x7f written
/// as \xHH: text from a client (a damaged command name, a field) that ends up
/// in an error message must not make the reply invalid BSON for drivers.
std::string printableUtf8(std::string_view s);
/// InvalidNamespace (73) when the command's first field, the collection most
/// commands name, is a string that is not valid UTF-8: it would come back in
/// namespaces and messages that drivers cannot read.
Status commandTargetUtf8(const bson_t* cmd, std::string_view db);
/// Appends an error message (made printable, see printableUtf8).
void appendMessage(bson_t* b, const char* key, std::string_view msg);

/// Appends an array of strings under `key`.
void appendStringArray(bson_t* b, std::string_view key, const std::vector<std::string>& values);

/// Appends an array of documents under `key`.
void appendDocArray(bson_t* b, std::string_view key, const std::vector<Doc>& docs);

/// Numeric helpers: true for int32/int64/double/decimal128.
bool isNumber(bson_type_t t);
/// Converts a numeric value to double (decimal128 via its string form).
double toDouble(const bson_value_t& v);
/// Returns true and sets out when the value is numeric and integral in int64 range.
bool toInt64Exact(const bson_value_t& v, int64_t* out);
/// mongod's truthiness for $expr/$cond: false, null, undefined, 0 are false.
bool isTruthy(const bson_value_t& v);
/// The name mongod uses for a type ("double", "string", "object", ...).
std::string_view typeName(bson_type_t t);

}  // namespace halo::bson
