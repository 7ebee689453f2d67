#pragma once
// Status / StatusWith<T>: the error currency between modules. Codes are
// MongoDB's wire error codes, so a Status goes straight into a reply.
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/error_codes.h"

namespace halo {

class [[nodiscard]] Status {
  public:
    Status() = default;
    Status(ErrorCode code, std::string reason) : code_(code), reason_(std::move(reason)) {}
    static Status OK() { return {}; }

    bool isOK() const { return code_ == ErrorCode::OK; }
    ErrorCode code() const { return code_; }
    int codeNumber() const { return static_cast<int>(code_); }
    const std::string& reason() const { return reason_; }
    std::string toString() const;

  private:
    ErrorCode code_ = ErrorCode::OK;
    std::string reason_;
};

template <typename T>
class [[nodiscard]] StatusWith {
  public:
    StatusWith(Status s) : status_(std::move(s)) {}  // NOLINT
    StatusWith(ErrorCode c, std::string r) : status_(c, std::move(r)) {}
    StatusWith(T v) : value_(std::move(v)) {}  // NOLINT

    bool isOK() const { return status_.isOK(); }
    const Status& getStatus() const { return status_; }
    T& getValue() { return *value_; }
    const T& getValue() const { return *value_; }

  private:
    Status status_;
    std::optional<T> value_;
};

/// Thrown by command handlers and the query/update layers for errors that end
/// the operation; the dispatcher turns it into {ok:0, code, codeName, errmsg}.
/// Never thrown across the event loop or C callbacks.
class DBException : public std::runtime_error {
  public:
    explicit DBException(Status s) : std::runtime_error(s.reason()), status_(std::move(s)) {}
    DBException(ErrorCode c, std::string r) : DBException(Status(c, std::move(r))) {}
    const Status& status() const { return status_; }
    ErrorCode code() const { return status_.code(); }

  private:
    Status status_;
};

[[noreturn]] inline void uasserted(ErrorCode c, std::string msg) {
    throw DBException(c, std::move(msg));
}
inline void uassert(bool cond, ErrorCode c, const char* msg) {
    if (!cond) uasserted(c, msg);
}
inline void uassertStatusOK(const Status& s) {
    if (!s.isOK()) throw DBException(s);
}
template <typename T>
T uassertStatusOK(StatusWith<T> sw) {
    if (!sw.isOK()) throw DBException(sw.getStatus());
    return std::move(sw.getValue());
}

/// Invariants are for bugs only, never for input.
[[noreturn]] void invariantFailed(const char* expr, const char* file, int line);
#define HALO_INVARIANT(expr) ((expr) ? (void)0 : ::halo::invariantFailed(#expr, __FILE__, __LINE__))

}  // namespace halo
