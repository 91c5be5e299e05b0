// Self-contained HTML rendering of a Comparison: the shared page shell and SVG plot helpers of
// analysis/html_page.h (so the plots exist without JavaScript), and a little inline JavaScript for
// sortable tables and a self-check (body data-plots-drawn / data-ready; the shell's error hook
// sets data-js-errors on any error) that headless tests read.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "analysis/compare_render.h"
#include "analysis/compare_words.h"
#include "analysis/html_page.h"

namespace pacer::analysis {
namespace {

using detail::fmt_num;
using detail::fmt_p;
using detail::fmt_signed;
using detail::group_thousands;
using detail::load_imbalance_label;

using html::esc;

constexpr const char* kRunColor[2] = {"#1f77b4", "#d62728"};
constexpr const char* kPartColor[kPartCount] = {"#d62728", "#ff7f0e", "#9467bd", "#8c564b",
                                                "#e377c2", "#2ca02c", "#17becf", "#7f7f7f"};

// The small Markdown subset the prose uses: **bold**, *italic*, `code`.
std::string inline_md(std::string_view s) {
  std::string e = esc(s), o;
  bool bold = false, ital = false, code = false;
  for (size_t i = 0; i < e.size(); ++i) {
    if (e[i] == '`') {
      o += code ? "</code>" : "<code>";
      code = !code;
    } else if (!code && e.compare(i, 2, "**") == 0) {
      o += bold ? "</b>" : "<b>";
      bold = !bold;
      ++i;
    } else if (!code && e[i] == '*') {
      o += ital ? "</i>" : "<i>";
      ital = !ital;
    } else {
      o += e[i];
    }
  }
  if (code) o += "</code>";
  if (bold) o += "</b>";
  if (ital) o += "</i>";
  return o;
}

struct Table {
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;  // cells already HTML
  std::string cls;
  std::string html() const {
    std::string o = "<table class=\"" + cls + "\"><thead><tr>";
    for (const auto& h : head) o += "<th>" + esc(h) + "</th>";
    o += "</tr></thead><tbody>\n";
    for (const auto& r : rows) {
      o += "<tr>";
      // Every column after the first holds numbers.
      for (size_t i = 0; i < r.size(); ++i) o += (i ? "<td class=\"n\">" : "<td>") + r[i] + "</td>";
      o += "</tr>\n";
    }
    return o + "</tbody></table>\n";
  }
};

std::pair<double, double> finite_range(const std::vector<double>& a, const std::vector<double>& b) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto* v : {&a, &b})
    for (double x : *v)
      if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
  return {lo, hi};
}

// 0, 1, 2, ... n-1: the x of a series drawn against its index.
std::vector<double> indices(size_t n) {
  std::vector<double> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<double>(i);
  return x;
}

// Both runs' step times (ms) against their index on `svg`, from 0 ms; returns the x scale for
// more series against the same index.
html::Scale step_lines(html::Svg& svg, const Comparison& c,
                       const std::array<const std::vector<double>*, 2>& ms,
                       std::string_view x_label, std::string_view what,
                       std::vector<html::LegendItem>& keys) {
  const size_t n = std::max(ms[0]->size(), ms[1]->size());
  const double hi = finite_range(*ms[0], *ms[1]).second;
  const html::Scale sx = svg.x_scale(0, static_cast<double>(std::max<size_t>(n, 2) - 1));
  const html::Scale sy = svg.y_scale(0, std::isfinite(hi) && hi > 0 ? hi * 1.08 : 1);
  svg.y_axis(sy, "step time (ms)");
  svg.x_axis(sx, x_label);
  for (int i = 0; i < 2; ++i) {
    svg.line(indices(ms[i]->size()), *ms[i], sx, sy, kRunColor[i], "",
             fmt::format("{}: {}, mean {:.3f} ms", c.label[i], what, c.cycles[i].ms.mean));
    keys.push_back({kRunColor[i], fmt::format("{} {}", c.label[i], what)});
  }
  return sx;
}

std::string timeline_svg(const Comparison& c) {
  html::Svg svg({920, 340, 70, 80, 16, 52}, "plot", "timeline", "step latency timelines");
  std::vector<html::LegendItem> keys;
  const html::Scale sx =
      step_lines(svg, c, {&c.step_ms[0], &c.step_ms[1]}, "decode step index", "step time", keys);
  const auto [flo, fhi] = finite_range(c.step_freq_mhz[0], c.step_freq_mhz[1]);
  if (std::isfinite(flo)) {
    const html::Scale sf = svg.y_scale(0, fhi * 1.1);  // from 0: a flat clock should look flat
    svg.y_axis(sf, "CPU clock (MHz)", true);
    for (int i = 0; i < 2; ++i) {
      svg.line(indices(c.step_freq_mhz[i].size()), c.step_freq_mhz[i], sx, sf, kRunColor[i], "5,3",
               fmt::format("{}: mean CPU clock (MHz)", c.label[i]));
      keys.push_back({kRunColor[i], c.label[i] + " clock (right axis)", true});
    }
  }
  return svg.str() + html::legend(keys);
}

std::string ranked_svg(const Comparison& c) {
  html::Svg svg({920, 260, 70, 20, 15, 52}, "plot", "ranked", "ranked step times");
  std::vector<html::LegendItem> keys;
  step_lines(svg, c, {&c.cycles[0].sorted_desc_ms, &c.cycles[1].sorted_desc_ms},
             "rank (slowest first)", "steps ranked slowest first", keys);
  return svg.str() + html::legend(keys);
}

// Stacked horizontal bars: one row for the total and one per op (largest |Δ| first); positive
// parts stack right of zero, negative parts left; a black tick marks the measured Δ.
std::string attribution_svg(const Comparison& c) {
  const Attribution& a = c.attribution;
  struct Bar {
    std::string name;
    std::array<double, kPartCount> parts;
    double delta;
  };
  std::vector<Bar> bars{{"total (mean step)", a.parts, a.delta_ns()}};
  for (size_t i = 0; i < a.ops.size() && i < 8; ++i)
    bars.push_back({a.ops[i].op, a.ops[i].parts, a.ops[i].delta_ns()});
  double extent = 1e-9;
  for (const Bar& bar : bars) {
    double pos = 0, neg = 0;
    for (double v : bar.parts) (v > 0 ? pos : neg) += v;
    extent = std::max({extent, pos, -neg});
  }
  constexpr double kRow = 26;
  html::Svg svg({920, 12 + kRow * static_cast<double>(bars.size()) + 52, 150, 30, 12, 52}, "plot",
                "attribution", "attribution stacked bars");
  const html::Scale sx = svg.x_scale(-extent * 1.05e-3, extent * 1.05e-3);  // us per step
  svg.x_axis(sx, "Δ per step (us): faster ← 0 → slower");
  svg.rule(sx(0), svg.plot_top() - 4, sx(0), svg.plot_bottom(), "#444", "", "");
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& bar = bars[i];
    const double y = svg.plot_top() + kRow * static_cast<double>(i);
    svg.text(svg.plot_left() - 6, y + kRow / 2 + 4, bar.name, "end");
    double pos = 0, neg = 0;
    for (int p = 0; p < kPartCount; ++p) {
      const double v = bar.parts[p];
      if (v == 0 || !std::isfinite(v)) continue;
      const double from = v > 0 ? pos : neg + v;
      (v > 0 ? pos : neg) += v;
      const double x0 = sx(from * 1e-3), x1 = sx((from + std::fabs(v)) * 1e-3);
      svg.bar(x0, y + 4, std::max(0.5, x1 - x0), kRow - 8, kPartColor[p],
              fmt::format("{}: {} {:+.2f} us/step ({:+.2f} pts)", bar.name,
                          part_name(static_cast<Part>(p)), v * 1e-3, v / a.mean_ns[0] * 100));
    }
    svg.rule(sx(bar.delta * 1e-3), y + 1, sx(bar.delta * 1e-3), y + kRow - 1, "#000", "delta",
             fmt::format("measured Δ {:+.2f} us/step", bar.delta * 1e-3));
  }
  std::vector<html::LegendItem> keys;
  for (int p = 0; p < kPartCount; ++p)
    keys.push_back({kPartColor[p], std::string(part_name(static_cast<Part>(p)))});
  keys.push_back({"#000", "black tick: measured Δ"});
  return svg.str() + html::legend(keys);
}

std::string pct(double a, double b) {
  return a != 0 && std::isfinite(a) && std::isfinite(b)
             ? fmt::format("{:+.2f}%", (b - a) / std::fabs(a) * 100)
             : "-";
}

constexpr const char* kScriptTail = R"(<script>
(function(){
  function key(t){var s=t.textContent.replace(/[,%+⚑]/g,'').trim();var v=parseFloat(s);return isNaN(v)?s:v;}
  document.querySelectorAll('table.sortable').forEach(function(tb){
    tb.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){
      var body=tb.tBodies[0],rows=Array.prototype.slice.call(body.rows),asc=th.getAttribute('data-asc')!=='1';
      rows.sort(function(a,b){var x=key(a.cells[i]),y=key(b.cells[i]);
        if(typeof x===typeof y)return (x<y?-1:x>y?1:0)*(asc?1:-1);return typeof x==='number'?-1:1;});
      rows.forEach(function(r){body.appendChild(r);});th.setAttribute('data-asc',asc?'1':'0');});});});
  var drawn=0;document.querySelectorAll('svg.plot').forEach(function(s){
    if(s.querySelectorAll('.mark').length>0)drawn++;});
  document.body.setAttribute('data-plots-drawn',String(drawn));
  document.body.setAttribute('data-ready','1');
})();
</script>)";

}  // namespace

std::string render_html(const Comparison& c, const CompareRenderOptions& ro) {
  const auto& l = c.label;
  const Attribution& a = c.attribution;
  std::string o = html::page_begin("pacer compare: " + c.path[0] + " vs " + c.path[1], true);
  o += fmt::format("<h1>Performance comparison: {} <code>{}</code> vs {} <code>{}</code></h1>\n",
                   esc(l[0]), esc(c.path[0]), esc(l[1]), esc(c.path[1]));
  o += "<p class=\"verdict\"><b>Verdict:</b> " + esc(c.verdict) + "</p>\n";
  for (const Flag& f : c.flags) o += "<div class=\"flag\">⚑ " + esc(f.text) + "</div>\n";

  o += "<h2>1. Step latency and CPU clock</h2>\n" + timeline_svg(c);
  Table sum{{"Metric", l[0], l[1], "Δ", "Change (%)"}, {}, ""};
  sum.rows.push_back({"Total Decode Steps", fmt::format("{}", c.cycles[0].ms.n),
                      fmt::format("{}", c.cycles[1].ms.n),
                      fmt::format("{:+d}", static_cast<int>(c.cycles[1].ms.n) -
                                               static_cast<int>(c.cycles[0].ms.n)),
                      "-"});
  auto srow = [&](const char* name, double x, double y, int dec) {
    sum.rows.push_back({name, group_thousands(x, dec), group_thousands(y, dec),
                        fmt_signed(y - x, dec), pct(x, y)});
  };
  srow("Avg Step Time (us)", c.cycles[0].ms.mean * 1e3, c.cycles[1].ms.mean * 1e3, 2);
  srow("Median Step Time (us)", c.cycles[0].p50 * 1e3, c.cycles[1].p50 * 1e3, 2);
  srow("Decode throughput (tok/s)", 1e3 / c.cycles[0].ms.mean, 1e3 / c.cycles[1].ms.mean, 2);
  o += sum.html();
  o += fmt::format(
      "<p class=\"muted\">Step-time difference: Welch p = {}, Mann–Whitney U p = {}.</p>\n",
      fmt_p(c.step_welch.p), fmt_p(c.step_u.p));

  o += "<h2>2. Decode step duration distribution</h2>\n" + ranked_svg(c);
  Table q{{"Statistic", l[0] + " (us)", l[1] + " (us)", "Δ (us)", "Δ (%)"}, {}, ""};
  const CycleStats &ca = c.cycles[0], &cb = c.cycles[1];
  for (const auto& [name, x, y] :
       std::vector<std::tuple<const char*, double, double>>{{"min", ca.min, cb.min},
                                                            {"p50", ca.p50, cb.p50},
                                                            {"p90", ca.p90, cb.p90},
                                                            {"p99", ca.p99, cb.p99},
                                                            {"max", ca.max, cb.max},
                                                            {"mean", ca.ms.mean, cb.ms.mean},
                                                            {"sd", ca.ms.sd(), cb.ms.sd()}})
    q.rows.push_back({name, group_thousands(x * 1e3, 2), group_thousands(y * 1e3, 2),
                      fmt_signed((y - x) * 1e3, 2), pct(x, y)});
  o += q.html();

  o += "<h2>3. Where the time went: additive attribution</h2>\n" + attribution_svg(c);
  Table at{{"Part", "Δ (us/step)", "pts of " + l[0] + " step", "share of Δ"}, {}, ""};
  for (int p = 0; p < kPartCount; ++p) {
    if (a.parts[p] == 0 && p != static_cast<int>(Part::Residual)) continue;
    at.rows.push_back(
        {fmt::format("<span style=\"color:{}\">■</span> {}", kPartColor[p],
                     part_name(static_cast<Part>(p))),
         fmt_signed(a.parts[p] * 1e-3, 2), fmt_signed(a.parts[p] / a.mean_ns[0] * 100, 2),
         a.delta_ns() != 0 ? fmt::format("{:.0f}%", a.parts[p] / a.delta_ns() * 100) : "-"});
  }
  if (a.span_excess_ns[0] != 0 || a.span_excess_ns[1] != 0) {
    const double d = a.span_excess_ns[1] - a.span_excess_ns[0];
    at.rows.push_back({load_imbalance_label(a), fmt_signed(d * 1e-3, 2),
                       fmt_signed(d / a.mean_ns[0] * 100, 2), ""});
  }
  at.rows.push_back({"<b>sum of parts</b>", fmt_signed(a.sum_of_parts() * 1e-3, 2),
                     fmt_signed(a.sum_of_parts() / a.mean_ns[0] * 100, 2), ""});
  at.rows.push_back({"<b>measured Δ</b>", fmt_signed(a.delta_ns() * 1e-3, 2),
                     fmt_signed(a.delta_ns() / a.mean_ns[0] * 100, 2), "100%"});
  o += at.html();
  if (!a.not_measured.empty()) {
    o += "<p>Could not be measured:</p><ul>";
    for (const auto& s : a.not_measured) o += "<li>" + esc(s) + "</li>";
    o += "</ul>\n";
  }
  Table ops{{"Op", l[0] + " (us/step)", l[1] + " (us/step)", "Δ (us)"}, {}, "sortable"};
  for (int p = 0; p < kPartCount; ++p)
    ops.head.push_back(std::string(part_name(static_cast<Part>(p))) + " (us)");
  ops.head.push_back("clock (MHz)");
  const size_t n_ops = ro.op_rows == 0 ? a.ops.size() : std::min(a.ops.size(), ro.op_rows);
  for (size_t i = 0; i < n_ops; ++i) {
    const OpAttribution& r = a.ops[i];
    std::vector<std::string> row{esc(r.op), group_thousands(r.mean_ns[0] * 1e-3, 2),
                                 group_thousands(r.mean_ns[1] * 1e-3, 2),
                                 fmt_signed(r.delta_ns() * 1e-3, 2)};
    for (int p = 0; p < kPartCount; ++p)
      row.push_back(r.parts[p] != 0 ? fmt_signed(r.parts[p] * 1e-3, 2) : "");
    row.push_back(fmt_num(r.freq_mhz[0], 0) + " → " + fmt_num(r.freq_mhz[1], 0));
    ops.rows.push_back(std::move(row));
  }
  o += ops.html();

  o += "<h2>4. In-depth core metric comparison</h2>\n<h3>Overview</h3><p>" + inline_md(c.overview) +
       "</p>\n";
  o += "<h3>Key findings</h3><ul>\n";
  for (const auto& f : c.findings) o += "<li>" + inline_md(f) + "</li>\n";
  o += "</ul><p><b>Recommendation:</b> " + inline_md(c.recommendation) + "</p>\n";
  if (!c.frequency.empty()) {
    Table fq{{"Device", l[0] + " (MHz)", l[1] + " (MHz)", "Δ (%)", "p-value", "U-test p"}, {}, ""};
    for (const DeviceFrequency& f : c.frequency)
      fq.rows.push_back({device_label(f.device), group_thousands(f.mhz[0].mean, 1),
                         group_thousands(f.mhz[1].mean, 1), fmt_signed(f.pct_change, 2),
                         fmt_p(f.p_welch), fmt_p(f.p_u)});
    o += "<h3>CPU clock per device</h3>" + fq.html();
  }
  Table dt{{"Function Name", "Metric Name", "Device", "Suspicion Score", "Impact (pts)",
            "β_" + l[0] + "(%)", "β_" + l[1] + "(%)", "Δβ(%)", "Z-Score(β)", "p-value(β)",
            "U-test p(β)", "μ_" + l[0], "μ_" + l[1], "Δμ", "Z-Score(μ)", "Z-Score(log_μ)",
            "p-value(μ)", "U-test p(μ)", "Flag"},
           {},
           "sortable"};
  const size_t n_rows = ro.table_rows == 0 ? c.rows.size() : std::min(c.rows.size(), ro.table_rows);
  for (size_t i = 0; i < n_rows; ++i) {
    const MetricRow& r = c.rows[i];
    const bool m = r.metric.has_value();
    const double sc = m ? metric_info(*r.metric).display_scale : 1;
    dt.rows.push_back(
        {esc(r.op),
         m ? fmt::format("{} ({})", metric_info(*r.metric).name, metric_info(*r.metric).unit)
           : "(time only)",
         device_label(r.device), fmt::format("{:.4g}", r.score),
         fmt::format("{:.3g}", r.impact_pts), fmt_num(r.beta[0].mean, 2),
         fmt_num(r.beta[1].mean, 2), fmt_signed(r.d_beta, 2), fmt_num(r.z_beta, 2), fmt_p(r.p_beta),
         fmt_p(r.u_p_beta), m ? group_thousands(r.mu[0].mean * sc, 2) : "-",
         m ? group_thousands(r.mu[1].mean * sc, 2) : "-", m ? fmt_signed(r.d_mu * sc, 2) : "-",
         m ? fmt_num(r.z_mu, 2) : "-", m ? fmt_num(r.z_log_mu, 2) : "-", m ? fmt_p(r.p_mu) : "-",
         m ? fmt_p(r.u_p_mu) : "-", r.flagged ? "⚑" : ""});
  }
  o += "<h3>Detailed comparison table</h3><p class=\"muted\">Sorted by suspicion score; click a "
       "header to "
       "sort.";
  if (n_rows < c.rows.size()) o += fmt::format(" Top {} of {} rows.", n_rows, c.rows.size());
  o += "</p>\n" + dt.html();

  o += "<h2>5. Runs and comparability</h2><ul>\n";
  for (int i = 0; i < 2; ++i)
    o += fmt::format(
        "<li>{}: <code>{}</code> — {} {}, {} decode steps, CPU {}, counters {}, clock {}</li>\n",
        esc(l[i]), esc(c.path[i]), esc(c.header[i].model.arch), esc(c.header[i].model.type),
        c.cycles[i].ms.n, esc(c.header[i].host.cpu_model), esc(c.header[i].counters.mode),
        esc(c.header[i].frequency.source));
  if (c.forced)
    for (const auto& e : c.compat.errors) o += "<li><b>Forced despite:</b> " + esc(e) + "</li>\n";
  for (const auto& w : c.compat.warnings) o += "<li>Warning: " + esc(w) + "</li>\n";
  for (int i = 0; i < 2; ++i)
    for (const auto& n : c.notes[i]) o += "<li>Note (" + esc(l[i]) + "): " + esc(n) + "</li>\n";
  o += "</ul>\n<h2>6. Legend</h2><ul>\n";
  for (const auto& [term, text] : compare_legend(ro.compare))
    o += "<li><b>" + esc(term) + "</b>: " + inline_md(text) + "</li>\n";
  o += "</ul>\n";
  o += kScriptTail;
  o += "\n" + html::page_end();
  return o;
}

}  // namespace pacer::analysis
