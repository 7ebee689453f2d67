// Replays the wire fuzz target over its seed corpus (corpus/wire), then over
// seeded random mutations of valid frames and of the corpus (for builds
// without libFuzzer). Deterministic: the seed is fixed, the count bounded. A
// crash or sanitizer report fails the test.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "replay.h"
#include "wire/message.h"

int main() {
    using namespace halo;
    const auto corpus = fuzz::loadCorpus(HALO_FUZZ_CORPUS);
    const size_t files = fuzz::replay(corpus);
    std::vector<std::vector<uint8_t>> seeds;
    auto body = bson::Doc::fromJsonOrDie(R"({"insert": "c", "$db": "t", "ordered": true})");
    auto d1 = bson::Doc::fromJsonOrDie(R"({"_id": 1, "a": [1, 2, {"b": "x"}]})");
    seeds.push_back(wire::buildOpMsg(1, 0, body.get()));
    seeds.push_back(
        wire::buildOpMsgWithSequences(2, 0, body.get(), {{"documents", {d1.get(), d1.get()}}}));
    seeds.push_back(wire::buildOpQuery(3, "admin.$cmd", d1.get()));
    for (auto c : {wire::Compressor::Snappy, wire::Compressor::Zlib, wire::Compressor::Zstd})
        seeds.push_back(wire::compress(seeds[1], c).getValue());
    for (const auto& in : corpus)
        if (in.size() >= 16) seeds.push_back(in);
    std::mt19937_64 rng(20261202);
    size_t runs = 0;
    for (int iter = 0; iter < 40000; ++iter) {
        auto frame = seeds[rng() % seeds.size()];
        int mutations = 1 + static_cast<int>(rng() % 8);
        for (int m = 0; m < mutations; ++m) {
            switch (rng() % 4) {
                case 0:
                    frame[rng() % frame.size()] = static_cast<uint8_t>(rng());
                    break;
                case 1:
                    frame.resize(16 + rng() % frame.size());
                    break;
                case 2:
                    frame.insert(
                        frame.begin() + static_cast<long>(16 + rng() % (frame.size() - 15)),
                        static_cast<uint8_t>(rng()));
                    break;
                case 3: {  // keep the length prefix honest so deeper parsers run
                    int32_t len = static_cast<int32_t>(frame.size());
                    std::memcpy(frame.data(), &len, 4);
                    break;
                }
            }
            if (frame.size() < 16) frame.resize(16);
        }
        LLVMFuzzerTestOneInput(frame.data(), frame.size());
        ++runs;
    }
    std::printf("wire fuzz replay: %zu corpus files, %zu mutated inputs, no crash\n", files, runs);
    return 0;
}
