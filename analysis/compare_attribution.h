#pragma once
// Additive attribution of a change in mean decode-step time to its causes.
//
// Per op, along its critical path (the worker of each instance that finished last):
//   wall    = span + sync                       sync = dispatch (op start -> its chunk start: fork,
//                                               late wake-up) + join (its chunk end -> op end)
//   span    = on-CPU + run-queue + blocked      blocked: off-CPU and not runnable
//   on-CPU  = instructions x CPI / frequency    (CPI = cycles / instructions, frequency = cycles /
//                                                on-CPU time)
// The step adds the time outside every op:  step = sum over ops of wall + outside.
//
// Differences of sums are additive as they are. The product is split with the logarithmic-mean
// Divisia index (LMDI): with L = (ON_b - ON_a) / ln(ON_b / ON_a),
//   ΔON = L ln(I_b/I_a) + L ln(CPI_b/CPI_a) - L ln(F_b/F_a)
// holds exactly (no interaction term, symmetric in the two runs), so the parts always add up to
// the measured difference. What no measured factor explains (sync, time outside ops, ops without
// worker data) is the residual.
//
// With less data the split is coarser, never wrong: without instructions/cycles (no PMU) but with
// a frequency source, on-CPU = (cycles implied by the clock) / frequency, and IPC x instructions
// stay together as "CPU work"; with on-CPU time only, on-CPU is one part.
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/compare_input.h"

namespace pacer::analysis {

enum class Part : int {
  Frequency,     // on-CPU time change from the clock
  Ipc,           // ... from cycles per instruction
  Instructions,  // ... from the instruction count
  CpuWork,       // ... from cycles at a constant clock (IPC x instructions, no PMU to split)
  OnCpu,         // on-CPU time change, nothing to split it with
  RunQueue,      // runnable but waiting for a CPU
  Blocked,       // off-CPU, not runnable (page faults, I/O, futex sleeps)
  Residual,      // sync, time outside ops, ops without worker data
};
inline constexpr int kPartCount = 8;
std::string_view part_name(Part p) noexcept;  // "frequency", "IPC", ...

// How finely an op's on-CPU time could be split (the lower of the two runs).
enum class SplitLevel : int { None = 0, OnCpu = 1, Frequency = 2, Counters = 3 };

struct OpAttribution {
  std::string op;
  std::array<double, 2> mean_ns{};         // mean wall time per cycle, normal / abnormal
  std::array<double, kPartCount> parts{};  // ns per cycle; sums to mean_ns[1] - mean_ns[0]
  SplitLevel level = SplitLevel::None;
  bool runq_measured = false;
  // The factors, per run (NaN when not measured), for the report.
  std::array<double, 2> oncpu_ns{}, runq_ns{}, offcpu_ns{}, sync_ns{};
  // Per run: the critical worker's slice minus the mean worker slice (OpTiming::excess_ns).
  std::array<double, 2> excess_ns{};
  std::array<double, 2> freq_mhz{}, cpi{}, instructions{};

  double delta_ns() const noexcept { return mean_ns[1] - mean_ns[0]; }
  double part(Part p) const noexcept { return parts[static_cast<size_t>(p)]; }
};

struct Attribution {
  std::array<double, 2> mean_ns{};  // mean decode step time
  std::array<double, kPartCount> parts{};
  double residual_sync_ns = 0;      // of the residual: sync inside ops (dispatch + join)
  double residual_dispatch_ns = 0;  // ... of which: op start -> critical chunk start
  double residual_join_ns = 0;      // ... of which: critical chunk end -> op end
  // Run-queue wait outside every slice (a worker woken late, before its chunk began; or between
  // ops), moved from the residual (dispatch first, then time outside ops) into the run-queue
  // part, at most as much as those residual parts changed.
  double runq_outside_ns = 0;
  double residual_outside_ns = 0;     // of the residual: time outside recorded ops
  double residual_unmeasured_ns = 0;  // of the residual: ops without worker data
  // Per run, summed over the ops with worker data: how much longer the worker each op waited
  // for ran than the op's average worker (load imbalance). Not a part: its change is inside the
  // span parts (on-CPU, run queue, blocked), the share of them that is one worker's slice
  // growing rather than every worker's.
  std::array<double, 2> span_excess_ns{};
  std::vector<OpAttribution> ops;       // by |delta| descending
  SplitLevel level = SplitLevel::None;  // the finest level every op with data reached
  bool runq_measured = false;
  std::vector<std::string> not_measured;  // sentences: what could not be split and why

  double delta_ns() const noexcept { return mean_ns[1] - mean_ns[0]; }
  double part(Part p) const noexcept { return parts[static_cast<size_t>(p)]; }
  double sum_of_parts() const noexcept;
};

// Decomposes normal -> abnormal. Both runs must have at least one cycle.
Attribution attribute(const RunCycles& normal, const RunCycles& abnormal);

}  // namespace pacer::analysis
