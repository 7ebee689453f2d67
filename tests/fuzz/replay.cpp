#include "replay.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

namespace halo::fuzz {

std::vector<Input> loadCorpus(const std::string& dir) {
    namespace fs = std::filesystem;
    std::vector<fs::path> files;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (it->is_regular_file()) files.push_back(it->path());
    if (ec || files.empty()) {
        std::fprintf(stderr, "fuzz corpus %s: %s\n", dir.c_str(),
                     ec ? ec.message().c_str() : "no files");
        std::exit(1);
    }
    std::sort(files.begin(), files.end());
    std::vector<Input> inputs;
    for (const auto& f : files) {
        std::ifstream in(f, std::ios::binary);
        if (!in) {
            std::fprintf(stderr, "fuzz corpus: cannot read %s\n", f.c_str());
            std::exit(1);
        }
        inputs.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    return inputs;
}

size_t replay(const std::vector<Input>& inputs) {
    for (const auto& in : inputs) runOne(in);
    return inputs.size();
}

}  // namespace halo::fuzz
