#include "analysis/compare_attribution.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "analysis/stats.h"

namespace pacer::analysis {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool positive(double x) {
  return std::isfinite(x) && x > 0;
}

// Per-cycle means of an op's critical-path timing in one run (NaN propagates: a quantity missing
// in any instance is missing for the op).
struct OpMeans {
  double wall = 0, span = 0, oncpu = 0, runq = 0, instr = 0, cycles = 0, freq_cycles = 0;
  double dispatch = 0, excess = 0;
  bool present = false;
  bool without_workers = false;
};

OpMeans op_means(const RunCycles& run, const std::string& op) {
  OpMeans m;
  auto it = run.timing.find(op);
  if (it == run.timing.end()) return m;
  m.present = true;
  for (const OpTiming& t : it->second) {
    m.wall += t.wall_ns;
    m.span += t.span_ns;
    m.oncpu += t.oncpu_ns;
    m.runq += t.runq_ns;
    m.instr += t.instructions;
    m.cycles += t.cycles;
    m.freq_cycles += t.freq_cycles;
    m.dispatch += t.dispatch_ns;
    m.excess += t.excess_ns;
    m.without_workers = m.without_workers || t.instances_without_workers > 0;
  }
  const auto n = static_cast<double>(run.cycles());
  for (double* v : {&m.wall, &m.span, &m.oncpu, &m.runq, &m.instr, &m.cycles, &m.freq_cycles,
                    &m.dispatch, &m.excess})
    *v /= n;
  return m;
}

// Mean of a per-cycle series; NaN when any value is missing (a quantity the log lacks somewhere
// is not compared at all).
double series_mean(const std::vector<double>& x) {
  if (x.empty()) return kNaN;
  double sum = 0;
  for (double v : x) sum += v;
  return sum / static_cast<double>(x.size());
}

SplitLevel level_of(const OpMeans& m) {
  if (!std::isfinite(m.span) || !positive(m.oncpu)) return SplitLevel::None;
  if (positive(m.instr) && positive(m.cycles)) return SplitLevel::Counters;
  if (positive(m.freq_cycles)) return SplitLevel::Frequency;
  return SplitLevel::OnCpu;
}

OpAttribution attribute_op(const std::string& op, const OpMeans& a, const OpMeans& b) {
  OpAttribution r;
  r.op = op;
  r.mean_ns = {a.wall, b.wall};
  const OpMeans* m[2] = {&a, &b};
  // An op present in one run only has no factors to compare: all of it is residual.
  const SplitLevel level =
      a.present && b.present ? std::min(level_of(a), level_of(b)) : SplitLevel::None;
  r.level = level;
  r.runq_measured = level != SplitLevel::None && std::isfinite(a.runq) && std::isfinite(b.runq);
  for (int i = 0; i < 2; ++i) {
    r.oncpu_ns[i] = level != SplitLevel::None ? m[i]->oncpu : kNaN;
    r.runq_ns[i] = r.runq_measured ? m[i]->runq : kNaN;
    r.offcpu_ns[i] = level != SplitLevel::None
                         ? m[i]->span - m[i]->oncpu - (r.runq_measured ? m[i]->runq : 0)
                         : kNaN;
    r.sync_ns[i] = level != SplitLevel::None ? m[i]->wall - m[i]->span : kNaN;
    r.excess_ns[i] = level != SplitLevel::None ? m[i]->excess : kNaN;
    r.freq_mhz[i] = level == SplitLevel::Counters    ? m[i]->cycles / m[i]->oncpu * 1e3
                    : level == SplitLevel::Frequency ? m[i]->freq_cycles / m[i]->oncpu * 1e3
                                                     : kNaN;
    r.cpi[i] = level == SplitLevel::Counters ? m[i]->cycles / m[i]->instr : kNaN;
    r.instructions[i] = level == SplitLevel::Counters ? m[i]->instr : kNaN;
  }
  auto set = [&](Part p, double v) { r.parts[static_cast<size_t>(p)] = v; };
  const double d_wall = b.wall - a.wall;
  if (level == SplitLevel::None) {
    set(Part::Residual, d_wall);
    return r;
  }
  const double d_oncpu = b.oncpu - a.oncpu;
  const double lm = stats::log_mean(b.oncpu, a.oncpu);
  switch (level) {
    case SplitLevel::Counters: {
      const double f_a = a.cycles / a.oncpu, f_b = b.cycles / b.oncpu;
      const double cpi_a = a.cycles / a.instr, cpi_b = b.cycles / b.instr;
      set(Part::Frequency, -lm * std::log(f_b / f_a));
      set(Part::Ipc, lm * std::log(cpi_b / cpi_a));
      set(Part::Instructions, lm * std::log(b.instr / a.instr));
      break;
    }
    case SplitLevel::Frequency: {
      const double f_a = a.freq_cycles / a.oncpu, f_b = b.freq_cycles / b.oncpu;
      set(Part::Frequency, -lm * std::log(f_b / f_a));
      set(Part::CpuWork, lm * std::log(b.freq_cycles / a.freq_cycles));
      break;
    }
    default:
      set(Part::OnCpu, d_oncpu);
      break;
  }
  if (r.runq_measured) set(Part::RunQueue, b.runq - a.runq);
  set(Part::Blocked, r.offcpu_ns[1] - r.offcpu_ns[0]);
  // Whatever the factors above leave (sync inside the op; rounding of the logged integers).
  double explained = 0;
  for (int p = 0; p < kPartCount; ++p)
    if (p != static_cast<int>(Part::Residual)) explained += r.parts[p];
  set(Part::Residual, d_wall - explained);
  return r;
}

}  // namespace

std::string_view part_name(Part p) noexcept {
  switch (p) {
    case Part::Frequency:
      return "frequency";
    case Part::Ipc:
      return "IPC";
    case Part::Instructions:
      return "instructions";
    case Part::CpuWork:
      return "CPU work";
    case Part::OnCpu:
      return "on-CPU time";
    case Part::RunQueue:
      return "run queue";
    case Part::Blocked:
      return "blocked";
    case Part::Residual:
      return "residual";
  }
  return "?";
}

double Attribution::sum_of_parts() const noexcept {
  return std::accumulate(parts.begin(), parts.end(), 0.0);
}

Attribution attribute(const RunCycles& normal, const RunCycles& abnormal) {
  Attribution out;
  const RunCycles* runs[2] = {&normal, &abnormal};
  for (int i = 0; i < 2; ++i) {
    const auto& s = runs[i]->step_ns;
    out.mean_ns[i] = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(s.size());
  }
  // Every op of either run, in the normal run's order, then the abnormal run's new ones.
  std::vector<std::string> ops = normal.op_order;
  for (const std::string& op : abnormal.op_order)
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);

  std::array<double, 2> ops_total{};
  bool any_level = false;
  SplitLevel min_level = SplitLevel::Counters;
  bool all_runq = true;
  for (const std::string& op : ops) {
    const OpMeans a = op_means(normal, op), b = op_means(abnormal, op);
    OpAttribution r = attribute_op(op, a, b);
    ops_total[0] += a.wall;
    ops_total[1] += b.wall;
    for (int p = 0; p < kPartCount; ++p) out.parts[p] += r.parts[p];
    if (r.level == SplitLevel::None) {
      out.residual_unmeasured_ns += r.delta_ns();
    } else {
      out.residual_sync_ns += r.part(Part::Residual);
      for (int i = 0; i < 2; ++i)
        if (std::isfinite(r.excess_ns[i])) out.span_excess_ns[i] += r.excess_ns[i];
      const double d_dispatch = b.dispatch - a.dispatch;
      if (std::isfinite(d_dispatch)) out.residual_dispatch_ns += d_dispatch;
      any_level = true;
      min_level = std::min(min_level, r.level);
      all_runq = all_runq && r.runq_measured;
    }
    out.ops.push_back(std::move(r));
  }
  const double outside_delta = (out.mean_ns[1] - ops_total[1]) - (out.mean_ns[0] - ops_total[0]);
  out.parts[static_cast<size_t>(Part::Residual)] += outside_delta;
  out.residual_outside_ns = outside_delta;
  out.residual_join_ns = out.residual_sync_ns - out.residual_dispatch_ns;
  // Run-queue wait no slice covers: a late wake-up shows as dispatch delay, a wait between ops as
  // time outside ops. Move it into the run-queue part, no more than those two parts changed by
  // (same sign), so the parts still add up.
  const double d_runq_outside =
      series_mean(abnormal.runq_outside_ns) - series_mean(normal.runq_outside_ns);
  const double room = out.residual_dispatch_ns + out.residual_outside_ns;
  if (std::isfinite(d_runq_outside) && d_runq_outside * room > 0) {
    const double moved =
        d_runq_outside > 0 ? std::min(d_runq_outside, room) : std::max(d_runq_outside, room);
    out.runq_outside_ns = moved;
    out.parts[static_cast<size_t>(Part::RunQueue)] += moved;
    out.parts[static_cast<size_t>(Part::Residual)] -= moved;
    // Taken from dispatch first (same sign as moved), then from time outside ops.
    const double from_dispatch = moved > 0 ? std::clamp(out.residual_dispatch_ns, 0.0, moved)
                                           : std::clamp(out.residual_dispatch_ns, moved, 0.0);
    out.residual_dispatch_ns -= from_dispatch;
    out.residual_sync_ns -= from_dispatch;
    out.residual_outside_ns -= moved - from_dispatch;
  }
  out.level = any_level ? min_level : SplitLevel::None;
  out.runq_measured = any_level && all_runq;
  std::stable_sort(out.ops.begin(), out.ops.end(), [](const auto& x, const auto& y) {
    return std::fabs(x.delta_ns()) > std::fabs(y.delta_ns());
  });

  if (!any_level) {
    out.not_measured.push_back(
        "on-CPU time: no worker on-CPU data in the logs, so nothing could be split; the whole "
        "difference is residual");
  } else {
    if (min_level < SplitLevel::Counters)
      out.not_measured.push_back(
          "IPC and instruction count: no instructions/cycles counters (no hardware PMU) in at "
          "least one run; their joint effect is shown as 'CPU work' (cycles at a constant clock)");
    if (min_level < SplitLevel::Frequency)
      out.not_measured.push_back(
          "frequency: no frequency source in at least one run; on-CPU time is shown unsplit");
    if (!out.runq_measured)
      out.not_measured.push_back(
          "run-queue wait: no per-slice runq_ns in at least one run; off-CPU time is shown as "
          "'blocked'");
  }
  for (const OpAttribution& r : out.ops)
    if (r.level == SplitLevel::None && r.delta_ns() != 0 && any_level)
      out.not_measured.push_back("op " + r.op +
                                 ": no worker data (or present in one run only); its change is "
                                 "residual");
  return out;
}

}  // namespace pacer::analysis
