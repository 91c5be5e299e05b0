#include "hwcounters/event_table.h"

#include <array>

namespace pacer::hwcounters {
namespace {

// perf's generic names: libpfm4 maps them to the running CPU's PMU, so the same table works on
// Intel and AMD. PERF_COUNT_HW_CACHE_MISSES is the last-level-cache miss event on both.
constexpr std::array kHardware = {
    EventDef{"cycles", "cycles", EventKind::Hardware, "core clock cycles while unhalted"},
    EventDef{"instructions", "instructions", EventKind::Hardware, "instructions retired"},
    EventDef{"ref_cycles", "ref-cycles", EventKind::Hardware,
             "reference cycles at the TSC (nominal) rate while unhalted"},
    EventDef{"llc_misses", "PERF_COUNT_HW_CACHE_MISSES", EventKind::Hardware,
             "last-level cache misses"},
    EventDef{"branch_misses", "branch-misses", EventKind::Hardware, "mispredicted branches"},
};

// The group leader (task-clock) comes first: its enabled time is the thread's on-CPU time.
constexpr std::array kSoftware = {
    EventDef{"task_clock_ns", "task-clock", EventKind::Software,
             "time the thread was on a CPU (ns)"},
    EventDef{"context_switches", "context-switches", EventKind::Software,
             "times the thread was switched out"},
    EventDef{"cpu_migrations", "cpu-migrations", EventKind::Software,
             "times the thread moved to another CPU"},
    EventDef{"page_faults", "page-faults", EventKind::Software, "page faults (minor + major)"},
};

constexpr std::array kMetrics = {
    DerivedMetric{"ipc", "instructions", "cycles", MetricScale::One, "instructions / cycles",
                  "multiplexed counts are scaled estimates (see `mux`)"},
    DerivedMetric{"cpi", "cycles", "instructions", MetricScale::One, "cycles / instructions",
                  "multiplexed counts are scaled estimates (see `mux`)"},
    DerivedMetric{"freq_mhz", "cycles", "ref_cycles", MetricScale::TscMhz,
                  "cycles / ref_cycles x TSC MHz",
                  "ref-cycles tick at the TSC rate only where the CPU's reference clock is the "
                  "TSC (Intel); AMD has no ref-cycles"},
    DerivedMetric{"freq_mhz_task_clock", "cycles", "task_clock_ns", MetricScale::NsToMhz,
                  "cycles / task_clock_ns x 1000",
                  "includes time in the kernel only if cycles counted kernel mode too"},
    DerivedMetric{"llc_mpki", "llc_misses", "instructions", MetricScale::PerKilo,
                  "llc_misses / instructions x 1000",
                  "prefetcher-covered streams miss little even when memory-bound"},
    DerivedMetric{"branch_mpki", "branch_misses", "instructions", MetricScale::PerKilo,
                  "branch_misses / instructions x 1000", ""},
    DerivedMetric{"cpu_utilization", "task_clock_ns", "wall_ns", MetricScale::One,
                  "task_clock_ns / wall_ns",
                  "below 1: the thread was off-CPU (run queue or blocked) during the op"},
};

}  // namespace

std::span<const EventDef> default_hardware_events() noexcept {
  return kHardware;
}
std::span<const EventDef> software_events() noexcept {
  return kSoftware;
}
std::span<const DerivedMetric> derived_metrics() noexcept {
  return kMetrics;
}

const DerivedMetric* find_metric(std::string_view name) noexcept {
  for (const DerivedMetric& m : kMetrics) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

std::optional<double> evaluate_metric(const DerivedMetric& m, double numerator, double denominator,
                                      double tsc_mhz) noexcept {
  if (denominator == 0) return std::nullopt;
  const double ratio = numerator / denominator;
  switch (m.scale) {
    case MetricScale::One:
      return ratio;
    case MetricScale::PerKilo:
      return ratio * 1000.0;
    case MetricScale::TscMhz:
      return ratio * tsc_mhz;
    case MetricScale::NsToMhz:
      return ratio * 1000.0;
  }
  return std::nullopt;
}

}  // namespace pacer::hwcounters
