// The one page shell, escaping function and plotting approach of pacer's three HTML pages (the
// run report, the comparison and the history). Every page is one self-contained file: the CSS is
// inline, and the plots are SVG drawn here on the server side, so they exist without JavaScript
// and look the same in any browser, a mail attachment or a file viewer.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pacer::analysis::html {

// Escapes & < > " and ' so the result is safe both as element text and inside a quoted attribute
// value (the only two contexts the pages put data in).
std::string esc(std::string_view s);

// The CSS block every page carries (the classes below: cards, verdict, figure, legend, tables,
// SVG axes and marks).
std::string_view page_css() noexcept;

// Begins a page: doctype, head (charset, viewport, the escaped title, the shared CSS) and opens
// the body. A page that carries scripts gets an error hook first in the head, so it sees errors of
// everything after it: each error's message is appended to the body's data-js-errors attribute
// (the headless tests read it).
std::string page_begin(std::string_view title, bool with_scripts = false);
// Closes what page_begin opened.
std::string page_end();

// A colour of the shared palette (it repeats after 8).
const char* palette(size_t i) noexcept;

// Linear map of the data interval [d0, d1] onto the pixel interval [r0, r1]; an empty data
// interval maps to the middle of the pixels.
struct Scale {
  double d0, d1, r0, r1;
  double operator()(double v) const noexcept {
    return d1 == d0 ? (r0 + r1) / 2 : r0 + (v - d0) / (d1 - d0) * (r1 - r0);
  }
};

// Ticks at 1, 2 or 5 x 10^k covering [lo, hi], about `target` of them; {lo} when hi <= lo.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);
// `v` with as many decimals as a tick step of `step` needs (0 to 6).
std::string tick_label(double v, double step);

struct LegendItem {
  std::string color, label;
  bool dashed = false;  // a dashed line swatch instead of a filled square
};
// No colour: the label alone (e.g. "no frequency data").
// An HTML legend (div.legend) of colour swatches; labels are escaped.
std::string legend(const std::vector<LegendItem>& items);

// One SVG plot: a frame of `width` x `height` pixels with margins around the plot area, axes with
// ticks and labels, and marks. Every data mark (a line, dot or bar) has class "mark", nothing else
// has, so a test or a script can count what was drawn. Text is escaped here.
class Svg {
 public:
  struct Frame {
    double width, height, left, right, top, bottom;  // margins: left .. bottom
  };
  struct Tick {
    double at;  // data value
    std::string label;
  };

  // `cls` and `id` (may be empty) become the svg's attributes, `aria` its accessible name.
  Svg(const Frame& f, std::string_view cls, std::string_view id, std::string_view aria);

  const Frame& frame() const noexcept { return f_; }
  double plot_left() const noexcept { return f_.left; }
  double plot_right() const noexcept { return f_.width - f_.right; }
  double plot_top() const noexcept { return f_.top; }
  double plot_bottom() const noexcept { return f_.height - f_.bottom; }
  // Scales from data onto the plot area (y grows upwards).
  Scale x_scale(double lo, double hi) const noexcept { return {lo, hi, plot_left(), plot_right()}; }
  Scale y_scale(double lo, double hi) const noexcept { return {lo, hi, plot_bottom(), plot_top()}; }

  // The x axis along the bottom of the plot area: its line, nice ticks (or the given ticks) and
  // the label centred below; the ticks at either end of the axis align inward so they stay inside.
  void x_axis(const Scale& sx, std::string_view label);
  void x_axis(const Scale& sx, std::string_view label, const std::vector<Tick>& ticks);
  // A y axis on the left (with grid lines across the plot area) or on the right of the plot area:
  // its line, nice ticks and the label rotated alongside.
  void y_axis(const Scale& sy, std::string_view label, bool right = false);

  // A line through (x[i], y[i]) in data units, lifted at non-finite values; nothing when no
  // point is finite. `dash` is a stroke-dasharray ("" for solid); `title` its tooltip.
  void line(std::span<const double> x, std::span<const double> y, const Scale& sx, const Scale& sy,
            const char* color, std::string_view dash, std::string_view title);
  // A dot, a bar and a rule (a line that is not data, e.g. a range or a marker) in pixels.
  void dot(double cx, double cy, double r, const char* color, std::string_view title);
  void bar(double x, double y, double w, double h, const char* color, std::string_view title);
  void rule(double x1, double y1, double x2, double y2, const char* color, std::string_view cls,
            std::string_view title);
  // Text at (x, y); anchor: start, middle or end; cls may be empty.
  void text(double x, double y, std::string_view s, std::string_view anchor = "start",
            std::string_view cls = "");

  // The finished element.
  std::string str() const { return out_ + "</svg>\n"; }

 private:
  Frame f_;
  std::string out_;
};

}  // namespace pacer::analysis::html
