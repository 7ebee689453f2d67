// Replays the SCRAM fuzz target over its seed corpus (corpus/scram), then over
// seeded random mutations of valid client-first/client-final pairs (for builds
// without libFuzzer). Deterministic: fixed seed, bounded count. A crash or
// sanitizer report fails.
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "replay.h"

int main() {
    const auto corpus = halo::fuzz::loadCorpus(HALO_FUZZ_CORPUS);
    const size_t files = halo::fuzz::replay(corpus);
    std::vector<std::string> seeds = {
        std::string("n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL") + '\0' +
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawLsrv,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
        std::string("n,a=us=2Cer,n=us=2Cer,r=abc") + '\0' +
            "c=bixhPXVzPTJDZXIs,r=abcsrv,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        std::string("y,,n=u=3D,r=x,e=ext") + '\0' + "c=eSws,r=xsrv,x=1,p=AAAA",
    };
    for (const auto& in : corpus) seeds.emplace_back(in.begin(), in.end());
    using namespace std::string_literals;
    const std::string alphabet = "nyacrpsiv=,+/0123456789ABCDEFabcdef\0\x80\xff"s;
    std::mt19937_64 rng(20261202);
    size_t runs = 0;
    for (int iter = 0; iter < 20000; ++iter) {
        std::string s = seeds[rng() % seeds.size()];
        int mutations = static_cast<int>(rng() % 6);
        for (int m = 0; m < mutations && !s.empty(); ++m) {
            size_t at = rng() % s.size();
            switch (rng() % 3) {
                case 0:
                    s[at] = alphabet[rng() % alphabet.size()];
                    break;
                case 1:
                    s.erase(at, 1 + rng() % 4);
                    break;
                case 2:
                    s.insert(at, 1, alphabet[rng() % alphabet.size()]);
                    break;
            }
        }
        halo::fuzz::runOne(s);
        ++runs;
    }
    std::printf("scram fuzz replay: %zu corpus files, %zu mutated inputs, no crash\n", files, runs);
    return 0;
}
