#pragma once
// The MongoDB wire protocol codec: bytes in, messages out, and back. Knows no
// sockets and no commands. Every length read from the network is bounded before
// anything is allocated; parse results are views into the caller's buffer.
#include <bson/bson.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bson/doc.h"
#include "common/status.h"

namespace halo::wire {

enum class OpCode : int32_t {
    Reply = 1,
    Update = 2001,
    Insert = 2002,
    Query = 2004,
    GetMore = 2005,
    Delete = 2006,
    KillCursors = 2007,
    Compressed = 2012,
    Msg = 2013,
};

inline constexpr int32_t kHeaderSize = 16;
inline constexpr int32_t kMaxMessageSizeBytes = 48'000'000;
inline constexpr int32_t kMaxBsonObjectSize = 16 * 1024 * 1024;
inline constexpr int32_t kMaxWriteBatchSize = 100'000;

// OP_MSG flag bits.
inline constexpr uint32_t kChecksumPresent = 1u << 0;
inline constexpr uint32_t kMoreToCome = 1u << 1;
inline constexpr uint32_t kExhaustAllowed = 1u << 16;

// OP_COMPRESSED compressor ids.
enum class Compressor : uint8_t { Noop = 0, Snappy = 1, Zlib = 2, Zstd = 3 };

struct Header {
    int32_t messageLength = 0;
    int32_t requestId = 0;
    int32_t responseTo = 0;
    int32_t opCode = 0;
};

/// Decodes and bounds-checks a 16-byte header (length in [16, 48,000,000]).
StatusWith<Header> parseHeader(std::span<const uint8_t> bytes);

struct DocumentSequence {
    std::string identifier;
    std::vector<std::span<const uint8_t>> documents;  // each a validated BSON document
};

/// An OP_MSG split into its body and kind-1 sections; views into the frame.
struct OpMsg {
    uint32_t flags = 0;
    std::span<const uint8_t> body;  // validated BSON
    std::vector<DocumentSequence> sequences;
};

/// A legacy OP_QUERY (drivers send their first handshake this way).
struct OpQuery {
    int32_t flags = 0;
    std::string fullCollectionName;
    int32_t numberToSkip = 0;
    int32_t numberToReturn = 0;
    std::span<const uint8_t> query;           // validated BSON
    std::span<const uint8_t> fieldsSelector;  // empty when absent
};

/// How much of each document parseOpMsg checks: every element (untrusted
/// input), or only the document's length and terminator (a reply from a server
/// we talk to: bson_iter bounds-checks every element it reads anyway, and the
/// full walk cost the proxy ~6% of its CPU).
enum class Validation { Full, Bounds };

/// Parses a whole OP_MSG frame (header included). Verifies the CRC-32C when
/// checksumPresent is set; rejects unknown required flag bits.
StatusWith<OpMsg> parseOpMsg(std::span<const uint8_t> frame, Validation v = Validation::Full);
/// Parses a whole OP_QUERY frame (header included).
StatusWith<OpQuery> parseOpQuery(std::span<const uint8_t> frame);

/// Whether a command may arrive as OP_QUERY on `<db>.$cmd`, as MongoDB 6.0+
/// decides: the handshake (hello, isMaster), and the few commands old drivers
/// still send that way (buildinfo, saslStart, saslContinue, authenticate,
/// _isSelf). Anything else is UnsupportedOpQueryCommand (352) with mongod's text.
Status checkOpQueryCommand(std::string_view name);

/// Decompresses an OP_COMPRESSED payload into a whole frame (header rebuilt
/// with the original opcode). The claimed size is bounded before allocation.
StatusWith<std::vector<uint8_t>> decompress(const Header& h, std::span<const uint8_t> payload);

/// Wraps a whole frame (header included) as OP_COMPRESSED with `c`.
StatusWith<std::vector<uint8_t>> compress(std::span<const uint8_t> frame, Compressor c);

/// Encoders. Each returns the whole frame, header included.
std::vector<uint8_t> buildOpMsg(int32_t requestId, int32_t responseTo, const bson_t* body,
                                uint32_t flags = 0);
std::vector<uint8_t> buildOpMsgWithSequences(
    int32_t requestId, int32_t responseTo, const bson_t* body,
    const std::vector<std::pair<std::string, std::vector<const bson_t*>>>& seqs,
    uint32_t flags = 0);
std::vector<uint8_t> buildOpReply(int32_t requestId, int32_t responseTo, const bson_t* doc,
                                  int32_t responseFlags = 0);
std::vector<uint8_t> buildOpQuery(int32_t requestId, std::string_view ns, const bson_t* query,
                                  int32_t numberToReturn = -1);

/// The body with every document sequence merged in as an array field, the way
/// a command handler wants it (`documents`, `updates`, `deletes`).
bson::Doc mergeSequences(const OpMsg& msg);

/// CRC-32C (Castagnoli), as the OP_MSG checksum uses.
uint32_t crc32c(std::span<const uint8_t> bytes);

/// Name of a compressor as negotiated in the handshake ("snappy", "zlib", "zstd").
std::string_view compressorName(Compressor c);
bool compressorFromName(std::string_view name, Compressor* out);

}  // namespace halo::wire
