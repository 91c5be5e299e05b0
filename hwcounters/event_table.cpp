#include "hwcounters/event_table.h"

#include <array>

namespace pacer::hwcounters {
namespace {

// perf's generic names: libpfm4 maps them to the running CPU's PMU, so the same table works on
// Intel and AMD. PERF_COUNT_HW_CACHE_MISSES is the last-level-cache miss event on both.
constexpr std::array kHardware = {
    EventDef{eventlog::counter_key::kCycles, "cycles", EventKind::Hardware,
             "core clock cycles while unhalted"},
    EventDef{eventlog::counter_key::kInstructions, "instructions", EventKind::Hardware,
             "instructions retired"},
    EventDef{eventlog::counter_key::kRefCycles, "ref-cycles", EventKind::Hardware,
             "reference cycles at the TSC (nominal) rate while unhalted"},
    EventDef{eventlog::counter_key::kLlcMisses, "PERF_COUNT_HW_CACHE_MISSES", EventKind::Hardware,
             "last-level cache misses"},
    EventDef{eventlog::counter_key::kBranchMisses, "branch-misses", EventKind::Hardware,
             "mispredicted branches"},
};

// The group leader (task-clock) comes first: its enabled time is the thread's on-CPU time.
constexpr std::array kSoftware = {
    EventDef{eventlog::counter_key::kTaskClockNs, "task-clock", EventKind::Software,
             "time the thread was on a CPU (ns)"},
    EventDef{eventlog::counter_key::kContextSwitches, "context-switches", EventKind::Software,
             "times the thread was switched out"},
    EventDef{eventlog::counter_key::kCpuMigrations, "cpu-migrations", EventKind::Software,
             "times the thread moved to another CPU"},
    EventDef{eventlog::counter_key::kPageFaults, "page-faults", EventKind::Software,
             "page faults (minor + major)"},
};

}  // namespace

std::span<const EventDef> default_hardware_events() noexcept {
  return kHardware;
}
std::span<const EventDef> software_events() noexcept {
  return kSoftware;
}
std::span<const DerivedMetric> derived_metrics() noexcept {
  return eventlog::kDerivedMetrics;
}

}  // namespace pacer::hwcounters
