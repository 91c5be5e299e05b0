// The cgroup CPU controller source: parsers on fixture text of both cgroup versions, and a real
// throttled child group where the machine allows it (root, a writable v1 `cpu` controller).
#include "hwcounters/cgroup_cpu.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

namespace pacer::hwcounters {
namespace {

TEST(CgroupCpu, ParsesV1AndV2CpuStat) {
  const auto v1 = parse_cgroup_cpu_stat(
      "nr_periods 120\nnr_throttled 37\nthrottled_time 4123456789\nnr_bursts 0\nburst_time 0\n");
  ASSERT_TRUE(v1.has_value());
  EXPECT_EQ(v1->nr_periods, 120);
  EXPECT_EQ(v1->nr_throttled, 37);
  EXPECT_EQ(v1->throttled_ns, 4123456789);
  // v2 reports microseconds (and usage fields the parser ignores).
  const auto v2 = parse_cgroup_cpu_stat(
      "usage_usec 9000\nuser_usec 8000\nsystem_usec 1000\nnr_periods 10\nnr_throttled 4\n"
      "throttled_usec 250000\n");
  ASSERT_TRUE(v2.has_value());
  EXPECT_EQ(v2->throttled_ns, 250000000);
  EXPECT_EQ(v2->nr_throttled, 4);
  EXPECT_FALSE(parse_cgroup_cpu_stat("usage_usec 5\n").has_value());
  EXPECT_FALSE(parse_cgroup_cpu_stat("").has_value());
}

TEST(CgroupCpu, FindsTheCpuControllerPath) {
  // v1 with cpu and cpuacct co-mounted; cpuset and cpuacct alone must not match.
  auto p = parse_proc_self_cgroup(
      "12:cpuset:/a\n11:cpuacct:/b\n4:cpu,cpuacct:/kubepods/pod1/c1\n0::/user.slice\n");
  EXPECT_EQ(p.version, 1);
  EXPECT_EQ(p.path, "/kubepods/pod1/c1");
  p = parse_proc_self_cgroup("0::/system.slice/pacer.service\n");
  EXPECT_EQ(p.version, 2);
  EXPECT_EQ(p.path, "/system.slice/pacer.service");
  EXPECT_EQ(parse_proc_self_cgroup("").version, 0);
  const auto q = parse_cpu_max("20000 100000\n");
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->first, 20000);
  EXPECT_EQ(q->second, 100000);
  EXPECT_EQ(parse_cpu_max("max 100000").value().first, -1);
  EXPECT_FALSE(parse_cpu_max("garbage").has_value());
}

// A child group with a quota of 10 ms per 100 ms, a busy process in it for 0.5 s: the group's
// throttling counters must rise by several periods and most of the time.
TEST(CgroupCpu, ARealQuotaThrottlesAndTheCountersSayHowMuch) {
  const std::filesystem::path root = "/sys/fs/cgroup/cpu";
  const std::filesystem::path dir = root / ("pacer-test-" + std::to_string(getpid()));
  std::error_code ec;
  if (geteuid() != 0 || !std::filesystem::exists(root / "cpu.cfs_quota_us") ||
      !std::filesystem::create_directory(dir, ec)) {
    GTEST_SKIP() << "needs root and a writable cgroup v1 cpu controller at " << root;
  }
  std::ofstream(dir / "cpu.cfs_period_us") << 100000;
  std::ofstream(dir / "cpu.cfs_quota_us") << 10000;
  const auto group = CgroupCpu::at(dir, 1);
  ASSERT_TRUE(group.has_value());
  EXPECT_EQ(group->quota_us(), 10000);
  EXPECT_DOUBLE_EQ(group->quota_cpus(), 0.1);
  const CgroupCpuStat before = group->read().value();
  const pid_t child = fork();
  if (child == 0) {
    std::ofstream(dir / "cgroup.procs") << getpid() << std::flush;
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    volatile unsigned x = 0;
    while (std::chrono::steady_clock::now() < end) x = x + 1;
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  const CgroupCpuStat after = group->read().value();
  std::filesystem::remove(dir, ec);
  // 0.5 s at 10% of a CPU: ~5 periods throttled for ~90 ms each.
  EXPECT_GE(after.nr_throttled - before.nr_throttled, 2);
  EXPECT_GE(after.throttled_ns - before.throttled_ns, 150'000'000);
}

}  // namespace
}  // namespace pacer::hwcounters
