#pragma once
// Server-side TLS settings, as mongod names them (net.tls.* in YAML, --tls* flags).
// Plain data, no OpenSSL: src/net/tls.h turns them into a context.
#include <optional>
#include <string>
#include <string_view>

namespace halo::net {

/// net.tls.mode. allowTLS and preferTLS differ in mongod only for the
/// connections it opens itself; a listener treats them alike: it accepts both
/// TLS and plain clients.
enum class TlsMode { disabled, allowTLS, preferTLS, requireTLS };

std::optional<TlsMode> parseTlsMode(std::string_view text);
std::string_view tlsModeName(TlsMode mode);

struct TlsServerOptions {
    TlsMode mode = TlsMode::disabled;
    std::string certificateKeyFile;          // PEM: the certificate (chain) and its key
    std::string certificateKeyFilePassword;  // when the key is encrypted
    std::string caFile;                      // verifies client certificates
    bool allowConnectionsWithoutCertificates = false;
    /// Error messages name the YAML key ("net.tls.CAFile"); with `flagNames`
    /// also the mongod flag ("--tlsCAFile"), for the store's command line.
    bool flagNames = false;

    bool enabled() const { return mode != TlsMode::disabled; }
};

}  // namespace halo::net
