#pragma once
// One run's event log reduced to what `pacer compare` needs: one cycle per decode step, and for
// every (op, device) the time it took and the metric values measured during it in that cycle.
//
// Ops are grouped by name across layers ("ffn_down" = all layers' ffn_down in that step), so a
// cycle's value for an op is the sum over its instances. Devices are the workers' CPUs and the
// host (the op as a whole, across workers). Two pseudo-ops mirror the step's scheduler view:
// "oncpu" (time on a CPU) and "runq" (time runnable but waiting for one).
#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/event_log.h"

namespace pacer::analysis {

enum class Metric : int {
  CpuFrequency,     // MHz, weighted by on-CPU time
  Ipc,              // instructions / cycles
  Instructions,     // per cycle (decode step)
  Cycles,           // CPU cycles per step (hardware counter)
  LlcMisses,        // per step
  RunqDelay,        // ns per step runnable but not running
  ContextSwitches,  // per step
  OncpuTime,        // ns per step on a CPU
  ProcessCpuUsage,  // CPUs busy in the process over the step (1.0 = one CPU)
  HostCpuUsage,     // CPUs busy on the host over the step
};
inline constexpr int kMetricCount = 10;

struct MetricInfo {
  std::string_view name;  // as in the report: cpu_frequency, ipc, ...
  std::string_view unit;  // display unit after `display_scale`
  double display_scale;   // stored value x scale = displayed value (ns -> us)
};
const MetricInfo& metric_info(Metric m) noexcept;

// A CPU id (>= 0), the host, or a worker whose CPU the log does not say (-2 - w).
inline constexpr int kHostDevice = -1;
std::string device_label(int device);  // "CPU 3", "host", "worker 1"

inline constexpr std::string_view kOncpuOp = "oncpu";
inline constexpr std::string_view kRunqOp = "runq";

// One (op, device) in one cycle. A metric's per-cycle value is num/den; den == 0 means the log
// has no value for it in that cycle.
struct Cell {
  double time_ns = 0;  // time the op took on this device (beta's numerator)
  std::array<double, kMetricCount> num{};
  std::array<double, kMetricCount> den{};
  double value(Metric m) const noexcept;  // NaN when absent
  void add(Metric m, double n, double d) noexcept {
    num[static_cast<int>(m)] += n;
    den[static_cast<int>(m)] += d;
  }
};

// The timing of one op in one cycle along its critical path: for every instance, the worker that
// finished last (the one the op waited for: a worker that started late and finished last is
// critical even when another's slice was longer), summed over instances. Quantities a log lacks
// are NaN.
// wall = dispatch + span + join; span = oncpu + runq + blocked; oncpu = instructions x CPI /
// frequency. sync = dispatch + join.
struct OpTiming {
  double wall_ns = 0;       // sum of (op t1 - t0)
  double dispatch_ns = 0;   // op start -> critical worker's chunk start (late wake-up, fork)
  double join_ns = 0;       // critical worker's chunk end -> op end (join, bookkeeping)
  double span_ns = 0;       // critical worker's slice
  double oncpu_ns = 0;      // its on-CPU time (oncpu_ns, else task_clock_ns)
  double runq_ns = 0;       // its run-queue wait
  double instructions = 0;  // its instructions
  double cycles = 0;        // its cycles (hardware counter)
  double freq_cycles = 0;   // on-CPU time x freq_mhz: cycles estimated from the clock
  // The critical worker's slice minus the mean slice of the instance's workers (0 with one
  // worker): how much longer the worker the op waited for ran than its average worker (load
  // imbalance); negative when it finished last because it started late.
  double excess_ns = 0;
  int instances = 0;
  int instances_without_workers = 0;
};

struct RunCycles {
  std::string path;
  Header header;
  ReadSummary summary;
  int prefill_steps = 0, decode_steps_seen = 0, skipped_steps = 0;
  int64_t migrations = 0;            // worker slices that started and ended on different CPUs
  std::vector<int64_t> step_ids;     // per cycle
  std::vector<double> step_ns;       // per cycle: decode step duration
  std::vector<double> tok_s;         // per cycle (as logged; NaN absent)
  std::vector<double> throttled_ns;  // per cycle: cgroup CPU-quota throttling (NaN absent)
  std::vector<double> steal_ns;      // per cycle: VM steal over all CPUs (NaN absent)
  // per cycle: VM steal on the CPUs this step's workers ran on (NaN where the log has no
  // per-CPU steal or the workers' CPUs are unknown)
  std::vector<double> steal_workers_ns;
  // per cycle: the step's run-queue wait (sched.runq_ns, all workers) that no op slice covers:
  // waits before a worker's chunk started (a late wake-up) or between ops. NaN when the step or
  // its slices have no runq_ns.
  std::vector<double> runq_outside_ns;
  // per cycle: ops that stream memory (weight_bytes > 0: the matmuls, embed; kv_bytes > 0:
  // attention) and the rest.
  std::vector<double> stream_bytes;     // weight and KV-cache bytes the step's ops read
  std::vector<double> stream_ns;        // wall time of those ops
  std::vector<double> other_ops_ns;     // wall time of every other op
  std::set<std::string> streaming_ops;  // names of the ops with weight_bytes or kv_bytes
  std::map<std::pair<std::string, int>, std::vector<Cell>> cells;  // (op, device) -> per cycle
  std::map<std::string, std::vector<OpTiming>> timing;             // op -> per cycle
  std::vector<std::string> op_order;                               // real ops in first-seen order
  std::set<int> cpu_devices;  // CPUs (and unpinned workers) seen in op slices or steps
  std::map<int, std::vector<double>> step_freq_mhz;  // device -> per cycle (NaN absent)
  std::vector<std::string> notes;                    // what the loader had to assume or drop

  size_t cycles() const noexcept { return step_ns.size(); }
  // The series of one (op, device), or nullptr.
  const std::vector<Cell>* find(const std::string& op, int device) const;
};

struct LoadOptions {
  int skip_steps = 0;  // leading decode steps to drop (warm-up)
};

// Reads a log (LogReader) and builds its cycles. Throws LogError for an unreadable log and
// std::runtime_error naming the file when it has no decode step.
RunCycles load_run(const std::string& path, const LoadOptions& opts = {});
RunCycles load_run_text(std::string_view text, const std::string& name,
                        const LoadOptions& opts = {});

}  // namespace pacer::analysis
