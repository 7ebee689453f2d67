#pragma once
// Value: one owned BSON value (a deep copy of a bson_value_t), the currency of
// the aggregation expression evaluator and of the matcher's predicate operands.
// A default-constructed Value is "missing" (type BSON_TYPE_EOD), which is
// distinct from null, as in mongod's aggregation language.
#include <bson/bson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bson/compare.h"
#include "bson/doc.h"

namespace halo::query {

/// Owns a deep copy of one bson_value_t (strings, binary, documents and arrays
/// are heap copies made with bson_value_copy). Copyable (deep) and movable.
/// Not thread-safe to mutate; const access from many threads is fine.
class Value {
  public:
    Value() { v_.value_type = BSON_TYPE_EOD; }
    /// Deep copy of `v`.
    explicit Value(const bson_value_t& v);
    Value(const Value& o) : Value(o.v_) {}
    Value(Value&& o) noexcept : v_(o.v_) { o.v_.value_type = BSON_TYPE_EOD; }
    Value& operator=(const Value& o);
    Value& operator=(Value&& o) noexcept;
    ~Value() { reset(); }

    static Value missing() { return Value(); }
    static Value null();
    static Value fromBool(bool b);
    static Value fromInt32(int32_t i);
    static Value fromInt64(int64_t i);
    static Value fromDouble(double d);
    static Value fromDecimal(const bson_decimal128_t& d);
    static Value fromString(std::string_view s);
    static Value fromDate(int64_t millis);
    static Value fromOid(const bson_oid_t& oid);
    static Value fromIter(const bson_iter_t& it) {
        return Value(*bson_iter_value(const_cast<bson_iter_t*>(&it)));
    }
    /// A document value (deep copy of `doc`).
    static Value fromDocument(const bson_t* doc);
    /// An array value built from `elems`; missing elements are stored as null.
    static Value fromArray(const std::vector<Value>& elems);

    const bson_value_t& get() const { return v_; }
    bson_type_t type() const { return v_.value_type; }
    bool isMissing() const { return v_.value_type == BSON_TYPE_EOD; }
    /// Missing, null or undefined ("nullish" for $ifNull and friends).
    bool isNullish() const {
        return v_.value_type == BSON_TYPE_EOD || v_.value_type == BSON_TYPE_NULL ||
               v_.value_type == BSON_TYPE_UNDEFINED;
    }
    bool isNumber() const { return bson::isNumber(v_.value_type); }
    bool isString() const { return v_.value_type == BSON_TYPE_UTF8; }
    bool isArray() const { return v_.value_type == BSON_TYPE_ARRAY; }
    bool isDocument() const { return v_.value_type == BSON_TYPE_DOCUMENT; }
    bool truthy() const { return bson::isTruthy(v_); }

    /// String contents (utf8 or symbol); empty for other types.
    std::string_view str() const;
    /// For documents and arrays: initializes `out` as a static view of the bytes
    /// (valid while this Value lives). Returns false for other types.
    bool view(bson_t* out) const;
    /// The elements of an array value (empty for other types).
    std::vector<Value> arrayElements() const;
    /// JSON-ish rendering for error messages.
    std::string toString() const;

  private:
    void reset() {
        if (v_.value_type != BSON_TYPE_EOD) bson_value_destroy(&v_);
        v_.value_type = BSON_TYPE_EOD;
    }
    bson_value_t v_{};
};

/// MongoDB canonical comparison of two values (missing sorts as EOD, below null);
/// strings compare under `strings` (a collation) when given.
int compare(const Value& a, const Value& b, const bson::StringComparator* strings = nullptr);
inline bool operator==(const Value& a, const Value& b) {
    return compare(a, b) == 0;
}

/// Initializes `out` as a static view over a document/array bson_value_t.
bool viewOf(const bson_value_t& v, bson_t* out);
/// A DOCUMENT bson_value_t that borrows the bytes of `doc`.
bson_value_t borrowDocument(const bson_t* doc);

}  // namespace halo::query
