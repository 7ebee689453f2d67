// Fuzz target for the BSON layer (src/bson) over untrusted bytes: validate(),
// then, for what it accepts, everything the store and the proxy do with a
// client's document: relaxed extended JSON (logs, error messages) and back,
// the one-pass field index, lookups by name and dotted path, copyWithout,
// patchInt64, and MongoDB's value ordering. Besides crashes and sanitizer
// reports it checks properties: every value equals itself, document order is
// antisymmetric, Fields finds what bson::find finds, and what copyWithout and
// patchInt64 make from a valid document is valid. Built as a libFuzzer target
// under clang (-DHALO_LIBFUZZER=ON, scripts/fuzz.sh); otherwise linked with
// bson_fuzz_driver.cpp, which replays the corpus and seeded mutations.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "bson/compare.h"
#include "bson/doc.h"
#include "bson/fields.h"

namespace {

using namespace halo::bson;

/// A broken property is a bug as much as a crash: report it the same way
/// (on stdout: scripts/fuzz.sh closes the target's stderr, see there).
void require(bool ok, const char* what) {
    if (ok) return;
    std::fprintf(stdout, "bson_fuzz: property violated: %s\n", what);
    std::fflush(stdout);
    std::abort();
}

int sign(int c) {
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

/// Every value of `doc`, nested ones included (depth is bounded by validate()).
void walk(const bson_t* doc, std::vector<std::string>* paths, const std::string& prefix,
          int depth) {
    bson_iter_t it;
    if (!bson_iter_init(&it, doc)) return;
    const bson_value_t* previous = nullptr;
    bson_value_t prev;
    while (bson_iter_next(&it)) {
        const bson_value_t* v = bson_iter_value(&it);
        require(compareValues(*v, *v) == 0, "a value equals itself");
        if (previous)
            require(sign(compareValues(*v, *previous)) == -sign(compareValues(*previous, *v)),
                    "value order is antisymmetric");
        prev = *v;
        previous = &prev;
        (void)valueToString(*v);
        (void)typeName(v->value_type);
        (void)isTruthy(*v);
        int64_t n;
        (void)toInt64Exact(*v, &n);
        (void)toDouble(*v);
        std::string_view key(bson_iter_key(&it), bson_iter_key_len(&it));
        (void)printableUtf8(key);
        std::string path = prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
        if (paths->size() < 16) paths->push_back(path);
        bson_t sub;
        if (subDocumentAt(it, &sub) && depth < 4) walk(&sub, paths, path, depth + 1);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (!validate(data, size).isOK()) return 0;
    Doc doc = Doc::copyOf(data, size);
    require(doc.size() == size, "a valid document copies whole");

    // JSON, both ways (what fails to parse back, invalid UTF-8, is fine).
    std::string json = doc.toJson();
    auto back = Doc::fromJson(json);
    if (back.isOK()) (void)back.getValue().toJson();

    // The field index agrees with a scan from the start.
    Fields fields(doc.get());
    for (size_t i = 0; i < fields.size(); ++i) {
        std::string_view key = fields.key(i);
        bson_iter_t a, b;
        require(fields.find(key, &a), "Fields finds its own keys");
        require(find(doc.get(), key, &b), "find finds every key Fields lists");
        require(bson_iter_offset(&a) == bson_iter_offset(&b), "Fields and find agree");
        bson_t sub;
        (void)fields.subDocument(key, &sub);
    }
    (void)stringField(doc.get(), "$db");
    std::string bytes;
    (void)bytesField(doc.get(), "payload", &bytes);
    (void)commandTargetUtf8(doc.get(), "db");

    std::vector<std::string> paths;
    walk(doc.get(), &paths, "", 0);
    require(compareDocs(doc.get(), doc.get()) == 0, "a document equals itself");
    for (const auto& path : paths) {
        bson_iter_t at;
        (void)findDotted(doc.get(), path, &at);
        size_t values = 0;
        forEachValueAtPath(doc.get(), path, [&](const bson_value_t&) { ++values; });
    }

    // Without its first field: still valid, and ordered against the original
    // the same way both ways round.
    std::string first = fields.size() > 0 ? std::string(fields.key(0)) : std::string("_id");
    Doc without = copyWithout(doc.get(), {first, "$db"});
    require(validate(without.data(), without.size()).isOK(), "copyWithout output is valid");
    require(
        sign(compareDocs(doc.get(), without.get())) == -sign(compareDocs(without.get(), doc.get())),
        "document order is antisymmetric");

    // patchInt64 at every path that holds an int64: the document stays valid
    // and reads back the new value.
    for (const auto& path : paths) {
        Doc copy = doc.copy();
        if (!patchInt64(copy, path, -42)) continue;
        require(validate(copy.data(), copy.size()).isOK(), "patchInt64 output is valid");
        bson_iter_t at;
        require(findDotted(copy.get(), path, &at) && BSON_ITER_HOLDS_INT64(&at) &&
                    bson_iter_int64(&at) == -42,
                "patchInt64 writes where findDotted reads");
    }
    return 0;
}
