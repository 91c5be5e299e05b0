// perf_event_open groups on the calling thread: software events everywhere, hardware events where
// a PMU is exposed (skipped with the kernel's reason otherwise).
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <string>
#include <vector>

#include "hwcounters/counter_source.h"
#include "hwcounters/event_table.h"
#include "hwcounters/frequency.h"
#include "hwcounters/perf_group.h"

namespace pacer::hwcounters {
namespace {

std::vector<EventRequest> requests(std::span<const EventDef> defs) {
  std::vector<EventRequest> out;
  for (const EventDef& d : defs) out.push_back({std::string(d.key), std::string(d.pfm_name)});
  return out;
}

int index_of(const CounterSource& s, std::string_view key) {
  const auto& k = s.keys();
  const auto it = std::find(k.begin(), k.end(), key);
  return it == k.end() ? -1 : static_cast<int>(it - k.begin());
}

int64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

double busy_work(int64_t ns) {
  volatile double x = 1.0;
  const int64_t start = thread_cpu_ns();
  while (thread_cpu_ns() - start < ns) {
    for (int i = 0; i < 1000; ++i) x = x * 1.0000001 + 1e-9;
  }
  return x;
}

TEST(ScaledDelta, ScalesByEnabledOverRunning) {
  Reading a, b;
  a.time_enabled_ns = 1000;
  a.time_running_ns = 1000;
  a.values[0] = 500;
  b.time_enabled_ns = 3000;  // 2000 ns enabled ...
  b.time_running_ns = 1500;  // ... of which 500 ns counting: x4
  b.values[0] = 800;         // raw delta 300
  EXPECT_EQ(scaled_delta(a, b, 0), 1200u);
  EXPECT_DOUBLE_EQ(mux_ratio(a, b), 0.25);
  b.time_running_ns = 3000;  // counted all the time: raw
  EXPECT_EQ(scaled_delta(a, b, 0), 300u);
  EXPECT_DOUBLE_EQ(mux_ratio(a, b), 1.0);
}

TEST(PerfSoftwareGroup, TaskClockMatchesThreadCpuTimeOfABusyLoop) {
  auto g = PerfGroupSource::open_for_calling_thread("perf_software", requests(software_events()));
  const int tc = index_of(*g, "task_clock_ns");
  if (tc < 0) {
    GTEST_SKIP() << "perf_event_open refused software events: "
                 << (g->unavailable().empty() ? "?" : g->unavailable()[0].reason);
  }
  EXPECT_EQ(g->read_method(), "read()");
  // On a shared VM host one 60 ms window is sometimes disturbed (the two clocks then part by a
  // few ms): the measurement is taken up to three times and the closest one must pass.
  double best_clock = 0, best_enabled = 0;
  std::string tries;
  for (int attempt = 0; attempt < 3; ++attempt) {
    Reading a, b;
    ASSERT_TRUE(g->read(a));
    const int64_t c0 = thread_cpu_ns();
    busy_work(60'000'000);
    const int64_t c1 = thread_cpu_ns();
    ASSERT_TRUE(g->read(b));
    const double task_clock = static_cast<double>(scaled_delta(a, b, tc));
    const double cpu = static_cast<double>(c1 - c0);
    // The group's enabled time of a per-thread group advances only while the thread runs.
    const double enabled = static_cast<double>(b.time_enabled_ns - a.time_enabled_ns);
    tries += " task-clock " + std::to_string(task_clock) + " ns, thread CPU " +
             std::to_string(cpu) + " ns, enabled " + std::to_string(enabled) + " ns;";
    if (attempt == 0 || std::fabs(task_clock / cpu - 1.0) < std::fabs(best_clock - 1.0)) {
      best_clock = task_clock / cpu;
      best_enabled = enabled / cpu;
    }
    if (std::fabs(best_clock - 1.0) < 0.05 && std::fabs(best_enabled - 1.0) < 0.05) break;
  }
  EXPECT_NEAR(best_clock, 1.0, 0.05) << tries;
  EXPECT_NEAR(best_enabled, 1.0, 0.05) << tries;
}

TEST(PerfSoftwareGroup, CountsContextSwitchesAndPageFaults) {
  auto g = PerfGroupSource::open_for_calling_thread("perf_software", requests(software_events()));
  const int cs = index_of(*g, "context_switches"), pf = index_of(*g, "page_faults");
  if (cs < 0 || pf < 0) GTEST_SKIP() << "software events unavailable";
  // The switch right after the group opens is not always counted (the kernel attaches the new
  // context lazily), so settle once before the measured interval.
  usleep(100);
  Reading a, b;
  ASSERT_TRUE(g->read(a));
  for (int i = 0; i < 3; ++i) usleep(1000);  // each sleep switches the thread out
  const size_t pages = 256, page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mem =
      mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  madvise(mem, pages * page, MADV_NOHUGEPAGE);  // one fault per 4 KiB page, not per 2 MiB
  for (size_t i = 0; i < pages; ++i) static_cast<volatile char*>(mem)[i * page] = 1;
  ASSERT_TRUE(g->read(b));
  munmap(mem, pages * page);
  EXPECT_GE(scaled_delta(a, b, cs), 3u);
  EXPECT_GE(scaled_delta(a, b, pf), pages);
#if defined(__SANITIZE_THREAD__)
  // TSan faults in its shadow memory for every page the loop touches (767 faults for 256
  // pages in the TSan build): the upper bound holds for uninstrumented code only.
#else
  EXPECT_LT(scaled_delta(a, b, pf), pages + 200);
#endif
}

TEST(PerfSoftwareGroup, UnknownEventIsReportedNotFatal) {
  std::vector<EventRequest> ev = requests(software_events());
  ev.push_back({"bogus", "no_such_event_xyz"});
  auto g = PerfGroupSource::open_for_calling_thread("perf_software", ev);
  ASSERT_FALSE(g->unavailable().empty());
  const Unavailable& u = g->unavailable().back();
  EXPECT_EQ(u.event, "bogus");
  EXPECT_NE(u.reason.find("no_such_event_xyz"), std::string::npos) << u.reason;
  EXPECT_EQ(index_of(*g, "bogus"), -1);
}

// Runs unchanged on bare metal; skipped with the kernel's reason where no PMU is exposed.
TEST(PerfHardwareGroup, CountsInstructionsAndCyclesOfAKnownLoop) {
  auto g = PerfGroupSource::open_for_calling_thread("perf_hardware",
                                                    requests(default_hardware_events()));
  const int ins = index_of(*g, "instructions"), cyc = index_of(*g, "cycles");
  if (ins < 0 || cyc < 0) {
    std::string why;
    for (const Unavailable& u : g->unavailable()) why += u.event + ": " + u.reason + "; ";
    GTEST_SKIP() << "no hardware counters: " << why;
  }
  const ChainKernel& imul = chain_kernels()[0];
  const uint64_t iters = 1'000'000;
  Reading a, b;
  ASSERT_TRUE(g->read(a));
  imul.run(iters, 3);
  ASSERT_TRUE(g->read(b));
  const double instructions = static_cast<double>(scaled_delta(a, b, ins));
  const double cycles = static_cast<double>(scaled_delta(a, b, cyc));
  // 8 imul + loop control per iteration; 3 cycles per imul.
  EXPECT_GE(instructions, 8.0 * iters);
  EXPECT_LE(instructions, 16.0 * iters + 200'000);
  EXPECT_GE(cycles, 0.95 * 24.0 * iters);
  EXPECT_LE(cycles, 2.0 * 24.0 * iters + 1'000'000);
}

}  // namespace
}  // namespace pacer::hwcounters
