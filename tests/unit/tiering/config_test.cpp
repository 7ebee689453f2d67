// The proxy's YAML configuration: valid files load, invalid ones are refused
// with a message that names the key and the problem.
#include "tiering/config.h"

#include <gtest/gtest.h>

namespace halo::tiering {
namespace {

constexpr const char* kValid = R"(
net: {bindIp: 127.0.0.1, port: 0}
tiers:
  fast: {uri: "mongodb://127.0.0.1:1/?replicaSet=fast"}
  archive: {uri: "mongodb://a:1,b:2/?replicaSet=archive"}
tiering:
  clockSkewGuard: 500ms
  mergedReadLimit: 250
  coldWrites: false
  transactionPromotionLimit: 500
  collections:
    - {namespace: shop.orders, ageField: date, horizon: 30d, changeStreams: true}
    - {namespace: shop.events, ageField: _id, horizon: 12h}
workers:
  lease: 5s
  evictor: {interval: 200ms, maxDocsPerSecond: 100}
  feeder: {mode: lazy, lazyDelay: 90s}
)";

TEST(ProxyConfig, LoadsAValidFile) {
    auto c = parseProxyConfig(kValid);
    ASSERT_TRUE(c.isOK()) << c.getStatus().reason();
    EXPECT_EQ(c.getValue().port, 0);
    EXPECT_EQ(c.getValue().clockSkewGuard, Millis(500));
    EXPECT_EQ(c.getValue().mergedReadLimit, 250);
    EXPECT_FALSE(c.getValue().coldWrites);
    ASSERT_EQ(c.getValue().collections.size(), 2u);
    EXPECT_EQ(c.getValue().collections[0].horizon, Millis(30LL * 86'400'000));
    EXPECT_EQ(c.getValue().collections[1].ageField, "_id");
    EXPECT_EQ(c.getValue().transactionPromotionLimit, 500);
    EXPECT_TRUE(c.getValue().collections[0].changeStreams);
    EXPECT_FALSE(c.getValue().collections[1].changeStreams);
    EXPECT_EQ(c.getValue().lease, Millis(5000));
    EXPECT_EQ(c.getValue().evictorMaxDocsPerSecond, 100);
    EXPECT_TRUE(c.getValue().feederLazy);
    EXPECT_EQ(c.getValue().feederLazyDelay, Millis(90'000));
    EXPECT_NE(c.getValue().policyFor("shop.orders"), nullptr);
    EXPECT_EQ(c.getValue().policyFor("shop.other"), nullptr);
}

TEST(ProxyConfig, ClientAuthenticationIsOnWheneverTheProxyHoldsTierCredentials) {
    std::string plain = "tiers: {fast: {uri: 'mongodb://h:1'}, archive: {uri: 'mongodb://h:2'}}\n";
    std::string creds =
        "tiers: {fast: {uri: 'mongodb://h:1'}, archive: {uri: 'mongodb://u:p%40w@h:2/?x=1'}}\n";
    EXPECT_FALSE(parseProxyConfig(plain).getValue().authorization);
    EXPECT_TRUE(parseProxyConfig(creds).getValue().authorization);
    auto off = parseProxyConfig(creds + "security: {authorization: disabled}\n");
    EXPECT_FALSE(off.getValue().authorization);
    EXPECT_TRUE(off.getValue().authorizationExplicit);
    auto on = parseProxyConfig(plain +
                               "security: {authorization: enabled, "
                               "userCacheInvalidationIntervalSecs: 5}\n");
    EXPECT_TRUE(on.getValue().authorization);
    EXPECT_EQ(on.getValue().userCacheInvalidation, Millis(5000));
    EXPECT_EQ(parseProxyConfig(plain).getValue().userCacheInvalidation, Millis(30'000));
    EXPECT_TRUE(hasCredentials("mongodb://user@h/"));
    EXPECT_FALSE(hasCredentials("mongodb://h/?authSource=a@b"));
}

void expectRefused(const std::string& yaml, const std::string& keyAndProblem) {
    auto c = parseProxyConfig(yaml);
    ASSERT_FALSE(c.isOK()) << yaml;
    EXPECT_NE(c.getStatus().reason().find(keyAndProblem), std::string::npos)
        << c.getStatus().reason();
}

TEST(ProxyConfig, RefusesInvalidFilesNamingTheKey) {
    std::string tiers = "tiers: {fast: {uri: 'mongodb://h:1'}, archive: {uri: 'mongodb://h:2'}}\n";
    expectRefused("net: {port: 1}\n", "tiers: is required");
    expectRefused(tiers +
                      "tiering: {collections: [{namespace: shop.orders, ageField: date, "
                      "horizon: 3 weeks}]}",
                  "tiering.collections[0].horizon: unknown duration unit");
    expectRefused(tiers +
                      "tiering: {collections: [{namespace: orders, ageField: date, "
                      "horizon: 1d}]}",
                  "tiering.collections[0].namespace: must be 'database.collection'");
    expectRefused(tiers + "tiering: {collections: [{namespace: a.b, horizon: 1d}]}",
                  "tiering.collections[0].ageField");
    expectRefused(tiers + "tiering: {collections: [{namespace: a.b, ageField: d}]}",
                  "tiering.collections[0].horizon: is required");
    expectRefused(tiers + "security: {authorization: yes}",
                  "security.authorization: must be enabled or disabled");
    expectRefused(tiers + "security: {userCacheInvalidationIntervalSecs: 0}",
                  "security.userCacheInvalidationIntervalSecs");
    expectRefused(tiers + "security: {keyFile: /x}", "security");
    expectRefused(tiers + "tiering: {colections: []}", "tiering.colections: unknown setting");
    expectRefused(tiers + "workers: {evictor: {maxDocsPerSecond: -3}}",
                  "workers.evictor.maxDocsPerSecond: must be a positive integer");
    expectRefused(tiers + "workers: {feeder: {mode: sometimes}}",
                  "workers.feeder.mode: must be eager or lazy");
    expectRefused("tiers: {fast: {uri: 'http://x'}, archive: {uri: 'mongodb://h:2'}}",
                  "tiers.fast.uri: must be a MongoDB connection string");
    expectRefused(tiers + "net: {port: 70000}", "net.port");
    expectRefused(tiers + "tiering: {mergedReadLimit: -1}",
                  "tiering.mergedReadLimit: must be 0 or more");
    expectRefused(tiers + "tiering: {transactionPromotionLimit: 0}",
                  "tiering.transactionPromotionLimit: must be 1 or more");
    expectRefused("tiers: [", "invalid YAML");
}

TEST(ProxyConfig, ReadsNetTlsAsMongodNamesIt) {
    std::string yaml = kValid;
    const std::string net = "net: {bindIp: 127.0.0.1, port: 0}";
    yaml.replace(yaml.find(net), net.size(),
                 "net: {port: 0, tls: {mode: preferTLS, certificateKeyFile: /s.pem, "
                 "CAFile: /ca.pem, allowConnectionsWithoutCertificates: true}}");
    auto c = parseProxyConfig(yaml);
    ASSERT_TRUE(c.isOK()) << c.getStatus().reason();
    const auto& tls = c.getValue().tls;
    EXPECT_EQ(tls.mode, net::TlsMode::preferTLS);
    EXPECT_EQ(tls.certificateKeyFile, "/s.pem");
    EXPECT_EQ(tls.caFile, "/ca.pem");
    EXPECT_TRUE(tls.allowConnectionsWithoutCertificates);
    EXPECT_FALSE(tls.flagNames);
    auto plain = parseProxyConfig(kValid);
    ASSERT_TRUE(plain.isOK());
    EXPECT_FALSE(plain.getValue().tls.enabled());
}

TEST(ProxyConfig, RefusesInvalidNetTls) {
    std::string tiers = "tiers: {fast: {uri: 'mongodb://h:1'}, archive: {uri: 'mongodb://h:2'}}\n";
    expectRefused(tiers + "net: {tls: {mode: requireSSL, certificateKeyFile: /s.pem}}",
                  "net.tls.mode: must be disabled, allowTLS, preferTLS or requireTLS");
    expectRefused(tiers + "net: {tls: {mode: requireTLS}}",
                  "net.tls.certificateKeyFile: is required when net.tls.mode is requireTLS");
    expectRefused(tiers + "net: {tls: {mode: requireTLS, PEMKeyFile: /s.pem}}",
                  "net.tls.PEMKeyFile: unknown setting");
    expectRefused(tiers + "net: {tls: on}", "net.tls: must be a mapping");
}

TEST(ProxyConfig, ParsesDurations) {
    EXPECT_EQ(parseDuration("250ms").getValue(), Millis(250));
    EXPECT_EQ(parseDuration("90").getValue(), Millis(90'000));
    EXPECT_EQ(parseDuration("1.5s").getValue(), Millis(1500));
    EXPECT_EQ(parseDuration("2h").getValue(), Millis(7'200'000));
    EXPECT_FALSE(parseDuration("soon").isOK());
    // Beyond int64 milliseconds (config_fuzz): refused, not converted.
    EXPECT_EQ(parseDuration("36500d").getValue(), kMaxDuration);
    EXPECT_FALSE(parseDuration("36501d").isOK());
    EXPECT_FALSE(parseDuration("99999999999999999999d").isOK());
    EXPECT_FALSE(parseDuration(std::string(400, '9')).isOK());
}

}  // namespace
}  // namespace halo::tiering
