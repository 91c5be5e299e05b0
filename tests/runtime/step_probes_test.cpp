// The per-step machine probes on this machine: a step that burns CPU shows process CPU usage,
// deltas are never negative, and the header says which probes exist (with a reason when absent).
#include "runtime/step_probes.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "runtime/event_log.h"

namespace pacer::runtime {
namespace {

int64_t mono_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TEST(StepProbes, HeaderNamesEachProbeOrWhyItIsAbsent) {
  StepProbes probes(static_cast<int>(std::thread::hardware_concurrency()), false);
  RunHeader header;
  probes.describe(header);
  const nlohmann::json h = header_json(header);
  EXPECT_EQ(h["thermal"]["rapl"], "absent");
  EXPECT_EQ(h["thermal"]["rapl_reason"], "not probed");
  const bool throttle = h["thermal"]["throttle_counters"] == "present";
  EXPECT_EQ(throttle, probes.has_throttle_counters());
  if (!throttle) {
    EXPECT_FALSE(h["thermal"]["throttle_reason"].get<std::string>().empty());
  }
  EXPECT_TRUE(h["cgroup"].contains("version") || h["cgroup"].contains("reason")) << h["cgroup"];
}

TEST(StepProbes, ABusyStepShowsProcessCpuAndNoNegativeDeltas) {
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  StepProbes probes(cpus, false);
  probes.begin_slow({0});
  probes.begin_host();
  probes.begin_process();
  const int64_t t0 = mono_ns();
  volatile uint64_t sink = 0;
  while (mono_ns() - t0 < 30'000'000) sink = sink + 1;  // ~30 ms of this thread's CPU
  probes.end_process();
  probes.end_host();
  const int64_t dt = mono_ns() - t0;
  StepRecord r;
  probes.finish(r, dt);
  ASSERT_TRUE(r.process_cpu_usage.has_value());
  EXPECT_GT(*r.process_cpu_usage, 0.0);
  EXPECT_LE(*r.process_cpu_usage, cpus + 0.1);
  if (r.host_cpu_usage) {
    EXPECT_GE(*r.host_cpu_usage, 0.0);
  }
  if (r.steal_ms) {
    EXPECT_GE(*r.steal_ms, 0.0);
  }
  if (r.cgroup) {
    EXPECT_GE(r.cgroup->nr_periods, 0);
  }
  if (r.throttle) {
    EXPECT_GE(r.throttle->core, 0);
  }
  EXPECT_FALSE(r.energy_j.has_value());  // RAPL not probed
}

}  // namespace
}  // namespace pacer::runtime
