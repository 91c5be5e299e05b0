// Markdown rendering of a Comparison. Section order: verdict and flags, 1 summary, 2 cycle
// distribution, 3 additive attribution, 4 in-depth (op, metric, device) comparison with findings,
// 5 runs and comparability, 6 legend.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/compare_render.h"
#include "analysis/compare_words.h"

namespace pacer::analysis {
namespace detail {

std::string load_imbalance_label(const Attribution& a) {
  return fmt::format(
      "&nbsp;&nbsp;of on-CPU + run queue + blocked: load imbalance (the waited-for worker's slice "
      "over its op's average worker, {} -> {} us)",
      group_thousands(a.span_excess_ns[0] * 1e-3, 2),
      group_thousands(a.span_excess_ns[1] * 1e-3, 2));
}

std::string group_thousands(double v, int decimals) {
  if (!std::isfinite(v)) return "n/a";
  std::string s = fmt::format("{:.{}f}", std::fabs(v), decimals);
  const size_t dot = s.find('.');
  std::string int_part = s.substr(0, dot), frac = dot == std::string::npos ? "" : s.substr(dot);
  std::string out;
  for (size_t i = 0; i < int_part.size(); ++i) {
    if (i > 0 && (int_part.size() - i) % 3 == 0) out += ',';
    out += int_part[i];
  }
  return (v < 0 && std::stod(s) != 0 ? "-" : "") + out + frac;
}

std::string fmt_num(double v, int decimals) {
  if (!std::isfinite(v)) return std::isnan(v) ? "n/a" : (v > 0 ? "inf" : "-inf");
  return fmt::format("{:.{}f}", v, decimals);
}

std::string fmt_p(double p) {
  if (!std::isfinite(p)) return "n/a";
  if (p == 0) return "0";
  if (p < 0.001) return fmt::format("{:.1e}", p);
  return fmt::format("{:.3f}", p);
}

std::string fmt_signed(double v, int decimals) {
  if (!std::isfinite(v)) return fmt_num(v, decimals);
  return fmt::format("{:+.{}f}", v, decimals);
}

}  // namespace detail

namespace {

using detail::fmt_num;
using detail::fmt_p;
using detail::fmt_signed;
using detail::group_thousands;
using detail::load_imbalance_label;

std::string pct_text(double a, double b) {
  if (!(a != 0) || !std::isfinite(a) || !std::isfinite(b)) return "-";
  return fmt::format("{:+.2f}%", (b - a) / std::fabs(a) * 100);
}

std::string mu_text(const MetricRow& r, int i) {
  if (!r.metric) return "-";
  const double x = r.mu[i].mean * metric_info(*r.metric).display_scale;
  if (*r.metric == Metric::Ipc || *r.metric == Metric::ProcessCpuUsage ||
      *r.metric == Metric::HostCpuUsage)
    return fmt_num(x, 2);
  return group_thousands(x, 2);
}

std::string metric_name(const MetricRow& r) {
  if (!r.metric) return "(time only)";
  const MetricInfo& m = metric_info(*r.metric);
  return fmt::format("{} ({})", m.name, m.unit);
}

void summary_section(std::string& o, const Comparison& c) {
  const auto& l = c.label;
  o += "## 1. High-Level Performance Summary\n\n";
  o += fmt::format("| Metric | {} | {} | Δ ({} - {}) | Change (%) |\n", l[0], l[1], l[1], l[0]);
  o += "|:--|--:|--:|--:|--:|\n";
  const auto n0 = static_cast<double>(c.cycles[0].ms.n), n1 = static_cast<double>(c.cycles[1].ms.n);
  o += fmt::format("| Total Decode Steps | {} | {} | {:+.0f} | - |\n", n0, n1, n1 - n0);
  auto row = [&](const char* name, double a, double b, int dec) {
    o += fmt::format("| {} | {} | {} | {} | {} |\n", name, group_thousands(a, dec),
                     group_thousands(b, dec), fmt_signed(b - a, dec), pct_text(a, b));
  };
  row("Avg Step Time (us)", c.cycles[0].ms.mean * 1e3, c.cycles[1].ms.mean * 1e3, 2);
  row("Median Step Time (us)", c.cycles[0].p50 * 1e3, c.cycles[1].p50 * 1e3, 2);
  row("Decode throughput (tok/s, 1/mean)", 1e3 / c.cycles[0].ms.mean, 1e3 / c.cycles[1].ms.mean, 2);
  for (const DeviceFrequency& f : c.frequency)
    if (f.device == kHostDevice) row("Mean CPU clock (MHz)", f.mhz[0].mean, f.mhz[1].mean, 0);
  o += fmt::format("\nStep-time difference: Welch t = {}, p = {}; Mann–Whitney U p = {}.\n\n",
                   fmt_num(c.step_welch.t, 2), fmt_p(c.step_welch.p), fmt_p(c.step_u.p));
}

void distribution_section(std::string& o, const Comparison& c, const CompareRenderOptions& ro) {
  const auto& l = c.label;
  o += "## 2. Decode Step Duration Distribution Comparison\n\n";
  o += fmt::format("| Statistic | {} (us) | {} (us) | Δ (us) | Δ (%) |\n", l[0], l[1]);
  o += "|:--|--:|--:|--:|--:|\n";
  auto row = [&](const char* name, double a, double b) {
    o += fmt::format("| {} | {} | {} | {} | {} |\n", name, group_thousands(a * 1e3, 2),
                     group_thousands(b * 1e3, 2), fmt_signed((b - a) * 1e3, 2), pct_text(a, b));
  };
  const CycleStats& a = c.cycles[0];
  const CycleStats& b = c.cycles[1];
  row("min", a.min, b.min);
  row("p50", a.p50, b.p50);
  row("p90", a.p90, b.p90);
  row("p99", a.p99, b.p99);
  row("max", a.max, b.max);
  row("mean", a.ms.mean, b.ms.mean);
  row("sd", a.ms.sd(), b.ms.sd());
  o += fmt::format("| CV | {:.2f}% | {:.2f}% | | |\n\n", a.ms.sd() / a.ms.mean * 100,
                   b.ms.sd() / b.ms.mean * 100);
  o += "Ranked decode steps, slowest first:\n\n";
  o += fmt::format("| Time Rank | {} Time (us) | {} Time (us) | Δ (us) | Δ (%) |\n", l[0], l[1]);
  o += "|--:|--:|--:|--:|--:|\n";
  const size_t n = std::max(a.sorted_desc_ms.size(), b.sorted_desc_ms.size());
  const size_t shown = ro.rank_rows == 0 ? n : std::min(n, ro.rank_rows);
  for (size_t i = 0; i < shown; ++i) {
    const bool ha = i < a.sorted_desc_ms.size(), hb = i < b.sorted_desc_ms.size();
    const double va = ha ? a.sorted_desc_ms[i] : NAN, vb = hb ? b.sorted_desc_ms[i] : NAN;
    o += fmt::format("| {} | {} | {} | {} | {} |\n", i + 1, ha ? group_thousands(va * 1e3, 2) : "-",
                     hb ? group_thousands(vb * 1e3, 2) : "-",
                     ha && hb ? fmt_signed((vb - va) * 1e3, 2) : "-",
                     ha && hb ? pct_text(va, vb) : "-");
  }
  if (shown < n) o += fmt::format("| ... | (rows {}-{} elided) | | | |\n", shown + 1, n);
  o += "\n";
}

void attribution_section(std::string& o, const Comparison& c, const CompareRenderOptions& ro) {
  const Attribution& a = c.attribution;
  const double t0 = a.mean_ns[0];
  o += "## 3. Where the Time Went: Additive Attribution\n\n";
  o += fmt::format(
      "Mean decode step: {} -> {} us ({}). Parts in us per step and in points (pts) "
      "of the {} mean step; they add up to the measured difference.\n\n",
      group_thousands(a.mean_ns[0] * 1e-3, 2), group_thousands(a.mean_ns[1] * 1e-3, 2),
      fmt_signed(c.delta_pct(), 1) + "%", c.label[0]);
  o += "| Part | Δ (us/step) | pts | share of Δ |\n|:--|--:|--:|--:|\n";
  const double delta = a.delta_ns();
  for (int p = 0; p < kPartCount; ++p) {
    const double v = a.parts[p];
    if (v == 0 && p != static_cast<int>(Part::Residual)) continue;
    o += fmt::format("| {} | {} | {} | {} |\n", part_name(static_cast<Part>(p)),
                     fmt_signed(v * 1e-3, 2), fmt_signed(v / t0 * 100, 2),
                     delta != 0 ? fmt::format("{:.0f}%", v / delta * 100) : "-");
  }
  if (a.runq_outside_ns != 0)
    o += fmt::format(
        "| &nbsp;&nbsp;run queue: outside slices (late wake-ups, between ops) | {} | "
        "{} | |\n",
        fmt_signed(a.runq_outside_ns * 1e-3, 2), fmt_signed(a.runq_outside_ns / t0 * 100, 2));
  if (a.span_excess_ns[0] != 0 || a.span_excess_ns[1] != 0) {
    const double d = a.span_excess_ns[1] - a.span_excess_ns[0];
    o += fmt::format("| {} | {} | {} | |\n", load_imbalance_label(a), fmt_signed(d * 1e-3, 2),
                     fmt_signed(d / t0 * 100, 2));
  }
  o += fmt::format(
      "| &nbsp;&nbsp;residual: dispatch delay (op start -> last worker's start) | {} "
      "| {} | |\n",
      fmt_signed(a.residual_dispatch_ns * 1e-3, 2),
      fmt_signed(a.residual_dispatch_ns / t0 * 100, 2));
  o += fmt::format("| &nbsp;&nbsp;residual: join (last worker's end -> op end) | {} | {} | |\n",
                   fmt_signed(a.residual_join_ns * 1e-3, 2),
                   fmt_signed(a.residual_join_ns / t0 * 100, 2));
  o += fmt::format("| &nbsp;&nbsp;residual: outside recorded ops | {} | {} | |\n",
                   fmt_signed(a.residual_outside_ns * 1e-3, 2),
                   fmt_signed(a.residual_outside_ns / t0 * 100, 2));
  if (a.residual_unmeasured_ns != 0)
    o += fmt::format("| &nbsp;&nbsp;residual: ops without worker data | {} | {} | |\n",
                     fmt_signed(a.residual_unmeasured_ns * 1e-3, 2),
                     fmt_signed(a.residual_unmeasured_ns / t0 * 100, 2));
  o += fmt::format("| **sum of parts** | **{}** | **{}** | |\n",
                   fmt_signed(a.sum_of_parts() * 1e-3, 2),
                   fmt_signed(a.sum_of_parts() / t0 * 100, 2));
  o += fmt::format("| **measured Δ (mean step)** | **{}** | **{}** | 100% |\n\n",
                   fmt_signed(delta * 1e-3, 2), fmt_signed(delta / t0 * 100, 2));
  if (!a.not_measured.empty()) {
    o += "Could not be measured:\n\n";
    for (const std::string& s : a.not_measured) o += "- " + s + "\n";
    o += "\n";
  }
  // Per op: only the part columns some op uses.
  std::vector<int> cols;
  for (int p = 0; p < kPartCount; ++p)
    for (const OpAttribution& r : a.ops)
      if (r.parts[p] != 0) {
        cols.push_back(p);
        break;
      }
  o += "Per op (all layers together, critical path), largest |Δ| first:\n\n";
  o += fmt::format("| Op | {} (us/step) | {} (us/step) | Δ (us) | Δ (%) |", c.label[0], c.label[1]);
  for (int p : cols) o += fmt::format(" {} (us) |", part_name(static_cast<Part>(p)));
  o += " clock (MHz) | CPI | split |\n|:--|--:|--:|--:|--:|";
  for (size_t i = 0; i < cols.size(); ++i) o += "--:|";
  o += "--:|--:|:--|\n";
  const size_t shown = ro.op_rows == 0 ? a.ops.size() : std::min(a.ops.size(), ro.op_rows);
  for (size_t i = 0; i < shown; ++i) {
    const OpAttribution& r = a.ops[i];
    o += fmt::format("| {} | {} | {} | {} | {} |", r.op, group_thousands(r.mean_ns[0] * 1e-3, 2),
                     group_thousands(r.mean_ns[1] * 1e-3, 2), fmt_signed(r.delta_ns() * 1e-3, 2),
                     pct_text(r.mean_ns[0], r.mean_ns[1]));
    for (int p : cols) o += fmt::format(" {} |", fmt_signed(r.parts[p] * 1e-3, 2));
    const char* split = r.level == SplitLevel::Counters    ? "counters"
                        : r.level == SplitLevel::Frequency ? "clock"
                        : r.level == SplitLevel::OnCpu     ? "on-CPU"
                                                           : "none";
    o += fmt::format(" {} -> {} | {} -> {} | {} |\n", fmt_num(r.freq_mhz[0], 0),
                     fmt_num(r.freq_mhz[1], 0), fmt_num(r.cpi[0], 2), fmt_num(r.cpi[1], 2), split);
  }
  if (shown < a.ops.size())
    o += fmt::format("\n({} more ops with smaller changes elided)\n", a.ops.size() - shown);
  o += "\n";
}

void findings_section(std::string& o, const Comparison& c, const CompareRenderOptions& ro) {
  const auto& l = c.label;
  o += "## 4. In-depth Core Metric Comparison\n\n### Overview\n\n" + c.overview + "\n\n";
  o += "### Key Findings\n\n";
  for (const std::string& f : c.findings) o += "- " + f + "\n";
  o += "\n**Recommendation:** " + c.recommendation + "\n\n";
  if (!c.frequency.empty()) {
    o += "### CPU clock per device (decode steps)\n\n";
    o += fmt::format("| Device | {} (MHz) | {} (MHz) | Δ (%) | p-value | U-test p | Flag |\n", l[0],
                     l[1]);
    o += "|:--|--:|--:|--:|--:|--:|:-:|\n";
    for (const DeviceFrequency& f : c.frequency) {
      bool flagged = false;
      for (const Flag& fl : c.flags)
        if (fl.kind == FlagKind::FrequencyDrop && fl.op.empty() &&
            std::find(fl.devices.begin(), fl.devices.end(), f.device) != fl.devices.end())
          flagged = true;
      o += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", device_label(f.device),
                       group_thousands(f.mhz[0].mean, 1), group_thousands(f.mhz[1].mean, 1),
                       fmt_signed(f.pct_change, 2), fmt_p(f.p_welch), fmt_p(f.p_u),
                       flagged ? "⚑" : "");
    }
    o += "\n";
  }
  o += "### Detailed comparison table\n\n";
  o += "One row per (op, metric, device), sorted by **Suspicion Score** in descending order; ⚑ "
       "marks rows matched by a rule.\n\n";
  o += fmt::format(
      "| Function Name | Metric Name | Device | Suspicion Score | Impact (pts) | β_{0}(%) | "
      "β_{1}(%) | Δβ(%) | Z-Score(β) | p-value(β) | U-test p(β) | μ_{0} | μ_{1} | Δμ | "
      "Z-Score(μ) | Z-Score(log_μ) | p-value(μ) | U-test p(μ) | Flag |\n",
      l[0], l[1]);
  o += "|:--|:--|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|:-:|\n";
  const size_t shown = ro.table_rows == 0 ? c.rows.size() : std::min(c.rows.size(), ro.table_rows);
  for (size_t i = 0; i < shown; ++i) {
    const MetricRow& r = c.rows[i];
    const double scale = r.metric ? metric_info(*r.metric).display_scale : 1.0;
    o += fmt::format(
        "| {} | {} | {} | {:.4g} | {:.3g} | {:.2f} | {:.2f} | {} | {} | {} | {} | {} | {} | {} | "
        "{} "
        "| {} | {} | {} | {} |\n",
        r.op, metric_name(r), device_label(r.device), r.score, r.impact_pts, r.beta[0].mean,
        r.beta[1].mean, fmt_signed(r.d_beta, 2), fmt_num(r.z_beta, 2), fmt_p(r.p_beta),
        fmt_p(r.u_p_beta), mu_text(r, 0), mu_text(r, 1),
        r.metric ? fmt_signed(r.d_mu * scale, 2) : "-", r.metric ? fmt_num(r.z_mu, 2) : "-",
        r.metric ? fmt_num(r.z_log_mu, 2) : "-", r.metric ? fmt_p(r.p_mu) : "-",
        r.metric ? fmt_p(r.u_p_mu) : "-", r.flagged ? "⚑" : "");
  }
  if (shown < c.rows.size())
    o += fmt::format(
        "| ... ({} rows elided; --rows 0 shows all) | | | | | | | | | | | | | | | | | "
        "| |\n",
        c.rows.size() - shown);
  o += "\n";
}

std::string header_cell(const Header& h, const std::string& what) {
  if (what == "model")
    return fmt::format("{} {} ({} layers, n_embd {})", h.model.arch, h.model.type,
                       h.model.n_layers ? fmt::format("{}", *h.model.n_layers) : "?",
                       h.model.n_embd ? fmt::format("{}", *h.model.n_embd) : "?");
  if (what == "threads")
    return fmt::format("{} threads, pin {}, CPUs {}",
                       h.run.threads ? fmt::format("{}", *h.run.threads) : "?", h.run.pin,
                       fmt::join(h.run.cpus, ","));
  if (what == "cpu")
    return h.host.cpu_model + (h.host.hostname.empty() ? "" : " on " + h.host.hostname);
  if (what == "counters")
    return h.counters.mode + ": " + fmt::format("{}", fmt::join(h.counters.live, ", ")) +
           (h.counters.scope.empty() ? "" : " (" + h.counters.scope + ")");
  if (what == "freq")
    return h.frequency.source +
           (h.frequency.nominal_mhz ? fmt::format(" (nominal {:.0f} MHz)", *h.frequency.nominal_mhz)
                                    : "");
  return "";
}

void runs_section(std::string& o, const Comparison& c) {
  o += "## 5. Runs and Comparability\n\n";
  o += fmt::format("| | {} | {} |\n|:--|:--|:--|\n", c.label[0], c.label[1]);
  o += fmt::format("| event log | `{}` | `{}` |\n", c.path[0], c.path[1]);
  for (const auto& [name, key] :
       std::vector<std::pair<const char*, const char*>>{{"model", "model"},
                                                        {"workers", "threads"},
                                                        {"CPU", "cpu"},
                                                        {"counters", "counters"},
                                                        {"frequency source", "freq"}})
    o += fmt::format("| {} | {} | {} |\n", name, header_cell(c.header[0], key),
                     header_cell(c.header[1], key));
  o += fmt::format("| decode steps compared | {} | {} |\n\n", c.cycles[0].ms.n, c.cycles[1].ms.n);
  if (c.forced)
    for (const std::string& e : c.compat.errors) o += "- **Forced despite:** " + e + "\n";
  for (const std::string& w : c.compat.warnings) o += "- Warning: " + w + "\n";
  for (int i = 0; i < 2; ++i)
    for (const std::string& n : c.notes[i]) o += fmt::format("- Note ({}): {}\n", c.label[i], n);
  if (c.forced || !c.compat.warnings.empty() || !c.notes[0].empty() || !c.notes[1].empty())
    o += "\n";
  if (!c.forced && c.compat.warnings.empty())
    o += "The runs are alike in model, threads, pinning, CPU model and counter sources.\n\n";
}

}  // namespace

std::string render_markdown(const Comparison& c, const CompareRenderOptions& ro) {
  std::string o;
  o += fmt::format("# Performance Comparison: {} (`{}`) vs {} (`{}`)\n\n", c.label[0], c.path[0],
                   c.label[1], c.path[1]);
  o += "**Verdict:** " + c.verdict + "\n\n";
  for (const Flag& f : c.flags) o += "> ⚑ " + f.text + "\n>\n";
  if (!c.flags.empty()) o.resize(o.size() - 2), o += "\n";
  summary_section(o, c);
  distribution_section(o, c, ro);
  attribution_section(o, c, ro);
  findings_section(o, c, ro);
  runs_section(o, c);
  o += "## 6. Legend\n\n";
  for (const auto& [term, text] : compare_legend(ro.compare))
    o += "- **" + term + "**: " + text + "\n";
  return o;
}

}  // namespace pacer::analysis
