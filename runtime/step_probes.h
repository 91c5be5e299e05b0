#pragma once
// The recorder's per-step machine probes (docs/event-log.md `step`): process and host CPU usage,
// VM steal, RAPL energy, cgroup CPU throttling and thermal throttle counts. Each takes a begin
// reading when a step starts and fills its delta into the step's StepRecord when it ends; the
// run header says which of them this machine has (`thermal`, `cgroup`). None of this is on the
// per-op hot path: it runs twice per step, on the thread that drives the steps.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "hwcounters/cgroup_cpu.h"
#include "hwcounters/sched.h"
#include "hwcounters/thermal_power.h"

namespace pacer::runtime {

struct RunHeader;
struct StepRecord;

class StepProbes {
 public:
  // Opens what the machine offers (RAPL only with probe_energy: its probe takes ~20 ms).
  // `online_cpus` is what /proc/stat's totals sum over.
  StepProbes(int online_cpus, bool probe_energy);
  ~StepProbes();
  StepProbes(const StepProbes&) = delete;
  StepProbes& operator=(const StepProbes&) = delete;

  // The header's `thermal` and `cgroup` facts.
  void describe(RunHeader& header) const;
  bool has_throttle_counters() const noexcept { return throttle_ != nullptr; }

  // Step start, slowest reads first so the fast ones sit nearest the step's t0 (/proc/stat alone
  // takes tens of microseconds): RAPL, cgroup and thermal throttle (on `throttle_cpus`), then
  // /proc/stat, then the process CPU clock.
  void begin_slow(std::vector<int> throttle_cpus);
  void begin_host() noexcept;
  void begin_process() noexcept;

  // Step end: the process CPU clock and /proc/stat the moment the step ends...
  void end_process() noexcept;
  void end_host() noexcept;
  // ...and, once the op lines are formatted, every delta into `r` (the slow probes read now).
  void finish(StepRecord& r, int64_t step_ns);

 private:
  int online_cpus_ = 0;
  std::unique_ptr<hwcounters::ThrottleCounters> throttle_;
  std::string throttle_why_;
  std::vector<int> throttle_cpus_;
  hwcounters::ThrottleCounts throttle0_;
  std::optional<hwcounters::CgroupCpu> cgroup_;  // the process's cgroup CPU controller
  std::string cgroup_why_;
  hwcounters::CgroupCpuStat cgroup0_;
  std::unique_ptr<hwcounters::EnergyMeter> energy_;
  std::string energy_why_;
  std::optional<double> energy0_;
  hwcounters::HostCpuTimes host0_, host1_;
  int64_t process0_ns_ = 0, process1_ns_ = -1;
};

}  // namespace pacer::runtime
