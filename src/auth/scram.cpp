#include "auth/scram.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <charconv>

namespace halo::auth {

namespace {

const EVP_MD* digestOf(ScramMechanism m) {
    return m == ScramMechanism::Sha1 ? EVP_sha1() : EVP_sha256();
}

Status failed(std::string reason) {
    return Status(ErrorCode::AuthenticationFailed, std::move(reason));
}

/// Splits "a=x,b=y" into (key, value) pairs; nullopt when an item is not k=v.
std::optional<std::vector<std::pair<char, std::string_view>>> parseAttributes(
    std::string_view msg) {
    std::vector<std::pair<char, std::string_view>> out;
    size_t pos = 0;
    while (pos <= msg.size()) {
        size_t comma = msg.find(',', pos);
        std::string_view item =
            msg.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
        if (item.size() < 2 || item[1] != '=') return std::nullopt;
        out.emplace_back(item[0], item.substr(2));
        if (comma == std::string_view::npos) break;
        pos = comma + 1;
    }
    return out;
}

bool printableNonce(std::string_view n) {
    if (n.empty()) return false;
    for (char c : n)
        if (c < 0x21 || c > 0x7e || c == ',') return false;
    return true;
}

Bytes xorBytes(std::span<const uint8_t> a, std::span<const uint8_t> b) {
    Bytes out(a.size());
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) out[i] = a[i] ^ b[i];
    return out;
}

}  // namespace

std::string_view mechanismName(ScramMechanism m) {
    return m == ScramMechanism::Sha1 ? "SCRAM-SHA-1" : "SCRAM-SHA-256";
}

std::optional<ScramMechanism> mechanismFromName(std::string_view name) {
    if (name == "SCRAM-SHA-1") return ScramMechanism::Sha1;
    if (name == "SCRAM-SHA-256") return ScramMechanism::Sha256;
    return std::nullopt;
}

std::span<const uint8_t> asBytes(std::string_view s) {
    return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

Bytes hashOf(ScramMechanism m, std::span<const uint8_t> data) {
    Bytes out(EVP_MAX_MD_SIZE);
    unsigned int len = 0;
    EVP_Digest(data.data(), data.size(), out.data(), &len, digestOf(m), nullptr);
    out.resize(len);
    return out;
}

Bytes hmacOf(ScramMechanism m, std::span<const uint8_t> key, std::span<const uint8_t> data) {
    Bytes out(EVP_MAX_MD_SIZE);
    unsigned int len = 0;
    HMAC(digestOf(m), key.data(), static_cast<int>(key.size()), data.data(), data.size(),
         out.data(), &len);
    out.resize(len);
    return out;
}

Bytes hi(ScramMechanism m, std::string_view password, std::span<const uint8_t> salt,
         int iterations) {
    Bytes out(static_cast<size_t>(EVP_MD_get_size(digestOf(m))));
    PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()), salt.data(),
                      static_cast<int>(salt.size()), iterations, digestOf(m),
                      static_cast<int>(out.size()), out.data());
    return out;
}

std::string base64Encode(std::span<const uint8_t> data) {
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((data.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 2 < data.size(); i += 3) {
        uint32_t v = (data[i] << 16) | (data[i + 1] << 8) | data[i + 2];
        out += kAlphabet[(v >> 18) & 63];
        out += kAlphabet[(v >> 12) & 63];
        out += kAlphabet[(v >> 6) & 63];
        out += kAlphabet[v & 63];
    }
    if (i + 1 == data.size()) {
        uint32_t v = data[i] << 16;
        out += kAlphabet[(v >> 18) & 63];
        out += kAlphabet[(v >> 12) & 63];
        out += "==";
    } else if (i + 2 == data.size()) {
        uint32_t v = (data[i] << 16) | (data[i + 1] << 8);
        out += kAlphabet[(v >> 18) & 63];
        out += kAlphabet[(v >> 12) & 63];
        out += kAlphabet[(v >> 6) & 63];
        out += '=';
    }
    return out;
}

std::optional<Bytes> base64Decode(std::string_view text) {
    if (text.size() % 4 != 0) return std::nullopt;
    auto value = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+') return 62;
        if (c == '/') return 63;
        return -1;
    };
    Bytes out;
    out.reserve(text.size() / 4 * 3);
    for (size_t i = 0; i < text.size(); i += 4) {
        bool last = i + 4 == text.size();
        int pad = 0;
        if (last && text[i + 3] == '=') pad = text[i + 2] == '=' ? 2 : 1;
        uint32_t v = 0;
        for (int k = 0; k < 4; ++k) {
            int d = k >= 4 - pad ? 0 : value(text[i + k]);
            if (d < 0) return std::nullopt;
            v = (v << 6) | static_cast<uint32_t>(d);
        }
        out.push_back(static_cast<uint8_t>(v >> 16));
        if (pad < 2) out.push_back(static_cast<uint8_t>(v >> 8));
        if (pad < 1) out.push_back(static_cast<uint8_t>(v));
    }
    return out;
}

Bytes randomBytes(size_t n) {
    Bytes out(n);
    if (RAND_bytes(out.data(), static_cast<int>(n)) != 1) {
        // OpenSSL's CSPRNG cannot fail once seeded; treat it as a bug, not input.
        HALO_INVARIANT(false && "RAND_bytes failed");
    }
    return out;
}

bool equalBytes(std::span<const uint8_t> a, std::span<const uint8_t> b) {
    return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

StatusWith<std::string> saslPrep(std::string_view password) {
    for (unsigned char c : password) {
        if (c >= 0x80)
            return Status(ErrorCode::BadValue,
                          "passwords with non-ASCII characters are not supported for "
                          "SCRAM-SHA-256 by this server (SASLprep mapping is not implemented); "
                          "use an ASCII password or SCRAM-SHA-1");
        if (c < 0x20 || c == 0x7f)
            return Status(ErrorCode::BadValue,
                          "SASLprep: passwords may not contain control characters");
    }
    return std::string(password);
}

std::string mongoPasswordDigest(std::string_view user, std::string_view password) {
    std::string in = fmt::format("{}:mongo:{}", user, password);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_Digest(in.data(), in.size(), md, &len, EVP_md5(), nullptr);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < len; ++i) {
        out += kHex[md[i] >> 4];
        out += kHex[md[i] & 15];
    }
    return out;
}

StatusWith<std::string> scramPassword(ScramMechanism m, std::string_view user,
                                      std::string_view password) {
    if (m == ScramMechanism::Sha1) return mongoPasswordDigest(user, password);
    return saslPrep(password);
}

std::string encodeSaslName(std::string_view name) {
    std::string out;
    for (char c : name) {
        if (c == ',')
            out += "=2C";
        else if (c == '=')
            out += "=3D";
        else
            out += c;
    }
    return out;
}

StatusWith<std::string> decodeSaslName(std::string_view encoded) {
    std::string out;
    for (size_t i = 0; i < encoded.size(); ++i) {
        if (encoded[i] != '=') {
            out += encoded[i];
            continue;
        }
        std::string_view esc = encoded.substr(i + 1, 2);
        if (esc == "2C")
            out += ',';
        else if (esc == "3D")
            out += '=';
        else
            return failed("invalid '=' escape in the SCRAM user name");
        i += 2;
    }
    return out;
}

ScramCredentials deriveCredentials(ScramMechanism m, std::string_view scramPassword, Bytes salt,
                                   int iterations) {
    ScramCredentials c;
    c.iterationCount = iterations;
    Bytes salted = hi(m, scramPassword, salt, iterations);
    Bytes clientKey = hmacOf(m, salted, asBytes("Client Key"));
    c.storedKey = hashOf(m, clientKey);
    c.serverKey = hmacOf(m, salted, asBytes("Server Key"));
    c.salt = std::move(salt);
    return c;
}

ScramCredentials makeCredentials(ScramMechanism m, std::string_view scramPassword) {
    bool sha1 = m == ScramMechanism::Sha1;
    return deriveCredentials(m, scramPassword, randomBytes(sha1 ? 16 : 28), sha1 ? 10000 : 15000);
}

// --- Client -------------------------------------------------------------------

ScramClient::ScramClient(ScramMechanism m, std::string user, std::string scramPassword,
                         std::string nonce)
    : mech_(m),
      user_(std::move(user)),
      password_(std::move(scramPassword)),
      nonce_(std::move(nonce)) {
    if (nonce_.empty()) nonce_ = base64Encode(randomBytes(24));
}

std::string ScramClient::first() const {
    return fmt::format("n,,n={},r={}", encodeSaslName(user_), nonce_);
}

StatusWith<std::string> ScramClient::finalMessage(std::string_view serverFirst) {
    auto attrs = parseAttributes(serverFirst);
    if (!attrs || attrs->size() < 3 || (*attrs)[0].first != 'r' || (*attrs)[1].first != 's' ||
        (*attrs)[2].first != 'i')
        return failed(fmt::format("invalid SCRAM server-first-message '{}'", serverFirst));
    std::string_view nonce = (*attrs)[0].second;
    if (nonce.size() <= nonce_.size() || nonce.substr(0, nonce_.size()) != nonce_ ||
        !printableNonce(nonce))
        return failed("the server's SCRAM nonce does not extend the client's");
    auto salt = base64Decode((*attrs)[1].second);
    if (!salt || salt->empty()) return failed("invalid salt in the SCRAM server-first-message");
    int iterations = 0;
    std::string_view it = (*attrs)[2].second;
    auto [p, ec] = std::from_chars(it.data(), it.data() + it.size(), iterations);
    if (ec != std::errc() || p != it.data() + it.size() || iterations < 4096)
        return failed(fmt::format("invalid SCRAM iteration count '{}' (at least 4096)", it));
    Bytes salted = hi(mech_, password_, *salt, iterations);
    Bytes clientKey = hmacOf(mech_, salted, asBytes("Client Key"));
    Bytes storedKey = hashOf(mech_, clientKey);
    Bytes serverKey = hmacOf(mech_, salted, asBytes("Server Key"));
    std::string withoutProof = fmt::format("c=biws,r={}", nonce);
    std::string authMessage = fmt::format("{},{},{}", first().substr(3), serverFirst, withoutProof);
    Bytes clientSignature = hmacOf(mech_, storedKey, asBytes(authMessage));
    serverSignature_ = hmacOf(mech_, serverKey, asBytes(authMessage));
    return fmt::format("{},p={}", withoutProof, base64Encode(xorBytes(clientKey, clientSignature)));
}

Status ScramClient::verify(std::string_view serverFinal) const {
    auto attrs = parseAttributes(serverFinal);
    if (!attrs || attrs->empty())
        return failed(fmt::format("invalid SCRAM server-final-message '{}'", serverFinal));
    if ((*attrs)[0].first == 'e')
        return failed(fmt::format("the server refused: {}", (*attrs)[0].second));
    if ((*attrs)[0].first != 'v') return failed("SCRAM server-final-message without 'v='");
    auto sig = base64Decode((*attrs)[0].second);
    if (serverSignature_.empty() || !sig || !equalBytes(*sig, serverSignature_))
        return failed("the server's SCRAM signature is wrong (is this the right server?)");
    return Status::OK();
}

// --- Server -------------------------------------------------------------------

StatusWith<std::string> ScramServer::start(std::string_view clientFirst) {
    // gs2-header: cbind-flag "," [authzid] ","
    size_t c1 = clientFirst.find(',');
    size_t c2 = c1 == std::string_view::npos ? c1 : clientFirst.find(',', c1 + 1);
    if (c2 == std::string_view::npos)
        return failed("invalid SCRAM client-first-message: no GS2 header");
    std::string_view flag = clientFirst.substr(0, c1);
    if (flag != "n" && flag != "y") return failed("SCRAM channel binding is not supported");
    std::string_view authzid = clientFirst.substr(c1 + 1, c2 - c1 - 1);
    gs2Header_ = std::string(clientFirst.substr(0, c2 + 1));
    clientFirstBare_ = std::string(clientFirst.substr(c2 + 1));
    auto attrs = parseAttributes(clientFirstBare_);
    if (!attrs || attrs->size() < 2 || (*attrs)[0].first != 'n' || (*attrs)[1].first != 'r')
        return failed("invalid SCRAM client-first-message");
    if (!printableNonce((*attrs)[1].second)) return failed("invalid SCRAM client nonce");
    nonce_ = std::string((*attrs)[1].second);
    auto user = decodeSaslName((*attrs)[0].second);
    if (!user.isOK()) return user;
    if (user.getValue().empty()) return failed("empty SCRAM user name");
    if (!authzid.empty()) {
        if (authzid.substr(0, 2) != "a=") return failed("invalid SCRAM authzid");
        auto az = decodeSaslName(authzid.substr(2));
        if (!az.isOK() || az.getValue() != user.getValue())
            return failed("SCRAM authzid differs from the user name");
    }
    return user;
}

std::string ScramServer::serverFirst(const ScramCredentials& creds, std::string serverNonce) {
    creds_ = creds;
    if (serverNonce.empty()) serverNonce = base64Encode(randomBytes(24));
    nonce_ += serverNonce;
    serverFirst_ =
        fmt::format("r={},s={},i={}", nonce_, base64Encode(creds_.salt), creds_.iterationCount);
    return serverFirst_;
}

StatusWith<std::string> ScramServer::finish(std::string_view clientFinal) {
    if (serverFirst_.empty()) return failed("SCRAM conversation out of order");
    size_t proofAt = clientFinal.rfind(",p=");
    if (proofAt == std::string_view::npos)
        return failed("SCRAM client-final-message without proof");
    std::string_view withoutProof = clientFinal.substr(0, proofAt);
    auto attrs = parseAttributes(withoutProof);
    if (!attrs || attrs->size() < 2 || (*attrs)[0].first != 'c' || (*attrs)[1].first != 'r')
        return failed("invalid SCRAM client-final-message");
    if ((*attrs)[0].second != base64Encode(asBytes(gs2Header_)))
        return failed("SCRAM channel binding data does not match the GS2 header");
    if ((*attrs)[1].second != nonce_) return failed("SCRAM nonce mismatch");
    auto proof = base64Decode(clientFinal.substr(proofAt + 3));
    if (!proof) return failed("invalid SCRAM client proof encoding");
    std::string authMessage = fmt::format("{},{},{}", clientFirstBare_, serverFirst_, withoutProof);
    Bytes clientSignature = hmacOf(mech_, creds_.storedKey, asBytes(authMessage));
    if (proof->size() != clientSignature.size()) return failed("SCRAM proof has the wrong size");
    Bytes clientKey = xorBytes(*proof, clientSignature);
    if (!equalBytes(hashOf(mech_, clientKey), creds_.storedKey))
        return failed("SCRAM proof does not match the stored key (wrong password)");
    Bytes serverSignature = hmacOf(mech_, creds_.serverKey, asBytes(authMessage));
    return "v=" + base64Encode(serverSignature);
}

}  // namespace halo::auth
