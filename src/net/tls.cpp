#include "net/tls.h"

#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace halo::net {

bool looksLikeTlsHandshake(const uint8_t first[4]) {
    return first[0] == 0x16 && first[1] == 0x03 && first[2] >= 0x01 && first[2] <= 0x04;
}

namespace {

/// "net.tls.CAFile", or "net.tls.CAFile (--tlsCAFile)" for the store.
std::string optionName(const TlsServerOptions& o, std::string_view key, std::string_view flag) {
    if (!o.flagNames) return fmt::format("net.tls.{}", key);
    return fmt::format("net.tls.{} (--{})", key, flag);
}

Status invalid(std::string msg) {
    return Status(ErrorCode::InvalidSSLConfiguration, std::move(msg));
}

Status readable(const std::string& path, const std::string& name) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f)
        return invalid(fmt::format("{}: cannot read '{}': {}", name, path, std::strerror(errno)));
    std::fclose(f);
    return Status::OK();
}

}  // namespace

TlsServerContext::TlsServerContext(TlsMode mode)
    : mode_(mode), ctx_(asio::ssl::context::tls_server) {}

StatusWith<std::shared_ptr<TlsServerContext>> TlsServerContext::create(const TlsServerOptions& o) {
    const std::string modeName = optionName(o, "mode", "tlsMode");
    const std::string certName = optionName(o, "certificateKeyFile", "tlsCertificateKeyFile");
    const std::string caName = optionName(o, "CAFile", "tlsCAFile");
    if (!o.enabled()) {
        if (!o.certificateKeyFile.empty())
            return invalid(fmt::format(
                "{} is set but {} is disabled; set it to requireTLS, preferTLS or allowTLS",
                certName, modeName));
        if (!o.caFile.empty())
            return invalid(fmt::format(
                "{} is set but {} is disabled; set it to requireTLS, preferTLS or allowTLS", caName,
                modeName));
        return std::shared_ptr<TlsServerContext>();
    }
    if (o.certificateKeyFile.empty())
        return invalid(
            fmt::format("{}: required when {} is {}", certName, modeName, tlsModeName(o.mode)));
    Status s = readable(o.certificateKeyFile, certName);
    if (!s.isOK()) return s;

    std::shared_ptr<TlsServerContext> t(new TlsServerContext(o.mode));
    asio::ssl::context& ctx = t->ctx_;
    SSL_CTX* native = ctx.native_handle();
    ctx.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                    asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                    asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use);
    SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
    // Always a callback: without one OpenSSL would prompt on the terminal for
    // the password of an encrypted key.
    std::string password = o.certificateKeyFilePassword;
    ctx.set_password_callback(
        [password](std::size_t, asio::ssl::context::password_purpose) { return password; });

    asio::error_code ec;
    ctx.use_certificate_chain_file(o.certificateKeyFile, ec);
    if (ec)
        return invalid(fmt::format("{}: '{}' holds no usable PEM certificate: {}", certName,
                                   o.certificateKeyFile, ec.message()));
    ctx.use_private_key_file(o.certificateKeyFile, asio::ssl::context::pem, ec);
    if (ec) {
        std::string hint =
            o.certificateKeyFilePassword.empty()
                ? std::string(" (an encrypted key needs ") +
                      optionName(o, "certificateKeyFilePassword", "tlsCertificateKeyFilePassword") +
                      ")"
                : std::string(" (or the password is wrong)");
        return invalid(fmt::format("{}: '{}' holds no usable private key{}: {}", certName,
                                   o.certificateKeyFile, hint, ec.message()));
    }
    if (SSL_CTX_check_private_key(native) != 1)
        return invalid(fmt::format("{}: the private key in '{}' does not match its certificate",
                                   certName, o.certificateKeyFile));

    if (!o.caFile.empty()) {
        s = readable(o.caFile, caName);
        if (!s.isOK()) return s;
        ctx.load_verify_file(o.caFile, ec);
        if (ec)
            return invalid(fmt::format("{}: '{}' holds no usable PEM certificate: {}", caName,
                                       o.caFile, ec.message()));
        // Tell clients which CA their certificate must come from.
        if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(o.caFile.c_str()))
            SSL_CTX_set_client_CA_list(native, names);
        ctx.set_verify_mode(
            asio::ssl::verify_peer |
            (o.allowConnectionsWithoutCertificates ? 0 : asio::ssl::verify_fail_if_no_peer_cert));
    } else {
        // No CA to check them against: client certificates are not requested.
        ctx.set_verify_mode(asio::ssl::verify_none);
    }
    static const unsigned char kSessionContext[] = "halocline";
    SSL_CTX_set_session_id_context(native, kSessionContext, sizeof kSessionContext - 1);
    return t;
}

}  // namespace halo::net

namespace halo::net {

std::string peerSubject(SSL* ssl) {
    X509* cert = SSL_get_peer_certificate(ssl);
    if (!cert) return {};
    std::string out;
    if (BIO* bio = BIO_new(BIO_s_mem())) {
        if (X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253) >= 0) {
            char* data = nullptr;
            long len = BIO_get_mem_data(bio, &data);
            if (data && len > 0) out.assign(data, static_cast<size_t>(len));
        }
        BIO_free(bio);
    }
    X509_free(cert);
    return out;
}

}  // namespace halo::net
