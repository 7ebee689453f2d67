#include "common/error_codes.h"

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

}  // namespace halo
