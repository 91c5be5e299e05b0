#pragma once
// Effective core frequency, from the best source the machine offers (recorded in the log):
//   1. cycles / ref-cycles x TSC MHz, per op, when the PMU counts both (the recorder does this from
//      its counter deltas; nothing here);
//   2. APERF/MPERF from /dev/cpu/N/msr (ratio x TSC MHz), per step per worker;
//   3. cpufreq's scaling_cur_freq, per step per worker;
//   4. a calibrated dependent-instruction loop run on each worker once per step.
//
// Why the loop uses multiplies: a chain of dependent register multiplies advances one link per
// multiply latency (3 cycles on every Intel core since Nehalem and on AMD Zen), so cycles = links
// x 3 exactly, whatever the memory system does. Chains of dependent add-immediates are no good:
// recent cores fold them at rename, and such a chain reads ~10 GHz on the dev machine. A second,
// independent chain (crc32, also 3 cycles) cross-checks the first. /proc/cpuinfo's "cpu MHz" is
// useless in a VM (it is the TSC rate).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hwcounters/counter_source.h"

namespace pacer::hwcounters {

struct TscInfo {
  double mhz = 0;
  std::string source;  // "cpuid 0x15" | "cpuid 0x40000010" | "measured against CLOCK_MONOTONIC"
};
// The invariant TSC's rate; measured once per process (10 ms) when CPUID does not state it.
const TscInfo& tsc_info();

uint64_t read_tsc() noexcept;

// A chain of `latency_cycles`-cycle dependent instructions; run(iters, x) executes 8 x iters links.
struct ChainKernel {
  std::string_view name;
  int latency_cycles;
  uint64_t (*run)(uint64_t iters, uint64_t x);
  std::string_view detail;
};
// imul first, then crc32 where the CPU has SSE4.2.
std::span<const ChainKernel> chain_kernels() noexcept;

// How long a calibration takes: `trials` runs of a short and a long chain; the minimum of each is
// kept (an interrupt only ever adds time) and their difference cancels the timer overhead.
struct CalibrationPlan {
  int small_iters = 64;   // x 8 links
  int large_iters = 320;  // x 8 links
  int trials = 3;
};

// One frequency estimate (MHz) on the calling thread; NaN if the timings made no sense.
double estimate_mhz(const ChainKernel& kernel, double tsc_mhz,
                    const CalibrationPlan& plan = {}) noexcept;

// The scalar clock of `cpu` (MHz, median of three imul-loop estimates), measured by a short-lived
// thread pinned there: the run header's freq_before/after. NaN when the thread cannot be pinned.
double measure_cpu_mhz(int cpu);

class FrequencySource {
 public:
  virtual ~FrequencySource() = default;
  // "aperf_mperf" | "cpufreq" | "calibrated_loop"
  virtual std::string_view name() const noexcept = 0;
  virtual std::string detail() const = 0;
  // Effective MHz of `cpu`, the CPU the calling thread runs on (the loop measures the calling
  // thread; APERF/MPERF average since the previous sample of that CPU). NaN when unknown.
  virtual double sample_mhz(int cpu) noexcept = 0;
};

class CalibratedLoopFrequency final : public FrequencySource {
 public:
  CalibratedLoopFrequency(double tsc_mhz, const ChainKernel& kernel, CalibrationPlan plan = {})
      : tsc_mhz_(tsc_mhz), kernel_(kernel), plan_(plan) {}
  std::string_view name() const noexcept override { return "calibrated_loop"; }
  std::string detail() const override;
  double sample_mhz(int) noexcept override { return estimate_mhz(kernel_, tsc_mhz_, plan_); }

 private:
  double tsc_mhz_;
  ChainKernel kernel_;
  CalibrationPlan plan_;
};

// nullptr and the reason when /dev/cpu/N/msr is not readable (msr module, root, VM passthrough).
std::unique_ptr<FrequencySource> make_aperf_mperf_frequency(double tsc_mhz, std::string* why_not);
// nullptr and the reason when /sys/devices/system/cpu/cpuN/cpufreq/scaling_cur_freq is absent.
std::unique_ptr<FrequencySource> make_cpufreq_frequency(std::string* why_not);

struct FrequencyChoice {
  std::unique_ptr<FrequencySource> source;
  std::vector<Unavailable> rejected;  // better sources that were not available, and why
};
// APERF/MPERF, else cpufreq, else the calibrated imul loop. Never null.
FrequencyChoice choose_frequency_source(double tsc_mhz);

}  // namespace pacer::hwcounters
