#include "store/repl/logical_clock.h"

#include <chrono>

namespace halo::store {

Timestamp LogicalClock::reserve() {
    auto now = static_cast<uint32_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                         std::chrono::system_clock::now().time_since_epoch())
                                         .count());
    std::lock_guard lk(mu_);
    if (now > last_.secs) {
        last_ = {now, 1};
    } else {
        ++last_.inc;
    }
    return last_;
}

Timestamp LogicalClock::latest() const {
    std::lock_guard lk(mu_);
    return last_;
}

void LogicalClock::advanceTo(Timestamp t) {
    std::lock_guard lk(mu_);
    if (last_ < t) last_ = t;
}

}  // namespace halo::store
