#include "wire/message.h"

#include <fmt/format.h>
#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <array>
#include <cstring>

namespace halo::wire {
namespace {

int32_t readI32(const uint8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;  // wire is little-endian, as is every host we build for
}

void putI32(std::vector<uint8_t>& out, int32_t v) {
    uint8_t b[4];
    std::memcpy(b, &v, 4);
    out.insert(out.end(), b, b + 4);
}

void patchI32(std::vector<uint8_t>& out, size_t at, int32_t v) {
    std::memcpy(out.data() + at, &v, 4);
}

void putHeader(std::vector<uint8_t>& out, int32_t requestId, int32_t responseTo, OpCode op) {
    putI32(out, 0);  // patched when the frame is complete
    putI32(out, requestId);
    putI32(out, responseTo);
    putI32(out, static_cast<int32_t>(op));
}

void finishFrame(std::vector<uint8_t>& out) {
    patchI32(out, 0, static_cast<int32_t>(out.size()));
}

/// Reads one BSON document at the front of `rest`, bounded and validated.
StatusWith<std::span<const uint8_t>> takeDocument(std::span<const uint8_t>& rest,
                                                  Validation v = Validation::Full) {
    if (rest.size() < 5) return Status(ErrorCode::InvalidBSON, "truncated BSON document");
    int32_t len = readI32(rest.data());
    if (len < 5 || static_cast<size_t>(len) > rest.size())
        return Status(ErrorCode::InvalidBSON, "BSON document length out of bounds");
    if (len > kMaxBsonObjectSize + 16 * 1024)
        return Status(
            ErrorCode::BSONObjectTooLarge,
            fmt::format("BSONObj size: {} is invalid. Size must be between 0 and {}(16MB)", len,
                        kMaxBsonObjectSize));
    auto doc = rest.first(static_cast<size_t>(len));
    if (v == Validation::Full) {
        Status s = bson::validate(doc.data(), doc.size());
        if (!s.isOK()) return s;
    } else if (doc.back() != 0) {
        return Status(ErrorCode::InvalidBSON, "BSON document without its terminating zero");
    }
    rest = rest.subspan(static_cast<size_t>(len));
    return doc;
}

StatusWith<std::string> takeCString(std::span<const uint8_t>& rest) {
    const void* nul = std::memchr(rest.data(), 0, rest.size());
    if (!nul) return Status(ErrorCode::InvalidBSON, "unterminated string in message");
    size_t n = static_cast<const uint8_t*>(nul) - rest.data();
    std::string s(reinterpret_cast<const char*>(rest.data()), n);
    rest = rest.subspan(n + 1);
    return s;
}

std::array<uint32_t, 256> makeCrcTable() {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? (0x82F63B78u ^ (c >> 1)) : (c >> 1);
        t[i] = c;
    }
    return t;
}

}  // namespace

uint32_t crc32c(std::span<const uint8_t> bytes) {
    static const auto table = makeCrcTable();
    uint32_t c = 0xFFFFFFFFu;
    for (uint8_t b : bytes) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

StatusWith<Header> parseHeader(std::span<const uint8_t> bytes) {
    if (bytes.size() < static_cast<size_t>(kHeaderSize))
        return Status(ErrorCode::ProtocolError, "message header truncated");
    Header h;
    h.messageLength = readI32(bytes.data());
    h.requestId = readI32(bytes.data() + 4);
    h.responseTo = readI32(bytes.data() + 8);
    h.opCode = readI32(bytes.data() + 12);
    if (h.messageLength < kHeaderSize || h.messageLength > kMaxMessageSizeBytes) {
        return Status(ErrorCode::ProtocolError,
                      fmt::format("message length {} is invalid; must be between {} and {}",
                                  h.messageLength, kHeaderSize, kMaxMessageSizeBytes));
    }
    return h;
}

StatusWith<OpMsg> parseOpMsg(std::span<const uint8_t> frame, Validation v) {
    OpMsg msg;
    if (frame.size() < static_cast<size_t>(kHeaderSize))
        return Status(ErrorCode::ProtocolError, "OP_MSG too short");
    auto payload = frame.subspan(kHeaderSize);
    if (payload.size() < 5) return Status(ErrorCode::ProtocolError, "OP_MSG too short");
    msg.flags = static_cast<uint32_t>(readI32(payload.data()));
    // Bits 0-15 are required: unknown ones must make us fail.
    constexpr uint32_t kKnownRequired = kChecksumPresent | kMoreToCome;
    if ((msg.flags & 0xFFFFu) & ~kKnownRequired)
        return Status(ErrorCode::ProtocolError,
                      fmt::format("Unrecognized required flags in OP_MSG: {:#x}", msg.flags));
    auto rest = payload.subspan(4);
    if (msg.flags & kChecksumPresent) {
        if (rest.size() < 4) return Status(ErrorCode::ProtocolError, "OP_MSG checksum truncated");
        uint32_t expected = static_cast<uint32_t>(readI32(frame.data() + frame.size() - 4));
        if (crc32c(frame.first(frame.size() - 4)) != expected)
            return Status(ErrorCode::ProtocolError, "OP_MSG checksum does not match contents");
        rest = rest.first(rest.size() - 4);
    }
    bool haveBody = false;
    while (!rest.empty()) {
        uint8_t kind = rest[0];
        rest = rest.subspan(1);
        if (kind == 0) {
            if (haveBody) return Status(ErrorCode::ProtocolError, "OP_MSG has more than one body");
            auto doc = takeDocument(rest, v);
            if (!doc.isOK()) return doc.getStatus();
            msg.body = doc.getValue();
            haveBody = true;
        } else if (kind == 1) {
            if (rest.size() < 4)
                return Status(ErrorCode::ProtocolError, "OP_MSG section truncated");
            int32_t size = readI32(rest.data());
            if (size < 5 || static_cast<size_t>(size) > rest.size())
                return Status(ErrorCode::ProtocolError,
                              "OP_MSG document sequence size out of bounds");
            auto section = rest.subspan(4, static_cast<size_t>(size) - 4);
            rest = rest.subspan(static_cast<size_t>(size));
            auto id = takeCString(section);
            if (!id.isOK()) return id.getStatus();
            DocumentSequence seq;
            seq.identifier = std::move(id.getValue());
            while (!section.empty()) {
                auto doc = takeDocument(section, v);
                if (!doc.isOK()) return doc.getStatus();
                seq.documents.push_back(doc.getValue());
            }
            for (const auto& s : msg.sequences)
                if (s.identifier == seq.identifier)
                    return Status(ErrorCode::ProtocolError,
                                  "OP_MSG has duplicate document sequence " + seq.identifier);
            msg.sequences.push_back(std::move(seq));
        } else {
            return Status(ErrorCode::ProtocolError,
                          fmt::format("Unknown section kind {} in OP_MSG", static_cast<int>(kind)));
        }
    }
    if (!haveBody) return Status(ErrorCode::ProtocolError, "OP_MSG has no body section");
    return msg;
}

Status checkOpQueryCommand(std::string_view name) {
    static constexpr std::array<std::string_view, 9> kAllowed{
        "hello",     "isMaster",     "ismaster",     "buildinfo", "buildInfo",
        "saslStart", "authenticate", "saslContinue", "_isSelf"};
    for (std::string_view a : kAllowed)
        if (a == name) return Status::OK();
    return Status(ErrorCode::UnsupportedOpQueryCommand,
                  fmt::format("Unsupported OP_QUERY command: {}. The client driver may require an "
                              "upgrade. For more details see "
                              "https://dochub.mongodb.org/core/legacy-opcode-removal",
                              name));
}

StatusWith<OpQuery> parseOpQuery(std::span<const uint8_t> frame) {
    OpQuery q;
    if (frame.size() < static_cast<size_t>(kHeaderSize))
        return Status(ErrorCode::ProtocolError, "OP_QUERY too short");
    auto payload = frame.subspan(kHeaderSize);
    if (payload.size() < 4) return Status(ErrorCode::ProtocolError, "OP_QUERY too short");
    q.flags = readI32(payload.data());
    auto rest = payload.subspan(4);
    auto ns = takeCString(rest);
    if (!ns.isOK()) return ns.getStatus();
    q.fullCollectionName = std::move(ns.getValue());
    if (rest.size() < 8) return Status(ErrorCode::ProtocolError, "OP_QUERY truncated");
    q.numberToSkip = readI32(rest.data());
    q.numberToReturn = readI32(rest.data() + 4);
    rest = rest.subspan(8);
    auto doc = takeDocument(rest);
    if (!doc.isOK()) return doc.getStatus();
    q.query = doc.getValue();
    if (!rest.empty()) {
        auto fields = takeDocument(rest);
        if (!fields.isOK()) return fields.getStatus();
        q.fieldsSelector = fields.getValue();
    }
    if (!rest.empty()) return Status(ErrorCode::ProtocolError, "trailing bytes after OP_QUERY");
    return q;
}

namespace {

/// Deflate encodes at most 258 bytes in a bit and a few (zlib's documented worst
/// case is 1032:1); a zlib stream also has a 2-byte header and 4-byte trailer.
constexpr size_t kZlibMaxRatio = 1032;

/// Whether `data` can decompress to `claimed` bytes, judged without decompressing:
/// the size snappy and zstd record in their own headers, zlib's highest ratio.
Status checkUncompressedSize(Compressor c, std::span<const uint8_t> data, size_t claimed) {
    auto mismatch = [](const char* what) {
        return Status(
            ErrorCode::ProtocolError,
            fmt::format("OP_COMPRESSED uncompressedSize does not match the {} data", what));
    };
    switch (c) {
        case Compressor::Noop:
            if (data.size() != claimed) return mismatch("noop");
            break;
        case Compressor::Snappy: {
            size_t n = 0;
            if (!snappy::GetUncompressedLength(reinterpret_cast<const char*>(data.data()),
                                               data.size(), &n) ||
                n != claimed)
                return mismatch("snappy");
            break;
        }
        case Compressor::Zlib:
            if (claimed / kZlibMaxRatio > data.size()) return mismatch("zlib");
            break;
        case Compressor::Zstd: {
            // Drivers' zstd frames record their size; a frame without it is
            // judged by decompressing.
            unsigned long long n = ZSTD_getFrameContentSize(data.data(), data.size());
            if (n == ZSTD_CONTENTSIZE_ERROR || (n != ZSTD_CONTENTSIZE_UNKNOWN && n != claimed))
                return mismatch("zstd");
            break;
        }
        default:
            break;  // refused below
    }
    return Status::OK();
}

}  // namespace

StatusWith<std::vector<uint8_t>> decompress(const Header& h, std::span<const uint8_t> payload) {
    if (payload.size() < 9) return Status(ErrorCode::ProtocolError, "OP_COMPRESSED too short");
    int32_t originalOp = readI32(payload.data());
    int32_t uncompressedSize = readI32(payload.data() + 4);
    auto compressor = static_cast<Compressor>(payload[8]);
    auto data = payload.subspan(9);
    if (uncompressedSize < 0 || uncompressedSize > kMaxMessageSizeBytes - kHeaderSize)
        return Status(ErrorCode::ProtocolError, "OP_COMPRESSED uncompressedSize out of bounds");
    if (originalOp == static_cast<int32_t>(OpCode::Compressed))
        return Status(ErrorCode::ProtocolError, "nested OP_COMPRESSED");
    // The claim is checked against what the payload can expand to before the
    // buffer is allocated: a few bytes claiming 48 MB must not cost 48 MB.
    if (Status s = checkUncompressedSize(compressor, data, static_cast<size_t>(uncompressedSize));
        !s.isOK())
        return s;
    std::vector<uint8_t> frame(kHeaderSize + static_cast<size_t>(uncompressedSize));
    uint8_t* dst = frame.data() + kHeaderSize;
    size_t outLen = static_cast<size_t>(uncompressedSize);
    switch (compressor) {
        case Compressor::Noop:
            if (data.size() != outLen)
                return Status(ErrorCode::ProtocolError, "noop size mismatch");
            if (outLen) std::memcpy(dst, data.data(), outLen);
            break;
        case Compressor::Snappy: {
            size_t n = 0;
            auto src = reinterpret_cast<const char*>(data.data());
            if (!snappy::GetUncompressedLength(src, data.size(), &n) || n != outLen ||
                !snappy::RawUncompress(src, data.size(), reinterpret_cast<char*>(dst)))
                return Status(ErrorCode::ProtocolError, "invalid snappy data in OP_COMPRESSED");
            break;
        }
        case Compressor::Zlib: {
            uLongf n = outLen;
            if (::uncompress(dst, &n, data.data(), data.size()) != Z_OK || n != outLen)
                return Status(ErrorCode::ProtocolError, "invalid zlib data in OP_COMPRESSED");
            break;
        }
        case Compressor::Zstd: {
            size_t n = ZSTD_decompress(dst, outLen, data.data(), data.size());
            if (ZSTD_isError(n) || n != outLen)
                return Status(ErrorCode::ProtocolError, "invalid zstd data in OP_COMPRESSED");
            break;
        }
        default:
            return Status(ErrorCode::ProtocolError, "unknown compressor in OP_COMPRESSED");
    }
    int32_t total = static_cast<int32_t>(frame.size());
    std::memcpy(frame.data(), &total, 4);
    std::memcpy(frame.data() + 4, &h.requestId, 4);
    std::memcpy(frame.data() + 8, &h.responseTo, 4);
    std::memcpy(frame.data() + 12, &originalOp, 4);
    return frame;
}

StatusWith<std::vector<uint8_t>> compress(std::span<const uint8_t> frame, Compressor c) {
    if (frame.size() < static_cast<size_t>(kHeaderSize))
        return Status(ErrorCode::InternalError, "frame too short to compress");
    auto body = frame.subspan(kHeaderSize);
    std::vector<uint8_t> out;
    out.reserve(frame.size() / 2 + 64);
    putHeader(out, readI32(frame.data() + 4), readI32(frame.data() + 8), OpCode::Compressed);
    putI32(out, readI32(frame.data() + 12));
    putI32(out, static_cast<int32_t>(body.size()));
    out.push_back(static_cast<uint8_t>(c));
    size_t at = out.size();
    switch (c) {
        case Compressor::Noop:
            out.insert(out.end(), body.begin(), body.end());
            break;
        case Compressor::Snappy: {
            out.resize(at + snappy::MaxCompressedLength(body.size()));
            size_t n = 0;
            snappy::RawCompress(reinterpret_cast<const char*>(body.data()), body.size(),
                                reinterpret_cast<char*>(out.data() + at), &n);
            out.resize(at + n);
            break;
        }
        case Compressor::Zlib: {
            uLongf n = compressBound(body.size());
            out.resize(at + n);
            if (::compress2(out.data() + at, &n, body.data(), body.size(), 6) != Z_OK)
                return Status(ErrorCode::InternalError, "zlib compression failed");
            out.resize(at + n);
            break;
        }
        case Compressor::Zstd: {
            size_t bound = ZSTD_compressBound(body.size());
            out.resize(at + bound);
            size_t n = ZSTD_compress(out.data() + at, bound, body.data(), body.size(), 1);
            if (ZSTD_isError(n)) return Status(ErrorCode::InternalError, "zstd compression failed");
            out.resize(at + n);
            break;
        }
    }
    finishFrame(out);
    return out;
}

std::vector<uint8_t> buildOpMsg(int32_t requestId, int32_t responseTo, const bson_t* body,
                                uint32_t flags) {
    return buildOpMsgWithSequences(requestId, responseTo, body, {}, flags);
}

std::vector<uint8_t> buildOpMsgWithSequences(
    int32_t requestId, int32_t responseTo, const bson_t* body,
    const std::vector<std::pair<std::string, std::vector<const bson_t*>>>& seqs, uint32_t flags) {
    std::vector<uint8_t> out;
    out.reserve(kHeaderSize + 5 + body->len);
    putHeader(out, requestId, responseTo, OpCode::Msg);
    putI32(out, static_cast<int32_t>(flags & ~kChecksumPresent));
    out.push_back(0);
    const uint8_t* d = bson_get_data(body);
    out.insert(out.end(), d, d + body->len);
    for (const auto& [id, docs] : seqs) {
        out.push_back(1);
        size_t sizeAt = out.size();
        putI32(out, 0);
        out.insert(out.end(), id.begin(), id.end());
        out.push_back(0);
        for (const bson_t* doc : docs) {
            const uint8_t* p = bson_get_data(doc);
            out.insert(out.end(), p, p + doc->len);
        }
        patchI32(out, sizeAt, static_cast<int32_t>(out.size() - sizeAt));
    }
    finishFrame(out);
    return out;
}

std::vector<uint8_t> buildOpReply(int32_t requestId, int32_t responseTo, const bson_t* doc,
                                  int32_t responseFlags) {
    std::vector<uint8_t> out;
    out.reserve(kHeaderSize + 20 + doc->len);
    putHeader(out, requestId, responseTo, OpCode::Reply);
    putI32(out, responseFlags);
    putI32(out, 0);  // cursorID (int64)
    putI32(out, 0);
    putI32(out, 0);  // startingFrom
    putI32(out, 1);  // numberReturned
    const uint8_t* d = bson_get_data(doc);
    out.insert(out.end(), d, d + doc->len);
    finishFrame(out);
    return out;
}

std::vector<uint8_t> buildOpQuery(int32_t requestId, std::string_view ns, const bson_t* query,
                                  int32_t numberToReturn) {
    std::vector<uint8_t> out;
    putHeader(out, requestId, 0, OpCode::Query);
    putI32(out, 0);
    out.insert(out.end(), ns.begin(), ns.end());
    out.push_back(0);
    putI32(out, 0);
    putI32(out, numberToReturn);
    const uint8_t* d = bson_get_data(query);
    out.insert(out.end(), d, d + query->len);
    finishFrame(out);
    return out;
}

bson::Doc mergeSequences(const OpMsg& msg) {
    bson::Doc out = bson::Doc::copyOf(msg.body.data(), msg.body.size());
    for (const auto& seq : msg.sequences) {
        bson_t arr;
        bson_append_array_begin(out.mut(), seq.identifier.c_str(),
                                static_cast<int>(seq.identifier.size()), &arr);
        char keybuf[16];
        for (size_t i = 0; i < seq.documents.size(); ++i) {
            const char* key;
            size_t klen =
                bson_uint32_to_string(static_cast<uint32_t>(i), &key, keybuf, sizeof keybuf);
            bson_t child;
            bson_init_static(&child, seq.documents[i].data(), seq.documents[i].size());
            bson_append_document(&arr, key, static_cast<int>(klen), &child);
        }
        bson_append_array_end(out.mut(), &arr);
    }
    return out;
}

std::string_view compressorName(Compressor c) {
    switch (c) {
        case Compressor::Noop:
            return "noop";
        case Compressor::Snappy:
            return "snappy";
        case Compressor::Zlib:
            return "zlib";
        case Compressor::Zstd:
            return "zstd";
    }
    return "unknown";
}

bool compressorFromName(std::string_view name, Compressor* out) {
    if (name == "snappy")
        *out = Compressor::Snappy;
    else if (name == "zlib")
        *out = Compressor::Zlib;
    else if (name == "zstd")
        *out = Compressor::Zstd;
    else
        return false;
    return true;
}

}  // namespace halo::wire
