#include "bson/compare.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "bson/doc.h"

namespace halo::bson {
namespace {

template <typename T>
int cmp3(T a, T b) {
    return a < b ? -1 : (a > b ? 1 : 0);
}

int cmpDoubleLong(double d, int64_t l) {
    if (std::isnan(d)) return -1;
    if (d < -0x1p63) return -1;
    if (d >= 0x1p63) return 1;
    auto di = static_cast<int64_t>(d);
    if (di != l) return cmp3(di, l);
    double frac = d - static_cast<double>(di);
    return frac < 0 ? -1 : (frac > 0 ? 1 : 0);
}

int cmpDouble(double a, double b) {
    bool an = std::isnan(a), bn = std::isnan(b);
    if (an || bn) return an && bn ? 0 : (an ? -1 : 1);
    return cmp3(a, b);
}

long double decimalToLongDouble(const bson_decimal128_t& d) {
    char buf[BSON_DECIMAL128_STRING];
    bson_decimal128_to_string(&d, buf);
    if (std::strstr(buf, "NaN")) return NAN;
    if (std::strcmp(buf, "Infinity") == 0) return INFINITY;
    if (std::strcmp(buf, "-Infinity") == 0) return -INFINITY;
    return std::strtold(buf, nullptr);
}

}  // namespace

long double toLongDouble(const bson_value_t& v) {
    switch (v.value_type) {
        case BSON_TYPE_INT32:
            return v.value.v_int32;
        case BSON_TYPE_INT64:
            return static_cast<long double>(v.value.v_int64);
        case BSON_TYPE_DOUBLE:
            return v.value.v_double;
        case BSON_TYPE_DECIMAL128:
            return decimalToLongDouble(v.value.v_decimal128);
        default:
            return 0;
    }
}

namespace {

int compareNumbers(const bson_value_t& a, const bson_value_t& b) {
    auto ta = a.value_type, tb = b.value_type;
    auto isInt = [](bson_type_t t) { return t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64; };
    auto asLong = [](const bson_value_t& v) -> int64_t {
        return v.value_type == BSON_TYPE_INT32 ? v.value.v_int32 : v.value.v_int64;
    };
    if (isInt(ta) && isInt(tb)) return cmp3(asLong(a), asLong(b));
    if (ta == BSON_TYPE_DECIMAL128 || tb == BSON_TYPE_DECIMAL128) {
        long double x = toLongDouble(a), y = toLongDouble(b);
        bool xn = std::isnan(x), yn = std::isnan(y);
        if (xn || yn) return xn && yn ? 0 : (xn ? -1 : 1);
        return cmp3(x, y);
    }
    if (ta == BSON_TYPE_DOUBLE && tb == BSON_TYPE_DOUBLE) {
        return cmpDouble(a.value.v_double, b.value.v_double);
    }
    if (ta == BSON_TYPE_DOUBLE) return cmpDoubleLong(a.value.v_double, asLong(b));
    return -cmpDoubleLong(b.value.v_double, asLong(a));
}

int compareStrings(const char* a, uint32_t alen, const char* b, uint32_t blen) {
    int c = std::memcmp(a, b, std::min(alen, blen));
    if (c != 0) return c < 0 ? -1 : 1;
    return cmp3(alen, blen);
}

}  // namespace

int canonicalRank(bson_type_t t) {
    switch (t) {
        case BSON_TYPE_MINKEY:
            return -1;
        case BSON_TYPE_EOD:
        case BSON_TYPE_UNDEFINED:
            return 0;
        case BSON_TYPE_NULL:
            return 5;
        case BSON_TYPE_DOUBLE:
        case BSON_TYPE_INT32:
        case BSON_TYPE_INT64:
        case BSON_TYPE_DECIMAL128:
            return 10;
        case BSON_TYPE_UTF8:
        case BSON_TYPE_SYMBOL:
            return 15;
        case BSON_TYPE_DOCUMENT:
            return 20;
        case BSON_TYPE_ARRAY:
            return 25;
        case BSON_TYPE_BINARY:
            return 30;
        case BSON_TYPE_OID:
            return 35;
        case BSON_TYPE_BOOL:
            return 40;
        case BSON_TYPE_DATE_TIME:
            return 45;
        case BSON_TYPE_TIMESTAMP:
            return 47;
        case BSON_TYPE_REGEX:
            return 50;
        case BSON_TYPE_DBPOINTER:
            return 55;
        case BSON_TYPE_CODE:
            return 60;
        case BSON_TYPE_CODEWSCOPE:
            return 65;
        case BSON_TYPE_MAXKEY:
            return 127;
    }
    return 0;
}

int compareValues(const bson_value_t& a, const bson_value_t& b, const StringComparator* strings) {
    int ra = canonicalRank(a.value_type), rb = canonicalRank(b.value_type);
    if (ra != rb) return cmp3(ra, rb);
    switch (a.value_type) {
        case BSON_TYPE_MINKEY:
        case BSON_TYPE_MAXKEY:
        case BSON_TYPE_NULL:
        case BSON_TYPE_UNDEFINED:
        case BSON_TYPE_EOD:
            return 0;
        case BSON_TYPE_DOUBLE:
        case BSON_TYPE_INT32:
        case BSON_TYPE_INT64:
        case BSON_TYPE_DECIMAL128:
            return compareNumbers(a, b);
        case BSON_TYPE_UTF8:
        case BSON_TYPE_SYMBOL: {
            const char* as =
                a.value_type == BSON_TYPE_UTF8 ? a.value.v_utf8.str : a.value.v_symbol.symbol;
            uint32_t al =
                a.value_type == BSON_TYPE_UTF8 ? a.value.v_utf8.len : a.value.v_symbol.len;
            const char* bs =
                b.value_type == BSON_TYPE_UTF8 ? b.value.v_utf8.str : b.value.v_symbol.symbol;
            uint32_t bl =
                b.value_type == BSON_TYPE_UTF8 ? b.value.v_utf8.len : b.value.v_symbol.len;
            if (strings) {
                int c = strings->compare(std::string_view(as, al), std::string_view(bs, bl));
                return c < 0 ? -1 : (c > 0 ? 1 : 0);
            }
            return compareStrings(as, al, bs, bl);
        }
        case BSON_TYPE_DOCUMENT:
        case BSON_TYPE_ARRAY:
            return compareDocBytes(a.value.v_doc.data, a.value.v_doc.data_len, b.value.v_doc.data,
                                   b.value.v_doc.data_len, strings);
        case BSON_TYPE_BINARY: {
            if (a.value.v_binary.data_len != b.value.v_binary.data_len)
                return cmp3(a.value.v_binary.data_len, b.value.v_binary.data_len);
            if (a.value.v_binary.subtype != b.value.v_binary.subtype)
                return cmp3(static_cast<int>(a.value.v_binary.subtype),
                            static_cast<int>(b.value.v_binary.subtype));
            if (a.value.v_binary.data_len == 0) return 0;
            int c = std::memcmp(a.value.v_binary.data, b.value.v_binary.data,
                                a.value.v_binary.data_len);
            return c < 0 ? -1 : (c > 0 ? 1 : 0);
        }
        case BSON_TYPE_OID: {
            int c = std::memcmp(a.value.v_oid.bytes, b.value.v_oid.bytes, 12);
            return c < 0 ? -1 : (c > 0 ? 1 : 0);
        }
        case BSON_TYPE_BOOL:
            return cmp3(a.value.v_bool, b.value.v_bool);
        case BSON_TYPE_DATE_TIME:
            return cmp3(a.value.v_datetime, b.value.v_datetime);
        case BSON_TYPE_TIMESTAMP: {
            if (a.value.v_timestamp.timestamp != b.value.v_timestamp.timestamp)
                return cmp3(a.value.v_timestamp.timestamp, b.value.v_timestamp.timestamp);
            return cmp3(a.value.v_timestamp.increment, b.value.v_timestamp.increment);
        }
        case BSON_TYPE_REGEX: {
            int c = std::strcmp(a.value.v_regex.regex, b.value.v_regex.regex);
            if (c != 0) return c < 0 ? -1 : 1;
            c = std::strcmp(a.value.v_regex.options, b.value.v_regex.options);
            return c < 0 ? -1 : (c > 0 ? 1 : 0);
        }
        case BSON_TYPE_DBPOINTER: {
            if (a.value.v_dbpointer.collection_len != b.value.v_dbpointer.collection_len)
                return cmp3(a.value.v_dbpointer.collection_len, b.value.v_dbpointer.collection_len);
            int c = std::memcmp(a.value.v_dbpointer.collection, b.value.v_dbpointer.collection,
                                a.value.v_dbpointer.collection_len);
            if (c != 0) return c < 0 ? -1 : 1;
            c = std::memcmp(a.value.v_dbpointer.oid.bytes, b.value.v_dbpointer.oid.bytes, 12);
            return c < 0 ? -1 : (c > 0 ? 1 : 0);
        }
        case BSON_TYPE_CODE:
            return compareStrings(a.value.v_code.code, a.value.v_code.code_len, b.value.v_code.code,
                                  b.value.v_code.code_len);
        case BSON_TYPE_CODEWSCOPE: {
            int c = compareStrings(a.value.v_codewscope.code, a.value.v_codewscope.code_len,
                                   b.value.v_codewscope.code, b.value.v_codewscope.code_len);
            if (c != 0) return c;
            return compareDocBytes(a.value.v_codewscope.scope_data, a.value.v_codewscope.scope_len,
                                   b.value.v_codewscope.scope_data, b.value.v_codewscope.scope_len);
        }
    }
    return 0;
}

int compareDocBytes(const uint8_t* a, uint32_t alen, const uint8_t* b, uint32_t blen,
                    const StringComparator* strings) {
    bson_iter_t ia, ib;
    if (!bson_iter_init_from_data(&ia, a, alen) || !bson_iter_init_from_data(&ib, b, blen)) {
        return cmp3(alen, blen);
    }
    while (true) {
        bool ha = bson_iter_next(&ia), hb = bson_iter_next(&ib);
        if (!ha || !hb) return ha == hb ? 0 : (ha ? 1 : -1);
        int ra = canonicalRank(bson_iter_type(&ia)), rb = canonicalRank(bson_iter_type(&ib));
        if (ra != rb) return cmp3(ra, rb);
        int c = std::strcmp(bson_iter_key(&ia), bson_iter_key(&ib));
        if (c != 0) return c < 0 ? -1 : 1;
        c = compareValues(*bson_iter_value(&ia), *bson_iter_value(&ib), strings);
        if (c != 0) return c;
    }
}

int compareDocs(const bson_t* a, const bson_t* b, const StringComparator* strings) {
    return compareDocBytes(bson_get_data(a), a->len, bson_get_data(b), b->len, strings);
}

}  // namespace halo::bson
