#pragma once
// Structured JSON logging in the shape of mongod 4.4+ ({"t":{"$date":...},"s":"I","c":...,
// "id":...,"msg":...,"attr":{...}}), one line per event, on spdlog. Thread-safe.
#include <string>
#include <string_view>

namespace halo::log {

enum class Severity { Debug, Info, Warning, Error, Fatal };

/// Sends logs to `path` (append) or to stdout when empty. Call once at start-up.
void init(const std::string& path, bool verbose);

/// `attrJson` must be a JSON object text ("{}" when there are no attributes).
void write(Severity s, std::string_view component, int id, std::string_view msg,
           std::string_view attrJson = "{}");

/// Escapes `s` as a JSON string literal, quotes included.
std::string quote(std::string_view s);

inline void info(std::string_view c, int id, std::string_view m, std::string_view a = "{}") {
    write(Severity::Info, c, id, m, a);
}
inline void warning(std::string_view c, int id, std::string_view m, std::string_view a = "{}") {
    write(Severity::Warning, c, id, m, a);
}
inline void error(std::string_view c, int id, std::string_view m, std::string_view a = "{}") {
    write(Severity::Error, c, id, m, a);
}
inline void debug(std::string_view c, int id, std::string_view m, std::string_view a = "{}") {
    write(Severity::Debug, c, id, m, a);
}

}  // namespace halo::log
