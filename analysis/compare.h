#pragma once
// `pacer compare`: why was the abnormal run slower than the normal one?
//
//   RunCycles a = load_run("normal.jsonl"), b = load_run("abnormal.jsonl");
//   Comparison c = compare_runs(a, b, {});      // throws CompareError if the runs are not alike
//   std::string md = render_markdown(c);         // compare_render.h
//
// A cycle is one decode step. For every (op, metric, device) the comparison tests the op's share
// of the cycle (β) and the metric's mean during the op (μ) between the runs and ranks the rows by
// a suspicion score; independently, it splits the change in mean step time into additive causes
// (compare_attribution.h) and states a verdict. Rules flag a frequency drop, run-queue growth,
// IPC loss and extra instructions whatever their rank.
#include <array>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/compare_attribution.h"
#include "analysis/compare_input.h"
#include "analysis/stats.h"

namespace pacer::analysis {

// The logs cannot be compared (different model, type or shape) and --force was not given.
class CompareError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CompareOptions {
  bool force = false;             // compare even different models/types/shapes
  double freq_drop_pct = 3.0;     // rule: a clock drop of at least this many percent ...
  double alpha = 0.01;            // ... significant at this level (Welch or U-test) is flagged
  double runq_flag_pts = 1.0;     // rule: run-queue growth of this many pts of the cycle
  double counter_flag_pct = 5.0;  // rule: IPC / instruction change of an op (>= 1% of the cycle)
  double z_cap = 10.0;            // |Z| beyond this adds nothing to the suspicion score
};

struct Compatibility {
  std::vector<std::string> errors;    // refuse to compare unless forced
  std::vector<std::string> warnings;  // compare, but say so
  // The differences that change the work itself (threads, pinning, worker CPUs, ISA, KV cache
  // type, prompt length, decode steps, and the kernel and executor settings both logs record:
  // work stealing, idle prefetch, GEMV streams and prefetch, repacking, AMX, BF16 dot): the
  // verdict names them first, as the leading candidate.
  std::vector<std::string> work_changes;
};
Compatibility check_compatibility(const Header& normal, const Header& abnormal);

// One (op, metric, device) row of the in-depth table. Index 0 = normal, 1 = abnormal.
struct MetricRow {
  std::string op;
  int device = kHostDevice;
  std::optional<Metric> metric;          // nullopt: the op has no metric on this device (β only)
  bool pseudo = false;                   // oncpu / runq
  std::array<stats::Summary, 2> beta{};  // % of cycle time, per cycle
  std::array<stats::Summary, 2> mu{};    // metric value (stored unit), per cycle
  double d_beta = 0, z_beta = 0, p_beta = 0, u_p_beta = 0;
  double d_mu = 0, z_mu = 0, z_log_mu = 0, p_mu = 0, u_p_mu = 0;
  double impact_pts = 0;  // pts of the normal cycle this row's change accounts for
  double score = 0;       // impact_pts x (min(|Z(β)|, cap) + min(|Z(log μ)|, cap))
  bool flagged = false;   // matches a rule flag (see Flag)
};

enum class FlagKind { FrequencyDrop, RunQueue, IpcLoss, Instructions };
struct Flag {
  FlagKind kind;
  std::string text;          // one sentence with numbers
  std::vector<int> devices;  // CPUs / host it concerns
  std::string op;            // the op it concerns, if any
  double pct_change = 0;     // relative change of the flagged quantity
};

// Decode-step durations of one run.
struct CycleStats {
  stats::Summary ms;
  double p50 = 0, p90 = 0, p99 = 0, min = 0, max = 0;
  std::vector<double> sorted_desc_ms;  // the ranked distribution
};

// A CPU's (or the host's) clock during the decode steps, normal vs abnormal.
struct DeviceFrequency {
  int device = kHostDevice;
  std::array<stats::Summary, 2> mhz{};
  double pct_change = 0, p_welch = 0, p_u = 0;
};

struct Comparison {
  std::array<std::string, 2> label{"normal", "abnormal"};
  std::array<std::string, 2> path;
  std::array<Header, 2> header;
  std::array<std::vector<std::string>, 2> notes;  // reader and loader notes per run
  Compatibility compat;
  bool forced = false;

  std::array<CycleStats, 2> cycles;
  stats::WelchResult step_welch;
  stats::MannWhitneyResult step_u;
  std::array<std::vector<double>, 2> step_ms;        // per cycle, in log order (HTML timeline)
  std::array<std::vector<double>, 2> step_freq_mhz;  // per cycle, mean over CPUs (NaN absent)
  std::vector<DeviceFrequency> frequency;            // per CPU, then host

  Attribution attribution;
  std::vector<MetricRow> rows;  // by score, descending
  std::vector<Flag> flags;

  // Words.
  std::optional<Part> main_cause;  // nullopt when there is no significant difference
  // Mean cgroup CPU-quota throttling per step (ns; NaN where the log has none), and whether it
  // explains most of the run-queue part: then that part is named "CPU quota throttling".
  std::array<double, 2> throttled_ns{std::nan(""), std::nan("")};
  bool quota_throttling = false;
  // Mean VM steal per step (ns, summed over the VM's CPUs; NaN where the log has none), and
  // whether its growth is at least a quarter of the step-time growth: then the verdict names it.
  std::array<double, 2> steal_ns{std::nan(""), std::nan("")};
  std::string steal_scope;  // "the workers' CPUs" (per-CPU steal in both logs) or "all CPUs"
  bool vm_steal = false;
  // Memory-bandwidth contention: the weight-streaming ops' rate (weight bytes / their wall time,
  // GB/s) and the other ops' mean time per step, per run; `membw_contention` when the streaming
  // rate fell at the same clock, without run-queue, quota or steal growth and with the same
  // configuration, while the other ops kept their time (the co-runner competes for DRAM, not for
  // the core). Then the CPU-work / IPC part is named "memory bandwidth contention".
  std::array<double, 2> stream_gbs{std::nan(""), std::nan("")};
  std::array<double, 2> other_ops_ms{std::nan(""), std::nan("")};
  bool membw_contention = false;
  // The same build (pacer version and git sha) and the same configuration did more cycles per
  // step, and not only in the weight-streaming ops: the code did the same work, so the extra
  // cycles came from other work on the host (shared caches, memory bandwidth, an SMT sibling,
  // a noisy VM neighbour). Then the CPU-work / IPC part is named "interference" (when the
  // abnormal run was faster: the normal run was the disturbed one).
  bool same_build_and_config = false;
  // Every op with at least 5% of the on-CPU time changed by at least a quarter of the on-CPU change
  // of all ops, in the same direction: a host-wide effect, not one op's (an IPC loss in one op
  // stays that op's IPC loss).
  bool oncpu_growth_broad = false;
  bool interference = false;
  double main_cause_pts = 0;
  bool significant = false;
  std::string verdict;
  std::string overview;
  std::vector<std::string> findings;  // markdown, one bullet each (flags first)
  std::string recommendation;

  double delta_pct() const noexcept;  // mean step time change, % of normal
};

Comparison compare_runs(const RunCycles& normal, const RunCycles& abnormal,
                        const CompareOptions& opts = {});

// The cause the verdict names first, as a stable key for scripts and trial tables:
// "configuration" (the headers differ in the work), "none" (no significant difference), else the
// leading part by its evidence: "cpu quota", "memory bandwidth", "vm steal", "frequency",
// "run queue", "ipc", "instructions", "cpu work", "on-cpu time", "blocked", "unexplained".
std::string leading_cause(const Comparison& c);

// What the decode matmul kernels' ceiling from cache (their rate with the weights in L2, measured
// before each run: runtime/kernel_ceiling.h) says about a slowdown of `slowdown_pct` % in tok/s
// when it went from `baseline` to `candidate` tok/s: kernels that fell by at least 3 % and half
// the slowdown point at the arithmetic (the code, the clock, a sibling on the core); kernels
// within 3 % (what their own passes vary by) point outside it (memory, attention, the threads'
// waits); else the share they explain. "" when either is 0 or there is no slowdown. Used by
// compare's findings and by `pacer regress` on the stored runs.
std::string kernel_ceiling_note(double slowdown_pct, double baseline, double candidate);

// The legend shared by every renderer: (term, definition) pairs.
std::vector<std::pair<std::string, std::string>> compare_legend(const CompareOptions& opts = {});

// "CPUs 0-1,4" / "CPU 3" / "host" for a set of devices.
std::string describe_devices(const std::vector<int>& devices);

}  // namespace pacer::analysis
