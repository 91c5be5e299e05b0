#pragma once
// Renderers of a Comparison (compare.h): Markdown (the reference report's layout and more), JSON
// (every number, for scripts and tests) and a self-contained HTML page (inline SVG plots: the two
// step-time timelines with their CPU clocks, the attribution as stacked bars; no network).
#include <string>

#include "analysis/compare.h"

namespace pacer::analysis {

// Not `RenderOptions`: report.h has that name for the run report, and two class types of one name
// in one namespace break the one-definition rule once both headers are in a program.
struct CompareRenderOptions {
  size_t table_rows = 40;  // rows of the detailed (op, metric, device) table; 0 = all
  size_t rank_rows = 20;   // rows of the ranked cycle-duration table; 0 = all
  size_t op_rows = 15;     // ops in the per-op attribution table; 0 = all
  CompareOptions compare;  // for the legend's thresholds
};

std::string render_markdown(const Comparison& c, const CompareRenderOptions& opts = {});
std::string render_json(const Comparison& c, const CompareRenderOptions& opts = {});
std::string render_html(const Comparison& c, const CompareRenderOptions& opts = {});

namespace detail {
// Shared by the renderers.
std::string group_thousands(double v, int decimals);  // 631394.912 -> "631,394.91"
std::string fmt_num(double v, int decimals);          // NaN -> "n/a"
std::string fmt_p(double p);                          // "0.000", "1", "n/a"
std::string fmt_signed(double v, int decimals);       // "+1.50", "n/a"
// The attribution table's load-imbalance row label (both runs' figures in it).
std::string load_imbalance_label(const Attribution& a);
}  // namespace detail

}  // namespace pacer::analysis
