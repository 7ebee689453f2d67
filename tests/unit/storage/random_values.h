#pragma once
// Deterministic generator of random BSON values of every type (nested documents
// and arrays included) for the key encoding property tests. Values are drawn
// from small domains so that equal and nearly-equal values are frequent.
#include <bson/bson.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "bson/doc.h"

namespace halo::store::testing {

class RandomValues {
  public:
    explicit RandomValues(uint64_t seed, bool lossless = false) : rng_(seed), lossless_(lossless) {}

    /// A new document {"v": <random value>}.
    bson::Doc next(int depth = 2) {
        bson::Doc d;
        append(d.mut(), "v", depth);
        return d;
    }

    /// Appends one random value under `key`.
    void append(bson_t* b, const char* key, int depth) {
        int kinds = depth > 0 ? 22 : 20;
        switch (pick(kinds)) {
            case 0:
                BSON_APPEND_MINKEY(b, key);
                break;
            case 1:
                BSON_APPEND_MAXKEY(b, key);
                break;
            case 2:
                BSON_APPEND_NULL(b, key);
                break;
            case 3:
                BSON_APPEND_UNDEFINED(b, key);
                break;
            case 4:
                BSON_APPEND_INT32(b, key, int32());
                break;
            case 5:
                BSON_APPEND_INT64(b, key, int64());
                break;
            case 6:
            case 7:
                BSON_APPEND_DOUBLE(b, key, dbl());
                break;
            case 8:
                if (lossless_) {
                    BSON_APPEND_INT32(b, key, int32());
                } else {
                    bson_decimal128_t dec;
                    bson_decimal128_from_string(decimalString().c_str(), &dec);
                    BSON_APPEND_DECIMAL128(b, key, &dec);
                }
                break;
            case 9:
            case 10: {
                std::string s = str();
                bson_append_utf8(b, key, -1, s.data(), static_cast<int>(s.size()));
                break;
            }
            case 11: {
                std::string s = str();
                bson_append_symbol(b, key, -1, s.data(), static_cast<int>(s.size()));
                break;
            }
            case 12: {
                std::string s = str();
                bson_append_binary(b, key, -1, static_cast<bson_subtype_t>(pick(3)),
                                   reinterpret_cast<const uint8_t*>(s.data()),
                                   static_cast<uint32_t>(s.size()));
                break;
            }
            case 13: {
                bson_oid_t oid;
                for (auto& byte : oid.bytes) byte = static_cast<uint8_t>(pick(3) * 0x7F);
                BSON_APPEND_OID(b, key, &oid);
                break;
            }
            case 14:
                BSON_APPEND_BOOL(b, key, pick(2) == 1);
                break;
            case 15:
                BSON_APPEND_DATE_TIME(b, key, int64());
                break;
            case 16:
                BSON_APPEND_TIMESTAMP(b, key, static_cast<uint32_t>(pick(3)) * 0x7FFFFFFFu,
                                      static_cast<uint32_t>(pick(3)));
                break;
            case 17: {
                std::string re = cstr(), opts = pick(2) ? "i" : "";
                BSON_APPEND_REGEX(b, key, re.c_str(), opts.c_str());
                break;
            }
            case 18: {
                bson_oid_t oid;
                for (auto& byte : oid.bytes) byte = static_cast<uint8_t>(pick(2));
                std::string ns = cstr();
                BSON_APPEND_DBPOINTER(b, key, ns.c_str(), &oid);
                break;
            }
            case 19: {
                std::string code = cstr();
                if (pick(2)) {
                    BSON_APPEND_CODE(b, key, code.c_str());
                } else {
                    bson::Doc scope;
                    if (pick(2)) BSON_APPEND_INT32(scope.mut(), "x", pick(3));
                    BSON_APPEND_CODE_WITH_SCOPE(b, key, code.c_str(), scope.get());
                }
                break;
            }
            case 20: {
                bson_t child;
                BSON_APPEND_DOCUMENT_BEGIN(b, key, &child);
                int n = pick(4);
                static const char* names[] = {"a", "b", "ab", ""};
                for (int i = 0; i < n; ++i) append(&child, names[pick(4)], depth - 1);
                bson_append_document_end(b, &child);
                break;
            }
            default: {
                bson_t child;
                BSON_APPEND_ARRAY_BEGIN(b, key, &child);
                int n = pick(4);
                for (int i = 0; i < n; ++i) {
                    std::string k = std::to_string(i);
                    append(&child, k.c_str(), depth - 1);
                }
                bson_append_array_end(b, &child);
                break;
            }
        }
    }

    int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }

  private:
    int32_t int32() {
        static const int32_t special[] = {0, 1, -1, 2, INT32_MAX, INT32_MIN, 100, -100};
        return pick(2) ? special[pick(8)] : static_cast<int32_t>(pick(21)) - 10;
    }
    int64_t int64() {
        static const int64_t special[] = {0,
                                          1,
                                          -1,
                                          INT64_MAX,
                                          INT64_MIN,
                                          INT64_MAX - 1,
                                          (int64_t{1} << 53),
                                          (int64_t{1} << 53) + 1,
                                          -(int64_t{1} << 53) - 1,
                                          (int64_t{1} << 62) + 1,
                                          2,
                                          -2};
        return pick(2) ? special[pick(12)] : static_cast<int64_t>(pick(21)) - 10;
    }
    double dbl() {
        static const double special[] = {
            0.0,    -0.0,       NAN,    INFINITY, -INFINITY, 0.5,   -0.5,   1.0, 1e-310, -1e-310,
            0x1p53, 0x1p53 + 2, 0x1p63, -0x1p63,  0x1p64,    1e300, -1e300, 2.0, 0.1};
        if (pick(2)) return special[pick(19)];
        return (static_cast<int>(pick(41)) - 20) / 4.0;
    }
    std::string decimalString() {
        static const char* special[] = {"1",         "1.0",      "-0",     "0",
                                        "0.1",       "-2.5",     "NaN",    "Infinity",
                                        "-Infinity", "1E+400",   "1E-400", "9223372036854775807",
                                        "1E+6000",   "-1E+6000", "2.50",   "100"};
        return special[pick(16)];
    }
    std::string str() {
        static const char alphabet[] = {'\0', 'a', 'b', '\x7f', '\xff'};
        std::string s;
        int n = pick(4);
        for (int i = 0; i < n; ++i) s.push_back(alphabet[pick(5)]);
        return s;
    }
    std::string cstr() {
        static const char alphabet[] = {'a', 'b', '\x7f', '\xff'};
        std::string s;
        int n = pick(3);
        for (int i = 0; i < n; ++i) s.push_back(alphabet[pick(4)]);
        return s;
    }

    std::mt19937_64 rng_;
    bool lossless_;
};

/// The value of field "v" of a document made by RandomValues (or any {"v": x}).
inline bson_value_t valueOf(const bson::Doc& d) {
    bson_iter_t it;
    bson_iter_init_find(&it, d.get(), "v");
    return *bson_iter_value(&it);
}

}  // namespace halo::store::testing
