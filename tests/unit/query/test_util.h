#pragma once
// Helpers shared by the query unit tests.
#include <string>

#include "bson/doc.h"

namespace halo::query::test {

/// Canonical extended JSON (type-exact) of a document.
inline std::string canonical(const bson_t* b) {
    size_t len = 0;
    char* s = bson_as_canonical_extended_json(b, &len);
    std::string out(s, len);
    bson_free(s);
    return out;
}
inline std::string canonical(const char* json) {
    return canonical(bson::Doc::fromJsonOrDie(json).get());
}

}  // namespace halo::query::test
