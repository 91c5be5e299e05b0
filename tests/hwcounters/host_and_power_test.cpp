// Host facts, thermal/energy probes and the derived-metric table.
#include <gtest/gtest.h>

#include <sys/utsname.h>

#include <chrono>
#include <thread>

#include "hwcounters/event_table.h"
#include "hwcounters/host_facts.h"
#include "hwcounters/thermal_power.h"

namespace pacer::hwcounters {
namespace {

TEST(HostFacts, ReadsKernelCpuModelAndAllowedCpus) {
  const HostFacts h = collect_host_facts();
  utsname u;
  ASSERT_EQ(uname(&u), 0);
  EXPECT_EQ(h.kernel, u.release);
  EXPECT_FALSE(h.cpu_model.empty());
  EXPECT_FALSE(h.allowed_cpus.empty());
  EXPECT_GE(h.online_cpus, static_cast<int>(h.allowed_cpus.size()));
  EXPECT_GT(h.tsc_mhz, 0);
  EXPECT_EQ(h.virtualized, !h.hypervisor.empty());
}

// The signature as lscpu prints it, from /proc/cpuinfo text (an EPYC 7601 guest's first
// processor; "model name" must not be read as "model"), and nothing where a field is missing.
TEST(HostFacts, CpuSignatureFromCpuinfo) {
  const std::string epyc =
      "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel\t\t: 1\n"
      "model name\t: AMD EPYC\nstepping\t: 2\nmicrocode\t: 0x1000065\n\n"
      "processor\t: 1\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
      "stepping\t: 1\n";
  EXPECT_EQ(cpu_signature_from_cpuinfo(epyc), "family 23 model 1 stepping 2");
  const std::string spr =
      "model name\t: Intel(R) Xeon(R) Platinum 8480+\ncpu family\t: 6\n"
      "stepping\t: 8\nmodel\t\t: 143\n";
  EXPECT_EQ(cpu_signature_from_cpuinfo(spr), "family 6 model 143 stepping 8");
  EXPECT_EQ(cpu_signature_from_cpuinfo("model name\t: X\ncpu family\t: 6\nstepping\t: 1\n"), "");
  EXPECT_EQ(cpu_signature_from_cpuinfo(""), "");
  // This machine's, where its kernel lists the fields (x86 Linux does).
  const HostFacts h = collect_host_facts();
  if (!h.cpu_signature.empty()) {
    EXPECT_EQ(h.cpu_signature.rfind("family ", 0), 0u) << h.cpu_signature;
  }
}

TEST(HostFacts, ParsesSysfsCpuLists) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("5"), (std::vector<int>{5}));
  EXPECT_EQ(parse_cpu_list(""), (std::vector<int>{}));
  EXPECT_EQ(parse_cpu_list("1,x"), (std::vector<int>{1}));
}

TEST(Thermal, ThrottleCountersPresentOrExplained) {
  std::string why;
  auto t = ThrottleCounters::open(&why);
  if (!t) {
    EXPECT_NE(why.find("thermal_throttle"), std::string::npos) << why;
    GTEST_SKIP() << "no thermal_throttle counters: " << why;
  }
  const std::vector<int> cpus{0};
  const ThrottleCounts a = t->read(cpus), b = t->read(cpus);
  EXPECT_GE(b.core, a.core);
  EXPECT_GE(a.core, 0);
}

TEST(Energy, MeterAdvancesUnderLoadOrIsExplained) {
  std::string why;
  auto m = EnergyMeter::open(&why, 20);
  if (!m) {
    EXPECT_FALSE(why.empty());
    GTEST_SKIP() << "no RAPL energy: " << why;
  }
  const auto a = m->joules();
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(60);
  volatile double x = 1;
  while (std::chrono::steady_clock::now() < end) x = x * 1.0000001;
  const auto b = m->joules();
  ASSERT_TRUE(a && b);
  EXPECT_GT(*b, *a);
  EXPECT_LT(*b - *a, 60.0 * 0.06 * 100) << "over 6 kW for 60 ms?";
}

TEST(DerivedMetrics, FormulasMatchHandComputedValues) {
  const DerivedMetric* ipc = find_metric("ipc");
  ASSERT_NE(ipc, nullptr);
  EXPECT_DOUBLE_EQ(*evaluate_metric(*ipc, 3000, 1500, 0), 2.0);
  const DerivedMetric* freq = find_metric("freq_mhz");
  ASSERT_NE(freq, nullptr);
  EXPECT_EQ(freq->numerator, "cycles");
  EXPECT_EQ(freq->denominator, "ref_cycles");
  // 1.5x the reference rate of a 2000 MHz TSC.
  EXPECT_DOUBLE_EQ(*evaluate_metric(*freq, 3'000'000, 2'000'000, 2000.0), 3000.0);
  const DerivedMetric* ftc = find_metric("freq_mhz_task_clock");
  ASSERT_NE(ftc, nullptr);
  EXPECT_DOUBLE_EQ(*evaluate_metric(*ftc, 2'500'000, 1'000'000, 0), 2500.0);  // 2.5 cycles/ns
  const DerivedMetric* mpki = find_metric("llc_mpki");
  ASSERT_NE(mpki, nullptr);
  EXPECT_DOUBLE_EQ(*evaluate_metric(*mpki, 50, 10'000, 0), 5.0);
  EXPECT_FALSE(evaluate_metric(*ipc, 1, 0, 0).has_value());
  EXPECT_EQ(find_metric("nope"), nullptr);
  for (const DerivedMetric& m : derived_metrics()) {
    EXPECT_FALSE(m.formula.empty()) << m.name;
  }
}

}  // namespace
}  // namespace pacer::hwcounters
