#include "net/tls_options.h"

namespace halo::net {

std::optional<TlsMode> parseTlsMode(std::string_view text) {
    for (TlsMode m :
         {TlsMode::disabled, TlsMode::allowTLS, TlsMode::preferTLS, TlsMode::requireTLS})
        if (text == tlsModeName(m)) return m;
    return std::nullopt;
}

std::string_view tlsModeName(TlsMode mode) {
    switch (mode) {
        case TlsMode::disabled:
            return "disabled";
        case TlsMode::allowTLS:
            return "allowTLS";
        case TlsMode::preferTLS:
            return "preferTLS";
        case TlsMode::requireTLS:
            return "requireTLS";
    }
    return "disabled";
}

}  // namespace halo::net
