#pragma once
// Interrupting a running operation (killOp). The dispatcher publishes the
// operation's kill flag on the thread that runs it; loops that can run long
// (scans, batches, write statements) call checkForInterrupt(), which throws
// Interrupted (11601) "operation was interrupted" once the flag is set.
// Cost when not killed: one thread-local load and one relaxed atomic load.
#include <atomic>

namespace halo::store {

/// While alive, checkForInterrupt() on this thread watches `killed` (null:
/// nothing to watch, e.g. the store's own work). Restores the previous flag.
class InterruptScope {
  public:
    explicit InterruptScope(const std::atomic<bool>* killed);
    ~InterruptScope();
    InterruptScope(const InterruptScope&) = delete;
    InterruptScope& operator=(const InterruptScope&) = delete;

  private:
    const std::atomic<bool>* saved_;
};

/// Throws DBException Interrupted (11601) when the current operation was killed.
void checkForInterrupt();

}  // namespace halo::store
