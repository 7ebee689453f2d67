#include "store/query/value.h"

#include <cstring>

#include "bson/compare.h"

namespace halo::query {

Value::Value(const bson_value_t& v) {
    if (v.value_type == BSON_TYPE_EOD) {
        v_.value_type = BSON_TYPE_EOD;
        return;
    }
    bson_value_copy(&v, &v_);
}

Value& Value::operator=(const Value& o) {
    if (this != &o) {
        reset();
        if (o.v_.value_type != BSON_TYPE_EOD) bson_value_copy(&o.v_, &v_);
    }
    return *this;
}

Value& Value::operator=(Value&& o) noexcept {
    if (this != &o) {
        reset();
        v_ = o.v_;
        o.v_.value_type = BSON_TYPE_EOD;
    }
    return *this;
}

Value Value::null() {
    Value r;
    r.v_.value_type = BSON_TYPE_NULL;
    return r;
}

Value Value::fromBool(bool b) {
    Value r;
    r.v_.value_type = BSON_TYPE_BOOL;
    r.v_.value.v_bool = b;
    return r;
}

Value Value::fromInt32(int32_t i) {
    Value r;
    r.v_.value_type = BSON_TYPE_INT32;
    r.v_.value.v_int32 = i;
    return r;
}

Value Value::fromInt64(int64_t i) {
    Value r;
    r.v_.value_type = BSON_TYPE_INT64;
    r.v_.value.v_int64 = i;
    return r;
}

Value Value::fromDouble(double d) {
    Value r;
    r.v_.value_type = BSON_TYPE_DOUBLE;
    r.v_.value.v_double = d;
    return r;
}

Value Value::fromDecimal(const bson_decimal128_t& d) {
    Value r;
    r.v_.value_type = BSON_TYPE_DECIMAL128;
    r.v_.value.v_decimal128 = d;
    return r;
}

Value Value::fromString(std::string_view s) {
    bson_value_t tmp{};
    tmp.value_type = BSON_TYPE_UTF8;
    tmp.value.v_utf8.str = const_cast<char*>(s.data());
    tmp.value.v_utf8.len = static_cast<uint32_t>(s.size());
    // bson_value_copy copies len bytes and NUL-terminates.
    return Value(tmp);
}

Value Value::fromDate(int64_t millis) {
    Value r;
    r.v_.value_type = BSON_TYPE_DATE_TIME;
    r.v_.value.v_datetime = millis;
    return r;
}

Value Value::fromOid(const bson_oid_t& oid) {
    Value r;
    r.v_.value_type = BSON_TYPE_OID;
    bson_oid_copy(&oid, &r.v_.value.v_oid);
    return r;
}

Value Value::fromDocument(const bson_t* doc) {
    return Value(borrowDocument(doc));
}

Value Value::fromArray(const std::vector<Value>& elems) {
    bson_t arr = BSON_INITIALIZER;
    char buf[16];
    for (size_t i = 0; i < elems.size(); ++i) {
        const char* key;
        size_t len = bson_uint32_to_string(static_cast<uint32_t>(i), &key, buf, sizeof buf);
        if (elems[i].isMissing()) {
            bson_append_null(&arr, key, static_cast<int>(len));
        } else {
            bson_append_value(&arr, key, static_cast<int>(len), &elems[i].get());
        }
    }
    bson_value_t tmp{};
    tmp.value_type = BSON_TYPE_ARRAY;
    tmp.value.v_doc.data = const_cast<uint8_t*>(bson_get_data(&arr));
    tmp.value.v_doc.data_len = arr.len;
    Value r(tmp);
    bson_destroy(&arr);
    return r;
}

std::string_view Value::str() const {
    if (v_.value_type == BSON_TYPE_UTF8) return {v_.value.v_utf8.str, v_.value.v_utf8.len};
    if (v_.value_type == BSON_TYPE_SYMBOL) return {v_.value.v_symbol.symbol, v_.value.v_symbol.len};
    return {};
}

bool Value::view(bson_t* out) const {
    return viewOf(v_, out);
}

std::vector<Value> Value::arrayElements() const {
    std::vector<Value> out;
    bson_t arr;
    if (!isArray() || !view(&arr)) return out;
    bson_iter_t it;
    if (!bson_iter_init(&it, &arr)) return out;
    while (bson_iter_next(&it)) out.push_back(fromIter(it));
    return out;
}

std::string Value::toString() const {
    if (isMissing()) return "missing";
    return bson::valueToString(v_);
}

int compare(const Value& a, const Value& b, const bson::StringComparator* strings) {
    return bson::compareValues(a.get(), b.get(), strings);
}

bool viewOf(const bson_value_t& v, bson_t* out) {
    if (v.value_type != BSON_TYPE_DOCUMENT && v.value_type != BSON_TYPE_ARRAY) return false;
    return bson_init_static(out, v.value.v_doc.data, v.value.v_doc.data_len);
}

bson_value_t borrowDocument(const bson_t* doc) {
    bson_value_t v{};
    v.value_type = BSON_TYPE_DOCUMENT;
    v.value.v_doc.data = const_cast<uint8_t*>(bson_get_data(doc));
    v.value.v_doc.data_len = doc->len;
    return v;
}

}  // namespace halo::query
