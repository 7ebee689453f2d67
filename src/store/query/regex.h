#pragma once
// Regex: a compiled PCRE2 pattern with MongoDB's option letters (i, m, s, x, u).
// Immutable and thread-safe once compiled: each match allocates its own match data.
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace halo::query {

class Regex {
  public:
    /// Compiles `pattern` with `options`. Errors as mongod: 51108 "invalid flag in
    /// regex options: z", 51091 "Regular expression is invalid: ...".
    static StatusWith<Regex> compile(std::string_view pattern, std::string_view options);

    /// True when the pattern matches somewhere in `subject`.
    bool matches(std::string_view subject) const;

    const std::string& pattern() const { return pattern_; }
    const std::string& options() const { return options_; }

  private:
    struct Code;
    std::shared_ptr<const Code> code_;
    std::string pattern_;
    std::string options_;
};

}  // namespace halo::query
