#include "bench/html_report.h"

#include <bson/bson.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace halo::bench {
namespace {

constexpr const char* kStyle = R"CSS(
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1360px; color: #222; padding: 0 16px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 36px; border-bottom: 1px solid #ddd; }
h3 { font-size: 14px; margin: 8px 0 2px; }
pre { background: #f6f6f6; padding: 10px; overflow-x: auto; font-size: 12.5px; }
.notes { white-space: pre-wrap; color: #444; }
.plots { display: flex; flex-wrap: wrap; gap: 12px; }
figure { margin: 0; border: 1px solid #e4e4e4; padding: 6px; }
svg { display: block; background: #fff; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
.legend span { display: inline-block; margin-right: 14px; }
.legend i { display: inline-block; width: 18px; height: 3px; vertical-align: middle; margin-right: 5px; }
table { border-collapse: collapse; margin-top: 8px; font-size: 12.5px; }
td, th { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th:first-child, td:first-child, td:nth-child(2) { text-align: left; }
#render-error { color: #b00; font-weight: bold; }
td.miss { color: #b00; font-weight: bold; }
)CSS";

// The renderer. Plain ES5 so any browser runs it; reads the JSON embedded in each section.
constexpr const char* kScript = R"JS(
(function () {
  'use strict';
  var NS = 'http://www.w3.org/2000/svg';
  var COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2',
                '#17becf', '#7f7f7f', '#bcbd22'];
  var W = 660, H = 300, M = { l: 62, r: 14, t: 12, b: 42 };
  var PCTS = [['p50_us', 'p50'], ['p95_us', 'p95'], ['p99_us', 'p99'], ['p999_us', 'p99.9']];

  function el(tag, attrs, parent, ns) {
    var e = ns === false ? document.createElement(tag) : document.createElementNS(NS, tag);
    for (var k in attrs) if (attrs.hasOwnProperty(k)) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function text(parent, x, y, s, anchor, extra) {
    var t = el('text', { x: x, y: y, 'text-anchor': anchor || 'middle' }, parent);
    if (extra) for (var k in extra) t.setAttribute(k, extra[k]);
    t.textContent = s;
    return t;
  }
  function nice(x) {
    if (!(x > 0)) return 1;
    var e = Math.pow(10, Math.floor(Math.log(x) / Math.LN10)), f = x / e;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * e;
  }
  function short(v) {
    if (v >= 1e6) return (v / 1e6).toFixed(v % 1e6 ? 1 : 0) + 'M';
    if (v >= 1e3) return (v / 1e3).toFixed(v % 1e3 ? 1 : 0) + 'k';
    return String(Math.round(v * 100) / 100);
  }
  function usLabel(us) {
    if (us >= 1e6) return us / 1e6 + ' s';
    if (us >= 1e3) return us / 1e3 + ' ms';
    return us + ' \u00b5s';
  }
  function figure(container, title, plot, extra) {
    var f = el('figure', {}, container, false);
    el('h3', {}, f, false).textContent = title;
    var attrs = { 'data-plot': plot, width: W, height: H, viewBox: '0 0 ' + W + ' ' + H };
    for (var k in extra) attrs[k] = extra[k];
    return el('svg', attrs, f);
  }
  function axes(svg, xTicks, yTicks, xLabel, yLabel) {
    var g = el('g', { 'class': 'axes' }, svg);
    el('line', { x1: M.l, y1: H - M.b, x2: W - M.r, y2: H - M.b, stroke: '#888' }, g);
    el('line', { x1: M.l, y1: M.t, x2: M.l, y2: H - M.b, stroke: '#888' }, g);
    xTicks.forEach(function (t) {
      el('line', { x1: t.x, y1: H - M.b, x2: t.x, y2: H - M.b + 4, stroke: '#888' }, g);
      text(g, t.x, H - M.b + 16, t.label);
    });
    yTicks.forEach(function (t) {
      el('line', { x1: M.l, y1: t.y, x2: W - M.r, y2: t.y, stroke: '#eee' }, g);
      text(g, M.l - 6, t.y + 4, t.label, 'end');
    });
    text(g, (M.l + W - M.r) / 2, H - 6, xLabel);
    text(g, 12, (M.t + H - M.b) / 2, yLabel, 'middle',
         { transform: 'rotate(-90 12 ' + (M.t + H - M.b) / 2 + ')' });
  }
  function series(svg, label, color, pts, dashed, dots) {
    var g = el('g', { 'class': 'series' }, svg);
    var attrs = { 'data-series': label, fill: 'none', stroke: color, 'stroke-width': 1.8,
                  points: pts.map(function (p) { return p[0].toFixed(1) + ',' + p[1].toFixed(1); }).join(' ') };
    if (dashed) attrs['stroke-dasharray'] = '6 3';
    el('polyline', attrs, g);
    if (dots) pts.forEach(function (p) { el('circle', { cx: p[0], cy: p[1], r: 3, fill: color }, g); });
  }

  function throughputPlot(container, runs) {
    var svg = figure(container, 'Throughput over time (ops/s, each second)', 'throughput');
    var len = 1, max = 0;
    runs.forEach(function (r) {
      var ps = r.run.per_second || [];
      len = Math.max(len, ps.length);
      ps.forEach(function (v) { max = Math.max(max, v); });
    });
    var step = nice(max / 5 || 1), top = Math.max(step, Math.ceil(max / step) * step);
    var xs = function (i) { return M.l + (len > 1 ? i / (len - 1) : 0.5) * (W - M.l - M.r); };
    var ys = function (v) { return H - M.b - (v / top) * (H - M.t - M.b); };
    var xStep = Math.max(1, nice((len - 1) / 8)), xt = [], yt = [];
    for (var s = 0; s < len; s += xStep) xt.push({ x: xs(s), label: String(s) });
    for (var v = 0; v <= top + 1e-9; v += step) yt.push({ y: ys(v), label: short(v) });
    axes(svg, xt, yt, 'second of the measured run', 'ops/s');
    runs.forEach(function (r, i) {
      var ps = r.run.per_second || [];
      series(svg, r.label, r.color, ps.map(function (v, s) { return [xs(s), ys(v)]; }), r.dashed, false);
    });
  }

  function latencyPlot(container, runs, op) {
    var have = runs.filter(function (r) { return r.run.operations && r.run.operations[op] && r.run.operations[op].ok > 0; });
    if (!have.length) return;
    var lo = Infinity, hi = 0;
    have.forEach(function (r) {
      PCTS.forEach(function (p) {
        var v = Math.max(1, r.run.operations[op][p[0]]);
        lo = Math.min(lo, v); hi = Math.max(hi, v);
      });
    });
    var l0 = Math.floor(Math.log(lo) / Math.LN10), l1 = Math.ceil(Math.log(hi) / Math.LN10);
    if (l1 <= l0) l1 = l0 + 1;
    var svg = figure(container, op + ' latency percentiles', 'latency', { 'data-op': op });
    var xs = function (i) { return M.l + 30 + i * (W - M.l - M.r - 60) / (PCTS.length - 1); };
    var ys = function (v) {
      var l = Math.log(Math.max(1, v)) / Math.LN10;
      return H - M.b - (l - l0) / (l1 - l0) * (H - M.t - M.b);
    };
    var xt = PCTS.map(function (p, i) { return { x: xs(i), label: p[1] }; }), yt = [];
    for (var e = l0; e <= l1; e++) yt.push({ y: ys(Math.pow(10, e)), label: usLabel(Math.pow(10, e)) });
    axes(svg, xt, yt, 'percentile', 'latency (log scale)');
    have.forEach(function (r) {
      var o = r.run.operations[op];
      series(svg, r.label, r.color, PCTS.map(function (p, i) { return [xs(i), ys(o[p[0]])]; }), r.dashed, true);
    });
  }

  function legend(container, runs) {
    var d = el('div', { 'class': 'legend' }, container, false);
    runs.forEach(function (r) {
      var s = el('span', {}, d, false);
      el('i', { style: 'background:' + r.color + (r.dashed ? ';opacity:.6' : '') }, s, false);
      s.appendChild(document.createTextNode(r.label));
    });
  }

  function numbers(container, runs) {
    var t = el('table', {}, container, false);
    var h = el('tr', {}, t, false);
    ['system', 'operation', 'ok', 'failed', 'NOT_FOUND', 'ops/s', 'p50 ms', 'p95 ms', 'p99 ms', 'p99.9 ms', 'max ms']
      .forEach(function (c) { el('th', {}, h, false).textContent = c; });
    var ms = function (v) { return (v / 1000).toFixed(2); };
    runs.forEach(function (r) {
      var ops = r.run.operations || {};
      Object.keys(ops).forEach(function (op, k) {
        var o = ops[op], tr = el('tr', {}, t, false);
        // Reports written before NOT_FOUND was counted have no such field.
        var miss = o.not_found === undefined ? '-' : o.not_found;
        [k ? '' : r.label, op, o.ok, o.failed, miss,
         k ? '' : Math.round(r.run.ops_per_sec), ms(o.p50_us), ms(o.p95_us), ms(o.p99_us),
         ms(o.p999_us), ms(o.max_us)].forEach(function (c, i) {
          var td = el('td', {}, tr, false);
          td.textContent = c;
          if (i === 4 && o.not_found > 0 && !r.run.expect_misses) td.className = 'miss';
        });
      });
    });
  }

  // What an operation cost each process and tier (bench reproduce runs carry it).
  function costs(container, runs) {
    var have = runs.filter(function (r) { return r.run.cpu_us_per_op; });
    if (!have.length) return;
    var t = el('table', { 'data-table': 'cost' }, container, false);
    var h = el('tr', {}, t, false);
    ['system', 'CPU us/op client', 'proxy', 'fast', 'archive', 'all', 'round trips/op fast', 'archive']
      .forEach(function (c) { el('th', {}, h, false).textContent = c; });
    var show = function (v, digits, missing) { return typeof v === 'number' ? v.toFixed(digits) : missing; };
    have.forEach(function (r) {
      var c = r.run.cpu_us_per_op, rt = r.run.round_trips_per_op, sum = 0, any = false;
      var cells = [r.label];
      ['client', 'proxy', 'fast', 'archive'].forEach(function (p) {
        cells.push(show(c[p], 0, '-'));
        if (typeof c[p] === 'number') { sum += c[p]; any = true; }
      });
      cells.push(any ? sum.toFixed(0) : '-');
      // null as a whole: no proxy on this side; a null tier: the proxy does not report it.
      ['fast', 'archive'].forEach(function (tier) { cells.push(rt ? show(rt[tier], 2, 'n/a') : '-'); });
      var tr = el('tr', {}, t, false);
      cells.forEach(function (v) { el('td', {}, tr, false).textContent = v; });
    });
  }

  function renderSection(sec) {
    var data = JSON.parse(sec.querySelector('script[type="application/json"]').textContent);
    var runs = data.map(function (d, i) {
      return { label: d.label, run: d.run, color: COLORS[d.colorIndex % COLORS.length], dashed: !!d.dashed };
    });
    var box = sec.querySelector('.plots');
    legend(sec.querySelector('.legend-box'), runs);
    throughputPlot(box, runs);
    var ops = [];
    runs.forEach(function (r) {
      Object.keys(r.run.operations || {}).forEach(function (op) { if (ops.indexOf(op) < 0) ops.push(op); });
    });
    ops.sort();
    ops.forEach(function (op) { latencyPlot(box, runs, op); });
    numbers(sec.querySelector('.numbers'), runs);
    costs(sec.querySelector('.numbers'), runs);
  }

  try {
    var sections = document.querySelectorAll('section[data-section]');
    for (var i = 0; i < sections.length; i++) renderSection(sections[i]);
    document.body.setAttribute('data-rendered', 'ok');
  } catch (e) {
    document.body.setAttribute('data-rendered', 'error: ' + e);
    document.getElementById('render-error').textContent = 'Could not draw the plots: ' + e;
  }
})();
)JS";

/// JSON text made safe to sit inside a <script> element ("</" cannot close it).
std::string scriptSafe(std::string_view json) {
    std::string out;
    out.reserve(json.size());
    for (size_t i = 0; i < json.size(); ++i) {
        out += json[i];
        if (json[i] == '<' && i + 1 < json.size() && json[i + 1] == '/') out += '\\';
    }
    return out;
}

/// Runs sharing a label up to " #" ("tiered #1", "tiered #2") are one system: one colour
/// (stable across sections), later repeats dashed.
std::string baseLabel(const std::string& label) {
    auto hash = label.rfind(" #");
    return hash == std::string::npos ? label : label.substr(0, hash);
}

}  // namespace

std::string htmlEscape(std::string_view s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&quot;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

std::string renderHtml(const ReportPage& page) {
    std::vector<std::string> systems;  // base labels in order of appearance, across sections
    std::string body;
    for (size_t si = 0; si < page.sections.size(); ++si) {
        const ReportSection& sec = page.sections[si];
        std::string data = "[";
        std::map<size_t, int> seen;
        for (size_t ri = 0; ri < sec.runs.size(); ++ri) {
            const ReportRun& r = sec.runs[ri];
            std::string base = baseLabel(r.label);
            size_t idx = 0;
            while (idx < systems.size() && systems[idx] != base) ++idx;
            if (idx == systems.size()) systems.push_back(base);
            bool dashed = seen[idx]++ > 0;
            if (ri) data += ",";
            data += fmt::format(R"({{"label":"{}","colorIndex":{},"dashed":{},"run":{}}})",
                                // labels are our own text; escape what JSON needs
                                [&] {
                                    std::string l;
                                    for (char c : r.label) {
                                        if (c == '"' || c == '\\') l += '\\';
                                        if (static_cast<unsigned char>(c) >= 0x20) l += c;
                                    }
                                    return l;
                                }(),
                                idx, dashed ? "true" : "false", r.json);
        }
        data += "]";
        body += fmt::format(
            "<section data-section=\"{}\">\n<h2>{}</h2>\n{}<div class=\"legend-box\"></div>\n"
            "<div class=\"plots\"></div>\n<div class=\"numbers\"></div>\n"
            "<script type=\"application/json\">{}</script>\n</section>\n",
            si, htmlEscape(sec.title),
            sec.notes.empty() ? ""
                              : fmt::format("<p class=\"notes\">{}</p>\n", htmlEscape(sec.notes)),
            scriptSafe(data));
    }
    return fmt::format(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<title>{}</title>\n<style>{}</style>\n</head>\n<body data-rendered=\"no\">\n"
        "<h1>{}</h1>\n<p id=\"render-error\"></p>\n{}{}<script>{}</script>\n</body>\n</html>\n",
        htmlEscape(page.title), kStyle, htmlEscape(page.title),
        page.summary.empty() ? "" : fmt::format("<pre>{}</pre>\n", htmlEscape(page.summary)), body,
        kScript);
}

StatusWith<ReportRun> readRunFile(const std::string& path) {
    std::ifstream f(path);
    if (!f) return Status(ErrorCode::BadValue, fmt::format("cannot read {}", path));
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    bson_error_t err;
    bson_t* doc = bson_new_from_json(reinterpret_cast<const uint8_t*>(text.data()),
                                     static_cast<ssize_t>(text.size()), &err);
    if (!doc)
        return Status(ErrorCode::BadValue, fmt::format("{} is not JSON: {}", path, err.message));
    bson_iter_t it;
    bool isRun = bson_iter_init_find(&it, doc, "operations") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
                 bson_iter_init_find(&it, doc, "per_second") && BSON_ITER_HOLDS_ARRAY(&it);
    ReportRun run;
    if (bson_iter_init_find(&it, doc, "label") && BSON_ITER_HOLDS_UTF8(&it))
        run.label = bson_iter_utf8(&it, nullptr);
    bson_destroy(doc);
    if (!isRun)
        return Status(ErrorCode::BadValue,
                      fmt::format("{} is not a `bench run --json` report (no operations and "
                                  "per_second)",
                                  path));
    if (run.label.empty()) run.label = std::filesystem::path(path).stem().string();
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    run.json = std::move(text);
    return run;
}

}  // namespace halo::bench
