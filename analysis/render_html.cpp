// HTML report: one self-contained file (inline CSS and JS, no external resources) that works
// offline. The tables are rendered here; the plots are drawn as SVG by the inline script from
// the report data embedded as JSON. When every plot has drawn, the script sets document.title to
// "plots-ok:<n>" and fills #plots-status; a script error sets "plots-error:<message>" instead
// (tests/analysis/html_render_test.cpp checks both in headless Chromium).
#include <fmt/format.h>

#include "analysis/report.h"
#include "analysis/report_json.h"
#include "analysis/report_sections.h"

namespace pacer::analysis {
namespace {

std::string esc(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

constexpr const char* kCss = R"CSS(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1280px;color:#1d2433;background:#fafbfc;padding:0 16px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d8dee8;padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}
.sub{color:#5b6578;margin-bottom:16px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}
.card{background:#fff;border:1px solid #d8dee8;border-radius:6px;padding:8px 14px;min-width:130px}
.card .k{color:#5b6578;font-size:12px} .card .v{font-size:18px;font-weight:600}
.verdict{background:#fff6e5;border:1px solid #f0c36d;border-radius:6px;padding:10px 14px;margin:12px 0}
.verdict.warn{background:#fdecea;border-color:#e8a39b}
.plot{background:#fff;border:1px solid #d8dee8;border-radius:6px;padding:8px;margin:10px 0}
.plot h3{margin:4px 6px 6px}
.plot svg{display:block;width:100%;height:auto}
.plot .none{color:#5b6578;padding:8px}
table{border-collapse:collapse;background:#fff;font-size:12.5px;margin:6px 0}
th,td{border:1px solid #e1e6ee;padding:3px 7px;white-space:nowrap}
th{background:#f1f4f8;text-align:left} td.n{text-align:right;font-variant-numeric:tabular-nums}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:6px 0}
dl.facts dt{color:#5b6578} dl.facts dd{margin:0}
ul.notes{margin:6px 0;padding-left:20px} .omitted{color:#5b6578;font-style:italic}
details summary{cursor:pointer;color:#2a5db0;margin:6px 0}
.legend span{display:inline-block;margin-right:14px} .legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
)CSS";

constexpr const char* kScript = R"JS(
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var drawn = 0;
  var COLORS = ["#3b6fd4", "#e07b39", "#3aa35b", "#c2413b", "#8a5cc2", "#2c9fa8", "#b59a2a", "#7a7f8a"];

  function el(tag, attrs, parent, text) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function niceTicks(lo, hi, n) {
    if (!(hi > lo)) { hi = lo + 1; }
    var span = hi - lo, step = Math.pow(10, Math.floor(Math.log10(span / n)));
    var err = span / n / step;
    if (err >= 7.5) step *= 10; else if (err >= 3.5) step *= 5; else if (err >= 1.5) step *= 2;
    var ticks = [], t = Math.ceil(lo / step) * step;
    for (; t <= hi + step * 1e-9; t += step) ticks.push(+t.toPrecision(12));
    return ticks;
  }
  // Tick labels with as many decimals as the tick step needs.
  function fmtTick(v, step) {
    var d = Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9)));
    return v.toFixed(d);
  }
  function svgBox(id, w, h) {
    var holder = document.getElementById(id);
    var svg = el("svg", {viewBox: "0 0 " + w + " " + h, width: w, height: h, role: "img"});
    holder.appendChild(svg);
    return svg;
  }
  function none(id, why) {
    var d = document.createElement("div");
    d.className = "none";
    d.textContent = why;
    document.getElementById(id).appendChild(d);
  }
  function yAxis(svg, x, top, bottom, lo, hi, label, right) {
    var ticks = niceTicks(lo, hi, 5), g = el("g", {"class": "axis"}, svg);
    var step = ticks.length > 1 ? ticks[1] - ticks[0] : Math.abs(hi - lo) || 1;
    el("line", {x1: x, x2: x, y1: top, y2: bottom, stroke: "#8a93a5"}, g);
    ticks.forEach(function (t) {
      var y = bottom - (t - lo) / (hi - lo) * (bottom - top);
      el("text", {x: right ? x + 6 : x - 6, y: y + 4, "font-size": 11, fill: "#5b6578",
                  "text-anchor": right ? "start" : "end"}, g, fmtTick(t, step));
      if (!right) el("line", {x1: x, x2: x + 9999, y1: y, y2: y, stroke: "#eef1f5"}, g);
    });
    var lx = right ? x + 52 : x - 48, ly = (top + bottom) / 2;
    el("text", {x: lx, y: ly, "font-size": 12, fill: "#3a4252", "text-anchor": "middle",
                transform: "rotate(-90 " + lx + " " + ly + ")"}, g, label);
  }
  function xAxis(svg, left, right, y, lo, hi, label) {
    var g = el("g", {"class": "axis"}, svg);
    el("line", {x1: left, x2: right, y1: y, y2: y, stroke: "#8a93a5"}, g);
    var ticks = niceTicks(lo, hi, 8);
    var step = ticks.length > 1 ? ticks[1] - ticks[0] : Math.abs(hi - lo) || 1;
    ticks.forEach(function (t) {
      var x = left + (t - lo) / (hi - lo) * (right - left);
      el("line", {x1: x, x2: x, y1: y, y2: y + 4, stroke: "#8a93a5"}, g);
      el("text", {x: x, y: y + 16, "font-size": 11, fill: "#5b6578", "text-anchor": "middle"}, g, fmtTick(t, step));
    });
    el("text", {x: (left + right) / 2, y: y + 34, "font-size": 12, fill: "#3a4252",
                "text-anchor": "middle"}, g, label);
  }
  function pathOf(xs, ys) {
    var d = "";
    for (var i = 0; i < xs.length; i++) d += (i ? "L" : "M") + xs[i].toFixed(1) + " " + ys[i].toFixed(1);
    return d;
  }

  // 1. Per-step latency with the effective frequency on a second axis.
  function timeline() {
    var steps = data.steps;
    if (!steps.length) { none("plot-timeline", "no step records in this log"); return; }
    var W = 1180, H = 340, L = 70, R = W - 80, T = 16, B = H - 52;
    var svg = svgBox("plot-timeline", W, H);
    var ms = steps.map(function (s) { return s.dur_ns / 1e6; });
    var maxMs = Math.max.apply(null, ms) * 1.05 || 1;
    var n = steps.length, xOf = function (i) { return L + (n > 1 ? i / (n - 1) : 0.5) * (R - L); };
    yAxis(svg, L, T, B, 0, maxMs, "step latency (ms)", false);
    xAxis(svg, L, R, B, 0, Math.max(n - 1, 1), "step (in run order)");
    var dec = [], decX = [];
    steps.forEach(function (s, i) {
      var y = B - ms[i] / maxMs * (B - T);
      if (s.phase === "decode") { dec.push(y); decX.push(xOf(i)); }
      else el("circle", {"class": "mark", cx: xOf(i), cy: y, r: 4, fill: COLORS[1]}, svg);
    });
    if (dec.length) el("path", {"class": "mark", d: pathOf(decX, dec), fill: "none", stroke: COLORS[0], "stroke-width": 1.5}, svg);
    var fx = [], fy = [], fs = steps.filter(function (s) { return s.freq_mhz !== null; });
    if (fs.length) {
      var fmin = Math.min.apply(null, fs.map(function (s) { return s.freq_mhz; }));
      var fmax = Math.max.apply(null, fs.map(function (s) { return s.freq_mhz; }));
      var pad = Math.max((fmax - fmin) * 0.1, 50), lo = Math.max(0, fmin - pad), hi = fmax + pad;
      yAxis(svg, R, T, B, lo, hi, "effective frequency (MHz)", true);
      steps.forEach(function (s, i) {
        if (s.freq_mhz === null) return;
        fx.push(xOf(i)); fy.push(B - (s.freq_mhz - lo) / (hi - lo) * (B - T));
      });
      el("path", {"class": "mark", d: pathOf(fx, fy), fill: "none", stroke: COLORS[3], "stroke-width": 1.2, "stroke-dasharray": "4 2"}, svg);
    }
    var lg = document.createElement("div");
    lg.className = "legend";
    lg.innerHTML = '<span><i style="background:' + COLORS[0] + '"></i>decode step latency</span>' +
        '<span><i style="background:' + COLORS[1] + '"></i>prefill step</span>' +
        (fs.length ? '<span><i style="background:' + COLORS[3] + '"></i>effective frequency (right axis)</span>'
                   : '<span>no frequency data</span>');
    document.getElementById("plot-timeline").appendChild(lg);
    drawn++;
  }

  // 2. Per-op time breakdown (phase :: op, by total time).
  function opBars() {
    var rows = data.by_phase_op.slice(0, 20);
    if (!rows.length) { none("plot-ops", "no op records in this log"); return; }
    var bh = 20, W = 1180, L = 250, R = W - 150, T = 8, H = T + rows.length * bh + 30;
    var svg = svgBox("plot-ops", W, H);
    var max = rows[0].dist.total_ns || 1;
    var phases = [];
    rows.forEach(function (r, i) {
      if (phases.indexOf(r.phase) < 0) phases.push(r.phase);
      var y = T + i * bh, w = r.dist.total_ns / max * (R - L);
      el("text", {x: L - 8, y: y + 14, "font-size": 12, "text-anchor": "end", fill: "#1d2433"}, svg, r.phase + " :: " + r.name);
      el("rect", {"class": "mark", x: L, y: y + 3, width: Math.max(w, 1), height: bh - 6, fill: COLORS[phases.indexOf(r.phase) % COLORS.length]}, svg);
      el("text", {x: L + Math.max(w, 1) + 6, y: y + 14, "font-size": 11, fill: "#3a4252"}, svg,
         (r.dist.total_ns / 1e6).toFixed(2) + " ms  " + (100 * r.share).toFixed(1) + "%");
    });
    xAxis(svg, L, R, T + rows.length * bh + 2, 0, max / 1e6, "");
    drawn++;
  }

  // 3. Decode step-latency histogram.
  function histogram() {
    var v = data.steps.filter(function (s) { return s.phase === "decode"; }).map(function (s) { return s.dur_ns / 1e6; });
    if (!v.length) { none("plot-hist", "no decode steps in this log"); return; }
    var lo = Math.min.apply(null, v), hi = Math.max.apply(null, v);
    if (hi <= lo) { hi = lo + Math.max(lo * 0.01, 1e-3); }
    var nb = Math.min(40, Math.max(5, Math.ceil(Math.sqrt(v.length)))), w = (hi - lo) / nb;
    var counts = new Array(nb).fill(0);
    v.forEach(function (x) { counts[Math.min(nb - 1, Math.floor((x - lo) / w))]++; });
    var W = 1180, H = 300, L = 70, R = W - 30, T = 12, B = H - 52;
    var svg = svgBox("plot-hist", W, H), cmax = Math.max.apply(null, counts);
    yAxis(svg, L, T, B, 0, cmax, "decode steps", false);
    xAxis(svg, L, R, B, lo, hi, "decode step latency (ms)");
    counts.forEach(function (c, i) {
      var x = L + i / nb * (R - L), bw = (R - L) / nb, h = c / cmax * (B - T);
      el("rect", {"class": "mark", x: x + 1, y: B - h, width: Math.max(bw - 2, 1), height: h, fill: COLORS[0]}, svg);
    });
    drawn++;
  }

  // 4. Phase breakdown as one stacked bar.
  function phases() {
    var rows = data.phases.filter(function (p) { return p.total_ns > 0; });
    if (!rows.length) { none("plot-phases", "no timed phases"); return; }
    var W = 1180, H = 70, L = 10, R = W - 10, x = L;
    var svg = svgBox("plot-phases", W, H);
    rows.forEach(function (p, i) {
      var w = p.share * (R - L);
      el("rect", {"class": "mark", x: x, y: 8, width: Math.max(w, 1), height: 26, fill: COLORS[i % COLORS.length]}, svg);
      if (w > 90) el("text", {x: x + 6, y: 26, "font-size": 12, fill: "#fff"}, svg, p.name + " " + (100 * p.share).toFixed(1) + "%");
      x += w;
    });
    var lx = L;
    rows.forEach(function (p, i) {
      el("rect", {x: lx, y: 46, width: 10, height: 10, fill: COLORS[i % COLORS.length]}, svg);
      var label = p.name + " " + (p.total_ns / 1e6).toFixed(2) + " ms (" + (100 * p.share).toFixed(1) + "%)";
      el("text", {x: lx + 14, y: 55, "font-size": 11, fill: "#3a4252"}, svg, label);
      lx += 20 + label.length * 6.4;
    });
    drawn++;
  }

  timeline();
  opBars();
  histogram();
  phases();
  var status = document.getElementById("plots-status");
  status.setAttribute("data-plots", String(drawn));
  status.textContent = drawn + " plots drawn";
  if (document.title.indexOf("plots-error") !== 0) document.title = "plots-ok:" + drawn;
})();
)JS";

void append_table(std::string& out, const detail::Table& t) {
  out += "<table><thead><tr>";
  for (const std::string& h : t.head) out += "<th>" + esc(h) + "</th>";
  out += "</tr></thead><tbody>\n";
  for (const auto& row : t.rows) {
    out += "<tr>";
    for (size_t c = 0; c < t.head.size(); ++c)
      out += fmt::format("<td{}>{}</td>", t.numeric[c] ? " class=\"n\"" : "",
                         esc(c < row.size() ? row[c] : std::string()));
    out += "</tr>\n";
  }
  out += "</tbody></table>\n";
}

}  // namespace

std::string render_html(const Report& r) {
  const Header& h = r.header;
  std::string out;
  out.reserve(1 << 20);
  out += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  out += fmt::format("<title>pacer report: {}</title>\n", esc(r.source));
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  // The error hook comes first so it sees errors of everything after it.
  out +=
      "<script>window.onerror=function(m){document.title='plots-error:'+m;"
      "var d=document.createElement('div');d.id='js-error';d.textContent=String(m);"
      "(document.body||document.documentElement).appendChild(d);};</script>\n";
  out += fmt::format("<style>{}</style>\n</head><body>\n", kCss);
  out += fmt::format(
      "<h1>pacer report</h1>\n<div class=\"sub\">{} &middot; {} {} &middot; {} "
      "threads, pin {} &middot; {}</div>\n",
      esc(r.source), esc(h.model.arch), esc(h.model.type),
      h.run.threads ? std::to_string(*h.run.threads) : "?", esc(h.run.pin), esc(h.host.cpu_model));

  // Headline numbers.
  const Throughput& t = r.throughput;
  auto card = [&](const std::string& k, const std::string& v) {
    out += fmt::format(
        "<div class=\"card\"><div class=\"k\">{}</div><div class=\"v\">{}</div>"
        "</div>",
        esc(k), esc(v));
  };
  out += "<div class=\"cards\">";
  card("decode", detail::fmt_opt(t.decode_tok_s, "{:.2f} tok/s"));
  card("prefill", detail::fmt_opt(t.prefill_tok_s, "{:.1f} tok/s"));
  card("TTFT", detail::fmt_opt(t.ttft_ms, "{:.1f} ms"));
  card("decode step p50 / p99", fmt::format("{} / {} ms", detail::fmt_ms(r.decode_steps.p50_ns),
                                            detail::fmt_ms(r.decode_steps.p99_ns)));
  card("decode mean MHz", detail::fmt_opt(r.decode_cpu.freq_mean_mhz, "{:.0f}"));
  card("decode roofline", t.decode_roofline_tok_s
                              ? fmt::format("{:.1f} tok/s", *t.decode_roofline_tok_s)
                              : std::string("not measured"));
  card("peak RSS", t.peak_rss_kb ? fmt::format("{:.1f} MB", *t.peak_rss_kb / 1024.0) : "-");
  out += "</div>\n";
  if (!r.read.complete())
    out +=
        "<div class=\"verdict warn\"><b>Incomplete run:</b> the log has no footer (the run "
        "was killed or crashed); the report covers what was recorded.</div>\n";
  const Bottleneck& b = r.bottleneck;
  out += fmt::format("<div class=\"verdict\"><b>Verdict: {}</b>", esc(bottleneck_name(b.verdict)));
  if (!b.dominant_phase.empty())
    out += fmt::format(" &mdash; {} is {:.1f}% of the run", esc(b.dominant_phase),
                       100 * b.dominant_phase_share);
  if (!b.dominant_op.empty())
    out += fmt::format("; its largest op is {} ({:.1f}%)", esc(b.dominant_op),
                       100 * b.dominant_op_share);
  if (!b.findings.empty()) out += "<br>" + esc(b.findings.front().evidence);
  out += "</div>\n";

  out += "<h2 id=\"plots\">Plots</h2>\n";
  out +=
      "<div class=\"plot\"><h3>Step latency and effective frequency</h3>"
      "<div id=\"plot-timeline\"></div></div>\n";
  out +=
      "<div class=\"plot\"><h3>Time per op (phase :: op, top 20 by total)</h3>"
      "<div id=\"plot-ops\"></div></div>\n";
  out +=
      "<div class=\"plot\"><h3>Decode step latency histogram</h3>"
      "<div id=\"plot-hist\"></div></div>\n";
  out += "<div class=\"plot\"><h3>Phase breakdown</h3><div id=\"plot-phases\"></div></div>\n";
  out += "<div id=\"plots-status\" data-plots=\"0\"></div>\n";

  for (const detail::Section& s : detail::build_sections(r, 0)) {
    out += fmt::format("<h2 id=\"{}\">{}</h2>\n", esc(s.id), esc(s.title));
    if (!s.facts.empty()) {
      out += "<dl class=\"facts\">";
      for (const auto& [k, v] : s.facts)
        out += fmt::format("<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
      out += "</dl>\n";
    }
    for (const auto& [caption, table] : s.tables) {
      if (!caption.empty()) out += fmt::format("<h3>{}</h3>\n", esc(caption));
      if (table.rows.empty()) {
        out += "<div class=\"omitted\">(none)</div>\n";
        continue;
      }
      const bool fold = table.rows.size() > 30;
      if (fold)
        out +=
            fmt::format("<details><summary>{} rows (click to show)</summary>\n", table.rows.size());
      append_table(out, table);
      if (fold) out += "</details>\n";
    }
    if (!s.notes.empty()) {
      out += "<ul class=\"notes\">";
      for (const std::string& n : s.notes) out += "<li>" + esc(n) + "</li>";
      out += "</ul>\n";
    }
  }

  // Plot data: only what the script reads. "</" is escaped so no string can close the tag.
  nlohmann::json data = detail::report_json(r);
  nlohmann::json slim = {
      {"steps", data["steps"]}, {"by_phase_op", data["by_phase_op"]}, {"phases", data["phases"]}};
  std::string json = slim.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string safe;
  safe.reserve(json.size());
  for (size_t i = 0; i < json.size(); ++i) {
    if (json[i] == '<' && i + 1 < json.size() && json[i + 1] == '/') {
      safe += "<\\/";
      ++i;
    } else {
      safe += json[i];
    }
  }
  out += "<script type=\"application/json\" id=\"report-data\">" + safe + "</script>\n";
  out += fmt::format("<script>{}</script>\n</body></html>\n", kScript);
  return out;
}

}  // namespace pacer::analysis
