#pragma once
// The time limit of the client operation a coroutine works for (the client's
// maxTimeMS), seen by every tier round trip the operation makes however deep in
// the protocol's helpers: ClientConnection runs a command that has a maxTimeMS
// on a DeadlineExecutor, which sets the thread's current deadline around every
// step of the command's coroutines, and Tier::roundTrip reads it when it
// starts. A tier that stops answering (a network partition) then fails the
// operation within its time, as MaxTimeMSExpired, instead of hanging it.
#include <asio.hpp>
#include <chrono>
#include <memory>

namespace halo::tiering {

using SteadyTime = std::chrono::steady_clock::time_point;

/// The deadline of the operation whose step runs on this thread now (null: none).
const SteadyTime* currentOpDeadline();

/// Runs work on an io_context's executor with the current deadline set.
class DeadlineExecutor {
  public:
    DeadlineExecutor(asio::io_context::executor_type inner, std::shared_ptr<const SteadyTime> d,
                     bool never = false) noexcept
        : inner_(std::move(inner)), deadline_(std::move(d)), never_(never) {}

    asio::execution_context& query(asio::execution::context_t) const noexcept {
        return asio::query(inner_, asio::execution::context);
    }
    asio::execution::blocking_t query(asio::execution::blocking_t) const noexcept {
        return never_ ? asio::execution::blocking_t(asio::execution::blocking.never)
                      : asio::execution::blocking_t(asio::execution::blocking.possibly);
    }
    DeadlineExecutor require(asio::execution::blocking_t::never_t) const noexcept {
        return DeadlineExecutor(inner_, deadline_, true);
    }
    DeadlineExecutor require(asio::execution::blocking_t::possibly_t) const noexcept {
        return DeadlineExecutor(inner_, deadline_, false);
    }

    template <typename F>
    void execute(F f) const {
        auto run = [d = deadline_, f = std::move(f)]() mutable {
            Scope scope(d.get());
            f();
        };
        if (never_)
            asio::execution::execute(asio::require(inner_, asio::execution::blocking.never),
                                     std::move(run));
        else
            asio::execution::execute(inner_, std::move(run));
    }

    friend bool operator==(const DeadlineExecutor& a, const DeadlineExecutor& b) noexcept {
        return a.inner_ == b.inner_ && a.deadline_ == b.deadline_ && a.never_ == b.never_;
    }
    friend bool operator!=(const DeadlineExecutor& a, const DeadlineExecutor& b) noexcept {
        return !(a == b);
    }

  private:
    /// Sets the thread's current deadline for one step, and puts back the one
    /// before (a step of another operation may run nested in it).
    struct Scope {
        explicit Scope(const SteadyTime* d);
        ~Scope();
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;
        const SteadyTime* prev;
    };

    asio::io_context::executor_type inner_;
    std::shared_ptr<const SteadyTime> deadline_;
    bool never_;
};

}  // namespace halo::tiering
