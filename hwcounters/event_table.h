#pragma once
// Event lists and derived metrics as data (LIKWID's groups/*.txt idea): what pacer counts by
// default, under which log key, and how the derived numbers are computed from those keys.
#include <optional>
#include <span>
#include <string_view>

#include "eventlog/metrics.h"

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

// The derived metrics live with the event-log schema (eventlog/metrics.h), so the reader computes
// them with the same formulas the header publishes.
using eventlog::DerivedMetric;
using eventlog::evaluate_metric;
using eventlog::find_metric;
using eventlog::MetricScale;
std::span<const DerivedMetric> derived_metrics() noexcept;

}  // namespace pacer::hwcounters
