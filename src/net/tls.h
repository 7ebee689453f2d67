#pragma once
// TLS on the accepting side: the OpenSSL context built from TlsServerOptions
// (checked at start, every error naming its option), and how a listener tells
// a TLS ClientHello from a plain wire message.
#include <asio.hpp>
#include <asio/ssl.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "net/tls_options.h"

namespace halo::net {

/// The server's certificate, key and (optional) CA for client certificates.
/// Immutable once created and shared by every connection of a listener
/// (OpenSSL creates per-connection state from it concurrently).
class TlsServerContext {
  public:
    /// Checks the options and loads the files. A null pointer (with OK) when
    /// the mode is disabled. Errors (InvalidSSLConfiguration) name the option:
    /// a missing or unreadable file, a file without a certificate or key, a key
    /// that does not match, a TLS mode without a certificate.
    static StatusWith<std::shared_ptr<TlsServerContext>> create(const TlsServerOptions& opts);

    TlsMode mode() const { return mode_; }
    bool requireTls() const { return mode_ == TlsMode::requireTLS; }
    asio::ssl::context& context() { return ctx_; }

  private:
    explicit TlsServerContext(TlsMode mode);
    TlsMode mode_;
    asio::ssl::context ctx_;
};

/// True when the first four bytes of a connection are a TLS handshake record
/// header (content type 0x16, version 3.1 to 3.4), as a ClientHello starts.
/// Read as a wire message, those bytes would announce a message of at least
/// 66,326 bytes, which no driver sends first (it sends hello), so the two
/// cannot be confused on a connection's first message.
bool looksLikeTlsHandshake(const uint8_t first[4]);

/// The subject of the certificate the peer presented on an established TLS
/// connection, in RFC 2253 form as mongod names x.509 users ("CN=app,OU=...");
/// empty when it presented none.
std::string peerSubject(SSL* ssl);

}  // namespace halo::net
