// SCRAM against the published examples: RFC 5802 section 5 (SCRAM-SHA-1) and
// RFC 7677 section 3 (SCRAM-SHA-256), both ends, plus MongoDB's password
// digest and the parsers' refusals of malformed peer messages.
#include "auth/scram.h"

#include <gtest/gtest.h>

#include "auth/sasl.h"

namespace halo::auth {
namespace {

struct Vector {
    ScramMechanism mech;
    const char* clientNonce;
    const char* serverNonceSuffix;
    const char* salt;
    const char* clientFirst;
    const char* serverFirst;
    const char* clientFinal;
    const char* serverFinal;
};

const Vector kRfc5802 = {
    ScramMechanism::Sha1,
    "fyko+d2lbbFgONRv9qkxdawL",
    "3rfcNHYJY1ZVvWVs7j",
    "QSXCR+Q6sek8bf92",
    "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
    "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
    "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
    "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
};

const Vector kRfc7677 = {
    ScramMechanism::Sha256,
    "rOprNGfwEbeRWgbNEkqO",
    "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    "W22ZaJ0SNY7soEsUEjb6gQ==",
    "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
};

class RfcVector : public ::testing::TestWithParam<Vector> {};

TEST_P(RfcVector, ClientProducesTheRfcMessages) {
    const Vector& v = GetParam();
    // The RFC examples hash the password as given ("pencil"): no MongoDB digest.
    ScramClient client(v.mech, "user", "pencil", v.clientNonce);
    EXPECT_EQ(client.first(), v.clientFirst);
    auto final = client.finalMessage(v.serverFirst);
    ASSERT_TRUE(final.isOK()) << final.getStatus().reason();
    EXPECT_EQ(final.getValue(), v.clientFinal);
    EXPECT_TRUE(client.verify(v.serverFinal).isOK());
    EXPECT_FALSE(client.verify("v=AAAA").isOK());
    EXPECT_FALSE(client.verify("e=invalid-proof").isOK());
}

TEST_P(RfcVector, ServerAcceptsTheRfcProofAndSigns) {
    const Vector& v = GetParam();
    auto salt = base64Decode(v.salt);
    ASSERT_TRUE(salt.has_value());
    ScramCredentials creds = deriveCredentials(v.mech, "pencil", *salt, 4096);
    ScramServer server(v.mech);
    auto user = server.start(v.clientFirst);
    ASSERT_TRUE(user.isOK()) << user.getStatus().reason();
    EXPECT_EQ(user.getValue(), "user");
    EXPECT_EQ(server.serverFirst(creds, v.serverNonceSuffix), v.serverFirst);
    auto final = server.finish(v.clientFinal);
    ASSERT_TRUE(final.isOK()) << final.getStatus().reason();
    EXPECT_EQ(final.getValue(), v.serverFinal);
}

TEST_P(RfcVector, ServerRefusesAWrongPassword) {
    const Vector& v = GetParam();
    auto salt = base64Decode(v.salt);
    ScramCredentials creds = deriveCredentials(v.mech, "not-pencil", *salt, 4096);
    ScramServer server(v.mech);
    ASSERT_TRUE(server.start(v.clientFirst).isOK());
    server.serverFirst(creds, v.serverNonceSuffix);
    auto final = server.finish(v.clientFinal);
    ASSERT_FALSE(final.isOK());
    EXPECT_EQ(final.getStatus().code(), ErrorCode::AuthenticationFailed);
}

INSTANTIATE_TEST_SUITE_P(Rfc, RfcVector, ::testing::Values(kRfc5802, kRfc7677));

TEST(Scram, ClientAndServerAgreeWithRandomNonces) {
    for (auto mech : {ScramMechanism::Sha1, ScramMechanism::Sha256}) {
        auto pwd = scramPassword(mech, "alice", "s3cret,=x");
        ASSERT_TRUE(pwd.isOK());
        ScramCredentials creds = makeCredentials(mech, pwd.getValue());
        EXPECT_EQ(creds.iterationCount, mech == ScramMechanism::Sha1 ? 10000 : 15000);
        ScramClient client(mech, "al,i=ce", pwd.getValue());
        ScramServer server(mech);
        auto user = server.start(client.first());
        ASSERT_TRUE(user.isOK());
        EXPECT_EQ(user.getValue(), "al,i=ce");
        auto cf = client.finalMessage(server.serverFirst(creds));
        ASSERT_TRUE(cf.isOK()) << cf.getStatus().reason();
        auto sf = server.finish(cf.getValue());
        ASSERT_TRUE(sf.isOK()) << sf.getStatus().reason();
        EXPECT_TRUE(client.verify(sf.getValue()).isOK());
    }
}

TEST(Scram, MongoPasswordDigest) {
    // hex(MD5("user:mongo:pencil")), as mongod and every driver compute it.
    EXPECT_EQ(mongoPasswordDigest("user", "pencil"), "1c33006ec1ffd90f9cadcbcc0e118200");
}

TEST(Scram, Base64RoundTripAndStrictness) {
    for (std::string s : {"", "f", "fo", "foo", "foob", "fooba", "foobar"}) {
        std::string enc = base64Encode(asBytes(s));
        auto dec = base64Decode(enc);
        ASSERT_TRUE(dec.has_value()) << enc;
        EXPECT_EQ(std::string(dec->begin(), dec->end()), s);
    }
    EXPECT_EQ(base64Encode(asBytes("foobar")), "Zm9vYmFy");
    EXPECT_EQ(base64Encode(asBytes("fo")), "Zm8=");
    EXPECT_FALSE(base64Decode("Zm8").has_value());
    EXPECT_FALSE(base64Decode("Zm!=").has_value());
    EXPECT_FALSE(base64Decode("Z===").has_value());
}

TEST(Scram, SaslPrepAcceptsAsciiAndRefusesWhatItCannotMap) {
    EXPECT_EQ(saslPrep("pencil 123!").getValue(), "pencil 123!");
    EXPECT_FALSE(saslPrep("tab\there").isOK());
    auto nonAscii = saslPrep("p\xc3\xa4ssword");
    ASSERT_FALSE(nonAscii.isOK());
    EXPECT_NE(nonAscii.getStatus().reason().find("non-ASCII"), std::string::npos);
}

TEST(Scram, ServerRefusesMalformedMessages) {
    for (const char* bad : {"", "n", "n,,", "p=tls-unique,,n=user,r=abc", "n,,r=abc,n=user",
                            "n,,n=us=zzer,r=abc", "n,,n=,r=abc", "n,a=other,n=user,r=abc"}) {
        ScramServer server(ScramMechanism::Sha256);
        EXPECT_FALSE(server.start(bad).isOK()) << bad;
    }
    ScramServer server(ScramMechanism::Sha256);
    ASSERT_TRUE(server.start("n,,n=user,r=abc").isOK());
    auto creds = deriveCredentials(ScramMechanism::Sha256, "pencil", Bytes{1, 2, 3}, 4096);
    std::string sf = server.serverFirst(creds, "def");
    EXPECT_EQ(sf, "r=abcdef,s=AQID,i=4096");
    for (const char* bad : {"c=biws,r=abcdef", "c=biws,r=abcxxx,p=AAAA", "c=eSws,r=abcdef,p=AAAA",
                            "c=biws,r=abcdef,p=***"}) {
        ScramServer s2(ScramMechanism::Sha256);
        ASSERT_TRUE(s2.start("n,,n=user,r=abc").isOK());
        s2.serverFirst(creds, "def");
        EXPECT_FALSE(s2.finish(bad).isOK()) << bad;
    }
}

TEST(Scram, ClientRefusesBadServerFirst) {
    ScramClient c(ScramMechanism::Sha256, "user", "pencil", "abc");
    EXPECT_FALSE(c.finalMessage("r=xyzdef,s=AQID,i=4096").isOK());  // nonce not ours
    EXPECT_FALSE(c.finalMessage("r=abcdef,s=AQID,i=1000").isOK());  // too few iterations
    EXPECT_FALSE(c.finalMessage("r=abcdef,s=!!,i=4096").isOK());
    EXPECT_FALSE(c.finalMessage("garbage").isOK());
    EXPECT_FALSE(c.verify("v=AQID").isOK());  // before any final message
}

}  // namespace
}  // namespace halo::auth

namespace halo::auth {
namespace {

/// A whole saslStart/saslContinue conversation with the client half.
StatusWith<bool> converse(ScramMechanism m, const std::string& password, bool skipEmpty) {
    auto sp = scramPassword(m, "alice", "secret").getValue();
    ScramCredentials creds = makeCredentials(m, sp);
    ScramClient client(m, "alice", scramPassword(m, "alice", password).getValue());
    SaslConversation conv;
    auto user = conv.start(mechanismName(m), client.first(), "admin", skipEmpty);
    if (!user.isOK()) return user.getStatus();
    EXPECT_EQ(user.getValue(), "alice");
    auto final = client.finalMessage(conv.serverFirst(creds));
    if (!final.isOK()) return final.getStatus();
    auto step = conv.step(final.getValue());
    if (!step.isOK()) return step.getStatus();
    EXPECT_TRUE(client.verify(step.getValue().payload).isOK());
    if (!skipEmpty) {
        EXPECT_FALSE(step.getValue().done);
        step = conv.step("");
        if (!step.isOK()) return step.getStatus();
    }
    EXPECT_TRUE(step.getValue().done);
    EXPECT_EQ(conv.step("").getStatus().code(), ErrorCode::ProtocolError);  // after the end
    return true;
}

TEST(SaslConversationTest, CompletesWithOrWithoutTheEmptyLastStep) {
    for (auto m : {ScramMechanism::Sha1, ScramMechanism::Sha256})
        for (bool skip : {false, true}) {
            auto r = converse(m, "secret", skip);
            EXPECT_TRUE(r.isOK()) << r.getStatus().toString();
        }
}

TEST(SaslConversationTest, AWrongPasswordFailsAuthentication) {
    auto r = converse(ScramMechanism::Sha256, "wrong", true);
    ASSERT_FALSE(r.isOK());
    EXPECT_EQ(r.getStatus().code(), ErrorCode::AuthenticationFailed);
}

TEST(SaslConversationTest, UnknownMechanismsAreRefusedAsMongodRefusesThem) {
    SaslConversation conv;
    auto r = conv.start("PLAIN", "n,,n=alice,r=abc", "admin", false);
    ASSERT_FALSE(r.isOK());
    EXPECT_EQ(r.getStatus().code(), ErrorCode::MechanismUnavailable);
    EXPECT_EQ(r.getStatus().reason(),
              "Received authentication for mechanism PLAIN which is unknown or not enabled");
}

}  // namespace
}  // namespace halo::auth
