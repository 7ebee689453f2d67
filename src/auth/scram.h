#pragma once
// SCRAM (RFC 5802, RFC 7677) as MongoDB uses it: SCRAM-SHA-1 over the
// MongoDB password digest hex(MD5("user:mongo:pwd")), SCRAM-SHA-256 over the
// SASLprep'd password. Both ends of the conversation live here (the store is
// the server, the tiering proxy's tier client is the client), with the
// primitives (Hi, HMAC, H, base64) they share. Crypto is OpenSSL's.
//
// No I/O, no clock; randomness comes from OpenSSL's RAND_bytes unless a test
// passes the nonce in. Every parse of a peer's message returns a Status: a
// malformed or hostile message is never an invariant failure.
// Not thread-safe per object; objects are cheap and per-conversation.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace halo::auth {

using Bytes = std::vector<uint8_t>;

enum class ScramMechanism { Sha1, Sha256 };

/// "SCRAM-SHA-1" / "SCRAM-SHA-256".
std::string_view mechanismName(ScramMechanism m);
std::optional<ScramMechanism> mechanismFromName(std::string_view name);

// --- Primitives ---------------------------------------------------------------
Bytes hashOf(ScramMechanism m, std::span<const uint8_t> data);
Bytes hmacOf(ScramMechanism m, std::span<const uint8_t> key, std::span<const uint8_t> data);
/// Hi(password, salt, i) = PBKDF2-HMAC over the mechanism's hash.
Bytes hi(ScramMechanism m, std::string_view password, std::span<const uint8_t> salt,
         int iterations);
std::string base64Encode(std::span<const uint8_t> data);
/// Strict RFC 4648 base64 (padding required); nullopt on any invalid input.
std::optional<Bytes> base64Decode(std::string_view text);
Bytes randomBytes(size_t n);
/// Constant-time comparison of two byte strings.
bool equalBytes(std::span<const uint8_t> a, std::span<const uint8_t> b);
std::span<const uint8_t> asBytes(std::string_view s);

/// SASLprep (RFC 4013) for the passwords this implementation accepts:
/// printable ASCII passes unchanged (that is what SASLprep maps it to);
/// control characters are prohibited by the profile; non-ASCII text is
/// refused with a clear message rather than mapped (NFKC is not implemented).
StatusWith<std::string> saslPrep(std::string_view password);
/// MongoDB's legacy password digest: hex(MD5(user + ":mongo:" + password)).
std::string mongoPasswordDigest(std::string_view user, std::string_view password);
/// The password SCRAM hashes for `mechanism`: the digest for SHA-1, SASLprep for SHA-256.
StatusWith<std::string> scramPassword(ScramMechanism m, std::string_view user,
                                      std::string_view password);

/// SASL name encoding in SCRAM messages: ',' -> "=2C", '=' -> "=3D".
std::string encodeSaslName(std::string_view name);
StatusWith<std::string> decodeSaslName(std::string_view encoded);

/// What a server stores per user and mechanism (mongod's `credentials` entry).
struct ScramCredentials {
    int iterationCount = 0;
    Bytes salt;
    Bytes storedKey;
    Bytes serverKey;
};

/// Derives stored credentials from the already-processed password (see scramPassword).
ScramCredentials deriveCredentials(ScramMechanism m, std::string_view scramPassword, Bytes salt,
                                   int iterations);
/// mongod's defaults: 10,000 iterations / 16-byte salt (SHA-1), 15,000 / 28 (SHA-256).
ScramCredentials makeCredentials(ScramMechanism m, std::string_view scramPassword);

/// The client side: first() -> server-first -> finalMessage() -> server-final -> verify().
class ScramClient {
  public:
    /// `scramPassword` is already processed (see scramPassword()). An empty
    /// `nonce` draws 24 random bytes (base64) as the client nonce.
    ScramClient(ScramMechanism m, std::string user, std::string scramPassword,
                std::string nonce = {});
    /// client-first-message: "n,,n=<user>,r=<nonce>".
    std::string first() const;
    /// client-final-message for the server's first message; checks the nonce and
    /// the iteration count (at least 4096, as drivers require).
    StatusWith<std::string> finalMessage(std::string_view serverFirst);
    /// Checks the server's signature ("v=...") in server-final-message.
    Status verify(std::string_view serverFinal) const;

  private:
    ScramMechanism mech_;
    std::string user_;
    std::string password_;
    std::string nonce_;
    Bytes serverSignature_;
};

/// The server side of one conversation.
class ScramServer {
  public:
    explicit ScramServer(ScramMechanism m) : mech_(m) {}
    ScramMechanism mechanism() const { return mech_; }
    /// Parses client-first-message; returns the (decoded) user name to look up.
    StatusWith<std::string> start(std::string_view clientFirst);
    /// server-first-message for the user's credentials. An empty `serverNonce`
    /// draws 24 random bytes (base64).
    std::string serverFirst(const ScramCredentials& creds, std::string serverNonce = {});
    /// Checks client-final-message (channel binding, nonce, proof); returns
    /// server-final-message ("v=<signature>"). Any failure is AuthenticationFailed
    /// with the detailed reason (for the log, not for the client).
    StatusWith<std::string> finish(std::string_view clientFinal);

  private:
    ScramMechanism mech_;
    std::string gs2Header_;
    std::string clientFirstBare_;
    std::string serverFirst_;
    std::string nonce_;  // client nonce + server nonce
    ScramCredentials creds_;
};

}  // namespace halo::auth
