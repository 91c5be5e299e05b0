#pragma once
// Event lists and derived metrics as data (LIKWID's groups/*.txt idea): what pacer counts by
// default, under which log key, and how the derived numbers are computed from those keys.
#include <optional>
#include <span>
#include <string_view>

namespace pacer::hwcounters {

enum class EventKind { Hardware, Software };

struct EventDef {
  std::string_view key;       // log key (docs/event-log.md `counters`)
  std::string_view pfm_name;  // what libpfm4 resolves (a perf generic name works on any PMU)
  EventKind kind;
  std::string_view description;
};

// cycles, instructions, ref_cycles, llc_misses, branch_misses (one perf group, leader cycles).
std::span<const EventDef> default_hardware_events() noexcept;
// task_clock_ns, context_switches, cpu_migrations, page_faults (one group, leader task-clock).
std::span<const EventDef> software_events() noexcept;

// How a derived metric scales numerator / denominator.
enum class MetricScale { One, PerKilo, TscMhz, NsToMhz };

// value = events[0] / events[1] x scale. `wall_ns` is the op's wall time, not a counter.
struct DerivedMetric {
  std::string_view name;
  std::string_view numerator;
  std::string_view denominator;
  MetricScale scale;
  std::string_view formula;  // for people: how the value is computed
  std::string_view caveat;   // when not to trust it
};

std::span<const DerivedMetric> derived_metrics() noexcept;
const DerivedMetric* find_metric(std::string_view name) noexcept;

// Applies one metric's formula; nullopt when the denominator is 0.
std::optional<double> evaluate_metric(const DerivedMetric& m, double numerator, double denominator,
                                      double tsc_mhz) noexcept;

}  // namespace pacer::hwcounters
