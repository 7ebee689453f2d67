#include "wire/message.h"

#include <gtest/gtest.h>

#include <cstring>

namespace halo::wire {
namespace {

TEST(WireTest, OpMsgRoundTrip) {
    auto body = bson::Doc::fromJsonOrDie(R"({"ping": 1, "$db": "admin"})");
    auto frame = buildOpMsg(7, 3, body.get());
    auto h = parseHeader(frame);
    ASSERT_TRUE(h.isOK());
    EXPECT_EQ(h.getValue().messageLength, static_cast<int32_t>(frame.size()));
    EXPECT_EQ(h.getValue().requestId, 7);
    EXPECT_EQ(h.getValue().responseTo, 3);
    EXPECT_EQ(h.getValue().opCode, static_cast<int32_t>(OpCode::Msg));
    auto msg = parseOpMsg(frame);
    ASSERT_TRUE(msg.isOK()) << msg.getStatus().toString();
    ASSERT_EQ(msg.getValue().body.size(), body.size());
    EXPECT_EQ(0, std::memcmp(msg.getValue().body.data(), body.data(), body.size()));
}

TEST(WireTest, DocumentSequencesMergeIntoBody) {
    auto body = bson::Doc::fromJsonOrDie(R"({"insert": "c", "$db": "test"})");
    auto d1 = bson::Doc::fromJsonOrDie(R"({"_id": 1})");
    auto d2 = bson::Doc::fromJsonOrDie(R"({"_id": 2})");
    auto frame = buildOpMsgWithSequences(1, 0, body.get(), {{"documents", {d1.get(), d2.get()}}});
    auto msg = parseOpMsg(frame);
    ASSERT_TRUE(msg.isOK()) << msg.getStatus().toString();
    ASSERT_EQ(msg.getValue().sequences.size(), 1u);
    EXPECT_EQ(msg.getValue().sequences[0].identifier, "documents");
    EXPECT_EQ(msg.getValue().sequences[0].documents.size(), 2u);
    bson::Doc merged = mergeSequences(msg.getValue());
    EXPECT_EQ(
        merged.toJson(),
        R"({ "insert" : "c", "$db" : "test", "documents" : [ { "_id" : 1 }, { "_id" : 2 } ] })");
}

TEST(WireTest, ChecksumIsVerified) {
    auto body = bson::Doc::fromJsonOrDie(R"({"ping": 1, "$db": "admin"})");
    auto frame = buildOpMsg(1, 0, body.get());
    // Set checksumPresent and append the CRC-32C of the frame.
    frame[16] |= 1;
    int32_t len = static_cast<int32_t>(frame.size() + 4);
    std::memcpy(frame.data(), &len, 4);
    uint32_t crc = crc32c(frame);
    frame.resize(frame.size() + 4);
    std::memcpy(frame.data() + frame.size() - 4, &crc, 4);
    EXPECT_TRUE(parseOpMsg(frame).isOK());
    frame[frame.size() - 1] ^= 0xFF;
    auto bad = parseOpMsg(frame);
    ASSERT_FALSE(bad.isOK());
    EXPECT_EQ(bad.getStatus().code(), ErrorCode::ProtocolError);
}

TEST(WireTest, Crc32cKnownVector) {
    const char* s = "123456789";
    EXPECT_EQ(crc32c(std::span(reinterpret_cast<const uint8_t*>(s), 9)), 0xE3069283u);
}

TEST(WireTest, HeaderBoundsAreEnforced) {
    uint8_t h[16] = {};
    int32_t len = 15;
    std::memcpy(h, &len, 4);
    EXPECT_FALSE(parseHeader(h).isOK());
    len = 48'000'001;
    std::memcpy(h, &len, 4);
    EXPECT_FALSE(parseHeader(h).isOK());
    len = 16;
    std::memcpy(h, &len, 4);
    EXPECT_TRUE(parseHeader(h).isOK());
    EXPECT_FALSE(parseHeader(std::span<const uint8_t>(h, 10)).isOK());
}

TEST(WireTest, TruncatedAndGarbageMessagesAreRejected) {
    auto body = bson::Doc::fromJsonOrDie(R"({"ping": 1, "$db": "admin"})");
    auto frame = buildOpMsg(1, 0, body.get());
    for (size_t cut = 16; cut < frame.size(); ++cut) {
        std::vector<uint8_t> t(frame.begin(), frame.begin() + static_cast<long>(cut));
        EXPECT_FALSE(parseOpMsg(t).isOK()) << "cut at " << cut;
    }
    auto garbage = frame;
    garbage[21] = 0x7F;  // corrupt the body's first element type
    EXPECT_FALSE(parseOpMsg(garbage).isOK());
    auto unknownKind = frame;
    unknownKind[20] = 9;
    EXPECT_FALSE(parseOpMsg(unknownKind).isOK());
    auto badFlags = frame;
    badFlags[17] = 0x80;  // an unknown required bit
    EXPECT_FALSE(parseOpMsg(badFlags).isOK());
}

TEST(WireTest, BoundsValidationChecksOnlyTheDocumentsFrame) {
    auto body = bson::Doc::fromJsonOrDie(R"({"ok": 1, "v": "abc"})");
    auto frame = buildOpMsg(1, 0, body.get());
    // An element type that does not exist: full validation refuses it, bounds do not look
    // (bson_iter stops at it when the document is read).
    size_t type = frame.size() - body.size() + 4;  // first element's type byte
    ASSERT_EQ(frame[type + 1], 'o');
    frame[type] = 0x7E;
    EXPECT_FALSE(parseOpMsg(frame).isOK());
    EXPECT_TRUE(parseOpMsg(frame, Validation::Bounds).isOK());
    // Without its terminating zero the document is refused either way.
    auto cut = buildOpMsg(1, 0, body.get());
    cut.back() = 1;
    EXPECT_FALSE(parseOpMsg(cut, Validation::Bounds).isOK());
}

TEST(WireTest, OpQueryRoundTrip) {
    auto q = bson::Doc::fromJsonOrDie(R"({"isMaster": 1})");
    auto frame = buildOpQuery(5, "admin.$cmd", q.get());
    auto parsed = parseOpQuery(frame);
    ASSERT_TRUE(parsed.isOK()) << parsed.getStatus().toString();
    EXPECT_EQ(parsed.getValue().fullCollectionName, "admin.$cmd");
    EXPECT_EQ(parsed.getValue().numberToReturn, -1);
    EXPECT_EQ(parsed.getValue().query.size(), q.size());
}

class CompressionTest : public ::testing::TestWithParam<Compressor> {};

TEST_P(CompressionTest, RoundTrip) {
    auto body = bson::Doc::fromJsonOrDie(
        R"({"insert": "c", "documents": [{"a": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}], "$db": "t"})");
    auto frame = buildOpMsg(9, 0, body.get());
    auto packed = compress(frame, GetParam());
    ASSERT_TRUE(packed.isOK());
    auto h = parseHeader(packed.getValue());
    ASSERT_TRUE(h.isOK());
    EXPECT_EQ(h.getValue().opCode, static_cast<int32_t>(OpCode::Compressed));
    auto unpacked = decompress(h.getValue(), std::span(packed.getValue()).subspan(kHeaderSize));
    ASSERT_TRUE(unpacked.isOK()) << unpacked.getStatus().toString();
    EXPECT_EQ(unpacked.getValue(), frame);
}

INSTANTIATE_TEST_SUITE_P(All, CompressionTest,
                         ::testing::Values(Compressor::Noop, Compressor::Snappy, Compressor::Zlib,
                                           Compressor::Zstd));

TEST(WireTest, CompressedSizeClaimIsBounded) {
    std::vector<uint8_t> payload(9, 0);
    int32_t op = static_cast<int32_t>(OpCode::Msg), size = 48'000'000;
    std::memcpy(payload.data(), &op, 4);
    std::memcpy(payload.data() + 4, &size, 4);
    payload[8] = static_cast<uint8_t>(Compressor::Snappy);
    Header h;
    EXPECT_FALSE(decompress(h, payload).isOK());
}

// A few bytes claiming up to 48 MB are refused before the buffer is allocated
// (wire_fuzz: each such frame cost a 48 MB allocation), by the size snappy and
// zstd record and by zlib's highest ratio; a claim the data can meet still
// decompresses (RoundTrip).
TEST(WireTest, CompressedSizeClaimIsCheckedAgainstThePayload) {
    auto frame = buildOpMsg(1, 0, bson::Doc::fromJsonOrDie(R"({"ping": 1, "$db": "a"})").get());
    for (auto c : {Compressor::Noop, Compressor::Snappy, Compressor::Zlib, Compressor::Zstd}) {
        auto packed = compress(frame, c);
        ASSERT_TRUE(packed.isOK());
        std::vector<uint8_t> payload(packed.getValue().begin() + kHeaderSize,
                                     packed.getValue().end());
        int32_t claim = 40'000'000;
        std::memcpy(payload.data() + 4, &claim, 4);
        auto d = decompress(parseHeader(packed.getValue()).getValue(), payload);
        ASSERT_FALSE(d.isOK()) << compressorName(c);
        EXPECT_NE(d.getStatus().reason().find("does not match"), std::string::npos)
            << d.getStatus().reason();
    }
}

}  // namespace
}  // namespace halo::wire
