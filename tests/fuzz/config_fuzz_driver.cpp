// Replays the config fuzz target over its seed corpus (corpus/config: proxy
// and store files), then over seeded mutations of them that splice in YAML
// syntax (flow and block collections, anchors, tags, quotes, merge keys) and
// odd values (huge and negative numbers, NaN, bad durations), for builds
// without libFuzzer. Deterministic and bounded. A crash, a sanitizer report or
// a broken property fails the test.
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "replay.h"

int main() {
    const auto corpus = halo::fuzz::loadCorpus(HALO_FUZZ_CORPUS);
    const size_t files = halo::fuzz::replay(corpus);
    std::vector<std::string> seeds;
    for (const auto& in : corpus) seeds.emplace_back(in.begin(), in.end());
    static const char* kTokens[] = {
        ": ",    "\n",          "\n  ",        "- ",      "{",       "}",
        "[",     "]",           ", ",          "'",       "\"",      "&a ",
        "*a",    "!!int ",      "!!str ",      "<<: ",    "? ",      "~",
        "null",  "-1",          "0",           "65536",   "1e309",   "nan",
        ".inf",  "-.inf",       "30d",         "0.5ms",   "1e3s",    "99999999999999999999d",
        "12h",   "true",        "yes",         "# c",     "|\n  ",   ">\n  ",
        "\t",    "\xc3\xa9",    "\xff",        "net",     "port",    "tiers",
        "uri",   "tiering",     "collections", "horizon", "storage", "---\n",
        "...\n", "%YAML 1.2\n",
    };
    constexpr size_t kTokenCount = sizeof kTokens / sizeof kTokens[0];
    std::mt19937_64 rng(20261202);
    size_t runs = 0;
    for (int iter = 0; iter < 6000; ++iter) {
        std::string s = seeds[rng() % seeds.size()];
        for (int m = 1 + static_cast<int>(rng() % 4); m > 0; --m) {
            size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
            switch (rng() % 4) {
                case 0:
                    s.insert(at, kTokens[rng() % kTokenCount]);
                    break;
                case 1:
                    s.erase(at, 1 + rng() % 8);
                    break;
                case 2:
                    if (at < s.size()) s[at] = kTokens[rng() % kTokenCount][0];
                    break;
                case 3: {  // a line of another seed
                    const std::string& other = seeds[rng() % seeds.size()];
                    size_t from = other.empty() ? 0 : rng() % other.size();
                    size_t to = other.find('\n', from);
                    s.insert(at, other.substr(from, to == std::string::npos ? to : to - from + 1));
                    break;
                }
            }
        }
        halo::fuzz::runOne(s);
        ++runs;
    }
    std::printf("config fuzz replay: %zu corpus files, %zu mutated inputs, no crash\n", files,
                runs);
    return 0;
}
