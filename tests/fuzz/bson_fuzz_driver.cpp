// Replays the BSON fuzz target over its seed corpus (corpus/bson), then over
// documents generated from a fixed seed (every BSON type, odd values: NaN,
// decimal128 specials, invalid UTF-8, code with scope, nesting past the depth
// limit) and byte mutations of them and of the corpus (for builds without
// libFuzzer). Deterministic and bounded. A crash, a sanitizer report or a
// broken property fails the test.
#include <bson/bson.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bson/doc.h"
#include "replay.h"

namespace {

using Rng = std::mt19937_64;

std::string randomString(Rng& rng) {
    static const char kChars[] = "ab.$_0\xc3\xa9\xff\x80";
    std::string s;
    for (size_t n = rng() % 6; n > 0; --n) s.push_back(kChars[rng() % (sizeof kChars - 1)]);
    return s;
}

void appendRandom(bson_t* b, Rng& rng, int depth, bool array);

void appendRandomValue(bson_t* b, const std::string& key, Rng& rng, int depth) {
    const char* k = key.c_str();
    const int kl = static_cast<int>(key.size());
    static const double kDoubles[] = {0.0, -0.0, 1.5, NAN, INFINITY, -INFINITY, 9.3e18, -9.3e18};
    static const char* kDecimals[] = {"NaN", "-Infinity", "1E+6144", "-0", "123.456E-6176", "1"};
    switch (rng() % 19) {
        case 0:
            bson_append_double(b, k, kl, kDoubles[rng() % 8]);
            break;
        case 1: {
            std::string s = randomString(rng);
            bson_append_utf8(b, k, kl, s.data(), static_cast<int>(s.size()));
            break;
        }
        case 2:
        case 3: {
            bson_t child;
            const bool array = rng() % 2;
            if (array)
                bson_append_array_begin(b, k, kl, &child);
            else
                bson_append_document_begin(b, k, kl, &child);
            if (depth < 4) appendRandom(&child, rng, depth + 1, array);
            if (array)
                bson_append_array_end(b, &child);
            else
                bson_append_document_end(b, &child);
            break;
        }
        case 4: {
            uint8_t bytes[5] = {1, 2, 3, 4, 5};
            bson_append_binary(b, k, kl, static_cast<bson_subtype_t>(rng() % 9), bytes,
                               static_cast<uint32_t>(rng() % 6));
            break;
        }
        case 5:
            bson_append_undefined(b, k, kl);
            break;
        case 6: {
            bson_oid_t oid;
            bson_oid_init_from_data(&oid, reinterpret_cast<const uint8_t*>("0123456789ab"));
            bson_append_oid(b, k, kl, &oid);
            break;
        }
        case 7:
            bson_append_bool(b, k, kl, rng() % 2);
            break;
        case 8:
            bson_append_date_time(b, k, kl, static_cast<int64_t>(rng()));
            break;
        case 9:
            bson_append_null(b, k, kl);
            break;
        case 10:
            bson_append_regex(b, k, kl, "^a.*", rng() % 2 ? "imx" : "");
            break;
        case 11: {
            bson_oid_t oid;
            bson_oid_init_from_data(&oid, reinterpret_cast<const uint8_t*>("ba9876543210"));
            bson_append_dbpointer(b, k, kl, "db.coll", &oid);
            break;
        }
        case 12:
            bson_append_code(b, k, kl, "function() {}");
            break;
        case 13: {
            bson_t scope = BSON_INITIALIZER;
            if (depth < 4) appendRandom(&scope, rng, depth + 1, false);
            bson_append_code_with_scope(b, k, kl, "x", &scope);
            bson_destroy(&scope);
            break;
        }
        case 14:
            bson_append_int32(b, k, kl, static_cast<int32_t>(rng()));
            break;
        case 15:
            bson_append_timestamp(b, k, kl, static_cast<uint32_t>(rng()),
                                  static_cast<uint32_t>(rng()));
            break;
        case 16:
            bson_append_int64(b, k, kl, static_cast<int64_t>(rng()));
            break;
        case 17: {
            bson_decimal128_t d;
            bson_decimal128_from_string(kDecimals[rng() % 6], &d);
            bson_append_decimal128(b, k, kl, &d);
            break;
        }
        case 18:
            if (rng() % 2)
                bson_append_minkey(b, k, kl);
            else
                bson_append_maxkey(b, k, kl);
            break;
    }
}

/// Appends up to five random fields; an array's keys are its indexes, but
/// now and then not (libbson prints a warning when such an array is appended
/// elsewhere, so not often).
void appendRandom(bson_t* b, Rng& rng, int depth, bool array) {
    const size_t n = rng() % 6;
    for (size_t i = 0; i < n; ++i) {
        std::string key;
        if (array)
            key = rng() % 64 ? std::to_string(i) : randomString(rng);
        else
            key = rng() % 4 ? randomString(rng) : std::to_string(rng() % 3);
        appendRandomValue(b, key, rng, depth);
    }
}

halo::fuzz::Input bytesOf(const bson_t* b) {
    const uint8_t* d = bson_get_data(b);
    return halo::fuzz::Input(d, d + b->len);
}

/// A document nested `levels` deep ({a: {a: ...}}), built from the bytes.
halo::fuzz::Input nested(int levels) {
    halo::fuzz::Input out = {5, 0, 0, 0, 0};
    for (int i = 0; i < levels; ++i) {
        halo::fuzz::Input outer = {0, 0, 0, 0, BSON_TYPE_DOCUMENT, 'a', 0};
        outer.insert(outer.end(), out.begin(), out.end());
        outer.push_back(0);
        const uint32_t len = static_cast<uint32_t>(outer.size());
        std::memcpy(outer.data(), &len, 4);
        out = std::move(outer);
    }
    return out;
}

void mutate(halo::fuzz::Input& d, Rng& rng) {
    static const int32_t kInts[] = {0, -1, 4, 5, 0x7fffffff, INT32_MIN, 16 * 1024 * 1024};
    for (int m = 1 + static_cast<int>(rng() % 4); m > 0 && !d.empty(); --m) {
        switch (rng() % 5) {
            case 0:
                d[rng() % d.size()] = static_cast<uint8_t>(rng());
                break;
            case 1:
                d.resize(rng() % (d.size() + 1));
                break;
            case 2:
                d.insert(d.begin() + static_cast<long>(rng() % (d.size() + 1)),
                         static_cast<uint8_t>(rng()));
                break;
            case 3:
                if (d.size() >= 4) {
                    int32_t v = kInts[rng() % 7];
                    std::memcpy(d.data() + rng() % (d.size() - 3), &v, 4);
                }
                break;
            case 4:  // keep the outer length honest so the walk goes deeper
                if (d.size() >= 4) {
                    int32_t len = static_cast<int32_t>(d.size());
                    std::memcpy(d.data(), &len, 4);
                }
                break;
        }
    }
}

}  // namespace

int main() {
    const auto corpus = halo::fuzz::loadCorpus(HALO_FUZZ_CORPUS);
    const size_t files = halo::fuzz::replay(corpus);
    for (int levels : {199, 200, 201}) halo::fuzz::runOne(nested(levels));  // the depth limit
    Rng rng(20261202);
    size_t runs = 0;
    for (int iter = 0; iter < 20000; ++iter) {
        halo::fuzz::Input in;
        if (iter % 4 == 0 && !corpus.empty()) {
            in = corpus[rng() % corpus.size()];
        } else {
            bson_t b = BSON_INITIALIZER;
            appendRandom(&b, rng, 0, false);
            in = bytesOf(&b);
            bson_destroy(&b);
        }
        halo::fuzz::runOne(in);
        mutate(in, rng);
        halo::fuzz::runOne(in);
        runs += 2;
    }
    std::printf("bson fuzz replay: %zu corpus files, %zu generated and mutated inputs, no crash\n",
                files, runs);
    return 0;
}
