// `pacer history --format html`: one self-contained page, a trend figure per (host, model, type,
// test) with two panels over time (tok/s with the repetitions' range, and the mean clock), one
// line per (threads, pin) series, then the runs table. The SVG is drawn here, not by a script,
// so the page is the same in any browser and in a mail attachment.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/history_render.h"

namespace pacer::analysis {
namespace {

std::string esc(std::string_view s) {
  std::string o;
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

double epoch_of(const std::string& iso) {
  std::tm tm{};
  if (!strptime(iso.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return std::nan("");
  return static_cast<double>(timegm(&tm));
}

// A tick label as precise as the axis span needs: seconds within an hour, minutes within a few
// days, dates beyond.
std::string time_label(double epoch, double span_s) {
  const std::time_t t = static_cast<std::time_t>(std::llround(epoch));
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  const char* format = span_s < 3600 ? "%H:%M:%S" : span_s < 4 * 86400 ? "%m-%d %H:%M" : "%Y-%m-%d";
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

// Ticks at 1, 2 or 5 x 10^k covering [lo, hi], about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target = 5) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  const double step = raw / mag < 1.5   ? mag
                      : raw / mag < 3.5 ? 2 * mag
                      : raw / mag < 7.5 ? 5 * mag
                                        : 10 * mag;
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) t.push_back(v);
  return t;
}

const char* kColors[] = {"#2a5db0", "#d0542c", "#2f9e44", "#8e44ad", "#b8860b", "#17a2b8"};

struct Point {
  double t, y, lo, hi;  // lo/hi: the range of the repetitions (tok/s panel)
};
using Series = std::map<std::pair<int, std::string>, std::vector<Point>>;  // (threads, pin)

// One panel: axes with ticks, axis labels, a polyline and a circle per point per series.
std::string panel(const Series& series, double t0, double t1, const std::string& y_label,
                  const std::string& cls, bool ranges) {
  constexpr double W = 560, H = 240, L = 64, R = 12, T = 12, B = 46;
  double y0 = INFINITY, y1 = -INFINITY;
  for (const auto& [k, pts] : series)
    for (const Point& p : pts) {
      y0 = std::min(y0, ranges ? p.lo : p.y);
      y1 = std::max(y1, ranges ? p.hi : p.y);
    }
  std::string svg = fmt::format(
      R"(<svg class="{}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {}" role="img" aria-label="{} over time">)",
      cls, W, H, esc(y_label));
  if (!std::isfinite(y0)) {
    svg +=
        fmt::format(R"(<text x="{}" y="{}" class="none">no data</text></svg>)", W / 2 - 30, H / 2);
    return svg;
  }
  // At least 5% of the values on the axis, so a 0.2% wobble of the clock does not look like a
  // cliff; then some padding.
  const double min_span = 0.05 * std::max(std::abs(y0), std::abs(y1));
  if (y1 - y0 < min_span) {
    const double mid = (y0 + y1) / 2;
    y0 = mid - min_span / 2;
    y1 = mid + min_span / 2;
  }
  const double pad = y1 > y0 ? 0.1 * (y1 - y0) : std::max(1.0, 0.05 * std::abs(y1));
  y0 = std::max(0.0, y0 - pad);
  y1 += pad;
  if (t1 <= t0) t0 -= 30, t1 += 30;  // one point: a minute around it
  auto X = [&](double t) { return L + (W - L - R) * (t - t0) / (t1 - t0); };
  auto Y = [&](double v) { return T + (H - T - B) * (1 - (v - y0) / (y1 - y0)); };
  svg += fmt::format(
      R"(<g class="axis"><line x1="{0}" y1="{1}" x2="{2}" y2="{1}"/><line x1="{0}" y1="{3}" x2="{0}" y2="{1}"/>)",
      L, H - B, W - R, T);
  for (double v : nice_ticks(y0, y1)) {
    svg += fmt::format(
        R"(<line class="grid" x1="{}" y1="{:.1f}" x2="{}" y2="{:.1f}"/><text x="{}" y="{:.1f}" text-anchor="end">{:g}</text>)",
        L, Y(v), W - R, Y(v), L - 6, Y(v) + 4, v);
  }
  const int n_time_ticks = 4;
  std::string previous;
  for (int i = 0; i <= n_time_ticks; ++i) {
    const double t = t0 + (t1 - t0) * i / n_time_ticks;
    const std::string label = time_label(t, t1 - t0);
    if (label == previous) continue;  // a short span: no repeated labels
    previous = label;
    // The end labels align inward so they stay inside the panel.
    const char* anchor = i == 0 ? "start" : i == n_time_ticks ? "end" : "middle";
    svg += fmt::format(R"(<text x="{:.1f}" y="{}" text-anchor="{}">{}</text>)", X(t), H - B + 16,
                       anchor, label);
  }
  svg += "</g>";
  svg += fmt::format(
      R"(<text class="axis-label" x="{}" y="{}" text-anchor="middle">time (UTC)</text>)",
      L + (W - L - R) / 2, H - 6);
  svg += fmt::format(
      R"svg(<text class="axis-label" transform="translate(14 {}) rotate(-90)" text-anchor="middle">{}</text>)svg",
      T + (H - T - B) / 2, esc(y_label));
  size_t color = 0;
  for (const auto& [key, pts] : series) {
    const char* c = kColors[color++ % std::size(kColors)];
    std::string d;
    for (const Point& p : pts)
      d += fmt::format("{}{:.1f},{:.1f}", d.empty() ? "M" : " L", X(p.t), Y(p.y));
    svg += fmt::format(R"(<path class="mark" d="{}" stroke="{}" fill="none"/>)", d, c);
    for (const Point& p : pts) {
      if (ranges && p.hi > p.lo) {
        svg += fmt::format(
            R"(<line class="range" x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" stroke="{3}"/>)",
            X(p.t), Y(p.lo), Y(p.hi), c);
      }
      svg += fmt::format(
          R"(<circle class="mark" cx="{:.1f}" cy="{:.1f}" r="3" fill="{}"><title>{:.4g}</title></circle>)",
          X(p.t), Y(p.y), c, p.y);
    }
  }
  return svg + "</svg>";
}

constexpr const char* kCss = R"CSS(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1280px;color:#1d2433;background:#fafbfc;padding:0 16px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:24px 0 8px;border-bottom:1px solid #d8dee8;padding-bottom:4px}
.sub{color:#5b6578;margin-bottom:16px}
figure.trend{background:#fff;border:1px solid #d8dee8;border-radius:6px;padding:8px;margin:10px 0}
figure.trend .panels{display:flex;flex-wrap:wrap;gap:8px}
figure.trend svg{width:560px;max-width:100%;height:auto}
svg text{font-size:11px;fill:#3b4457} svg .axis-label{font-size:12px;fill:#1d2433}
svg .axis line{stroke:#5b6578} svg line.grid{stroke:#eef1f5} svg path.mark{stroke-width:1.8}
svg line.range{stroke-width:1;opacity:.6}
.legend span{display:inline-block;margin-right:14px} .legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
table{border-collapse:collapse;background:#fff;font-size:12.5px;margin:6px 0}
th,td{border:1px solid #e1e6ee;padding:3px 7px;white-space:nowrap}
th{background:#f1f4f8;text-align:left} td.n{text-align:right;font-variant-numeric:tabular-nums}
)CSS";

}  // namespace

std::string render_history_html(const std::vector<StoredRun>& runs) {
  // (host, model, type, test) -> the runs in it, oldest first.
  using Key = std::tuple<std::string, std::string, std::string, std::string>;
  std::map<Key, std::vector<const StoredRun*>> groups;
  for (const StoredRun& s : runs) {
    const BenchRecord& r = s.record;
    groups[{r.host, r.model_name.empty() ? r.model_path : r.model_name, r.type, r.test}].push_back(
        &s);
  }
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>pacer "
      "history</title>"
      "<style>{}</style></head><body>\n<h1>pacer history</h1>\n<div class=\"sub\">{} run{} in {} "
      "series (host, model, type, test)</div>\n",
      kCss, runs.size(), runs.size() == 1 ? "" : "s", groups.size());
  if (runs.empty()) html += "<p class=\"none\">no runs match</p>\n";
  int figure = 0;
  for (const auto& [key, members] : groups) {
    Series rate, clock;
    double t0 = INFINITY, t1 = -INFINITY;
    for (const StoredRun* s : members) {
      const BenchRecord& r = s->record;
      const double t = epoch_of(r.time_utc);
      if (!std::isfinite(t)) continue;
      t0 = std::min(t0, t);
      t1 = std::max(t1, t);
      double lo = r.tok_s_mean, hi = r.tok_s_mean;
      for (double v : r.tok_s) lo = std::min(lo, v), hi = std::max(hi, v);
      if (std::isfinite(r.tok_s_mean))
        rate[{r.threads, r.pin}].push_back({t, r.tok_s_mean, lo, hi});
      if (std::isfinite(r.freq_mean_mhz) && r.freq_mean_mhz > 0)
        clock[{r.threads, r.pin}].push_back({t, r.freq_mean_mhz, r.freq_mean_mhz, r.freq_mean_mhz});
    }
    const auto& [host, model, type, test] = key;
    html += fmt::format(
        "<figure class=\"trend\" id=\"trend-{}\"><h2>{} &middot; {} {} &middot; {}</h2>\n<div "
        "class=\"legend\">",
        figure++, esc(host), esc(model), esc(type), esc(test));
    size_t color = 0;
    for (const auto& [series, pts] : rate) {
      html += fmt::format(
          "<span><i style=\"background:{}\"></i>{} thread{}, pin {} ({} run{})</span>",
          kColors[color++ % std::size(kColors)], series.first, series.first == 1 ? "" : "s",
          esc(series.second), pts.size(), pts.size() == 1 ? "" : "s");
    }
    html += "</div><div class=\"panels\">";
    html += panel(rate, t0, t1, "tok/s", "plot-rate", true);
    html += panel(clock, t0, t1, "mean clock (MHz)", "plot-clock", false);
    html += "</div></figure>\n";
  }
  if (!runs.empty()) {
    html +=
        "<h2>Runs</h2>\n<table><tr><th>time (UTC)</th><th>host</th><th>model</th><th>type</th>"
        "<th>test</th><th>t</th><th>pin</th><th>tok/s</th><th>cv %</th><th>MHz</th>"
        "<th>commit</th><th>run</th><th>flags</th></tr>\n";
    for (const StoredRun& s : runs) {
      const BenchRecord& r = s.record;
      html += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td>{}"
          "</td><td class=\"n\">{:.2f}</td><td class=\"n\">{:.1f}</td><td class=\"n\">{:.0f}</td>"
          "<td>{}</td><td>{}</td><td>{}</td></tr>\n",
          esc(r.time_utc), esc(r.host), esc(r.model_name), esc(r.type), esc(r.test), r.threads,
          esc(r.pin), r.tok_s_mean, 100 * r.cv, r.freq_mean_mhz, esc(r.git_sha.substr(0, 12)),
          esc(r.run_uuid), esc(fmt::format("{}", fmt::join(r.flags, "; "))));
    }
    html += "</table>\n";
  }
  return html + "</body></html>\n";
}

}  // namespace pacer::analysis
