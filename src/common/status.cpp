#include "common/status.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

namespace halo {

std::string Status::toString() const {
    if (isOK()) return "OK";
    return fmt::format("{}({}): {}", codeName(code_), codeNumber(), reason_);
}

void invariantFailed(const char* expr, const char* file, int line) {
    std::fprintf(stderr, "Invariant failure %s at %s:%d\n", expr, file, line);
    std::abort();
}

}  // namespace halo
