#define PCRE2_CODE_UNIT_WIDTH 8
#include "store/query/regex.h"

#include <fmt/format.h>
#include <pcre2.h>

namespace halo::query {

struct Regex::Code {
    pcre2_code* code = nullptr;
    ~Code() {
        if (code) pcre2_code_free(code);
    }
};

StatusWith<Regex> Regex::compile(std::string_view pattern, std::string_view options) {
    uint32_t flags = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
    for (char c : options) {
        switch (c) {
            case 'i':
                flags |= PCRE2_CASELESS;
                break;
            case 'm':
                flags |= PCRE2_MULTILINE;
                break;
            case 's':
                flags |= PCRE2_DOTALL;
                break;
            case 'x':
                flags |= PCRE2_EXTENDED;
                break;
            case 'u':
                break;
            default:
                return Status(ErrorCode::Location51108,
                              fmt::format("invalid flag in regex options: {}", c));
        }
    }
    if (pattern.find('\0') != std::string_view::npos)
        return Status(ErrorCode::Location51091,
                      "Regular expression is invalid: embedded null byte");
    int err = 0;
    PCRE2_SIZE off = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     flags, &err, &off, nullptr);
    if (!code) {
        PCRE2_UCHAR buf[256];
        pcre2_get_error_message(err, buf, sizeof buf);
        return Status(ErrorCode::Location51091, fmt::format("Regular expression is invalid: {}",
                                                            reinterpret_cast<const char*>(buf)));
    }
    Regex r;
    auto c = std::make_shared<Code>();
    c->code = code;
    r.code_ = std::move(c);
    r.pattern_ = std::string(pattern);
    r.options_ = std::string(options);
    return r;
}

bool Regex::matches(std::string_view subject) const {
    if (!code_) return false;
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_->code, nullptr);
    int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(),
                         0, 0, md, nullptr);
    pcre2_match_data_free(md);
    return rc >= 0;
}

}  // namespace halo::query
