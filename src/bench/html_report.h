#pragma once
// The HTML report: one self-contained file (inline CSS, JS and data; no network)
// that plots `bench run --json` documents side by side. Each section gets
//  - <svg data-plot="throughput">: one <polyline data-series=LABEL> per run, ops/s per second;
//  - <svg data-plot="latency" data-op=OP> per operation: one <polyline data-series=LABEL> per
//    run through p50, p95, p99 and p99.9 (log scale);
//  - a table of the numbers.
// The plots are drawn by the page's script when it loads (so a headless browser can check
// that they rendered: <body data-rendered="ok"> once done, "error: ..." otherwise).
// Pure string building; no I/O except readRunFile.
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace halo::bench {

struct ReportRun {
    std::string label;  // the system measured: "archive alone #1", "tiered #1"
    std::string json;   // a `bench run --json` document
};

struct ReportSection {
    std::string title;
    std::string notes;  // plain text shown under the title (escaped; newlines kept)
    std::vector<ReportRun> runs;
};

struct ReportPage {
    std::string title;
    std::string summary;  // preformatted text shown first (escaped)
    std::vector<ReportSection> sections;
};

std::string renderHtml(const ReportPage& page);
std::string htmlEscape(std::string_view s);

/// Reads a `bench run --json` file; the label is its "label" field, else the file name
/// without ".json". BadValue if it is not JSON or not a run report.
StatusWith<ReportRun> readRunFile(const std::string& path);

}  // namespace halo::bench
