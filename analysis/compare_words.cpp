#include "analysis/compare_words.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace pacer::analysis {
namespace {
// "kernels from L2 150.0 -> 120.0 tok/s (-20.0%)": the figures both readings start with.
std::string kernel_ceiling_move(double baseline, double candidate) {
  return fmt::format("kernels from L2 {:.1f} -> {:.1f} tok/s ({:+.1f}%)", baseline, candidate,
                     100 * (candidate / baseline - 1));
}
}  // namespace

}  // namespace pacer::analysis

namespace pacer::analysis::detail {
namespace {

constexpr const char* kMembwAdvice =
    "Another process competed for memory bandwidth: only the ops that stream weights slowed, at "
    "the same clock and without run-queue wait. Find the co-runner that streams memory on other "
    "cores of the same socket or NUMA node (`perf stat -a -e` memory events, `pcm-memory`, "
    "`top` for busy neighbours; on a VM, the host's other tenants), move it or pacer to another "
    "NUMA node, or measure the bandwidth left (`pacer bench` roofline column) while it runs.";

constexpr const char* kInterferenceAdvice =
    "The same build and configuration did more CPU work per step at the same clock: other work "
    "on the host slowed it through shared resources (last-level cache, memory bandwidth, an SMT "
    "sibling; on a VM, the neighbours). Find it (`top`, `perf stat -a`, the host's other "
    "tenants), pin pacer away from it (`--pin` with CPUs of another core or socket), and repeat "
    "the runs on a quiet host before suspecting the code.";

std::string_view part_label(Part p, bool slower) {
  switch (p) {
    case Part::Frequency:
      return slower ? "frequency reduction" : "frequency increase";
    case Part::Ipc:
      return slower ? "IPC loss" : "IPC gain";
    case Part::Instructions:
      return slower ? "more instructions" : "fewer instructions";
    case Part::CpuWork:
      return slower ? "more CPU work" : "less CPU work";
    case Part::OnCpu:
      return slower ? "more on-CPU time" : "less on-CPU time";
    case Part::RunQueue:
      return slower ? "run-queue contention" : "less run-queue wait";
    case Part::Blocked:
      return slower ? "more blocked time" : "less blocked time";
    case Part::Residual:
      return "unexplained";
  }
  return "?";
}

// part_label, with the names a comparison's own evidence gives a part: run-queue wait that the
// cgroup's throttling explains, CPU work that only the weight-streaming ops did.
std::string cause_label(const Comparison& c, Part p, bool slower) {
  if (slower && p == Part::RunQueue && c.quota_throttling) return "CPU quota throttling (cgroup)";
  if (slower && c.membw_contention && (p == Part::CpuWork || p == Part::Ipc || p == Part::OnCpu))
    return "memory bandwidth contention";
  if (c.interference && (p == Part::CpuWork || p == Part::Ipc || p == Part::OnCpu))
    return slower ? "interference from other work on the host"
                  : "less interference from other work on the host (the normal run was the "
                    "disturbed one)";
  return std::string(part_label(p, slower));
}

std::string pts(double v) {
  return fmt::format("{:.1f} {}", v, std::fabs(v) == 1.0 ? "pt" : "pts");
}

const Flag* find_flag(const Comparison& c, FlagKind kind) {
  for (const Flag& f : c.flags)
    if (f.kind == kind) return &f;
  return nullptr;
}

// The ops that carry most (>= 80%, at most 3) of a part in the direction of the change; empty
// when the part is spread over more ops than that.
std::vector<const OpAttribution*> carrying_ops(const Attribution& a, Part p, double dir) {
  std::vector<const OpAttribution*> ops;
  for (const OpAttribution& o : a.ops)
    if (o.part(p) * dir > 0) ops.push_back(&o);
  std::sort(ops.begin(), ops.end(),
            [&](const auto* x, const auto* y) { return x->part(p) * dir > y->part(p) * dir; });
  const double total = a.part(p) * dir;
  double acc = 0;
  std::vector<const OpAttribution*> out;
  for (const OpAttribution* o : ops) {
    out.push_back(o);
    acc += o->part(p) * dir;
    if (acc >= 0.8 * total) break;
    if (out.size() == 3) return {};
  }
  return out;
}

std::string op_names(const std::vector<const OpAttribution*>& ops) {
  std::vector<std::string> names;
  for (const auto* o : ops) names.push_back(o->op);
  return fmt::format("{}", fmt::join(names, ", "));
}

// CPUs whose run-queue wait grew (per-CPU pseudo-op rows).
std::vector<int> runq_devices(const Comparison& c) {
  if (const Flag* f = find_flag(c, FlagKind::RunQueue); f && !f->devices.empty()) return f->devices;
  std::vector<int> devs;
  for (const MetricRow& r : c.rows)
    if (r.op == kRunqOp && r.device != kHostDevice && r.metric == Metric::RunqDelay && r.d_mu > 0)
      devs.push_back(r.device);
  return devs;
}

std::string part_detail(const Comparison& c, Part p, double dir) {
  const Attribution& a = c.attribution;
  const auto ops = carrying_ops(a, p, dir);
  switch (p) {
    case Part::Frequency: {
      std::string where;
      std::array<double, 2> ghz{};
      bool concentrated = !ops.empty() && ops.size() < a.ops.size();
      if (concentrated) {
        // The few ops that carry most of the part are not "where" the clock fell when every other
        // op lost about as much clock: they are just the biggest ops of a CPU-wide drop.
        std::array<double, 2> sum{}, weight{};  // [0]: carrying ops, [1]: the others
        for (const OpAttribution& o : a.ops) {
          if (!(o.freq_mhz[0] > 0) || !std::isfinite(o.freq_mhz[1]) || !(o.oncpu_ns[0] > 0))
            continue;
          const size_t k = std::find(ops.begin(), ops.end(), &o) != ops.end() ? 0 : 1;
          sum[k] += (o.freq_mhz[1] / o.freq_mhz[0] - 1) * o.oncpu_ns[0];
          weight[k] += o.oncpu_ns[0];
        }
        if (weight[0] > 0 && weight[1] > 0) {
          const double carrying = sum[0] / weight[0], others = sum[1] / weight[1];
          if (others * dir < 0 && std::fabs(others) >= 0.5 * std::fabs(carrying))
            concentrated = false;
        }
      }
      const Flag* f = find_flag(c, FlagKind::FrequencyDrop);
      if (f && f->op.empty() && !f->devices.empty()) where = " on " + describe_devices(f->devices);
      if (f && f->op.empty() && !concentrated) {
        for (const DeviceFrequency& d : c.frequency) {
          if (std::find(f->devices.begin(), f->devices.end(), d.device) == f->devices.end())
            continue;
          ghz[0] += d.mhz[0].mean / static_cast<double>(f->devices.size());
          ghz[1] += d.mhz[1].mean / static_cast<double>(f->devices.size());
        }
      } else {
        // On-CPU-time weighted clock of the ops that carry the part (or of every op).
        std::array<double, 2> w{};
        for (const OpAttribution& o : a.ops) {
          if (!ops.empty() && std::find(ops.begin(), ops.end(), &o) == ops.end()) continue;
          for (int i = 0; i < 2; ++i) {
            if (!std::isfinite(o.freq_mhz[i]) || !std::isfinite(o.oncpu_ns[i])) continue;
            ghz[i] += o.freq_mhz[i] * o.oncpu_ns[i];
            w[i] += o.oncpu_ns[i];
          }
        }
        for (int i = 0; i < 2; ++i) ghz[i] = w[i] > 0 ? ghz[i] / w[i] : 0;
      }
      std::string out =
          ghz[0] > 0 ? fmt::format("{} -> {}", format_mhz(ghz[0]), format_mhz(ghz[1])) : "";
      if (concentrated) {
        out += (out.empty() ? "in " : " in ") + op_names(ops);
      } else if (where.empty()) {
        out += out.empty() ? "CPU-wide, every op" : ", CPU-wide: every op";
      }
      return out + where;
    }
    case Part::Ipc:
      if (!ops.empty())
        return fmt::format("CPI {:.2f} -> {:.2f} in {}", ops[0]->cpi[0], ops[0]->cpi[1],
                           op_names(ops));
      return "";
    case Part::Instructions:
      if (!ops.empty() && ops[0]->instructions[0] > 0)
        return fmt::format("{:+.0f}% in {}{}",
                           (ops[0]->instructions[1] / ops[0]->instructions[0] - 1) * 100,
                           ops[0]->op,
                           ops.size() > 1 ? ", also " + op_names(std::vector<const OpAttribution*>(
                                                            ops.begin() + 1, ops.end()))
                                          : "");
      return "";
    case Part::CpuWork:
      return "cycles at a constant clock; no PMU to separate IPC from instructions" +
             (ops.empty() ? std::string() : "; in " + op_names(ops));
    case Part::OnCpu:
      return "no frequency or counters to split it" +
             (ops.empty() ? std::string() : "; in " + op_names(ops));
    case Part::RunQueue: {
      const auto devs = runq_devices(c);
      return fmt::format("{:+.3f} ms/step runnable but waiting for a CPU{}{}",
                         a.part(Part::RunQueue) * 1e-6,
                         devs.empty() ? "" : " on " + describe_devices(devs),
                         a.runq_outside_ns != 0
                             ? fmt::format(" ({:+.3f} ms of it outside op slices: workers woken "
                                           "late, or waiting between ops)",
                                           a.runq_outside_ns * 1e-6)
                             : "");
    }
    case Part::Blocked:
      return fmt::format("{:+.3f} ms/step off-CPU and not runnable", a.part(Part::Blocked) * 1e-6);
    case Part::Residual:
      return fmt::format(
          "dispatch delay {:+.3f} ms, join {:+.3f} ms, outside ops {:+.3f} ms{}",
          a.residual_dispatch_ns * 1e-6, a.residual_join_ns * 1e-6, a.residual_outside_ns * 1e-6,
          a.residual_unmeasured_ns != 0
              ? fmt::format(", ops without data {:+.3f} ms", a.residual_unmeasured_ns * 1e-6)
              : "");
  }
  return "";
}

std::string p_text(double p) {
  if (!std::isfinite(p)) return "n/a";
  if (p < 0.001) return "< 0.001";
  return fmt::format("{:.3f}", p);
}

void write_verdict(Comparison& c) {
  const Attribution& a = c.attribution;
  const double t0 = a.mean_ns[0], t1 = a.mean_ns[1];
  const double dpct = c.delta_pct();
  const bool tested = std::isfinite(c.step_welch.p) || std::isfinite(c.step_u.p);
  const bool p_ok = (std::isfinite(c.step_welch.p) && c.step_welch.p < 0.05) ||
                    (std::isfinite(c.step_u.p) && c.step_u.p < 0.05);
  c.significant = std::fabs(dpct) >= 1.0 && (p_ok || (!tested && std::fabs(dpct) >= 5.0));
  std::string v;
  bool freq_listed = false;
  if (!c.significant) {
    v = fmt::format(
        "No significant difference in decode step time: {:.3f} -> {:.3f} ms/step ({:+.1f}%, "
        "Welch p {}, U-test p {}).",
        t0 * 1e-6, t1 * 1e-6, dpct, p_text(c.step_welch.p), p_text(c.step_u.p));
  } else {
    const double dir = dpct > 0 ? 1.0 : -1.0;
    std::vector<std::pair<double, Part>> contrib;  // pts in the direction of the change
    for (int p = 0; p < kPartCount; ++p)
      contrib.emplace_back(a.parts[p] / t0 * 100 * dir, static_cast<Part>(p));
    std::stable_sort(contrib.begin(), contrib.end(),
                     [](const auto& x, const auto& y) { return x.first > y.first; });
    if (contrib[0].first > 0) {
      c.main_cause = contrib[0].second;
      c.main_cause_pts = contrib[0].first;
    }
    const auto cpu_work_cause = [](std::optional<Part> p) {
      return p == Part::CpuWork || p == Part::Ipc || p == Part::OnCpu;
    };
    // Slower: only a change on every op is the host's (one op losing IPC is named as such).
    // Faster: the same build cannot have done less work by itself, whatever the ops: the normal
    // run was the disturbed one.
    c.interference = c.same_build_and_config && (c.oncpu_growth_broad || dir < 0) &&
                     !c.membw_contention && cpu_work_cause(c.main_cause);
    v = fmt::format("Decode {:.1f}% {} ({:.3f} -> {:.3f} ms/step):", std::fabs(dpct),
                    dir > 0 ? "slower" : "faster", t0 * 1e-6, t1 * 1e-6);
    const double threshold = std::max(0.5, 0.1 * std::fabs(dpct));
    double listed = 0;
    std::vector<std::string> items;
    for (const auto& [value, part] : contrib) {
      if (items.size() == 3 || value < threshold) break;
      std::string detail = part_detail(c, part, dir);
      std::string label(part_label(part, dir > 0));
      if (part == Part::RunQueue && c.quota_throttling) {
        // The workers waited for the cgroup's next CFS period, not for other threads.
        label = "CPU quota throttling (cgroup)";
        detail = fmt::format("throttled {:.3f} -> {:.3f} ms/step",
                             std::isfinite(c.throttled_ns[0]) ? c.throttled_ns[0] * 1e-6 : 0.0,
                             c.throttled_ns[1] * 1e-6);
      }
      if (c.membw_contention &&
          (part == Part::CpuWork || part == Part::Ipc || part == Part::OnCpu)) {
        // More cycles (or on-CPU time) at the same clock, spent in the weight-streaming ops only:
        // the cores waited on a DRAM another process was saturating.
        label = "memory bandwidth contention";
        detail = fmt::format(
            "the weight-streaming ops read {:.1f} -> {:.1f} GB/s at the same clock; the other "
            "ops {:+.0f}%",
            c.stream_gbs[0], c.stream_gbs[1], (c.other_ops_ms[1] / c.other_ops_ms[0] - 1) * 100);
      }
      if (c.interference && !c.membw_contention &&
          (part == Part::CpuWork || part == Part::Ipc || part == Part::OnCpu)) {
        label = cause_label(c, part, dir > 0);
        detail =
            "the same build and configuration took more cycles per step: shared caches, "
            "memory bandwidth, an SMT sibling or a VM neighbour, not the code" +
            (detail.empty() ? std::string() : "; " + detail);
      }
      items.push_back(
          fmt::format("{} {}{}", pts(value), label, detail.empty() ? "" : " (" + detail + ")"));
      listed += value;
      freq_listed = freq_listed || part == Part::Frequency;
    }
    // Parts against the change are named too: a clock drop on memory-bound ops typically comes
    // with fewer cycles per step (the cores wait on memory, not on the clock), so the frequency
    // part alone overstates what restoring the clock would win back.
    double against = 0;
    std::vector<std::string> offsets;
    for (auto it = contrib.rbegin(); it != contrib.rend(); ++it) {
      const auto& [value, part] = *it;
      if (value > -threshold || offsets.size() == 2) break;
      std::string detail = part_detail(c, part, -dir);
      const bool fewer_cycles_at_lower_clock =
          dir > 0 && c.main_cause == Part::Frequency &&
          (part == Part::CpuWork || part == Part::Ipc || part == Part::OnCpu);
      if (fewer_cycles_at_lower_clock)
        detail =
            "fewer cycles at the lower clock, typical of memory-bound ops, which wait on "
            "memory rather than on the clock";
      offsets.push_back(fmt::format("{} {}{}", pts(value), part_label(part, dir < 0),
                                    detail.empty() ? "" : " (" + detail + ")"));
      against += value;
    }
    for (std::string& o : offsets) items.push_back(std::move(o));
    const double other = std::fabs(dpct) - listed - against;
    if (items.empty() || std::fabs(other) >= 0.05) items.push_back(pts(other) + " other");
    v += " " + fmt::format("{}", fmt::join(items, ", ")) + ".";
    if (-against > std::fabs(dpct) && c.main_cause) {
      v += fmt::format(
          " Parts of opposite sign ({} against) exceed the net change: fixing the {} alone "
          "would win back less than its {}.",
          pts(-against), cause_label(c, *c.main_cause, dir > 0), pts(c.main_cause_pts));
    }
  }
  // Load imbalance sits inside the span parts listed above: say when a good part of the change
  // is the waited-for worker's slice growing (or shrinking) against its op's average worker.
  if (c.significant) {
    const double dir = dpct > 0 ? 1.0 : -1.0;
    const double d_excess = a.span_excess_ns[1] - a.span_excess_ns[0];
    const double excess_pts = d_excess / t0 * 100 * dir;
    if (excess_pts >= std::max(0.5, 0.25 * std::fabs(dpct))) {
      v += fmt::format(
          " Load imbalance: the worker each op waited for ran {:.3f} -> {:.3f} ms/step longer "
          "than its op's average worker ({} of the change, inside the parts above): {}.",
          a.span_excess_ns[0] * 1e-6, a.span_excess_ns[1] * 1e-6, pts(excess_pts),
          dir > 0 ? "the slowdown sits on some workers, not all of them (a slower or busier core, "
                    "uneven shares)"
                  : "the speed-up came from the workers evening out");
    }
  }
  // A change made by a few long steps (pauses: a host taking the vCPUs, an interrupt storm)
  // rather than by every step: a kernel, build or configuration change moves the median step
  // too, so the median is the figure to compare the code by.
  if (c.significant) {
    const double dir = dpct > 0 ? 1.0 : -1.0;
    struct Tail {
      int n = 0;
      double ms_per_step = 0;  // time above the median of the steps over 1.5x it, per step
    };
    const auto tail = [&c](int i) {
      Tail t;
      const std::vector<double>& v = c.step_ms[i];
      for (double ms : v)
        if (ms > 1.5 * c.cycles[i].p50) {
          ++t.n;
          t.ms_per_step += ms - c.cycles[i].p50;
        }
      if (!v.empty()) t.ms_per_step /= static_cast<double>(v.size());
      return t;
    };
    const Tail tails[2] = {tail(0), tail(1)};
    const double d_mean_ms = (t1 - t0) * 1e-6;
    const double d_p50_ms = c.cycles[1].p50 - c.cycles[0].p50;
    const double d_tail_ms = tails[1].ms_per_step - tails[0].ms_per_step;
    if (3 * std::fabs(d_p50_ms) < std::fabs(d_mean_ms) &&
        d_tail_ms * dir >= 0.5 * std::fabs(d_mean_ms)) {
      const int i = dir > 0 ? 1 : 0;  // the run with the long steps
      v += fmt::format(
          " A few steps made the change: the median step moved only {:.3f} -> {:.3f} ms, while "
          "the {} run's {} of {} steps over 1.5x its median add {:.3f} ms/step above it ({:.3f} "
          "in the {} run): pauses (a host taking the vCPUs, interrupts, another process's burst) "
          "rather than slower code; compare the median steps for the code's speed.",
          c.cycles[0].p50, c.cycles[1].p50, c.label[i], tails[i].n, c.step_ms[i].size(),
          tails[i].ms_per_step, tails[1 - i].ms_per_step, c.label[1 - i]);
    }
  }
  if (const Flag* f = find_flag(c, FlagKind::FrequencyDrop); f && !freq_listed)
    v += " Note: " + f->text + " (flagged by rule).";
  if (c.significant && c.vm_steal) {
    v += fmt::format(
        " VM steal: the hypervisor took {:.3f} -> {:.3f} ms/step of CPU time from this VM "
        "(/proc/stat steal, {}): host preemption, which shows above as a lower clock or "
        "lost time.",
        c.steal_ns[0] * 1e-6, c.steal_ns[1] * 1e-6, c.steal_scope);
  }
  // A different configuration does different work: say so first, as the leading candidate,
  // before any attribution (which assumes the same work in both runs).
  if (!c.compat.work_changes.empty()) {
    v = fmt::format(
            "The runs were configured differently ({}): that is the leading candidate; "
            "compare runs of one configuration before trusting the attribution. ",
            fmt::join(c.compat.work_changes, "; ")) +
        v;
  }
  c.verdict = std::move(v);
}

std::string metric_value(Metric m, double v) {
  const MetricInfo& info = metric_info(m);
  const double x = v * info.display_scale;
  if (m == Metric::Ipc || m == Metric::ProcessCpuUsage || m == Metric::HostCpuUsage)
    return fmt::format("{:.2f}", x);
  if (std::fabs(x) >= 1e5) return fmt::format("{:.3g}", x);
  return fmt::format("{:.1f}", x);
}

void write_findings(Comparison& c) {
  const Attribution& a = c.attribution;
  for (const Flag& f : c.flags) {
    std::string why;
    switch (f.kind) {
      case FlagKind::FrequencyDrop:
        why =
            " A lower clock slows every op on those CPUs about equally, so it hardly moves any "
            "op's share of the step (β) and a β-weighted score can bury it; pacer flags it by "
            "rule.";
        c.findings.push_back("⚑ **Frequency drop.** " + f.text + "." + why);
        break;
      case FlagKind::RunQueue:
        c.findings.push_back("⚑ **Run-queue contention.** " + f.text + ".");
        break;
      case FlagKind::IpcLoss:
        c.findings.push_back("⚑ **IPC loss.** " + f.text + ".");
        break;
      case FlagKind::Instructions:
        c.findings.push_back("⚑ **Instruction count changed.** " + f.text + ".");
        break;
    }
  }
  // The kernels' own rate from cache, measured before each run (bench's recorded rep): which
  // side of a slowdown moved.
  const auto& k0 = c.header[0].kernel_ceiling_tok_s;
  const auto& k1 = c.header[1].kernel_ceiling_tok_s;
  if (k0 && k1 && *k0 > 0 && *k1 > 0) {
    // The step time's change as a change in tok/s.
    const double d = c.delta_pct();
    const double slower_pct = d > 0 ? 100 * (1 - 1 / (1 + d / 100)) : 0;
    std::string note = kernel_ceiling_note(slower_pct, *k0, *k1);
    if (note.empty()) note = kernel_ceiling_move(*k0, *k1);
    c.findings.push_back(
        "**Kernels from cache.** The matmul kernels alone, weights in L2, on each run's threads "
        "just before it: " +
        note + ".");
  }
  // The additive attribution in one sentence.
  std::vector<std::string> parts;
  for (int p = 0; p < kPartCount; ++p) {
    const double v = a.parts[p] / a.mean_ns[0] * 100;
    if (std::fabs(v) >= 0.05 || p == static_cast<int>(Part::Residual))
      parts.push_back(fmt::format("{} {:+.1f} pts", part_name(static_cast<Part>(p)), v));
  }
  c.findings.push_back(fmt::format(
      "**Attribution.** Mean step time changed by {:+.3f} ms ({:+.1f}%): {}. The parts add up to "
      "the measured difference (sum {:+.3f} ms).",
      a.delta_ns() * 1e-6, c.delta_pct(), fmt::join(parts, ", "), a.sum_of_parts() * 1e-6));
  // The top (op, device) pairs of the suspicion ranking, each with its related metric changes.
  std::set<std::string> seen;  // one finding per op, on its top-ranked device
  for (const MetricRow& r : c.rows) {
    if (seen.size() == 3 || r.score <= 0) break;
    if (!seen.insert(r.op).second) continue;
    const bool up = r.d_beta > 0;
    const bool sig = std::isfinite(r.p_beta) && r.p_beta < 0.05;
    std::string s = fmt::format(
        "**`{}` on {}**: its share of the step (β) {} from {:.2f}% to {:.2f}% ({:+.2f} ppt), {} "
        "(Welch p {}, U-test p {}).",
        r.op, device_label(r.device), up ? "increased" : "decreased", r.beta[0].mean,
        r.beta[1].mean, r.d_beta,
        sig ? "which is statistically significant" : "which may not be statistically significant",
        p_text(r.p_beta), p_text(r.u_p_beta));
    std::vector<std::string> related;
    for (const MetricRow& m : c.rows) {
      if (related.size() == 3) break;
      if (m.op != r.op || m.device != r.device || !m.metric || m.d_mu == 0) continue;
      const bool moved =
          (std::isfinite(m.p_mu) && m.p_mu < 0.05) || (std::isfinite(m.u_p_mu) && m.u_p_mu < 0.05);
      if (!moved || std::fabs(m.d_mu) < 0.01 * std::fabs(m.mu[0].mean)) continue;
      related.push_back(
          fmt::format("`{}` {} from {} to {} {}", metric_info(*m.metric).name,
                      m.d_mu > 0 ? "rose" : "fell", metric_value(*m.metric, m.mu[0].mean),
                      metric_value(*m.metric, m.mu[1].mean), metric_info(*m.metric).unit));
    }
    if (!related.empty()) s += fmt::format(" Meanwhile {}.", fmt::join(related, "; "));
    c.findings.push_back(std::move(s));
  }
  for (const MetricRow& r : c.rows)
    if (r.op == kOncpuOp && r.device == kHostDevice &&
        (r.beta[0].mean > 100 || r.beta[1].mean > 100)) {
      c.findings.push_back(
          "*Note: β above 100% (the `oncpu` pseudo-op on the host) sums the on-CPU time of all "
          "workers, so with W workers it can reach W x 100%.*");
      break;
    }
}

void write_overview(Comparison& c) {
  std::string s;
  if (!c.rows.empty() && c.rows[0].score > 0) {
    const MetricRow& r = c.rows[0];
    s = fmt::format(
        "The top-ranked difference between `{}` and `{}` is **`{}`** ({} on {}, suspicion score "
        "{:.1f}): its share of the step went from {:.2f}% to {:.2f}%",
        c.label[0], c.label[1], r.op, r.metric ? metric_info(*r.metric).name : "time",
        device_label(r.device), r.score, r.beta[0].mean, r.beta[1].mean);
    if (r.metric)
      s += fmt::format(" and its {} from {} to {} {}", metric_info(*r.metric).name,
                       metric_value(*r.metric, r.mu[0].mean), metric_value(*r.metric, r.mu[1].mean),
                       metric_info(*r.metric).unit);
    s += ". ";
  }
  if (c.main_cause)
    s += fmt::format("The additive attribution names **{}** as the main cause ({}).",
                     cause_label(c, *c.main_cause, c.delta_pct() > 0), pts(c.main_cause_pts));
  else
    s += "The step-time difference is not significant, so no cause is named.";
  c.overview = std::move(s);
}

void write_recommendation(Comparison& c) {
  std::string s;
  const auto cause = c.main_cause;
  const Flag* freq = find_flag(c, FlagKind::FrequencyDrop);
  if (!cause) {
    s = "No action needed for step time: the runs are within noise. Run longer (-n) for tighter "
        "statistics.";
  } else {
    switch (*cause) {
      case Part::Frequency:
        s = "Find why the clock fell: the governor and energy-performance preference "
            "(`cpupower frequency-info`), thermal and power limits (`turbostat`: package watts, "
            "throttle counts), turbo being off, and on a VM the host's power policy or CPU "
            "steal. Pin the workers to CPUs that hold their clock (`--pin`) and compare again.";
        break;
      case Part::RunQueue:
        if (c.quota_throttling) {
          s = "The process's cgroup ran out of its CPU quota (CFS `cpu.cfs_quota_us` / `cpu.max`) "
              "and waited for the next period: raise the quota (Kubernetes: the CPU limit) to at "
              "least the thread count x the period, or run with fewer threads (`-t`) than the "
              "quota's CPUs; the event log's `cgroup` header and per-step `cgroup` fields show "
              "the quota and the throttled time.";
          break;
        }
        s = "Other runnable threads shared the workers' CPUs: find them (`top -H`, `pidstat -t`, "
            "`perf sched latency`), move them off (cpusets, `taskset`, `isolcpus`), or pin pacer "
            "to idle CPUs with an explicit `--pin` list; use fewer threads (`-t`) than free cores.";
        break;
      case Part::Ipc:
        if (c.membw_contention) {
          s = kMembwAdvice;
          break;
        }
        if (c.interference) {
          s = kInterferenceAdvice;
          break;
        }
        s = "The same instructions took more cycles each: look for cache or memory-bandwidth "
            "contention (the `llc_misses` rows), a busy SMT sibling, or different NUMA placement.";
        break;
      case Part::Instructions:
        s = "The abnormal run executed more instructions: compare the ISA, weight type, context "
            "length (attention grows with position) and build (`pacer_version`, `git_sha`) in the "
            "two headers.";
        break;
      case Part::CpuWork:
      case Part::OnCpu:
        if (c.membw_contention) {
          s = kMembwAdvice;
          break;
        }
        if (c.interference) {
          s = kInterferenceAdvice;
          break;
        }
        s = "More on-CPU work at the same clock, and no hardware counters to tell IPC from "
            "instruction count: rerun where the PMU is exposed, and compare ISA, build and "
            "context length in the headers.";
        break;
      case Part::Blocked:
        s = "Workers slept off-CPU while not runnable: look for page faults (model evicted from "
            "the page cache), I/O or lock waits (`page_faults`, `context_switches` rows).";
        break;
      case Part::Residual:
        s = "Most of the change lies outside the measured factors: check worker imbalance (the "
            "per-CPU β rows), fork/join overhead and time outside recorded ops.";
        break;
    }
  }
  if (freq && cause != Part::Frequency)
    s += " Also investigate the flagged frequency drop: it costs time on every op that runs on "
         "those CPUs.";
  s += " Then work down the detailed table from the highest suspicion score, reading β (share of "
       "the step) together with μ (what the CPU was doing during the op).";
  if (c.vm_steal) {
    s += " The VM lost CPU time to its host (steal): ask for dedicated or pinned vCPUs, move to a "
         "less loaded host, or compare runs taken at quieter times; pacer cannot fix steal from "
         "inside the guest.";
  }
  c.recommendation = std::move(s);
}

}  // namespace

std::string format_mhz(double mhz) {
  if (mhz >= 1000) return fmt::format("{:.2f} GHz", mhz / 1000);
  return fmt::format("{:.0f} MHz", mhz);
}

void write_words(Comparison& c, const CompareOptions& opts) {
  write_verdict(c);
  write_findings(c);
  write_overview(c);
  write_recommendation(c);
}

}  // namespace pacer::analysis::detail

namespace pacer::analysis {

std::string kernel_ceiling_note(double slowdown_pct, double baseline, double candidate) {
  if (!(baseline > 0) || !(candidate > 0) || !(slowdown_pct > 0)) return "";
  // Below this a ceiling's move is within what its own passes vary by on a quiet host.
  constexpr double kSteadyPct = 3.0;
  const double fell = 100 * (1 - candidate / baseline);
  const std::string moved = kernel_ceiling_move(baseline, candidate);
  if (fell >= kSteadyPct && fell >= slowdown_pct / 2) {
    return moved +
           ": the matmuls' arithmetic slowed with it (the code, the clock, a sibling on "
           "the core), not only memory";
  }
  if (std::abs(fell) < kSteadyPct) {
    return moved +
           ": the matmuls' arithmetic held, so the loss is outside it (memory, "
           "attention, the threads' waits)";
  }
  return moved + fmt::format(": the arithmetic explains part of the {:.1f}%", slowdown_pct);
}

namespace {
double finite_or_zero(double v) {
  return std::isfinite(v) ? v : 0.0;
}
}  // namespace

std::string leading_cause(const Comparison& c) {
  if (!c.compat.work_changes.empty()) return "configuration";
  if (!c.significant || !c.main_cause) return "none";
  const bool slower = c.delta_pct() > 0;
  // Steal leads when it is at least as large as the leading part (else it is a second cause, as
  // the verdict's own sentence says).
  if (slower && c.vm_steal &&
      c.steal_ns[1] - finite_or_zero(c.steal_ns[0]) >=
          c.main_cause_pts / 100 * c.attribution.mean_ns[0])
    return "vm steal";
  switch (*c.main_cause) {
    case Part::Frequency:
      return "frequency";
    case Part::RunQueue:
      return slower && c.quota_throttling ? "cpu quota" : "run queue";
    case Part::Ipc:
      if (slower && c.membw_contention) return "memory bandwidth";
      return c.interference ? "interference" : "ipc";
    case Part::Instructions:
      return "instructions";
    case Part::CpuWork:
      if (slower && c.membw_contention) return "memory bandwidth";
      return c.interference ? "interference" : "cpu work";
    case Part::OnCpu:
      if (slower && c.membw_contention) return "memory bandwidth";
      return c.interference ? "interference" : "on-cpu time";
    case Part::Blocked:
      return "blocked";
    case Part::Residual:
      return "unexplained";
  }
  return "unexplained";
}

std::vector<std::pair<std::string, std::string>> compare_legend(const CompareOptions& o) {
  return {
      {"Step",
       "one decode step (prefill batches are not compared). Every statistic below treats "
       "the per-step values of a run as its sample."},
      {"β (beta)",
       "the op's time in a step as % of that step's duration: on `host` the op's "
       "wall time (all its layers), on `CPU n` the time of the worker slices that "
       "ran on CPU n. β above 100% (oncpu on host) sums several workers."},
      {"μ (mu)",
       "the metric's value during the op in a step: cpu_frequency weighted by on-CPU "
       "time, ipc = instructions / cycles, counts and times summed per step; host "
       "rows aggregate all workers. The table shows its mean over steps."},
      {"oncpu / runq",
       "pseudo-ops from the scheduler: time on a CPU, and time runnable but "
       "waiting for a CPU, per step (host: summed over threads)."},
      {"Δβ, Δμ", "abnormal mean minus normal mean (β in percentage points)."},
      {"Z-Score(β), Z-Score(μ)",
       fmt::format("effect size: Δ / s with s = sqrt((sd_normal² + sd_abnormal²) / 2), the root "
                   "mean square of the two runs' per-step standard deviations (symmetric: "
                   "swapping the runs flips the sign only). Zero variance is handled by a floor "
                   "on s of {:.0f}% of the larger mean (measurement resolution): a noise-free 1% "
                   "change scores 1, a noise-free change never scores infinity and is never "
                   "silently 0.",
                   stats::kRelativeSdFloor * 100)},
      {"Z-Score(log μ)",
       fmt::format("the same on ln(μ + c), c = 1% of the median positive μ of both runs "
                   "(scale-free, so zeros such as no run-queue wait are defined); s floored at "
                   "{:.2f} (~1% relative). It measures relative change: a clock going 3.0 -> 2.1 "
                   "GHz and a count going 3000 -> 2100 score alike.",
                   stats::kLogSdFloor)},
      {"n_eff",
       "effective sample size of a run's per-step series: decode steps are autocorrelated (a "
       "slow step tends to follow a slow one), so both tests count n_eff = n (1 − r1) / (1 + r1) "
       "independent values, r1 being the series' lag-1 autocorrelation (n when r1 ≤ 0; at least "
       "2). Without it, equal runs with r1 = 0.6 would test 'significant' at 5% about a third of "
       "the time."},
      {"p-value",
       "two-sided Welch t-test (unequal variances, Welch–Satterthwaite degrees of "
       "freedom, Student's t) on each run's n_eff. Both runs constant: p = 0 if the means differ, "
       "1 if not. Fewer than 2 steps on a side: n/a."},
      {"U-test p", fmt::format("two-sided Mann–Whitney U: exact distribution when the runs have "
                               "{} steps or fewer together, no ties and no autocorrelation; "
                               "otherwise the normal approximation with midranks for ties, the "
                               "variance of U/(n1·n2) taken from the effective sizes, "
                               "(n1_eff + n2_eff + 1) / (12 n1_eff n2_eff), times the tie factor "
                               "1 − Σ(t³−t)/((n+1) n (n−1)), and a 0.5 continuity correction. "
                               "All values tied: p = 1.",
                               stats::kExactMaxTotal)},
      {"Impact (pts)",
       "the part of the normal step the row's change accounts for, by the attribution's own model "
       "(one model: the table and the attribution agree). Host rows: the op's attribution part "
       "(cpu_frequency: frequency; ipc: IPC; instructions: instructions; runq_delay: run queue; "
       "oncpu_time and cycles: what no finer row carries, i.e. CPU work that no PMU split and "
       "unsplit on-CPU time; the oncpu/runq pseudo-ops: the whole step's parts). CPU rows: the "
       "same LMDI on that CPU's on-CPU time, L(on-CPU_normal, on-CPU_abnormal) × |ln(μ_abnormal / "
       "μ_normal)|, on-CPU time net of its clock's part, run-queue wait as time. Other metrics: "
       "|Δβ| (host pseudo-ops per worker)."},
      {"Suspicion Score",
       fmt::format("Impact × (min(|Z(β)|, {0:g}) + min(|Z(log μ)|, {0:g})). Unlike |Δβ| × (|Z(β)| "
                   "+ |Z(log μ)|), it does not bury a change that slows every op alike (a "
                   "frequency drop leaves β nearly unchanged), and capping Z stops a very quiet "
                   "normal run from inflating trivial changes.",
                   o.z_cap)},
      {"⚑ (flag)",
       fmt::format("raised by rule, whatever the score: a CPU clock drop of ≥ {:g}%, run-queue "
                   "growth of ≥ {:g} pts of the step per worker, or an IPC / instruction change "
                   "of ≥ {:g}% in an op with β ≥ 1%, each significant at p < {:g} (Welch or U).",
                   o.freq_drop_pct, o.runq_flag_pts, o.counter_flag_pct, o.alpha)},
      {"Attribution",
       "wall = on-CPU + run-queue + blocked + sync per op (critical path: the worker of each "
       "instance that finished last; sync = dispatch delay before its chunk + join after it; "
       "run-queue wait no slice covers moves from dispatch/outside into run queue); on-CPU = "
       "instructions × CPI / frequency, "
       "split exactly with the logarithmic-mean Divisia index; residual = sync, "
       "time outside ops and ops without data. pts = ns / normal mean step × 100; "
       "the parts sum to the measured change."},
      {"n/a", "not computable from the logs (too few steps, or the metric was not measured)."},
  };
}

}  // namespace pacer::analysis
