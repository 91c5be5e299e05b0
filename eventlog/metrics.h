#pragma once
// Derived metrics as data (LIKWID's groups/*.txt idea): each is numerator / denominator of two
// counter keys (eventlog/schema.h) times a scale. The one place their formulas live: hwcounters
// publishes them in the log header (`derived_metrics`), and analysis computes IPC, clocks and
// miss rates from the logged counters through the same entries.
#include <array>
#include <optional>
#include <string_view>

#include "eventlog/schema.h"

namespace pacer::eventlog {

// How a derived metric scales numerator / denominator.
enum class MetricScale { One, PerKilo, TscMhz, NsToMhz };

// value = counter[numerator] / counter[denominator] x scale. `wall_ns` is the op's wall time,
// not a counter.
struct DerivedMetric {
  std::string_view name;
  std::string_view numerator;
  std::string_view denominator;
  MetricScale scale;
  std::string_view formula;  // for people: how the value is computed
  std::string_view caveat;   // when not to trust it
};

namespace metric_name {
inline constexpr std::string_view kIpc = "ipc";
inline constexpr std::string_view kCpi = "cpi";
inline constexpr std::string_view kFreqMhz = "freq_mhz";
inline constexpr std::string_view kFreqMhzTaskClock = "freq_mhz_task_clock";
inline constexpr std::string_view kLlcMpki = "llc_mpki";
inline constexpr std::string_view kBranchMpki = "branch_mpki";
inline constexpr std::string_view kCpuUtilization = "cpu_utilization";
}  // namespace metric_name

inline constexpr std::string_view kWallNs = "wall_ns";  // the op's wall time (not a counter)

inline constexpr std::array kDerivedMetrics = {
    DerivedMetric{metric_name::kIpc, counter_key::kInstructions, counter_key::kCycles,
                  MetricScale::One, "instructions / cycles",
                  "multiplexed counts are scaled estimates (see `mux`)"},
    DerivedMetric{metric_name::kCpi, counter_key::kCycles, counter_key::kInstructions,
                  MetricScale::One, "cycles / instructions",
                  "multiplexed counts are scaled estimates (see `mux`)"},
    DerivedMetric{metric_name::kFreqMhz, counter_key::kCycles, counter_key::kRefCycles,
                  MetricScale::TscMhz, "cycles / ref_cycles x TSC MHz",
                  "ref-cycles tick at the TSC rate only where the CPU's reference clock is the "
                  "TSC (Intel); AMD has no ref-cycles"},
    DerivedMetric{metric_name::kFreqMhzTaskClock, counter_key::kCycles, counter_key::kTaskClockNs,
                  MetricScale::NsToMhz, "cycles / task_clock_ns x 1000",
                  "includes time in the kernel only if cycles counted kernel mode too"},
    DerivedMetric{metric_name::kLlcMpki, counter_key::kLlcMisses, counter_key::kInstructions,
                  MetricScale::PerKilo, "llc_misses / instructions x 1000",
                  "prefetcher-covered streams miss little even when memory-bound"},
    DerivedMetric{metric_name::kBranchMpki, counter_key::kBranchMisses, counter_key::kInstructions,
                  MetricScale::PerKilo, "branch_misses / instructions x 1000", ""},
    DerivedMetric{metric_name::kCpuUtilization, counter_key::kTaskClockNs, kWallNs,
                  MetricScale::One, "task_clock_ns / wall_ns",
                  "below 1: the thread was off-CPU (run queue or blocked) during the op"},
};

// The entry named `name`, or nullptr.
constexpr const DerivedMetric* find_metric(std::string_view name) noexcept {
  for (const DerivedMetric& m : kDerivedMetrics) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

// The entry named `name`; a name missing from the table does not compile where it is constant.
// The loop returns the entry itself rather than a find_metric pointer tested against nullptr:
// GCC 12 with -fsanitize=undefined does not take that test as a constant expression.
consteval const DerivedMetric& metric(std::string_view name) {
  for (const DerivedMetric& m : kDerivedMetrics) {
    if (m.name == name) return m;
  }
  throw "no such derived metric";  // a compile-time error in consteval
}

// Applies one metric's formula; nullopt when the denominator is 0. tsc_mhz is used only by
// MetricScale::TscMhz.
constexpr std::optional<double> evaluate_metric(const DerivedMetric& m, double numerator,
                                                double denominator, double tsc_mhz = 0) noexcept {
  if (denominator == 0) return std::nullopt;
  const double ratio = numerator / denominator;
  switch (m.scale) {
    case MetricScale::One:
      return ratio;
    case MetricScale::PerKilo:
    case MetricScale::NsToMhz:
      return ratio * 1000.0;
    case MetricScale::TscMhz:
      return ratio * tsc_mhz;
  }
  return std::nullopt;
}

}  // namespace pacer::eventlog
