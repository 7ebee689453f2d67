#include "store/storage/key_string.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "bson/compare.h"

namespace halo::store::keystring {
namespace {

static_assert(std::numeric_limits<long double>::digits >= 64,
              "numeric keys need a long double that holds every int64 exactly");

// Type tags, ordered like bson::canonicalRank. kEnd closes an object/array body
// and is below every tag. No tag, nor its complement, is 0xFF (see kAfterPrefix).
enum Tag : uint8_t {
    kEnd = 0x04,
    kMinKey = 0x0A,
    kUndefined = 0x0F,
    kNull = 0x14,
    kNumber = 0x1E,
    kString = 0x28,
    kObject = 0x32,
    kArray = 0x3C,
    kBinData = 0x46,
    kOid = 0x50,
    kBool = 0x5A,
    kDate = 0x64,
    kTimestamp = 0x6E,
    kRegex = 0x78,
    kDBPointer = 0x82,
    kCode = 0x8C,
    kCodeWScope = 0x96,
    kMaxKey = 0xF0,
};

// Number classes (second byte of a number).
enum NumClass : uint8_t {
    kNaN = 0x01,
    kNegInf = 0x02,
    kNegative = 0x03,
    kZero = 0x04,
    kPositive = 0x05,
    kPosInf = 0x06,
};

constexpr int kExponentBias = 0x8000;

Tag tagOf(bson_type_t t) {
    switch (t) {
        case BSON_TYPE_MINKEY:
            return kMinKey;
        case BSON_TYPE_EOD:
        case BSON_TYPE_UNDEFINED:
            return kUndefined;
        case BSON_TYPE_NULL:
            return kNull;
        case BSON_TYPE_DOUBLE:
        case BSON_TYPE_INT32:
        case BSON_TYPE_INT64:
        case BSON_TYPE_DECIMAL128:
            return kNumber;
        case BSON_TYPE_UTF8:
        case BSON_TYPE_SYMBOL:
            return kString;
        case BSON_TYPE_DOCUMENT:
            return kObject;
        case BSON_TYPE_ARRAY:
            return kArray;
        case BSON_TYPE_BINARY:
            return kBinData;
        case BSON_TYPE_OID:
            return kOid;
        case BSON_TYPE_BOOL:
            return kBool;
        case BSON_TYPE_DATE_TIME:
            return kDate;
        case BSON_TYPE_TIMESTAMP:
            return kTimestamp;
        case BSON_TYPE_REGEX:
            return kRegex;
        case BSON_TYPE_DBPOINTER:
            return kDBPointer;
        case BSON_TYPE_CODE:
            return kCode;
        case BSON_TYPE_CODEWSCOPE:
            return kCodeWScope;
        case BSON_TYPE_MAXKEY:
            return kMaxKey;
    }
    return kUndefined;
}

void putU8(std::string& out, uint8_t b) {
    out.push_back(static_cast<char>(b));
}

void putBE(std::string& out, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) putU8(out, static_cast<uint8_t>(v >> (8 * i)));
}

void putBytes(std::string& out, const void* p, size_t n) {
    if (n) out.append(static_cast<const char*>(p), n);
}

// Bytes with 0x00 escaped as 00 FF, terminated by 00 00: prefix-free and bytewise ordered.
void putEscaped(std::string& out, const char* s, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        putU8(out, static_cast<uint8_t>(s[i]));
        if (s[i] == '\0') putU8(out, 0xFF);
    }
    putU8(out, 0);
    putU8(out, 0);
}

// bson::toLongDouble is the conversion compareValues uses, so the encoding
// order agrees with it exactly.
long double numberAsLongDouble(const bson_value_t& v) {
    return bson::toLongDouble(v);
}

void putNumber(std::string& out, long double x) {
    if (std::isnan(x)) return putU8(out, kNaN);
    if (std::isinf(x)) return putU8(out, x < 0 ? kNegInf : kPosInf);
    if (x == 0) return putU8(out, kZero);
    const bool neg = x < 0;
    int exp = 0;
    long double m = std::frexp(std::fabs(x), &exp);  // m in [0.5, 1)
    long double scaled = std::ldexp(m, 64);
    auto hi = static_cast<uint64_t>(scaled);
    const uint64_t inv = neg ? ~uint64_t{0} : 0;
    putU8(out, neg ? kNegative : kPositive);
    putBE(out, (static_cast<uint64_t>(exp + kExponentBias) & 0xFFFF) ^ inv, 2);
    putBE(out, hi ^ inv, 8);
    if constexpr (std::numeric_limits<long double>::digits > 64) {
        auto lo = static_cast<uint64_t>(std::ldexp(scaled - static_cast<long double>(hi), 64));
        putBE(out, lo ^ inv, 8);
    }
}

void putValueBody(std::string& out, const bson_value_t& v, const bson::StringComparator* coll);

// A string under a collation: its comparison key (which holds no 0x00 byte).
void putCollated(std::string& out, const char* s, size_t n, const bson::StringComparator* coll) {
    std::string key = coll->comparisonKey(std::string_view(s, n));
    putEscaped(out, key.data(), key.size());
}

// Elements of an embedded document (withNames) or array, then kEnd.
void putDocBody(std::string& out, const uint8_t* data, uint32_t len, bool withNames,
                const bson::StringComparator* coll) {
    bson_iter_t it;
    if (bson_iter_init_from_data(&it, data, len)) {
        while (bson_iter_next(&it)) {
            const bson_value_t* ev = bson_iter_value(&it);
            putU8(out, tagOf(ev->value_type));
            if (withNames) {
                const char* key = bson_iter_key(&it);
                putBytes(out, key, std::strlen(key));
                putU8(out, 0);
            }
            putValueBody(out, *ev, coll);
        }
    }
    putU8(out, kEnd);
}

void putValueBody(std::string& out, const bson_value_t& v, const bson::StringComparator* coll) {
    switch (v.value_type) {
        case BSON_TYPE_EOD:
        case BSON_TYPE_MINKEY:
        case BSON_TYPE_MAXKEY:
        case BSON_TYPE_NULL:
        case BSON_TYPE_UNDEFINED:
            return;
        case BSON_TYPE_DOUBLE:
        case BSON_TYPE_INT32:
        case BSON_TYPE_INT64:
        case BSON_TYPE_DECIMAL128:
            return putNumber(out, numberAsLongDouble(v));
        case BSON_TYPE_UTF8:
            if (coll) return putCollated(out, v.value.v_utf8.str, v.value.v_utf8.len, coll);
            return putEscaped(out, v.value.v_utf8.str, v.value.v_utf8.len);
        case BSON_TYPE_SYMBOL:
            if (coll) return putCollated(out, v.value.v_symbol.symbol, v.value.v_symbol.len, coll);
            return putEscaped(out, v.value.v_symbol.symbol, v.value.v_symbol.len);
        case BSON_TYPE_DOCUMENT:
            return putDocBody(out, v.value.v_doc.data, v.value.v_doc.data_len, true, coll);
        case BSON_TYPE_ARRAY:
            return putDocBody(out, v.value.v_doc.data, v.value.v_doc.data_len, false, coll);
        case BSON_TYPE_BINARY:
            putBE(out, v.value.v_binary.data_len, 4);
            putU8(out, static_cast<uint8_t>(v.value.v_binary.subtype));
            return putBytes(out, v.value.v_binary.data, v.value.v_binary.data_len);
        case BSON_TYPE_OID:
            return putBytes(out, v.value.v_oid.bytes, 12);
        case BSON_TYPE_BOOL:
            return putU8(out, v.value.v_bool ? 1 : 0);
        case BSON_TYPE_DATE_TIME:
            return putBE(out, static_cast<uint64_t>(v.value.v_datetime) ^ (uint64_t{1} << 63), 8);
        case BSON_TYPE_TIMESTAMP:
            putBE(out, v.value.v_timestamp.timestamp, 4);
            return putBE(out, v.value.v_timestamp.increment, 4);
        case BSON_TYPE_REGEX:
            putBytes(out, v.value.v_regex.regex, std::strlen(v.value.v_regex.regex));
            putU8(out, 0);
            putBytes(out, v.value.v_regex.options, std::strlen(v.value.v_regex.options));
            return putU8(out, 0);
        case BSON_TYPE_DBPOINTER:
            putBE(out, v.value.v_dbpointer.collection_len, 4);
            putBytes(out, v.value.v_dbpointer.collection, v.value.v_dbpointer.collection_len);
            return putBytes(out, v.value.v_dbpointer.oid.bytes, 12);
        case BSON_TYPE_CODE:
            return putEscaped(out, v.value.v_code.code, v.value.v_code.code_len);
        case BSON_TYPE_CODEWSCOPE:
            putEscaped(out, v.value.v_codewscope.code, v.value.v_codewscope.code_len);
            return putDocBody(out, v.value.v_codewscope.scope_data, v.value.v_codewscope.scope_len,
                              true, nullptr);
    }
}

// ---- decoding -------------------------------------------------------------

// Reads bytes of one component, undoing the complement of descending components.
class Reader {
  public:
    Reader(std::string_view s, size_t pos, bool desc) : s_(s), pos_(pos), mask_(desc ? 0xFF : 0) {}
    bool u8(uint8_t* b) {
        if (pos_ >= s_.size()) return false;
        *b = static_cast<uint8_t>(s_[pos_++]) ^ mask_;
        return true;
    }
    bool be(int bytes, uint64_t* v) {
        *v = 0;
        for (int i = 0; i < bytes; ++i) {
            uint8_t b;
            if (!u8(&b)) return false;
            *v = (*v << 8) | b;
        }
        return true;
    }
    bool bytes(size_t n, std::string* out) {
        if (s_.size() - pos_ < n) return false;
        out->resize(n);
        for (size_t i = 0; i < n; ++i) (*out)[i] = static_cast<char>(s_[pos_ + i] ^ mask_);
        pos_ += n;
        return true;
    }
    bool cstring(std::string* out) {
        out->clear();
        uint8_t b;
        while (u8(&b)) {
            if (b == 0) return true;
            out->push_back(static_cast<char>(b));
        }
        return false;
    }
    bool escaped(std::string* out) {
        out->clear();
        uint8_t b;
        while (u8(&b)) {
            if (b != 0) {
                out->push_back(static_cast<char>(b));
                continue;
            }
            if (!u8(&b)) return false;
            if (b == 0) return true;
            if (b != 0xFF) return false;
            out->push_back('\0');
        }
        return false;
    }
    bool peek(uint8_t* b) const {
        if (pos_ >= s_.size()) return false;
        *b = static_cast<uint8_t>(s_[pos_]) ^ mask_;
        return true;
    }
    size_t pos() const { return pos_; }

  private:
    std::string_view s_;
    size_t pos_;
    uint8_t mask_;
};

bool readBody(Reader& r, uint8_t tag, bson_t* out, const char* key);

bool readDocBody(Reader& r, bson_t* out, bool withNames) {
    for (int i = 0;; ++i) {
        uint8_t tag;
        if (!r.u8(&tag)) return false;
        if (tag == kEnd) return true;
        std::string name = std::to_string(i);
        if (withNames && !r.cstring(&name)) return false;
        if (!readBody(r, tag, out, name.c_str())) return false;
    }
}

void appendNumber(bson_t* out, const char* key, long double x) {
    if (x == std::nearbyint(x) && x >= INT32_MIN && x <= INT32_MAX) {
        BSON_APPEND_INT32(out, key, static_cast<int32_t>(x));
    } else if (x == std::nearbyint(x) && x >= -0x1p63L && x < 0x1p63L) {
        BSON_APPEND_INT64(out, key, static_cast<int64_t>(x));
    } else {
        BSON_APPEND_DOUBLE(out, key, static_cast<double>(x));
    }
}

bool readNumber(Reader& r, bson_t* out, const char* key) {
    uint8_t cls;
    if (!r.u8(&cls)) return false;
    switch (cls) {
        case kNaN:
            return BSON_APPEND_DOUBLE(out, key, NAN);
        case kNegInf:
            return BSON_APPEND_DOUBLE(out, key, -INFINITY);
        case kPosInf:
            return BSON_APPEND_DOUBLE(out, key, INFINITY);
        case kZero:
            return BSON_APPEND_INT32(out, key, 0);
        case kNegative:
        case kPositive:
            break;
        default:
            return false;
    }
    const uint64_t inv = cls == kNegative ? ~uint64_t{0} : 0;
    uint64_t e, hi;
    if (!r.be(2, &e) || !r.be(8, &hi)) return false;
    e = (e ^ inv) & 0xFFFF;
    long double m = std::ldexp(static_cast<long double>(hi ^ inv), -64);
    if constexpr (std::numeric_limits<long double>::digits > 64) {
        uint64_t lo;
        if (!r.be(8, &lo)) return false;
        m += std::ldexp(static_cast<long double>(lo ^ inv), -128);
    }
    long double x = std::ldexp(m, static_cast<int>(e) - kExponentBias);
    appendNumber(out, key, cls == kNegative ? -x : x);
    return true;
}

bool readBody(Reader& r, uint8_t tag, bson_t* out, const char* key) {
    std::string a, b;
    uint64_t n, m;
    switch (tag) {
        case kMinKey:
            return BSON_APPEND_MINKEY(out, key);
        case kMaxKey:
            return BSON_APPEND_MAXKEY(out, key);
        case kNull:
            return BSON_APPEND_NULL(out, key);
        case kUndefined:
            return BSON_APPEND_UNDEFINED(out, key);
        case kNumber:
            return readNumber(r, out, key);
        case kString:
            return r.escaped(&a) &&
                   bson_append_utf8(out, key, -1, a.data(), static_cast<int>(a.size()));
        case kObject:
        case kArray: {
            bson_t child;
            if (tag == kObject) {
                BSON_APPEND_DOCUMENT_BEGIN(out, key, &child);
            } else {
                BSON_APPEND_ARRAY_BEGIN(out, key, &child);
            }
            bool ok = readDocBody(r, &child, tag == kObject);
            bool closed = tag == kObject ? bson_append_document_end(out, &child)
                                         : bson_append_array_end(out, &child);
            return ok && closed;
        }
        case kBinData: {
            uint8_t sub;
            if (!r.be(4, &n) || !r.u8(&sub) || !r.bytes(n, &a)) return false;
            return bson_append_binary(out, key, -1, static_cast<bson_subtype_t>(sub),
                                      reinterpret_cast<const uint8_t*>(a.data()),
                                      static_cast<uint32_t>(a.size()));
        }
        case kOid: {
            if (!r.bytes(12, &a)) return false;
            bson_oid_t oid;
            std::memcpy(oid.bytes, a.data(), 12);
            return BSON_APPEND_OID(out, key, &oid);
        }
        case kBool: {
            uint8_t v;
            return r.u8(&v) && v <= 1 && BSON_APPEND_BOOL(out, key, v == 1);
        }
        case kDate:
            if (!r.be(8, &n)) return false;
            return BSON_APPEND_DATE_TIME(out, key, static_cast<int64_t>(n ^ (uint64_t{1} << 63)));
        case kTimestamp:
            if (!r.be(4, &n) || !r.be(4, &m)) return false;
            return BSON_APPEND_TIMESTAMP(out, key, static_cast<uint32_t>(n),
                                         static_cast<uint32_t>(m));
        case kRegex:
            return r.cstring(&a) && r.cstring(&b) &&
                   BSON_APPEND_REGEX(out, key, a.c_str(), b.c_str());
        case kDBPointer: {
            std::string oidBytes;
            if (!r.be(4, &n) || !r.bytes(n, &a) || !r.bytes(12, &oidBytes)) return false;
            bson_oid_t oid;
            std::memcpy(oid.bytes, oidBytes.data(), 12);
            return BSON_APPEND_DBPOINTER(out, key, a.c_str(), &oid);
        }
        case kCode:
            return r.escaped(&a) && BSON_APPEND_CODE(out, key, a.c_str());
        case kCodeWScope: {
            if (!r.escaped(&a)) return false;
            bson::Doc scope;
            if (!readDocBody(r, scope.mut(), true)) return false;
            return BSON_APPEND_CODE_WITH_SCOPE(out, key, a.c_str(), scope.get());
        }
        default:
            return false;
    }
}

}  // namespace

void appendValue(std::string& out, const bson_value_t& v, bool descending,
                 const bson::StringComparator* coll) {
    const size_t start = out.size();
    putU8(out, tagOf(v.value_type));
    putValueBody(out, v, coll);
    if (descending) {
        for (size_t i = start; i < out.size(); ++i) out[i] = static_cast<char>(~out[i]);
    }
}

std::string encodeValue(const bson_value_t& v, bool descending,
                        const bson::StringComparator* coll) {
    std::string out;
    appendValue(out, v, descending, coll);
    return out;
}

void appendRecordId(std::string& out, int64_t rid) {
    putBE(out, static_cast<uint64_t>(rid) ^ (uint64_t{1} << 63), 8);
}

int64_t readRecordIdSuffix(std::string_view key) {
    HALO_INVARIANT(key.size() >= kRecordIdSize);
    uint64_t v = 0;
    for (size_t i = key.size() - kRecordIdSize; i < key.size(); ++i) {
        v = (v << 8) | static_cast<uint8_t>(key[i]);
    }
    return static_cast<int64_t>(v ^ (uint64_t{1} << 63));
}

std::string afterPrefix(std::string_view prefix) {
    std::string out(prefix);
    out.append(kAfterPrefix);
    return out;
}

StatusWith<bson::Doc> decodeKey(std::string_view key, const std::vector<bool>& descending) {
    bson::Doc out;
    size_t pos = 0;
    for (bool desc : descending) {
        Reader r(key, pos, desc);
        uint8_t tag;
        if (!r.u8(&tag) || !readBody(r, tag, out.mut(), "")) {
            return Status(ErrorCode::InvalidBSON, "malformed index key");
        }
        pos = r.pos();
    }
    return out;
}

std::string toDebugString(std::string_view key, const std::vector<bool>& descending) {
    auto sw = decodeKey(key, descending);
    if (sw.isOK()) return sw.getValue().toJson();
    std::string hex;
    for (char c : key) hex += fmt::format("{:02x}", static_cast<uint8_t>(c));
    return hex;
}

}  // namespace halo::store::keystring
