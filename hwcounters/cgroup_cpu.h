#pragma once
// The CPU controller of the cgroup this process runs in: its CFS quota and its throttling
// counters (cpu.stat), for cgroup v1 (cpu.cfs_quota_us / cpu.cfs_period_us, throttled_time in ns)
// and v2 (cpu.max, throttled_usec). A run inside a container with a CPU quota waits for the next
// CFS period when the quota is spent: that shows as run-queue time unless these counters are read.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace pacer::hwcounters {

struct CgroupCpuStat {
  int64_t nr_periods = 0;    // CFS periods with runnable tasks
  int64_t nr_throttled = 0;  // periods in which the group was throttled
  int64_t throttled_ns = 0;  // total time throttled
};

// Parsers (pure, for tests on fixture text).
// cpu.stat of v1 (throttled_time, ns) or v2 (throttled_usec): nullopt if no throttling fields.
std::optional<CgroupCpuStat> parse_cgroup_cpu_stat(std::string_view text);
// /proc/self/cgroup: the path of the v1 `cpu` controller's group ("cpu" or "cpu,cpuacct" line),
// else the v2 path ("0::..."), with which version it is.
struct CgroupPath {
  int version = 0;  // 1 or 2; 0: none found
  std::string path;
};
CgroupPath parse_proc_self_cgroup(std::string_view text);
// cpu.max (v2: "max 100000" or "20000 100000") -> (quota_us or -1 for none, period_us).
std::optional<std::pair<int64_t, int64_t>> parse_cpu_max(std::string_view text);

class CgroupCpu {
 public:
  // The cgroup of this process with a readable cpu.stat, or nullopt (why in *why).
  static std::optional<CgroupCpu> detect(std::string* why = nullptr);
  // The same for an explicit group folder (tests; `version` 1 or 2).
  static std::optional<CgroupCpu> at(const std::filesystem::path& dir, int version,
                                     std::string* why = nullptr);

  int version() const noexcept { return version_; }
  const std::filesystem::path& dir() const noexcept { return dir_; }
  int64_t quota_us() const noexcept { return quota_us_; }    // -1: no quota
  int64_t period_us() const noexcept { return period_us_; }  // 0: unknown
  // quota / period in CPUs (0 when there is no quota).
  double quota_cpus() const noexcept {
    return quota_us_ > 0 && period_us_ > 0 ? static_cast<double>(quota_us_) / period_us_ : 0.0;
  }
  std::optional<CgroupCpuStat> read() const;

 private:
  std::filesystem::path dir_;
  int version_ = 0;
  int64_t quota_us_ = -1, period_us_ = 0;
};

}  // namespace pacer::hwcounters
