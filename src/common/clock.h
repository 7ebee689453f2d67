#pragma once
// The wall clock, in milliseconds since the Unix epoch (BSON dates, ages).
#include <chrono>
#include <cstdint>

namespace halo {

inline int64_t wallMillis() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace halo
