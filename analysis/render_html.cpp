// HTML report: one self-contained file (inline CSS, no scripts, no external resources) that
// works offline. The tables and the plots are both rendered here; the plots are SVG drawn by the
// shared helpers of analysis/html_page.h, like the comparison and history pages
// (tests/analysis/html_render_test.cpp checks them in headless Chromium).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "analysis/html_page.h"
#include "analysis/report.h"
#include "analysis/report_sections.h"

namespace pacer::analysis {
namespace {

using html::esc;
using html::palette;

// The width every report plot is drawn at (it scales down with the page).
constexpr double kPlotWidth = 1180;

// A figure: its heading, then the plot container with `id` (the plot's SVG or a line saying why
// there is none, then the legend).
std::string figure(std::string_view title, std::string_view id, const std::string& body) {
  return fmt::format("<div class=\"figure\"><h3>{}</h3><div id=\"{}\">{}</div></div>\n", esc(title),
                     esc(id), body);
}

std::string no_plot(std::string_view why) {
  return fmt::format("<div class=\"none\">{}</div>", esc(why));
}

// 1. Per-step latency in run order, with the effective frequency on a second axis.
std::string timeline_plot(const Report& r) {
  const std::vector<StepRow>& steps = r.steps;
  if (steps.empty()) return no_plot("no step records in this log");
  html::Svg svg({kPlotWidth, 340, 70, 80, 16, 52}, "plot", "", "step latency and frequency");
  double max_ms = 0;
  for (const StepRow& s : steps) max_ms = std::max(max_ms, s.dur_ns / 1e6);
  max_ms = max_ms > 0 ? max_ms * 1.05 : 1;
  const size_t n = steps.size();
  const html::Scale sx = svg.x_scale(0, static_cast<double>(std::max<size_t>(n, 2) - 1));
  const html::Scale sy = svg.y_scale(0, max_ms);
  svg.y_axis(sy, "step latency (ms)");
  svg.x_axis(sx, "step (in run order)");
  std::vector<double> dec_x, dec_y, f_x, f_y;
  double fmin = INFINITY, fmax = -INFINITY;
  for (size_t i = 0; i < n; ++i) {
    const StepRow& s = steps[i];
    const double ms = s.dur_ns / 1e6;
    if (s.phase == Phase::Decode) {
      dec_x.push_back(static_cast<double>(i));
      dec_y.push_back(ms);
    } else {
      svg.dot(sx(static_cast<double>(i)), sy(ms), 4, palette(1),
              fmt::format("{} step {}: {:.3f} ms", phase_name(s.phase), s.step, ms));
    }
    if (s.freq_mhz) {
      f_x.push_back(static_cast<double>(i));
      f_y.push_back(*s.freq_mhz);
      fmin = std::min(fmin, *s.freq_mhz);
      fmax = std::max(fmax, *s.freq_mhz);
    }
  }
  svg.line(dec_x, dec_y, sx, sy, palette(0), "", "decode step latency (ms)");
  std::vector<html::LegendItem> keys{{palette(0), "decode step latency"},
                                     {palette(1), "prefill step"}};
  if (!f_y.empty()) {
    const double pad = std::max((fmax - fmin) * 0.1, 50.0);
    const html::Scale sf = svg.y_scale(std::max(0.0, fmin - pad), fmax + pad);
    svg.y_axis(sf, "effective frequency (MHz)", true);
    svg.line(f_x, f_y, sx, sf, palette(3), "4 2", "effective frequency (MHz)");
    keys.push_back({palette(3), "effective frequency (right axis)", true});
  } else {
    keys.push_back({"", "no frequency data"});
  }
  return svg.str() + html::legend(keys);
}

// 2. Per-op time (phase :: op, the 20 largest by total time), one bar each.
std::string op_plot(const Report& r) {
  const size_t n = std::min<size_t>(r.by_phase_op.size(), 20);
  if (n == 0) return no_plot("no op records in this log");
  constexpr double kRow = 20;
  html::Svg svg({kPlotWidth, 8 + kRow * static_cast<double>(n) + 46, 250, 150, 8, 46}, "plot", "",
                "time per op");
  const double max_ms = std::max(r.by_phase_op[0].dist.total_ns / 1e6, 1e-6);
  const html::Scale sx = svg.x_scale(0, max_ms);
  std::vector<Phase> phases;
  for (size_t i = 0; i < n; ++i) {
    const OpRow& row = r.by_phase_op[i];
    if (std::find(phases.begin(), phases.end(), row.phase) == phases.end())
      phases.push_back(row.phase);
    const size_t color =
        static_cast<size_t>(std::find(phases.begin(), phases.end(), row.phase) - phases.begin());
    const double y = svg.plot_top() + kRow * static_cast<double>(i);
    const double ms = row.dist.total_ns / 1e6;
    const std::string name = fmt::format("{} :: {}", phase_name(row.phase), row.name);
    const double w = std::max(sx(ms) - sx(0), 1.0);
    svg.text(svg.plot_left() - 8, y + 14, name, "end");
    svg.bar(svg.plot_left(), y + 3, w, kRow - 6, palette(color),
            fmt::format("{}: {:.3f} ms", name, ms));
    svg.text(svg.plot_left() + w + 6, y + 14,
             fmt::format("{:.2f} ms  {:.1f}%", ms, 100 * row.share));
  }
  svg.x_axis(sx, "total time (ms)");
  return svg.str();
}

// 3. Decode step-latency histogram: sqrt(n) bins, 5 to 40 of them.
std::string histogram_plot(const Report& r) {
  std::vector<double> v;
  for (const StepRow& s : r.steps)
    if (s.phase == Phase::Decode) v.push_back(s.dur_ns / 1e6);
  if (v.empty()) return no_plot("no decode steps in this log");
  double lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
  if (hi <= lo) hi = lo + std::max(lo * 0.01, 1e-3);
  const size_t bins = std::clamp<size_t>(
      static_cast<size_t>(std::ceil(std::sqrt(static_cast<double>(v.size())))), 5, 40);
  const double width = (hi - lo) / static_cast<double>(bins);
  std::vector<int> counts(bins, 0);
  for (double x : v)
    ++counts[std::min(bins - 1, static_cast<size_t>(std::max(0.0, std::floor((x - lo) / width))))];
  const int cmax = *std::max_element(counts.begin(), counts.end());
  html::Svg svg({kPlotWidth, 300, 70, 30, 12, 52}, "plot", "", "decode step latency histogram");
  const html::Scale sx = svg.x_scale(lo, hi), sy = svg.y_scale(0, cmax);
  svg.y_axis(sy, "decode steps");
  svg.x_axis(sx, "decode step latency (ms)");
  for (size_t i = 0; i < bins; ++i) {
    const double b0 = lo + width * static_cast<double>(i);
    const double x0 = sx(b0), x1 = sx(b0 + width);
    svg.bar(x0 + 1, sy(counts[i]), std::max(x1 - x0 - 2, 1.0), sy(0) - sy(counts[i]), palette(0),
            fmt::format("{:.3f} to {:.3f} ms: {} steps", b0, b0 + width, counts[i]));
  }
  return svg.str();
}

// 4. The phases as one stacked bar over the run's time.
std::string phase_plot(const Report& r) {
  std::vector<const PhaseRow*> rows;
  for (const PhaseRow& p : r.phases)
    if (p.total_ns > 0) rows.push_back(&p);
  if (rows.empty()) return no_plot("no timed phases");
  html::Svg svg({kPlotWidth, 90, 10, 10, 8, 52}, "plot", "", "phase breakdown");
  const html::Scale sx = svg.x_scale(0, 100);
  double at = 0;
  std::vector<html::LegendItem> keys;
  for (size_t i = 0; i < rows.size(); ++i) {
    const PhaseRow& p = *rows[i];
    const double x0 = sx(at), x1 = sx(at + 100 * p.share);
    const std::string label =
        fmt::format("{} {:.2f} ms ({:.1f}%)", p.name, p.total_ns / 1e6, 100 * p.share);
    svg.bar(x0, svg.plot_top(), std::max(x1 - x0, 1.0), 26, palette(i), label);
    if (x1 - x0 > 90)
      svg.text(x0 + 6, svg.plot_top() + 18, fmt::format("{} {:.1f}%", p.name, 100 * p.share),
               "start", "on-bar");
    keys.push_back({palette(i), label});
    at += 100 * p.share;
  }
  svg.x_axis(sx, "share of the run's time (%)");
  return svg.str() + html::legend(keys);
}

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
  out += html::page_begin("pacer report: " + r.source);
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
  out += figure("Step latency and effective frequency", "plot-timeline", timeline_plot(r));
  out += figure("Time per op (phase :: op, top 20 by total)", "plot-ops", op_plot(r));
  out += figure("Decode step latency histogram", "plot-hist", histogram_plot(r));
  out += figure("Phase breakdown", "plot-phases", phase_plot(r));

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

  out += html::page_end();
  return out;
}

}  // namespace pacer::analysis
