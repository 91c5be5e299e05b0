#pragma once
// Everything one thread reads at each op boundary: a hardware perf group where the PMU allows it
// (cycles, instructions, ref-cycles, LLC misses, branch misses + the user's --events), the
// software group (task-clock, context switches, migrations, page faults), and schedstat's
// run-queue delay. Where perf_event_open is refused altogether, task_clock_ns comes from
// CLOCK_THREAD_CPUTIME_ID. What could not be counted is listed with the reason.
#include <memory>
#include <string>
#include <vector>

#include "hwcounters/counter_source.h"

namespace pacer::hwcounters {

struct CounterSpec {
  std::vector<std::string> extra_events;  // libpfm4 names (--events a,b,c)
  bool hardware = true;                   // try the PMU at all
  bool schedstat = true;                  // per-op run-queue delay
  bool use_rdpmc = true;
};

// What the header says about the counters (docs/event-log.md `counters`).
struct CounterSetStatus {
  std::string mode;                      // "hardware" | "software" | "clock"
  std::vector<std::string> live;         // log keys, in source order
  std::vector<Unavailable> unavailable;  // event -> reason
  std::string read;                      // read methods joined with '+', e.g. "rdpmc+read()"
  bool kernel_mode = true;               // false: hardware events count user mode only
  bool software_kernel_mode = true;      // false: software events too (context switches read 0)
};

class CounterSet {
 public:
  CounterSet() = default;
  // Opens every source for the calling thread. Never throws for unsupported events.
  static CounterSet open_for_calling_thread(const CounterSpec& spec);
  // A set from ready-made sources (tests use fakes).
  explicit CounterSet(std::vector<std::unique_ptr<CounterSource>> sources,
                      std::vector<Unavailable> extra_unavailable = {});

  std::vector<std::unique_ptr<CounterSource>>& sources() noexcept { return sources_; }
  const std::vector<std::unique_ptr<CounterSource>>& sources() const noexcept { return sources_; }
  CounterSetStatus status() const;

 private:
  std::vector<std::unique_ptr<CounterSource>> sources_;
  std::vector<Unavailable> extra_unavailable_;  // sources that could not open at all
  bool kernel_mode_ = true;
  bool software_kernel_mode_ = true;
};

}  // namespace pacer::hwcounters
