#pragma once
// Test-only fail points, as mongod's configureFailPoint command sets them
// (accepted only with --setParameter enableTestCommands=1). A fail point has a
// mode: off, alwaysOn, {times: n} (the next n activations, then off),
// {skip: n} (not the next n, then every one) or {activationProbability: p};
// a data document that says what it does; and a count of the times it fired
// (configureFailPoint replies with the count from before the change).
//
// The code a fail point guards asks fire(predicate): the predicate sees the
// data and says whether this operation is one the fail point is about; only
// then does the mode count the activation. A point that is off costs one
// atomic load.
//
// Thread-safety: every method is thread-safe.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>

#include "bson/doc.h"
#include "common/status.h"

namespace halo::store {

class FailPoint {
  public:
    enum class Mode { Off, AlwaysOn, Times, Skip, Random };
    struct Settings {
        Mode mode = Mode::Off;
        int64_t count = 0;         // Times: activations left; Skip: activations to skip
        double probability = 0.0;  // Random
        std::shared_ptr<const bson::Doc> data = std::make_shared<const bson::Doc>();
    };

    /// Reads `mode` and `data` of a configureFailPoint command, with mongod's
    /// errors (IllegalOperation without mode, BadValue, TypeMismatch).
    static StatusWith<Settings> parse(const bson_t* cmd);

    /// Replaces the mode and data; returns how many times it fired before.
    int64_t configure(Settings settings);

    /// When the point is on and `applies(data)` holds, counts one activation
    /// against the mode; returns the data if the point fires, else null.
    std::shared_ptr<const bson::Doc> fire(const std::function<bool(const bson_t*)>& applies);

    bool maybeOn() const { return on_.load(std::memory_order_relaxed); }
    int64_t timesEntered() const { return timesEntered_.load(); }
    /// {mode, data, timesEntered}, as getParameter shows a fail point.
    void append(bson_t* out) const;

  private:
    mutable std::mutex mu_;
    Settings settings_;
    std::atomic<bool> on_{false};
    std::atomic<int64_t> timesEntered_{0};
    std::minstd_rand rng_{std::random_device{}()};
};

/// The fail points this store knows, by mongod's names.
class FailPoints {
  public:
    /// Fails or delays commands chosen by name (mongod's failCommand).
    FailPoint failCommand;
    /// After a retryable write's statement is applied, before it commits:
    /// closes the connection and/or fails with failBeforeCommitExceptionCode.
    FailPoint onPrimaryTransactionalWrite;
    /// A getMore fails (errorCode) once it holds its cursor; the cursor is gone.
    FailPoint failGetMoreAfterCursorCheckout;

    /// Null for a name this store does not have.
    FailPoint* find(std::string_view name);
};

}  // namespace halo::store
