// The bottleneck section: which phase and op dominate, and why (with the numbers that say so).
//
// Losses (time the run lost to something outside the kernels) are ranked by the time they cost:
//   off-CPU      workers runnable but not running:   lost = runq share x phase time
//   frequency    clock below the run's reference:    lost = (1 - f / f_ref) x phase time
//   overhead     step time not covered by any op:    lost = sum of the gaps
//   imbalance    workers waiting at the joins:       lost = their wait / workers
//   disturbed    decode steps far above their peers: lost = their time above the peers' median
// If none passes its threshold, the verdict is the nature of the work: memory-bound when the
// matmuls stream weights near the measured bandwidth roofline, compute-bound when well below.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "analysis/report.h"
#include "analysis/report_accum.h"
#include "eventlog/schema.h"

namespace pacer::analysis {

std::string_view bottleneck_name(BottleneckKind k) noexcept {
  switch (k) {
    case BottleneckKind::MemoryBound:
      return "memory-bound";
    case BottleneckKind::ComputeBound:
      return "compute-bound";
    case BottleneckKind::FrequencyLimited:
      return "frequency-limited";
    case BottleneckKind::OffCpu:
      return "off-CPU";
    case BottleneckKind::OverheadBound:
      return "overhead-bound";
    case BottleneckKind::LoadImbalanced:
      return "load-imbalanced";
    case BottleneckKind::Disturbed:
      return "disturbed";
    case BottleneckKind::Undetermined:
      break;
  }
  return "undetermined";
}

namespace detail {
namespace {

struct Loss {
  Finding finding;
  int64_t lost_ns = 0;
};

std::string ms(int64_t ns) {
  return fmt::format("{:.2f} ms", static_cast<double>(ns) / 1e6);
}
std::string pct(double share) {
  return fmt::format("{:.1f}%", 100.0 * share);
}

Phase focus_phase(const std::string& dominant) {
  if (dominant == "prefill") return Phase::Prefill;
  if (dominant == "sampling") return Phase::Sample;
  if (dominant == "tokenization") return Phase::Tokenize;
  if (dominant == "detokenization") return Phase::Detokenize;
  return Phase::Decode;
}

// What a compute-bound verdict says without cycle counters; the kernel ceiling, when the header
// has one, answers it and takes it out again.
constexpr std::string_view kRooflineOnlyCaveat =
    "; judged from the roofline alone (no IPC: no hardware counters), so stalls on memory latency "
    "read the same";

// Decode's nature with the header's kernel ceiling (the matmul kernels alone, weights in L2:
// runtime/kernel_ceiling.h). Without cycle counters "below the roofline" cannot tell the kernels'
// arithmetic from waits on memory, and a run at 65% of the roofline reads memory-bound by the
// threshold when its kernels could not go faster from cache (TinyLlama Q4_0 on one Zen 1 core: 88%
// of them). Below the DRAM roofline the kernels bound decode on this CPU: compute-bound, said with
// the figure. At or above it, a run the threshold called compute-bound waits on memory below its
// bandwidth (memory-bound: latency, the prefetchers); one it called memory-bound keeps that, with
// the figure.
void weigh_kernel_ceiling(const Report& r, Finding& f) {
  const auto& kernel = r.header.kernel_ceiling_tok_s;
  const auto& tok_s = r.throughput.decode_tok_s;
  const auto& roof = r.throughput.decode_roofline_tok_s;
  if ((f.kind != BottleneckKind::ComputeBound && f.kind != BottleneckKind::MemoryBound) ||
      !kernel || !(*kernel > 0) || !tok_s || !roof || !(*roof > 0))
    return;
  if (const size_t at = f.evidence.find(kRooflineOnlyCaveat); at != std::string::npos)
    f.evidence.erase(at, kRooflineOnlyCaveat.size());
  const double pct = 100 * *tok_s / *kernel;
  if (*kernel < *roof) {
    f.kind = BottleneckKind::ComputeBound;
    f.evidence += fmt::format(
        "; the matmul kernels alone, weights in L2, reach {:.1f} tok/s on these cores, below the "
        "{:.1f} tok/s DRAM roofline, and decode runs at {:.0f}% of that: their arithmetic on this "
        "CPU bounds it, not memory",
        *kernel, *roof, pct);
    f.suggestions = {
        "the kernels cannot stream this type at the bandwidth on this CPU: a type with less "
        "arithmetic per byte (q8_0 over q4_0 and the K-quants), more cores, or a CPU with wider "
        "integer SIMD (AVX-512 VNNI) moves the limit"};
    return;
  }
  f.evidence += fmt::format(
      "; the matmul kernels alone, weights in L2, reach {:.1f} tok/s on these cores, above the "
      "{:.1f} tok/s DRAM roofline; decode runs at {:.0f}% of them",
      *kernel, *roof, pct);
  if (f.kind == BottleneckKind::MemoryBound) return;  // at the threshold by its own streaming
  f.kind = BottleneckKind::MemoryBound;
  f.evidence +=
      ": the time beyond theirs is waiting on memory below its bandwidth (latency, prefetch "
      "distance)";
  f.suggestions = {
      "the kernels outrun memory here but do not keep enough of it in flight: try the GEMV read "
      "plan's overrides (PACER_GEMV_STREAMS=1/2/4, PACER_PREFETCH=0/1, PACER_PAGE_TOUCH) with "
      "`pacer bench`",
      "pin threads (--pin compact) so each worker keeps its share's pages and prefetch state"};
}

// The same for decode's largest op, in GB/s: the kernels' ceiling as the bytes of a token's
// matmuls over its time (every kind of the model together), against the op's own streaming rate.
void weigh_kernel_ceiling_op(const Report& r, const CpuMetrics& cpu, Finding& f) {
  const Header& h = r.header;
  const auto& kernel = h.kernel_ceiling_tok_s;
  const auto& bytes = h.model.matmul_bytes_per_token;
  const std::optional<double> rate = cpu.slice_gbs ? cpu.slice_gbs : cpu.gbs;
  if (f.kind != BottleneckKind::MemoryBound || !kernel || !(*kernel > 0) || !bytes ||
      !(*bytes > 0) || !h.bandwidth_gbs || !rate)
    return;
  const double kernel_gbs = *kernel * static_cast<double>(*bytes) / 1e9;
  if (kernel_gbs >= *h.bandwidth_gbs) return;
  f.kind = BottleneckKind::ComputeBound;
  f.evidence += fmt::format(
      "; the model's matmul kernels alone, weights in L2, stream {:.1f} GB/s on these cores, "
      "below the roofline: {:.0f}% of them",
      kernel_gbs, 100 * *rate / kernel_gbs);
}

// The nature of the work (memory / compute) from the roofline, or from IPC without one.
std::optional<Finding> nature(const Report& r, const std::string& subject, const CpuMetrics& cpu,
                              const BottleneckThresholds& t, std::vector<std::string>* notes) {
  const Header& h = r.header;
  const std::string wtype = h.model.type.empty() ? "the current type" : h.model.type;
  Finding f;
  f.subject = subject;
  if (cpu.roofline_pct && cpu.gbs && h.bandwidth_gbs) {
    std::string stream =
        fmt::format("{} at {:.1f} GB/s = {:.0f}% of the measured {:.1f} GB/s roofline",
                    cpu.kv_bytes > 0 ? "matmuls and attention stream weights and KV cache"
                                     : "matmuls stream weights",
                    *cpu.gbs, *cpu.roofline_pct, *h.bandwidth_gbs);
    // The kernels' nature is judged by their own rate: the op time around the slices (dispatch,
    // join, the recorder's brackets) is the overhead rule's, and would call short GEMVs
    // compute-bound in a recorded run whose kernels stream at the roofline.
    double kernel_pct = *cpu.roofline_pct;
    if (cpu.slice_gbs && cpu.slice_roofline_pct) {
      kernel_pct = *cpu.slice_roofline_pct;
      stream += fmt::format(" (their worker slices alone: {:.1f} GB/s = {:.0f}%)", *cpu.slice_gbs,
                            *cpu.slice_roofline_pct);
    }
    if (kernel_pct >= t.memory_bound_roofline_pct) {
      f.kind = BottleneckKind::MemoryBound;
      f.evidence = stream;
      f.suggestions = {
          fmt::format("stream fewer bytes per token: a smaller weight type than {} (q4_0 moves "
                      "~0.56 B/weight, q8_0 ~1.06 B, f16 2 B)",
                      wtype),
          "more threads will not help once bandwidth is saturated; keep all workers on one NUMA "
          "node (--pin compact) so they share its memory controllers",
          "speculative decoding or batching several sequences reuse each streamed weight for more "
          "tokens"};
    } else {
      f.kind = BottleneckKind::ComputeBound;
      f.evidence = stream;
      if (cpu.ipc) {
        f.evidence += fmt::format("; IPC {:.2f}{}", *cpu.ipc,
                                  *cpu.ipc < t.low_ipc ? " (stalled: cache/latency-bound)" : "");
      } else {
        // Without cycles and instructions "below the roofline" is all that is measured: memory
        // latency, or a host that slowed the workers, reads the same.
        f.evidence += kRooflineOnlyCaveat;
      }
      // Advice the run already followed is left out: the VNNI kernels are the fastest pacer has
      // for the integer types, and a run on every core has no more cores to use.
      if (h.run.isa != "avx512" || !h.run.vnni.value_or(false)) {
        f.suggestions.push_back(fmt::format(
            "check the kernel path: the run used isa={}{}; the AVX-512 VNNI integer dot products "
            "are the fastest for q8_0/q4_0",
            h.run.isa.empty() ? "?" : h.run.isa,
            h.run.vnni.has_value() ? (*h.run.vnni ? " with VNNI" : " without VNNI") : ""));
      }
      if (!h.run.threads || !h.host.cores || *h.run.threads < *h.host.cores) {
        f.suggestions.push_back(fmt::format(
            "use more cores (threads={} of {} cores) or scatter pinning across physical cores",
            h.run.threads ? std::to_string(*h.run.threads) : "?",
            h.host.cores ? std::to_string(*h.host.cores) : "?"));
      }
      f.suggestions.push_back(
          "find the ops furthest below the roofline (% slice in the op tables): a weight type "
          "whose "
          "kernel streams slower than the others' is where the time goes");
    }
    return f;
  }
  if (notes)
    notes->push_back(
        "memory- vs compute-bound cannot be judged from bandwidth: the header has no "
        "bandwidth_gbs (run `pacer bench` to measure it; it is recorded with the run)");
  if (cpu.ipc) {
    f.kind = *cpu.ipc < t.low_ipc ? BottleneckKind::MemoryBound : BottleneckKind::ComputeBound;
    f.evidence = fmt::format("IPC {:.2f} ({} {:.1f}; judged without a bandwidth roofline)",
                             *cpu.ipc, *cpu.ipc < t.low_ipc ? "below" : "at or above", t.low_ipc);
    if (cpu.gbs) f.evidence += fmt::format("; weights streamed at {:.1f} GB/s", *cpu.gbs);
    f.suggestions = {
        "measure the memory bandwidth (`pacer bench`) to place the run against its "
        "roofline"};
    return f;
  }
  if (cpu.gbs) {
    f.kind = BottleneckKind::Undetermined;
    f.evidence = fmt::format(
        "weights streamed at {:.1f} GB/s; no roofline and no IPC to judge "
        "it against",
        *cpu.gbs);
    f.suggestions = {
        "measure the memory bandwidth (`pacer bench`) so GB/s can be placed against "
        "the roofline"};
    return f;
  }
  return std::nullopt;
}

// What every loss rule sees: the dominant phase, its op row and CPU metrics, and the losses the
// rules before it found (a rule may defer to an earlier one).
struct RuleContext {
  const Report& r;
  const BottleneckThresholds& t;
  Phase focus;
  std::string focus_name;
  const OpRow& phase_row;
  const CpuMetrics& cpu;
  int64_t phase_ns;
  const std::vector<Loss>& found;  // earlier rules' losses, in table order
  std::vector<std::string>& notes;
};

// Workers runnable but not running: lost = runq share x phase time.
std::optional<Loss> offcpu_rule(const RuleContext& c) {
  const CpuMetrics& cpu = c.cpu;
  if (!cpu.offcpu_share) {
    c.notes.push_back("no run-queue data (runq_ns): off-CPU time cannot be judged");
    return std::nullopt;
  }
  if (*cpu.offcpu_share <= c.t.offcpu_share) return std::nullopt;
  Loss l;
  l.lost_ns = static_cast<int64_t>(*cpu.offcpu_share * static_cast<double>(c.phase_ns));
  l.finding = {
      BottleneckKind::OffCpu,
      c.focus_name,
      fmt::format("workers were runnable but not running for {} of their time "
                  "during {} (threshold {}), about {} of the phase",
                  pct(*cpu.offcpu_share), c.focus_name, pct(c.t.offcpu_share), ms(l.lost_ns)),
      {"another process competes for these CPUs: check the host load (step "
       "host_cpu_usage) and stop or move it",
       fmt::format("pin the workers (--pin compact|scatter|LIST; this run: {}) and "
                   "leave one CPU free for the OS and other work",
                   c.r.header.run.pin.empty() ? "?" : c.r.header.run.pin),
       "use fewer threads than allowed CPUs so no worker waits for a core"}};
  return l;
}

// The phase's mean clock below the run's reference: lost = (1 - f / f_ref) x phase time.
std::optional<Loss> frequency_mean_rule(const RuleContext& c) {
  const CpuMetrics& cpu = c.cpu;
  const Report& r = c.r;
  if (!cpu.freq_mean_mhz || !r.reference_freq_mhz) {
    c.notes.push_back("no per-op frequency or no reference frequency: frequency cannot be judged");
    return std::nullopt;
  }
  const double ratio = *cpu.freq_mean_mhz / *r.reference_freq_mhz;
  if (ratio >= c.t.frequency_ratio) return std::nullopt;
  Loss l;
  l.lost_ns = static_cast<int64_t>((1.0 - ratio) * static_cast<double>(c.phase_ns));
  l.finding = {
      BottleneckKind::FrequencyLimited,
      c.focus_name,
      fmt::format("mean effective frequency {:.0f} MHz (lowest sample {:.0f} MHz) is {:.0f}% "
                  "of the reference {:.0f} MHz ({}); threshold {:.0f}%",
                  *cpu.freq_mean_mhz, cpu.freq_min_mhz.value_or(0), 100 * ratio,
                  *r.reference_freq_mhz, r.reference_freq_source, 100 * c.t.frequency_ratio),
      {fmt::format("check the governor (this run: {}) and set it to performance",
                   r.header.host.governor.empty() ? "unknown" : r.header.host.governor),
       "check thermal and power limits (throttle counters, RAPL) and the cooling",
       "wide AVX-512 code can lower the clock: compare with PACER_ISA=avx2",
       "on a VM the host may be oversubscribed: compare with `pacer compare` against a "
       "quiet run"}};
  return l;
}

// A throttling episode hides in a run-wide mean: steps that ran below the reference clock cost
// (their time - the typical step's) each. Defers to the mean rule when that one fired.
std::optional<Loss> frequency_episode_rule(const RuleContext& c) {
  const Report& r = c.r;
  const bool mean_flagged =
      !c.found.empty() && c.found.back().finding.kind == BottleneckKind::FrequencyLimited;
  if (mean_flagged || !r.reference_freq_mhz ||
      (c.focus != Phase::Decode && c.focus != Phase::Prefill))
    return std::nullopt;
  const double limit = c.t.frequency_ratio * *r.reference_freq_mhz;
  std::vector<int64_t> normal;
  int64_t n_slow = 0, n_all = 0, slow_ns = 0;
  double slow_freq = 0;
  for (const StepRow& s : r.steps) {
    if (s.phase != c.focus || !s.freq_mhz) continue;
    ++n_all;
    if (*s.freq_mhz < limit) {
      ++n_slow;
      slow_ns += s.dur_ns;
      slow_freq += *s.freq_mhz;
    } else {
      normal.push_back(s.dur_ns);
    }
  }
  if (n_slow < 3 || n_slow * 20 < n_all || normal.empty()) return std::nullopt;
  std::nth_element(normal.begin(), normal.begin() + normal.size() / 2, normal.end());
  const int64_t typical = normal[normal.size() / 2];
  Loss l;
  l.lost_ns = std::max<int64_t>(slow_ns - n_slow * typical, 0);
  l.finding = {
      BottleneckKind::FrequencyLimited,
      c.focus_name,
      fmt::format("{} of {} {} steps ran below {:.0f}% of the reference {:.0f} MHz ({}) at "
                  "{:.0f} MHz on average; they took {:.2f} ms each vs {:.2f} ms for the "
                  "others, {} lost",
                  n_slow, n_all, c.focus_name, 100 * c.t.frequency_ratio, *r.reference_freq_mhz,
                  r.reference_freq_source, slow_freq / static_cast<double>(n_slow),
                  static_cast<double>(slow_ns) / static_cast<double>(n_slow) / 1e6,
                  static_cast<double>(typical) / 1e6, ms(l.lost_ns)),
      {"a throttling episode: see the step timeline; check thermal and power limits and "
       "what else ran on the host at that time",
       "compare a slow stretch with a normal one: `pacer compare` splits the difference into "
       "frequency, IPC, instruction and off-CPU parts"}};
  if (static_cast<double>(l.lost_ns) <= 0.02 * static_cast<double>(c.phase_ns)) return std::nullopt;
  return l;
}

// Step time not covered by any op (gaps) plus op time no worker was busy (waits).
std::optional<Loss> overhead_rule(const RuleContext& c) {
  if (c.focus != Phase::Decode && c.focus != Phase::Prefill) return std::nullopt;
  const Report& r = c.r;
  int64_t step_ns = 0, gap_ns = 0, n = 0;
  for (const StepRow& s : r.steps)
    if (s.phase == c.focus) {
      step_ns += s.dur_ns;
      gap_ns += s.gap_ns();
      ++n;
    }
  const int64_t wait_ns = c.cpu.wait_ns;
  const double share =
      step_ns > 0 ? static_cast<double>(gap_ns + wait_ns) / static_cast<double>(step_ns) : 0.0;
  if (n == 0 || share <= c.t.overhead_share) return std::nullopt;
  const int64_t ops_per_step = c.phase_row.dist.count / std::max<int64_t>(n, 1);
  Loss l;
  l.lost_ns = gap_ns + wait_ns;
  l.finding = {
      BottleneckKind::OverheadBound,
      c.focus_name,
      fmt::format("{} of {} step time is overhead (threshold {}): {} between ops ({:.2f} us "
                  "per gap over ~{} ops per step) and {} inside ops with no worker busy "
                  "(dispatch, join, workers starting late)",
                  pct(share), c.focus_name, pct(c.t.overhead_share), ms(gap_ns),
                  static_cast<double>(gap_ns) / static_cast<double>(n) / 1e3 /
                      static_cast<double>(std::max<int64_t>(ops_per_step, 1)),
                  ops_per_step, ms(wait_ns)),
      {}};
  auto& sug = l.finding.suggestions;
  const Header& h = r.header;
  if (wait_ns > gap_ns) {
    // Workers that share one CPU wait for each other's time slices.
    std::vector<int> cpus;
    bool shared = false;
    for (const WorkerRow& w : r.workers)
      for (int cpu : w.cpus) {
        if (std::find(cpus.begin(), cpus.end(), cpu) != cpus.end()) shared = true;
        cpus.push_back(cpu);
      }
    sug.push_back(fmt::format(
        "workers start late or wait at the join{}: pin one worker per CPU (--pin compact; "
        "this run: pin={}) and use no more threads than idle CPUs",
        shared ? " and several ran on the same CPU (see Workers)" : "",
        h.run.pin.empty() ? "?" : h.run.pin));
    sug.push_back(
        "keep workers spinning briefly between ops instead of sleeping, so a "
        "dispatch does not pay a wake-up");
  }
  sug.push_back(
      "fuse small ops (norm into the next matmul's activation quantization, gate+up in one "
      "pass) so a token has fewer parallel regions");
  sug.push_back(
      fmt::format("recording itself costs time per op (recording={}): compare "
                  "tok/s with recording off",
                  h.run.recording.empty() ? "?" : h.run.recording));
  return l;
}

// Decode steps far slower than the steps around them at a normal clock (the frequency rules take
// the slow-clock ones): lost = sum over them of (their time - the median of the steps around
// them). Against their neighbours rather than the run's median step, so a long generation whose
// steps grow with the context is not taken for disturbed. What the scheduler saw of it (run-queue
// wait, VM steal, CPU quota throttling) is set against that, and so is where the extra time sat:
// in one op (the work stopped as a whole: the host took the CPUs, an SMI, an interrupt storm) or
// spread over the step's ops (everything slower at the same clock: memory bandwidth or cache taken
// by other work).
std::optional<Loss> disturbed_steps_rule(const RuleContext& c) {
  if (c.focus != Phase::Decode) return std::nullopt;
  const Report& r = c.r;
  std::vector<const StepRow*> steps;
  for (const StepRow& s : r.steps)
    if (s.phase == Phase::Decode) steps.push_back(&s);
  if (steps.size() < 8) return std::nullopt;
  std::vector<int64_t> durs;
  for (const StepRow* s : steps) durs.push_back(s->dur_ns);
  std::nth_element(durs.begin(), durs.begin() + durs.size() / 2, durs.end());
  const int64_t median = durs[durs.size() / 2];
  if (median <= 0) return std::nullopt;  // a log whose steps have no duration
  // The median of the (up to) kNeighbours steps centred on step i, itself included.
  constexpr size_t kNeighbours = 15;
  std::vector<int64_t> window;
  const auto local_median = [&](size_t i) {
    const size_t lo = i >= kNeighbours / 2 ? i - kNeighbours / 2 : 0;
    const size_t hi = std::min(steps.size(), lo + kNeighbours);
    const size_t from = hi - std::min(hi, kNeighbours);
    window.clear();
    for (size_t k = from; k < hi; ++k) window.push_back(steps[k]->dur_ns);
    std::nth_element(window.begin(), window.begin() + window.size() / 2, window.end());
    return window[window.size() / 2];
  };
  const double clock_limit =
      r.reference_freq_mhz ? c.t.frequency_ratio * *r.reference_freq_mhz : 0.0;
  auto op_p50 = [&r](const std::string& name) {
    for (const OpRow& row : r.by_phase_op)
      if (row.phase == Phase::Decode && row.name == name) return row.dist.p50_ns;
    return 0.0;
  };
  int n_slow = 0, n_paused = 0;
  int64_t lost = 0, slow_ns = 0, runq = 0, steal = 0, throttled = 0;
  bool has_runq = false, has_steal = false, has_throttled = false;
  const StepRow* worst = nullptr;  // the paused step whose one op ran longest
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepRow& s = *steps[i];
    if (s.freq_mhz && *s.freq_mhz < clock_limit) continue;
    const int64_t around = local_median(i);
    if (around <= 0 ||
        static_cast<double>(s.dur_ns) <= c.t.slow_step_ratio * static_cast<double>(around))
      continue;
    const int64_t excess = s.dur_ns - around;
    ++n_slow;
    lost += excess;
    slow_ns += s.dur_ns;
    runq += s.runq_ns.value_or(0);
    steal += s.steal_ns.value_or(0);
    throttled += s.throttled_ns.value_or(0);
    has_runq |= s.runq_ns.has_value();
    has_steal |= s.steal_ns.has_value();
    has_throttled |= s.throttled_ns.has_value();
    if (!s.longest_op.empty() &&
        static_cast<double>(s.longest_op_ns) - op_p50(s.longest_op) >= 0.5 * excess) {
      ++n_paused;
      if (!worst || s.longest_op_ns > worst->longest_op_ns) worst = &s;
    }
  }
  if (n_slow < 2 || static_cast<double>(lost) <= c.t.disturbed_share * c.phase_ns)
    return std::nullopt;
  Loss l;
  l.lost_ns = lost;
  std::string evidence = fmt::format(
      "{} of {} decode steps took over {:.1f}x the median of the {} steps around them at a "
      "normal clock (the run's median step: {}): {:.2f} ms each on average, {} lost ({} of "
      "decode)",
      n_slow, steps.size(), c.t.slow_step_ratio, kNeighbours, ms(median),
      static_cast<double>(slow_ns) / n_slow / 1e6, ms(lost),
      pct(static_cast<double>(lost) / static_cast<double>(c.phase_ns)));
  const double median_tok_s = 1e9 / static_cast<double>(median);
  evidence += fmt::format("; the median step alone runs {:.1f} tok/s", median_tok_s);
  if (r.throughput.decode_roofline_tok_s)
    evidence += fmt::format(" = {:.0f}% of the {:.1f} tok/s decode roofline",
                            100 * median_tok_s / *r.throughput.decode_roofline_tok_s,
                            *r.throughput.decode_roofline_tok_s);
  const int64_t seen = runq + steal + throttled;
  const auto part = [](bool recorded, std::string_view what, int64_t ns) {
    return fmt::format("{} {}", what, recorded ? ms(ns) : std::string("not recorded"));
  };
  const std::string seen_parts = fmt::format("{}, {}, {}", part(has_runq, "run-queue wait", runq),
                                             part(has_steal, "VM steal", steal),
                                             part(has_throttled, "quota throttling", throttled));
  const bool guest_saw_it = 2 * seen >= lost;
  if (guest_saw_it) {
    evidence +=
        fmt::format(". The scheduler's figures cover most of it in those steps: {}", seen_parts);
  } else {
    evidence +=
        fmt::format(". The scheduler's figures cover little of it in those steps ({})", seen_parts);
    if (2 * n_paused >= n_slow && worst) {
      evidence += fmt::format(
          "; in {} of them one op held most of the extra time ({} took {} against its median "
          "{:.3f} ms): the work stopped for a while rather than ran slower",
          n_paused, worst->longest_op, ms(worst->longest_op_ns), op_p50(worst->longest_op) / 1e6);
    } else {
      evidence +=
          "; the extra time was spread over the steps' ops: everything ran slower at the same "
          "clock, as when other work takes memory bandwidth or cache";
    }
  }
  l.finding.kind = BottleneckKind::Disturbed;
  l.finding.subject = c.focus_name;
  l.finding.evidence = std::move(evidence);
  auto& sug = l.finding.suggestions;
  const bool vm = r.header.host.virtualized.value_or(false);
  if (guest_saw_it) {
    sug.push_back(
        "other threads or the hypervisor took the workers' CPUs in those steps: see the off-CPU "
        "and steal figures, keep other load off these CPUs and pin the workers (--pin)");
  } else if (vm) {
    sug.push_back(
        "on a VM this is the host: it ran something else on these vCPUs (not every hypervisor "
        "reports steal) or another guest took the memory bandwidth. Ask for dedicated or pinned "
        "vCPUs, or repeat the run at a quieter time");
  } else {
    sug.push_back(
        "look for what interrupted the workers: interrupt counts (/proc/interrupts before and "
        "after), SMIs (`turbostat`'s SMI column), page faults, and other processes (`perf sched "
        "latency`)");
  }
  sug.push_back(
      "the median step is what this machine gives undisturbed; `pacer compare` against a quiet "
      "run splits the difference into its parts");
  return l;
}

// Workers done early and waiting at the join for the op's slowest one: lost = the time the
// ops would have saved with every worker as fast as their mean, sum(longest - own) / workers.
std::optional<Loss> imbalance_rule(const RuleContext& c) {
  if (c.focus != Phase::Decode && c.focus != Phase::Prefill) return std::nullopt;
  const CpuMetrics& cpu = c.cpu;
  const int workers = static_cast<int>(c.r.workers.size());
  if (!cpu.imbalance_share || workers < 2 || *cpu.imbalance_share <= c.t.imbalance_share) {
    return std::nullopt;
  }
  Loss l;
  l.lost_ns = cpu.imbalance_ns / workers;
  std::string busy;
  for (const WorkerRow& w : c.r.workers) {
    busy += fmt::format("{}worker {} {}", busy.empty() ? "" : ", ", w.w, ms(w.busy_ns));
  }
  l.finding = {
      BottleneckKind::LoadImbalanced,
      c.focus_name,
      fmt::format("in {}'s parallel ops the workers spent {} of their time done and waiting for "
                  "the op's slowest worker (threshold {}): ~{} of op time lost at the joins "
                  "(busy: {})",
                  c.focus_name, pct(*cpu.imbalance_share), pct(c.t.imbalance_share), ms(l.lost_ns),
                  busy),
      {"every worker owns an equal share of the rows (work stealing moves only their tails), so "
       "a slow worker still sets much of the pace: keep other load off the workers' CPUs and pin "
       "one worker per core (--pin compact or cores; this run: pin=" +
           (c.r.header.run.pin.empty() ? std::string("?") : c.r.header.run.pin) + ")",
       "on SMT or hybrid (performance + efficiency core) CPUs use one worker per physical "
       "performance core; on a VM, vCPUs slowed by the host show here (compare a slow run with "
       "a normal one: `pacer compare`)"}};
  return l;
}

// An op that streams faster than the header's bandwidth: that figure was measured once, before
// the run (`pacer bench` measures each row's again just before its reps and writes that one), so
// a machine whose bandwidth moved during the run, or a probe that under-read it, leaves ops above
// 100 %. Said once, with the largest, rather than left as an unexplained % roof over 100.
void note_ops_above_roofline(const Report& r, std::vector<std::string>& notes) {
  const OpRow* worst = nullptr;
  int above = 0;
  for (const OpRow& row : r.by_phase_op) {
    if (!row.cpu.roofline_pct || *row.cpu.roofline_pct <= 100.0) continue;
    ++above;
    if (!worst || *row.cpu.roofline_pct > *worst->cpu.roofline_pct) worst = &row;
  }
  if (worst == nullptr || !r.header.bandwidth_gbs) return;
  notes.push_back(fmt::format(
      "{} op{} streamed faster than the header's {:.1f} GB/s ({} :: {} at {:.1f} GB/s, {:.0f}% of "
      "it): that bandwidth was measured before the run, so the machine's bandwidth moved during "
      "the run or the probe under-read it, and % roof overstates {}",
      above, above == 1 ? "" : "s", *r.header.bandwidth_gbs, phase_name(worst->phase), worst->name,
      worst->cpu.gbs.value_or(0.0), *worst->cpu.roofline_pct,
      above == 1 ? "that op" : "those ops"));
}

// The loss rules, in the order they are evaluated (a rule may look at the earlier ones' losses).
// The losses are then ranked by the time they cost; the first is the verdict.
using LossRule = std::optional<Loss> (*)(const RuleContext&);
constexpr LossRule kLossRules[] = {offcpu_rule,   frequency_mean_rule, frequency_episode_rule,
                                   overhead_rule, imbalance_rule,      disturbed_steps_rule};

}  // namespace

void classify_bottleneck(Report& r, const BottleneckThresholds& t) {
  Bottleneck& b = r.bottleneck;
  auto top = std::max_element(
      r.phases.begin(), r.phases.end(),
      [](const PhaseRow& a, const PhaseRow& c) { return a.total_ns < c.total_ns; });
  if (top == r.phases.end() || top->total_ns == 0) {
    b.notes.push_back("no timed phases in the log: nothing to classify");
    return;
  }
  // A `pacer bench` tg row's log (header bench_test "tg32", "tg32 @ d4096"): its prefill only
  // fills the KV cache to the row's depth (4096 tokens take far longer than 32 decode steps), and
  // what the row measures is decode, so decode is what is classified.
  const auto bench_test = r.header.raw.find(eventlog::header_key::kBenchTest);
  if (top->name == phase_name(Phase::Prefill) && bench_test != r.header.raw.end() &&
      bench_test->is_string() && bench_test->get<std::string>().starts_with("tg")) {
    const auto decode = std::find_if(r.phases.begin(), r.phases.end(), [](const PhaseRow& p) {
      return p.name == phase_name(Phase::Decode);
    });
    if (decode != r.phases.end() && decode != top && decode->total_ns > 0) {
      b.notes.push_back(fmt::format(
          "a `pacer bench` {} row: its {} ({} of the run) fills the KV cache before the measured "
          "decode, so decode is classified",
          bench_test->get<std::string>(), top->name, pct(top->share)));
      top = decode;
    }
  }
  b.dominant_phase = top->name;
  b.dominant_phase_share = top->share;
  b.dominant_phase_ns = top->total_ns;
  note_ops_above_roofline(r, b.notes);
  const Phase focus = focus_phase(top->name);
  const std::string focus_name(phase_name(focus));

  const OpRow* phase_row = nullptr;
  for (const OpRow& row : r.by_phase)
    if (row.phase == focus) phase_row = &row;
  const OpRow* top_op = nullptr;
  for (const OpRow& row : r.by_phase_op)
    if (row.phase == focus) {
      top_op = &row;  // rows are sorted by total time
      break;
    }
  if (top_op) {
    b.dominant_op = top_op->name;
    b.dominant_op_phase = focus;
    b.dominant_op_share = top_op->share;
  }
  if (!phase_row) {
    b.notes.push_back(fmt::format("no {} ops recorded: only the phase time is known", focus_name));
    return;
  }
  const CpuMetrics& cpu = phase_row->cpu;
  std::vector<Loss> losses;
  for (LossRule rule : kLossRules) {
    const RuleContext ctx{r, t, focus, focus_name, *phase_row, cpu, top->total_ns, losses, b.notes};
    if (std::optional<Loss> l = rule(ctx)) losses.push_back(std::move(*l));
  }
  std::stable_sort(losses.begin(), losses.end(),
                   [](const Loss& a, const Loss& c) { return a.lost_ns > c.lost_ns; });
  std::optional<Finding> kind = nature(r, focus_name, cpu, t, &b.notes);
  if (kind && focus == Phase::Decode) weigh_kernel_ceiling(r, *kind);
  if (kind && focus == Phase::Decode && r.throughput.decode_tok_s &&
      r.throughput.decode_roofline_tok_s) {
    kind->evidence += fmt::format(
        "; decode runs at {:.1f} tok/s = {:.0f}% of the {:.1f} tok/s "
        "decode roofline",
        *r.throughput.decode_tok_s,
        100 * *r.throughput.decode_tok_s / *r.throughput.decode_roofline_tok_s,
        *r.throughput.decode_roofline_tok_s);
  }
  if (!losses.empty()) {
    b.verdict = losses.front().finding.kind;
  } else if (kind) {
    b.verdict = kind->kind;
  }
  for (Loss& l : losses) b.findings.push_back(std::move(l.finding));
  if (kind) b.findings.push_back(std::move(*kind));

  if (top_op) {
    std::optional<Finding> op_kind =
        nature(r, fmt::format("{} :: {}", focus_name, top_op->name), top_op->cpu, t, nullptr);
    if (op_kind && focus == Phase::Decode) weigh_kernel_ceiling_op(r, top_op->cpu, *op_kind);
    if (op_kind) {
      op_kind->evidence =
          fmt::format("the largest op ({} of {} op time); ", pct(top_op->share), focus_name) +
          op_kind->evidence;
      if (top_op->cpu.freq_mean_mhz)
        op_kind->evidence += fmt::format("; {:.0f} MHz mean", *top_op->cpu.freq_mean_mhz);
      op_kind->suggestions.clear();
      b.findings.push_back(std::move(*op_kind));
    }
  }
  if (focus == Phase::Decode && top->share > 0.5) {
    b.notes.push_back(fmt::format(
        "decode dominates ({} of the run): per-token cost is what to optimise; speculative "
        "decoding (draft + verify) and quantization cut it, batching raises throughput",
        pct(top->share)));
  }
}

}  // namespace detail
}  // namespace pacer::analysis
