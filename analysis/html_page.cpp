#include "analysis/html_page.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace pacer::analysis::html {
namespace {

constexpr std::string_view kCss = R"CSS(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1280px;color:#1d2433;background:#fafbfc;padding:0 16px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d8dee8;padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}
.sub{color:#5b6578;margin-bottom:16px} .muted{color:#5b6578;font-size:12px} .none{color:#5b6578;padding:8px}
code{background:#f1f4f8;padding:0 3px;border-radius:3px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}
.card{background:#fff;border:1px solid #d8dee8;border-radius:6px;padding:8px 14px;min-width:130px}
.card .k{color:#5b6578;font-size:12px} .card .v{font-size:18px;font-weight:600}
.verdict{background:#fff6e5;border:1px solid #f0c36d;border-radius:6px;padding:10px 14px;margin:12px 0}
.verdict.warn,.flag{background:#fdecea;border:1px solid #e8a39b;border-radius:6px}
.flag{padding:6px 12px;margin:6px 0}
.figure,figure.trend{background:#fff;border:1px solid #d8dee8;border-radius:6px;padding:8px;margin:10px 0}
.figure h3,figure.trend h2{margin:4px 6px 6px}
figure.trend .panels{display:flex;flex-wrap:wrap;gap:8px}
svg{display:block;width:100%;height:auto} figure.trend svg{width:560px;max-width:100%}
svg text{font-size:11px;fill:#3b4457} svg .axis-label{font-size:12px;fill:#1d2433} svg text.on-bar{fill:#fff}
svg .axis line{stroke:#8a93a5} svg line.grid{stroke:#eef1f5} svg path.mark{fill:none;stroke-width:1.6}
svg line.range{stroke-width:1;opacity:.6}
.legend{margin:4px 6px}
.legend span{display:inline-block;margin-right:14px} .legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
.legend i.dash{width:18px;height:0;border-top:2px dashed;background:none}
table{border-collapse:collapse;background:#fff;font-size:12.5px;margin:6px 0}
th,td{border:1px solid #e1e6ee;padding:3px 7px;white-space:nowrap}
th{background:#f1f4f8;text-align:left} td.n{text-align:right;font-variant-numeric:tabular-nums}
table.sortable th{cursor:pointer}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:6px 0}
dl.facts dt{color:#5b6578} dl.facts dd{margin:0}
ul.notes{margin:6px 0;padding-left:20px} .omitted{color:#5b6578;font-style:italic}
details summary{cursor:pointer;color:#2a5db0;margin:6px 0}
)CSS";

constexpr const char* kErrorHook = R"(<script>
window.addEventListener('error',function(e){var b=document.body||document.documentElement;
b.setAttribute('data-js-errors',(b.getAttribute('data-js-errors')||'')+(e.message||'error')+';');});
</script>
)";

constexpr const char* kPalette[] = {"#3b6fd4", "#e07b39", "#3aa35b", "#c2413b",
                                    "#8a5cc2", "#2c9fa8", "#b59a2a", "#7a7f8a"};

}  // namespace

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
      case '\'':
        o += "&#39;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string_view page_css() noexcept {
  return kCss;
}

std::string page_begin(std::string_view title, bool with_scripts) {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n{}"
      "<title>{}</title>\n<style>{}</style>\n</head><body>\n",
      with_scripts ? kErrorHook : "", esc(title), kCss);
}

std::string page_end() {
  return "</body></html>\n";
}

const char* palette(size_t i) noexcept {
  return kPalette[i % std::size(kPalette)];
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return {lo};
  const double raw = (hi - lo) / std::max(target, 1);
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  const double mult = raw / mag < 1.5 ? 1 : raw / mag < 3.5 ? 2 : raw / mag < 7.5 ? 5 : 10;
  const double step = mult * mag;
  // Counted steps, and a division by the inverse of a magnitude below 1, so the ticks are the
  // doubles nearest the round values (0.3, not 0.30000000000000004).
  const double inv = mag < 1 ? std::round(1 / mag) : 0;
  std::vector<double> t;
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k += 1)
    t.push_back(inv > 0 ? k * mult / inv : k * step);
  return t;
}

std::string tick_label(double v, double step) {
  const int decimals =
      step > 0 && std::isfinite(step)
          ? std::clamp(static_cast<int>(-std::floor(std::log10(step) + 1e-9)), 0, 6)
          : 0;
  if (std::fabs(v) < 0.5 * std::pow(10.0, -decimals)) v = 0;  // no "-0.00"
  return fmt::format("{:.{}f}", v, decimals);
}

std::string legend(const std::vector<LegendItem>& items) {
  std::string o = "<div class=\"legend\">";
  for (const LegendItem& it : items)
    o += it.color.empty() ? fmt::format("<span>{}</span>", esc(it.label))
         : it.dashed
             ? fmt::format("<span><i class=\"dash\" style=\"border-color:{}\"></i>{}</span>",
                           esc(it.color), esc(it.label))
             : fmt::format("<span><i style=\"background:{}\"></i>{}</span>", esc(it.color),
                           esc(it.label));
  return o + "</div>\n";
}

Svg::Svg(const Frame& f, std::string_view cls, std::string_view id, std::string_view aria) : f_(f) {
  out_ = fmt::format(
      "<svg class=\"{}\"{} xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" "
      "style=\"max-width:{}px\" role=\"img\" aria-label=\"{}\">\n",
      esc(cls), id.empty() ? "" : fmt::format(" id=\"{}\"", esc(id)), f.width, f.height, f.width,
      esc(aria));
}

void Svg::x_axis(const Scale& sx, std::string_view label) {
  const std::vector<double> at = nice_ticks(std::min(sx.d0, sx.d1), std::max(sx.d0, sx.d1), 8);
  const double step = at.size() > 1 ? at[1] - at[0] : std::fabs(sx.d1 - sx.d0);
  std::vector<Tick> ticks;
  for (double v : at) ticks.push_back({v, tick_label(v, step)});
  x_axis(sx, label, ticks);
}

void Svg::x_axis(const Scale& sx, std::string_view label, const std::vector<Tick>& ticks) {
  const double y = plot_bottom();
  out_ += fmt::format(
      "<g class=\"axis\"><line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/>",
      plot_left(), plot_right(), y, y);
  for (const Tick& t : ticks) {
    const double x = sx(t.at);
    const char* anchor = std::fabs(x - plot_left()) < 1    ? "start"
                         : std::fabs(x - plot_right()) < 1 ? "end"
                                                           : "middle";
    out_ += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\"/>"
        "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"{4}\">{5}</text>",
        x, y, y + 4, y + 16, anchor, esc(t.label));
  }
  out_ += "</g>\n";
  if (!label.empty())
    text((plot_left() + plot_right()) / 2, std::min(y + 34, f_.height - 4), label, "middle",
         "axis-label");
}

void Svg::y_axis(const Scale& sy, std::string_view label, bool right) {
  const double x = right ? plot_right() : plot_left();
  const std::vector<double> at = nice_ticks(std::min(sy.d0, sy.d1), std::max(sy.d0, sy.d1), 5);
  const double step = at.size() > 1 ? at[1] - at[0] : std::fabs(sy.d1 - sy.d0);
  out_ += fmt::format(
      "<g class=\"axis\"><line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\"/>", x,
      plot_top(), plot_bottom());
  for (double v : at) {
    const double y = sy(v);
    if (!right)
      out_ += fmt::format(
          "<line class=\"grid\" x1=\"{0:.1f}\" x2=\"{1:.1f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\"/>",
          x + 1, plot_right(), y);
    out_ += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\">{}</text>",
                        right ? x + 6 : x - 6, y + 4, right ? "start" : "end", tick_label(v, step));
  }
  out_ += "</g>\n";
  if (label.empty()) return;
  // Rotated alongside the axis, outside its tick labels.
  const double lx = right ? std::min(x + 56, f_.width - 6) : std::max(x - 52, 12.0);
  const double ly = (plot_top() + plot_bottom()) / 2;
  out_ += fmt::format(
      "<text class=\"axis-label\" x=\"{0:.1f}\" y=\"{1:.1f}\" text-anchor=\"middle\" "
      "transform=\"rotate(-90 {0:.1f} {1:.1f})\">{2}</text>\n",
      lx, ly, esc(label));
}

void Svg::line(std::span<const double> x, std::span<const double> y, const Scale& sx,
               const Scale& sy, const char* color, std::string_view dash, std::string_view title) {
  std::string d;
  bool pen = false;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) {
      pen = false;
      continue;
    }
    d +=
        fmt::format("{}{}{:.1f},{:.1f}", d.empty() ? "" : " ", pen ? "L" : "M", sx(x[i]), sy(y[i]));
    pen = true;
  }
  if (d.empty()) return;
  out_ += fmt::format(
      "<path class=\"mark\" d=\"{}\" stroke=\"{}\"{}><title>{}</title></path>\n", d, esc(color),
      dash.empty() ? "" : fmt::format(" stroke-dasharray=\"{}\"", esc(dash)), esc(title));
}

void Svg::dot(double cx, double cy, double r, const char* color, std::string_view title) {
  out_ += fmt::format(
      "<circle class=\"mark\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"><title>{}</title>"
      "</circle>\n",
      cx, cy, r, esc(color), esc(title));
}

void Svg::bar(double x, double y, double w, double h, const char* color, std::string_view title) {
  out_ += fmt::format(
      "<rect class=\"mark\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.2f}\" "
      "fill=\"{}\"><title>{}</title></rect>\n",
      x, y, std::max(w, 0.0), std::max(h, 0.0), esc(color), esc(title));
}

void Svg::rule(double x1, double y1, double x2, double y2, const char* color, std::string_view cls,
               std::string_view title) {
  out_ += fmt::format(
      "<line{} x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\">",
      cls.empty() ? "" : fmt::format(" class=\"{}\"", esc(cls)), x1, y1, x2, y2, esc(color));
  out_ += title.empty() ? "</line>\n" : fmt::format("<title>{}</title></line>\n", esc(title));
}

void Svg::text(double x, double y, std::string_view s, std::string_view anchor,
               std::string_view cls) {
  out_ += fmt::format("<text{} x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\">{}</text>\n",
                      cls.empty() ? "" : fmt::format(" class=\"{}\"", esc(cls)), x, y, esc(anchor),
                      esc(s));
}

}  // namespace pacer::analysis::html
