#include "common/error_codes.h"

namespace halo {

std::string_view codeName(ErrorCode code) {
    switch (code) {
#define HALO_X(name, num) \
    case ErrorCode::name: \
        return #name;
        HALO_ERROR_CODES(HALO_X)
#undef HALO_X
    }
    return "UnknownError";
}

}  // namespace halo
