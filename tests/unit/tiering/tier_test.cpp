// Tier::init: what a tier's connection string may ask for. TLS options are
// read from the URI and their files loaded at init, errors naming the key.
// (TLS against real servers: tests/js/tiering/tls.test.js.)
#include "tiering/tier.h"

#include <gtest/gtest.h>

namespace halo::tiering {
namespace {

Status initTier(const std::string& uri) {
    Tier t("fast", uri);
    return t.init();
}

TEST(TierInit, AcceptsPlainAndTlsUris) {
    EXPECT_TRUE(initTier("mongodb://127.0.0.1:1/?replicaSet=fast").isOK());
    // No tlsCAFile: the system's CAs.
    EXPECT_TRUE(initTier("mongodb://127.0.0.1:1/?tls=true").isOK());
    EXPECT_TRUE(initTier("mongodb://127.0.0.1:1/?ssl=true&tlsInsecure=true").isOK());
}

TEST(TierInit, RefusesUnusableTlsFilesNamingTheKey) {
    Status s = initTier("mongodb://127.0.0.1:1/?tls=true&tlsCAFile=/nonexistent/ca.pem");
    ASSERT_FALSE(s.isOK());
    EXPECT_EQ(s.code(), ErrorCode::InvalidSSLConfiguration);
    EXPECT_NE(s.reason().find("tiers.fast.uri: tlsCAFile cannot read '/nonexistent/ca.pem'"),
              std::string::npos)
        << s.reason();
    s = initTier("mongodb://127.0.0.1:1/?tls=true&tlsCertificateKeyFile=/nonexistent/c.pem");
    ASSERT_FALSE(s.isOK());
    EXPECT_NE(s.reason().find("tiers.fast.uri: tlsCertificateKeyFile"), std::string::npos)
        << s.reason();
}

}  // namespace
}  // namespace halo::tiering
