#pragma once
// Scheduler and CPU-usage sources: what the OS did to a thread (run-queue delay, on-CPU time,
// context switches) and how busy the process and the host were.
//
// Costs measured on the 2-vCPU KVM dev machine (Linux 6.18): pread of
// /proc/self/task/TID/schedstat ~0.4 us, clock_gettime(CLOCK_THREAD_CPUTIME_ID) ~0.3 us (a real
// syscall, not vDSO), /proc/self/task/TID/status ~2 us.
#include <pthread.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hwcounters/counter_source.h"

namespace pacer::hwcounters {

int current_tid() noexcept;

// Per-op run-queue delay of the calling thread: the run_delay field of
// /proc/self/task/TID/schedstat, read with one pread on a descriptor kept open. The value is
// exact at the moment the thread was last scheduled in, which is what a chunk boundary needs (a
// running thread's waits are all behind it). Key: "runq_ns".
class SchedstatSource final : public CounterSource {
 public:
  // nullptr (and the reason) when schedstat is not readable (kernel without CONFIG_SCHEDSTATS).
  static std::unique_ptr<SchedstatSource> open_for_calling_thread(std::string* why_not);
  ~SchedstatSource() override;
  SchedstatSource(const SchedstatSource&) = delete;
  SchedstatSource& operator=(const SchedstatSource&) = delete;

  std::string_view name() const noexcept override { return "schedstat"; }
  std::string_view read_method() const noexcept override { return "pread(schedstat)"; }
  const std::vector<std::string>& keys() const noexcept override { return keys_; }
  const std::vector<Unavailable>& unavailable() const noexcept override { return none_; }
  bool read(Reading& out) noexcept override;

 private:
  explicit SchedstatSource(int fd) : fd_(fd) {}
  int fd_;
  std::vector<std::string> keys_{"runq_ns"};
  std::vector<Unavailable> none_;
};

// On-CPU time of the calling thread from CLOCK_THREAD_CPUTIME_ID: the fallback for task_clock_ns
// when perf_event_open is refused altogether. Key: "task_clock_ns".
class ThreadClockSource final : public CounterSource {
 public:
  ThreadClockSource() = default;
  std::string_view name() const noexcept override { return "thread_clock"; }
  std::string_view read_method() const noexcept override { return "clock_gettime"; }
  const std::vector<std::string>& keys() const noexcept override { return keys_; }
  const std::vector<Unavailable>& unavailable() const noexcept override { return none_; }
  bool read(Reading& out) noexcept override;

 private:
  std::vector<std::string> keys_{"task_clock_ns"};
  std::vector<Unavailable> none_;
};

// Cumulative scheduler figures of one thread, readable from any thread.
struct ThreadSched {
  bool ok = false;
  int64_t oncpu_ns = 0;    // schedstat field 1 (updated at ticks and switches)
  int64_t runq_ns = 0;     // schedstat field 2: time runnable but waiting for a CPU
  int64_t timeslices = 0;  // schedstat field 3
  int64_t nvcsw = 0;       // voluntary context switches (status)
  int64_t nivcsw = 0;      // involuntary context switches (status)
};
ThreadSched read_thread_sched(int tid) noexcept;

// The same, with both /proc files kept open (a pread each instead of open/read/close: ~5x
// cheaper, for reading every worker at every step).
class ThreadSchedReader {
 public:
  explicit ThreadSchedReader(int tid) noexcept;
  ~ThreadSchedReader();
  ThreadSchedReader(const ThreadSchedReader&) = delete;
  ThreadSchedReader& operator=(const ThreadSchedReader&) = delete;
  ThreadSched read() const noexcept;

 private:
  int schedstat_fd_ = -1, status_fd_ = -1;
};

// Exact on-CPU time of any thread of this process (the kernel brings a running thread's runtime
// up to date on the read, unlike schedstat's field 1, which lags by up to a tick), ns; -1 on error.
int64_t thread_cpu_ns(pthread_t thread) noexcept;

// CPU time of the whole process (all threads), ns: CLOCK_PROCESS_CPUTIME_ID.
int64_t process_cpu_ns() noexcept;

// The first line of /proc/stat, in USER_HZ ticks summed over CPUs.
struct HostCpuTimes {
  bool ok = false;
  uint64_t busy = 0;   // user + nice + system + irq + softirq + steal
  uint64_t total = 0;  // busy + idle + iowait
  uint64_t steal = 0;  // time the hypervisor ran something else while this VM wanted a CPU
  // With per_cpu: steal of CPU i ("cpuN" lines) at index i; CPUs /proc/stat does not list are 0.
  std::vector<uint64_t> steal_per_cpu;
};
// The totals line; with per_cpu also every "cpuN" line's steal (the file is generated whole by
// the kernel either way, so the extra lines cost only their parsing).
HostCpuTimes read_host_cpu_times(bool per_cpu = false) noexcept;
// The same from /proc/stat text (tests).
HostCpuTimes parse_proc_stat(std::string_view text, bool per_cpu);
// CPUs busy between two readings (1.0 = one CPU), given how many CPUs /proc/stat sums over.
// /proc/stat counts in 10 ms ticks, so intervals under ~100 ms are coarse.
// nullopt when no tick elapsed.
std::optional<double> host_cpus_busy(const HostCpuTimes& a, const HostCpuTimes& b,
                                     int online_cpus) noexcept;

}  // namespace pacer::hwcounters
