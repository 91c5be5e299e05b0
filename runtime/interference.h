#pragma once
// Real interference for `pacer scenario`: the causes `pacer compare` must name, injected on this
// machine for real rather than written into a log. Each is an RAII object: constructed, the
// interference runs; destroyed, it stops and leaves nothing behind.
//
//   CpuHogs      busy-loop threads pinned to given CPUs (run-queue contention for the workers
//                there)
//   MemoryStreamers  threads pinned to other CPUs copying buffers far larger than the LLC
//                (memory-bandwidth contention without sharing a core)
//   CpuQuotaGroup    a cgroup with a CFS CPU quota (v1 cpu.cfs_quota_us or v2 cpu.max) that a
//                child process is moved into before it runs (needs root)
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace pacer::runtime {

// Pins the calling thread to one CPU; throws std::runtime_error naming the CPU on failure.
void pin_current_thread(int cpu);

class CpuHogs {
 public:
  // `per_cpu` spinning threads on each CPU of `cpus`.
  CpuHogs(const std::vector<int>& cpus, int per_cpu);
  ~CpuHogs();
  CpuHogs(const CpuHogs&) = delete;
  CpuHogs& operator=(const CpuHogs&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

class MemoryStreamers {
 public:
  // One thread per CPU of `cpus`, each copying between two buffers of `bytes_per_thread` (touched
  // up front) until destroyed.
  MemoryStreamers(const std::vector<int>& cpus, size_t bytes_per_thread);
  ~MemoryStreamers();
  MemoryStreamers(const MemoryStreamers&) = delete;
  MemoryStreamers& operator=(const MemoryStreamers&) = delete;
  // Bytes copied so far by all threads (read + written count once).
  size_t bytes_copied() const noexcept { return copied_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<size_t> copied_{0};
  std::vector<std::thread> threads_;
};

class CpuQuotaGroup {
 public:
  // A new child group of the machine's cpu controller with a quota of `cpus` CPUs per 100 ms
  // period (cpus <= 0: no quota, a plain group, so that a control run sees the same group
  // scheduling as the quota'd run): cgroup v1 (/sys/fs/cgroup/cpu or cpu,cpuacct) when mounted,
  // else v2 where the `cpu` controller is enabled. nullopt with the reason in *why when neither can
  // be written (not root, no cpu controller).
  static std::optional<CpuQuotaGroup> create(double cpus, std::string* why);
  ~CpuQuotaGroup();
  CpuQuotaGroup(CpuQuotaGroup&& other) noexcept;
  CpuQuotaGroup& operator=(CpuQuotaGroup&& other) noexcept;
  CpuQuotaGroup(const CpuQuotaGroup&) = delete;

  int version() const noexcept { return version_; }
  const std::filesystem::path& dir() const noexcept { return dir_; }
  // The file a process id is written to, to move that process in ("tasks"-like): precomputed so
  // a forked child can write it with async-signal-safe calls only.
  const std::string& procs_file() const noexcept { return procs_file_; }
  std::string describe() const;  // "cgroup v1 /sys/fs/cgroup/cpu/pacer-...: 1.00 CPUs"

 private:
  CpuQuotaGroup() = default;
  std::filesystem::path dir_;
  std::string procs_file_;
  int version_ = 0;
  double cpus_ = 0;
};

}  // namespace pacer::runtime
