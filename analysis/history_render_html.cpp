// `pacer history --format html`: one self-contained page, a trend figure per (host, model, type,
// test) with two panels over time (tok/s with the repetitions' range, and the mean clock), one
// line per (threads, pin) series, then the runs table. The page shell and the SVG plot helpers are
// the shared ones of analysis/html_page.h: the plots are drawn here, not by a script, so the page
// is the same in any browser and in a mail attachment.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/history_render.h"
#include "analysis/html_page.h"

namespace pacer::analysis {
namespace {

using html::esc;

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

struct Point {
  double t, y, lo, hi;  // lo/hi: the range of the repetitions (tok/s panel)
};
using Series = std::map<std::pair<int, std::string>, std::vector<Point>>;  // (threads, pin)

// One panel: axes with ticks, axis labels, a line and a dot per point per series (and the
// repetitions' range as a rule when `ranges`).
std::string panel(const Series& series, double t0, double t1, const std::string& y_label,
                  const std::string& cls, bool ranges) {
  html::Svg svg({560, 240, 64, 12, 12, 46}, cls, "", y_label + " over time");
  double y0 = INFINITY, y1 = -INFINITY;
  for (const auto& [k, pts] : series)
    for (const Point& p : pts) {
      y0 = std::min(y0, ranges ? p.lo : p.y);
      y1 = std::max(y1, ranges ? p.hi : p.y);
    }
  if (!std::isfinite(y0)) {
    svg.text(svg.frame().width / 2, svg.frame().height / 2, "no data", "middle", "none");
    return svg.str();
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
  const html::Scale X = svg.x_scale(t0, t1), Y = svg.y_scale(y0, y1);
  svg.y_axis(Y, y_label);
  const int n_time_ticks = 4;
  std::vector<html::Svg::Tick> ticks;
  for (int i = 0; i <= n_time_ticks; ++i) {
    const double t = t0 + (t1 - t0) * i / n_time_ticks;
    std::string label = time_label(t, t1 - t0);
    if (!ticks.empty() && label == ticks.back().label) continue;  // a short span: no repeats
    ticks.push_back({t, std::move(label)});
  }
  svg.x_axis(X, "time (UTC)", ticks);
  size_t color = 0;
  for (const auto& [key, pts] : series) {
    const char* c = html::palette(color++);
    std::vector<double> t, y;
    for (const Point& p : pts) t.push_back(p.t), y.push_back(p.y);
    svg.line(t, y, X, Y, c, "", fmt::format("{} threads, pin {}", key.first, key.second));
    for (const Point& p : pts) {
      if (ranges && p.hi > p.lo)
        svg.rule(X(p.t), Y(p.lo), X(p.t), Y(p.hi), c, "range",
                 fmt::format("repetitions: {:.4g} to {:.4g}", p.lo, p.hi));
      svg.dot(X(p.t), Y(p.y), 3, c, fmt::format("{:.4g}", p.y));
    }
  }
  return svg.str();
}

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
  std::string page = html::page_begin("pacer history");
  page += fmt::format(
      "<h1>pacer history</h1>\n<div class=\"sub\">{} run{} in {} series (host, model, type, "
      "test)</div>\n",
      runs.size(), runs.size() == 1 ? "" : "s", groups.size());
  if (runs.empty()) page += "<p class=\"none\">no runs match</p>\n";
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
    page += fmt::format(
        "<figure class=\"trend\" id=\"trend-{}\"><h2>{} &middot; {} {} &middot; {}</h2>\n",
        figure++, esc(host), esc(model), esc(type), esc(test));
    // The panels colour the series in the same (map) order.
    std::vector<html::LegendItem> keys;
    for (const auto& [series, pts] : rate)
      keys.push_back(
          {html::palette(keys.size()),
           fmt::format("{} thread{}, pin {} ({} run{})", series.first, series.first == 1 ? "" : "s",
                       series.second, pts.size(), pts.size() == 1 ? "" : "s")});
    page += html::legend(keys) + "<div class=\"panels\">";
    page += panel(rate, t0, t1, "tok/s", "plot-rate", true);
    page += panel(clock, t0, t1, "mean clock (MHz)", "plot-clock", false);
    page += "</div></figure>\n";
  }
  if (!runs.empty()) {
    page +=
        "<h2>Runs</h2>\n<table><tr><th>time (UTC)</th><th>host</th><th>model</th><th>type</th>"
        "<th>test</th><th>t</th><th>pin</th><th>tok/s</th><th>cv %</th><th>MHz</th>"
        "<th>commit</th><th>run</th><th>flags</th></tr>\n";
    for (const StoredRun& s : runs) {
      const BenchRecord& r = s.record;
      page += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td>{}"
          "</td><td class=\"n\">{:.2f}</td><td class=\"n\">{:.1f}</td><td class=\"n\">{:.0f}</td>"
          "<td>{}</td><td>{}</td><td>{}</td></tr>\n",
          esc(r.time_utc), esc(r.host), esc(r.model_name), esc(r.type), esc(r.test), r.threads,
          esc(r.pin), r.tok_s_mean, 100 * r.cv, r.freq_mean_mhz, esc(r.git_sha.substr(0, 12)),
          esc(r.run_uuid), esc(fmt::format("{}", fmt::join(r.flags, "; "))));
    }
    page += "</table>\n";
  }
  return page + html::page_end();
}

}  // namespace pacer::analysis
