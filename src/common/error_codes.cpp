#include "common/error_codes.h"

#include <initializer_list>
#include <map>
#include <mutex>
#include <string>

namespace halo {

std::string_view codeName(ErrorCode code) {
    switch (code) {
#define HALO_X(name, num) \
    case ErrorCode::name: \
        return #name;
        HALO_ERROR_CODES(HALO_X)
#undef HALO_X
    }
    // A code without a name of its own: mongod calls it "Location<N>". The
    // names live as long as the process, so the views stay valid.
    static std::mutex mu;
    static std::map<int, std::string> names;
    std::lock_guard lk(mu);
    auto [it, inserted] = names.try_emplace(static_cast<int>(code));
    if (inserted) it->second = "Location" + std::to_string(static_cast<int>(code));
    return it->second;
}

namespace {

bool oneOf(int code, std::initializer_list<ErrorCode> codes) {
    for (ErrorCode c : codes)
        if (static_cast<int>(c) == code) return true;
    return false;
}

}  // namespace

bool isRetriableError(int code) {
    using E = ErrorCode;
    return oneOf(
        code, {E::HostUnreachable, E::HostNotFound, E::NetworkTimeout, E::ShutdownInProgress,
               E::ReadConcernMajorityNotAvailableYet, E::PrimarySteppedDown, E::ExceededTimeLimit,
               E::ConnectionPoolExpired, E::InternalTransactionNotSupported, E::SocketException,
               E::NotWritablePrimary, E::InterruptedAtShutdown, E::InterruptedDueToReplStateChange,
               E::NotPrimaryNoSecondaryOk, E::NotPrimaryOrSecondary,
               E::BackupCursorOpenConflictWithCheckpoint});
}

bool isNetworkError(int code) {
    using E = ErrorCode;
    return oneOf(code, {E::HostUnreachable, E::HostNotFound, E::NetworkTimeout,
                        E::ConnectionPoolExpired, E::SocketException});
}

bool isNotPrimaryError(int code) {
    using E = ErrorCode;
    return oneOf(code,
                 {E::PrimarySteppedDown, E::NotWritablePrimary, E::InterruptedDueToReplStateChange,
                  E::NotPrimaryNoSecondaryOk, E::NotPrimaryOrSecondary});
}

bool isShutdownError(int code) {
    return oneOf(code, {ErrorCode::ShutdownInProgress, ErrorCode::InterruptedAtShutdown});
}

bool isSnapshotError(int code) {
    using E = ErrorCode;
    return oneOf(code, {E::SnapshotTooOld, E::SnapshotUnavailable, E::StaleChunkHistory,
                        E::MigrationConflict});
}

bool isNeedRetargettingError(int code) {
    return oneOf(code, {ErrorCode::StaleEpoch, ErrorCode::StaleConfig});
}

}  // namespace halo
