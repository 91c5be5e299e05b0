#pragma once
// A perf-stat-like summary of an event log's counters: the scheduler's view of whole steps (as
// perf stat counts them), then every counted event summed over all op slices, with its rate and
// the derived figures perf prints (CPUs utilized, IPC, GHz), and every event that was not counted
// with the reason the recorder gave. `pacer run --events-out` prints
// it at the end of the run, as `perf stat` does.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/event_log.h"

namespace pacer::analysis {

struct CounterTotal {
  std::string name;  // as in the log: instructions, cycles, task_clock_ns, context_switches, ...
  double total = 0;  // over every op slice of every worker
  int64_t slices = 0;
};

// Whole steps: what the scheduler saw of every worker from each step's start to its end (the
// steps' `sched` records), which is what `perf stat` counts over the same window: the sleeps and
// wake-ups between ops included. Absent (has_sched false) in a log without them.
struct StepTotals {
  int64_t prefill_steps = 0, decode_steps = 0;
  double wall_ns = 0;  // summed step durations
  double oncpu_ns = 0, runq_ns = 0;
  int64_t context_switches = 0;  // voluntary + involuntary
  bool has_sched = false;
};

struct CounterSummary {
  std::string path;
  Header header;
  StepTotals steps;
  int64_t ops = 0, slices = 0;
  double wall_ns = 0;                // first op start to last op end
  double op_wall_ns = 0;             // summed op durations
  double oncpu_ns = 0, runq_ns = 0;  // summed over slices (oncpu_ns, else task_clock_ns)
  bool has_oncpu = false, has_runq = false;
  std::vector<CounterTotal> counters;  // first-seen order

  const CounterTotal* find(std::string_view name) const noexcept;
};

// Reads the log (LogError on a bad one).
CounterSummary summarize_counters(const std::string& path);
CounterSummary summarize_counters_text(std::string_view text, const std::string& name);

// perf stat's layout: value, event, then "# derived figure". Values are grouped by thousands;
// the header's floats are rounded for humans (nominal 2596 MHz, not 2596.1354721114903).
std::string render_counter_summary(const CounterSummary& s);

}  // namespace pacer::analysis
