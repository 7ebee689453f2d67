// Fuzz target for everything that parses untrusted bytes off the network:
// header, OP_MSG (sections, sequences, checksum), OP_QUERY, OP_COMPRESSED and
// the BSON validation beneath them. Built as a libFuzzer target under clang
// (-DHALO_LIBFUZZER=ON); otherwise linked with fuzz_driver.cpp, which replays
// seeded random and mutated frames so the suite exercises it on every run.
#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace halo::wire;
    std::span<const uint8_t> bytes(data, size);
    auto h = parseHeader(bytes);
    if (!h.isOK()) return 0;
    switch (static_cast<OpCode>(h.getValue().opCode)) {
        case OpCode::Msg: {
            auto m = parseOpMsg(bytes);
            if (m.isOK()) (void)mergeSequences(m.getValue());
            break;
        }
        case OpCode::Query:
            (void)parseOpQuery(bytes);
            break;
        case OpCode::Compressed:
            if (size > static_cast<size_t>(kHeaderSize)) {
                auto d = decompress(h.getValue(), bytes.subspan(kHeaderSize));
                if (d.isOK()) (void)parseOpMsg(d.getValue());
            }
            break;
        default:
            break;
    }
    return 0;
}
