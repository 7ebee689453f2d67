#include "store/exec/interrupt.h"

#include "common/status.h"

namespace halo::store {
namespace {
thread_local const std::atomic<bool>* t_killed = nullptr;
}  // namespace

InterruptScope::InterruptScope(const std::atomic<bool>* killed) : saved_(t_killed) {
    t_killed = killed;
}

InterruptScope::~InterruptScope() {
    t_killed = saved_;
}

void checkForInterrupt() {
    if (t_killed && t_killed->load(std::memory_order_relaxed))
        uasserted(ErrorCode::Interrupted, "operation was interrupted");
}

}  // namespace halo::store
