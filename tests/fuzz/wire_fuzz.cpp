// Fuzz target for everything that parses untrusted bytes off the network:
// header, OP_MSG (sections, sequences, checksum), OP_QUERY, OP_COMPRESSED and
// the BSON validation beneath them; also OP_MSG as the proxy reads a tier's
// reply (Validation::Bounds), whose body is then read with bson_iter only.
// Built as a libFuzzer target under clang (-DHALO_LIBFUZZER=ON, scripts/fuzz.sh);
// otherwise linked with wire_fuzz_driver.cpp, which replays the corpus and
// seeded random and mutated frames so the suite exercises it on every run.
#include <cstddef>
#include <cstdint>
#include <span>

#include "bson/doc.h"
#include "bson/fields.h"
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
            auto reply = parseOpMsg(bytes, Validation::Bounds);
            if (reply.isOK()) {
                halo::bson::View body(reply.getValue().body.data(), reply.getValue().body.size());
                halo::bson::Fields fields(body.get());
                for (size_t i = 0; i < fields.size(); ++i) (void)fields.key(i);
                (void)halo::bson::toJson(body.get());
            }
            break;
        }
        case OpCode::Query: {
            auto q = parseOpQuery(bytes);
            if (q.isOK()) {
                halo::bson::View query(q.getValue().query.data(), q.getValue().query.size());
                bson_iter_t it;
                if (bson_iter_init(&it, query.get()) && bson_iter_next(&it))
                    (void)checkOpQueryCommand(bson_iter_key(&it));
            }
            break;
        }
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
