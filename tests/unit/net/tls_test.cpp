// Listener TLS settings: the mode names, how a ClientHello is told from a
// plain wire message, and that invalid settings are refused naming the option.
// (Serving real TLS clients is tested with real drivers in tests/js/store/tls.test.js.)
#include "net/tls.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace halo::net {
namespace {

TEST(TlsMode, ParsesMongodNames) {
    EXPECT_EQ(parseTlsMode("requireTLS"), TlsMode::requireTLS);
    EXPECT_EQ(parseTlsMode("preferTLS"), TlsMode::preferTLS);
    EXPECT_EQ(parseTlsMode("allowTLS"), TlsMode::allowTLS);
    EXPECT_EQ(parseTlsMode("disabled"), TlsMode::disabled);
    EXPECT_FALSE(parseTlsMode("requireSSL").has_value());
    EXPECT_FALSE(parseTlsMode("").has_value());
    EXPECT_EQ(tlsModeName(TlsMode::preferTLS), "preferTLS");
}

TEST(TlsDetection, TellsAClientHelloFromAWireMessage) {
    const uint8_t tls12[4] = {0x16, 0x03, 0x01, 0x00};  // ClientHello record, 200 bytes
    const uint8_t tls13[4] = {0x16, 0x03, 0x03, 0x02};
    EXPECT_TRUE(looksLikeTlsHandshake(tls12));
    EXPECT_TRUE(looksLikeTlsHandshake(tls13));
    // Plain wire messages: their int32 length comes first, little-endian.
    for (int32_t len : {16, 22, 278, 790, 4096, 48'000'000}) {
        uint8_t b[4];
        std::memcpy(b, &len, 4);
        EXPECT_FALSE(looksLikeTlsHandshake(b)) << len;
    }
}

class TlsServerContextTest : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = std::filesystem::temp_directory_path() /
               ("halo-tls-test-" + std::to_string(::getpid()));
        std::filesystem::create_directories(dir_);
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }
    std::string write(const std::string& name, const std::string& text) {
        auto p = dir_ / name;
        std::ofstream(p) << text;
        return p.string();
    }
    static void expectRefused(const TlsServerOptions& o, const std::string& part) {
        auto r = TlsServerContext::create(o);
        ASSERT_FALSE(r.isOK());
        EXPECT_EQ(r.getStatus().code(), ErrorCode::InvalidSSLConfiguration);
        EXPECT_NE(r.getStatus().reason().find(part), std::string::npos) << r.getStatus().reason();
    }
    std::filesystem::path dir_;
};

TEST_F(TlsServerContextTest, DisabledNeedsNothing) {
    auto r = TlsServerContext::create(TlsServerOptions{});
    ASSERT_TRUE(r.isOK());
    EXPECT_EQ(r.getValue(), nullptr);
}

TEST_F(TlsServerContextTest, RefusesInvalidSettingsNamingTheOption) {
    TlsServerOptions o;
    o.mode = TlsMode::requireTLS;
    expectRefused(o, "net.tls.certificateKeyFile: required when net.tls.mode is requireTLS");
    o.flagNames = true;
    expectRefused(o, "net.tls.certificateKeyFile (--tlsCertificateKeyFile): required");
    o.flagNames = false;

    o.certificateKeyFile = (dir_ / "missing.pem").string();
    expectRefused(o, "net.tls.certificateKeyFile: cannot read");

    o.certificateKeyFile = write("garbage.pem", "not a certificate\n");
    expectRefused(o, "net.tls.certificateKeyFile: '" + o.certificateKeyFile +
                         "' holds no usable PEM certificate");

    TlsServerOptions off;
    off.certificateKeyFile = o.certificateKeyFile;
    expectRefused(off, "net.tls.certificateKeyFile is set but net.tls.mode is disabled");
    off.certificateKeyFile.clear();
    off.caFile = o.certificateKeyFile;
    expectRefused(off, "net.tls.CAFile is set but net.tls.mode is disabled");
}

}  // namespace
}  // namespace halo::net
