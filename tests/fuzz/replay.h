#pragma once
// What the replay drivers share (the build without libFuzzer): the target's
// seed corpus, tests/fuzz/corpus/<target>, whose path each driver is compiled
// with (HALO_FUZZ_CORPUS), and a runner over it. scripts/fuzz.sh feeds the same
// directories to libFuzzer.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace halo::fuzz {

using Input = std::vector<uint8_t>;

/// Every regular file of `dir`, in name order. Exits with status 1 (failing the
/// test) when the directory cannot be read or holds no file: a lost corpus must
/// not pass unnoticed.
std::vector<Input> loadCorpus(const std::string& dir);

/// Runs the target once per input. Returns how many ran.
size_t replay(const std::vector<Input>& inputs);

inline void runOne(const Input& in) {
    LLVMFuzzerTestOneInput(in.data(), in.size());
}
inline void runOne(const std::string& in) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(in.data()), in.size());
}

}  // namespace halo::fuzz
