#include "store/update/format.h"

#include <fmt/format.h>

#include <cmath>

#include "store/update/element.h"

namespace halo::update {
namespace {

std::string quoted(const char* s, size_t len) {
    std::string out = "\"";
    for (size_t i = 0; i < len; ++i) {
        char c = s[i];
        if (c == '"' || c == '\\') out.push_back('\\');
        out.push_back(c);
    }
    out.push_back('"');
    return out;
}

std::string formatContainer(const uint8_t* data, uint32_t len, bool isArray) {
    bson_iter_t it;
    if (!bson_iter_init_from_data(&it, data, len)) return isArray ? "[]" : "{}";
    std::string out;
    bool first = true;
    while (bson_iter_next(&it)) {
        out += first ? " " : ", ";
        first = false;
        if (isArray)
            out += formatValue(*bson_iter_value(&it));
        else
            out += formatElement(bson_iter_key(&it), *bson_iter_value(&it));
    }
    if (first) return isArray ? "[]" : "{}";
    return isArray ? "[" + out + " ]" : "{" + out + " }";
}

std::string formatDouble(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    std::string s = fmt::format("{}", d);
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    return s;
}

}  // namespace

std::string formatValue(const bson_value_t& v) {
    switch (v.value_type) {
        case BSON_TYPE_DOUBLE:
            return formatDouble(v.value.v_double);
        case BSON_TYPE_UTF8:
            return quoted(v.value.v_utf8.str, v.value.v_utf8.len);
        case BSON_TYPE_DOCUMENT:
            return formatContainer(v.value.v_doc.data, v.value.v_doc.data_len, false);
        case BSON_TYPE_ARRAY:
            return formatContainer(v.value.v_doc.data, v.value.v_doc.data_len, true);
        case BSON_TYPE_BINARY: {
            std::string hex;
            for (uint32_t i = 0; i < v.value.v_binary.data_len; ++i)
                hex += fmt::format("{:02X}", v.value.v_binary.data[i]);
            return fmt::format("BinData({}, {})", static_cast<int>(v.value.v_binary.subtype), hex);
        }
        case BSON_TYPE_UNDEFINED:
            return "undefined";
        case BSON_TYPE_OID: {
            char buf[25];
            bson_oid_to_string(&v.value.v_oid, buf);
            return fmt::format("ObjectId('{}')", buf);
        }
        case BSON_TYPE_BOOL:
            return v.value.v_bool ? "true" : "false";
        case BSON_TYPE_DATE_TIME:
            return fmt::format("new Date({})", v.value.v_datetime);
        case BSON_TYPE_NULL:
            return "null";
        case BSON_TYPE_REGEX:
            return fmt::format("/{}/{}", v.value.v_regex.regex ? v.value.v_regex.regex : "",
                               v.value.v_regex.options ? v.value.v_regex.options : "");
        case BSON_TYPE_DBPOINTER:
            return "DBRef(...)";
        case BSON_TYPE_CODE:
            return std::string(v.value.v_code.code, v.value.v_code.code_len);
        case BSON_TYPE_SYMBOL:
            return quoted(v.value.v_symbol.symbol, v.value.v_symbol.len);
        case BSON_TYPE_CODEWSCOPE:
            return std::string(v.value.v_codewscope.code, v.value.v_codewscope.code_len);
        case BSON_TYPE_INT32:
            return std::to_string(v.value.v_int32);
        case BSON_TYPE_TIMESTAMP:
            return fmt::format("Timestamp({}, {})", v.value.v_timestamp.timestamp,
                               v.value.v_timestamp.increment);
        case BSON_TYPE_INT64:
            return std::to_string(v.value.v_int64);
        case BSON_TYPE_DECIMAL128: {
            char buf[BSON_DECIMAL128_STRING];
            bson_decimal128_to_string(&v.value.v_decimal128, buf);
            return fmt::format("NumberDecimal(\"{}\")", buf);
        }
        case BSON_TYPE_MINKEY:
            return "MinKey";
        case BSON_TYPE_MAXKEY:
            return "MaxKey";
        case BSON_TYPE_EOD:
            return "EOO";
    }
    return "?";
}

std::string formatElement(std::string_view name, const bson_value_t& v) {
    return fmt::format("{}: {}", name, formatValue(v));
}

std::string formatDoc(const bson_t* doc) {
    return formatContainer(bson_get_data(doc), doc->len, false);
}

std::string formatElement(const Element& e) {
    ValueView vv(e);
    return formatElement(e.key(), vv.get());
}

}  // namespace halo::update
