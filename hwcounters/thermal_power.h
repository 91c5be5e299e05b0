#pragma once
// Thermal throttling and energy, where the machine has them: the thermal_throttle event counts in
// sysfs, and RAPL energy through powercap (/sys/class/powercap/intel-rapl:N) or perf's `power`
// PMU. Each is probed once; when absent, the reason goes into the log header.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace pacer::hwcounters {

struct ThrottleCounts {
  int64_t core = 0;     // sum of core_throttle_count over the CPUs read
  int64_t package = 0;  // sum of package_throttle_count over their packages
};

class ThrottleCounters {
 public:
  // nullptr and the reason when /sys/devices/system/cpu/cpu0/thermal_throttle is absent.
  static std::unique_ptr<ThrottleCounters> open(std::string* why_not);
  // Cumulative counts of the given CPUs (a few files per CPU: read only the workers' CPUs).
  ThrottleCounts read(std::span<const int> cpus) const noexcept;

 private:
  ThrottleCounters() = default;
};

class EnergyMeter {
 public:
  // Probes for `probe_ms` and rejects a counter that does not advance (a VM's perf power PMU may
  // exist and read 0). nullptr and the reason when none works.
  static std::unique_ptr<EnergyMeter> open(std::string* why_not, int probe_ms = 20);
  ~EnergyMeter();
  EnergyMeter(const EnergyMeter&) = delete;
  EnergyMeter& operator=(const EnergyMeter&) = delete;

  const std::string& name() const noexcept { return name_; }  // "powercap intel-rapl:0 ..."
  // Joules since open, wrap-around handled; nullopt on a read error. Call from one thread.
  std::optional<double> joules() noexcept;

 private:
  EnergyMeter() = default;

  std::string name_;
  // powercap: energy_uj files (one per package domain) and their wrap ranges.
  std::vector<std::string> files_;
  std::vector<double> ranges_j_;
  std::vector<double> last_j_;
  // perf power PMU: one fd per package and its scale (J per count).
  std::vector<int> fds_;
  double scale_ = 0;
  double total_j_ = 0;
};

}  // namespace pacer::hwcounters
