// runtime/interference: each injector really does what it claims, checked with the kernel's own
// counters (schedstat run delay, cgroup cpu.stat), not with pacer's readers.
#include "runtime/interference.h"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace pacer::runtime {
namespace {

// schedstat's second field: ns this thread spent runnable but waiting for a CPU.
long long run_delay_ns() {
  std::ifstream in("/proc/thread-self/schedstat");
  long long oncpu = 0, delay = -1;
  in >> oncpu >> delay;
  return in ? delay : -1;
}

void spin_for(std::chrono::milliseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  volatile uint64_t sink = 0;
  while (std::chrono::steady_clock::now() < end) sink = sink + 1;
}

int any_allowed_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) return cpu;
  return -1;
}

TEST(Interference, CpuHogsMakeAThreadOnTheirCpuWait) {
  if (run_delay_ns() < 0) GTEST_SKIP() << "no /proc/thread-self/schedstat (CONFIG_SCHEDSTATS)";
  const int cpu = any_allowed_cpu();
  ASSERT_GE(cpu, 0);
  long long waited = 0;
  std::thread probe([&] {
    pin_current_thread(cpu);
    const long long before = run_delay_ns();
    {
      CpuHogs hogs({cpu}, 1);
      spin_for(std::chrono::milliseconds(300));
    }
    waited = run_delay_ns() - before;
  });
  probe.join();
  // Sharing one CPU with a spinning thread for 300 ms of wall time: CFS gives each about half,
  // so the probe waits on the order of 100 ms; 20 ms is far above an idle CPU's wake-up noise.
  EXPECT_GT(waited, 20'000'000) << "run delay " << waited << " ns";
}

TEST(Interference, MemoryStreamersCopyUntilDestroyed) {
  const int cpu = any_allowed_cpu();
  ASSERT_GE(cpu, 0);
  size_t copied = 0;
  {
    MemoryStreamers s({cpu}, size_t{16} << 20);
    // At least one full pass over the buffer. Polled up to 10 s rather than read after a fixed
    // 200 ms: on a loaded 2-CPU machine the streamer's thread start and its first touch of 32 MiB
    // took longer than that (a CI run beside another one read 0 bytes at 200 ms).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((copied = s.bytes_copied()) <= (size_t{16} << 20) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  EXPECT_GT(copied, size_t{16} << 20);
}

TEST(Interference, QuotaGroupThrottlesAChildAndIsRemoved) {
  std::string why;
  std::optional<CpuQuotaGroup> g = CpuQuotaGroup::create(0.1, &why);
  if (!g) GTEST_SKIP() << why;
  const std::filesystem::path dir = g->dir();
  ASSERT_TRUE(std::filesystem::exists(dir));
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::ofstream(g->procs_file()) << 0 << std::flush;
    spin_for(std::chrono::milliseconds(400));  // 4 periods at 10% quota: throttled in each
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  std::ifstream stat(dir / "cpu.stat");
  std::string key;
  long long value = 0, nr_throttled = -1;
  while (stat >> key >> value)
    if (key == "nr_throttled") nr_throttled = value;
  EXPECT_GT(nr_throttled, 0) << g->describe();
  g.reset();
  EXPECT_FALSE(std::filesystem::exists(dir));
}

}  // namespace
}  // namespace pacer::runtime
