#include "common/log.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <mutex>

namespace halo::log {
namespace {
std::shared_ptr<spdlog::logger> g_logger;
bool g_verbose = false;
std::once_flag g_default;

spdlog::logger& logger() {
    std::call_once(g_default, [] {
        if (!g_logger) {
            g_logger = spdlog::stdout_logger_mt("halocline");
            g_logger->set_pattern("%v");
        }
    });
    return *g_logger;
}
}  // namespace

void init(const std::string& path, bool verbose) {
    g_verbose = verbose;
    if (path.empty()) {
        g_logger = spdlog::stdout_logger_mt("halocline");
    } else {
        g_logger = spdlog::basic_logger_mt("halocline", path);
    }
    g_logger->set_pattern("%v");
    g_logger->flush_on(spdlog::level::trace);
}

std::string quote(std::string_view s) {
    std::string out;
    out.reserve(s.size() + 2);
    out.push_back('"');
    for (unsigned char c : s) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (c < 0x20) {
                    out += fmt::format("\\u{:04x}", c);
                } else {
                    out.push_back(static_cast<char>(c));
                }
        }
    }
    out.push_back('"');
    return out;
}

void write(Severity s, std::string_view component, int id, std::string_view msg,
           std::string_view attrJson) {
    if (s == Severity::Debug && !g_verbose) return;
    static constexpr const char* kSev[] = {"D1", "I", "W", "E", "F"};
    auto now = std::chrono::system_clock::now();
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
    std::string line = fmt::format(
        R"({{"t":{{"$date":"{:%Y-%m-%dT%H:%M:%S}.{:03d}+00:00"}},"s":"{}","c":"{}","id":{},"msg":{},"attr":{}}})",
        fmt::gmtime(std::chrono::system_clock::to_time_t(now)), static_cast<int>(ms.count()),
        kSev[static_cast<int>(s)], component, id, quote(msg), attrJson);
    logger().info(line);
    logger().flush();
}

}  // namespace halo::log
