// `pacer topo` end to end: text and JSON output, policy mappings on synthetic machines, and clear
// errors (exit 1, one line) for impossible requests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace {

int allowed_cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
}

using ::testing::HasSubstr;
using Result = pacer::cli_test::CommandResult;
Result run(const std::string& cmd) {
  return pacer::cli_test::run_command(cmd);
}

const std::string kPacer = PACER_BINARY;

TEST(TopoCli, TextShowsTheMachineAndEveryPolicy) {
  const Result r = run(kPacer + " topo");
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* s : {"packages", "NUMA nodes", "cores", "caches", "allowed     CPUs",
                        "pin policies for", "compact", "scatter", "cores"}) {
    EXPECT_THAT(r.out, HasSubstr(s));
  }
}

TEST(TopoCli, JsonDescribesThisMachine) {
  const Result r = run(kPacer + " topo --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_GE(j["pus"].get<int>(), 1);
  EXPECT_FALSE(j["allowed_cpus"].empty());
  const int threads = j["pinning"]["threads"];
  EXPECT_EQ(j["pinning"]["policies"]["cores"]["cpus"].size(), static_cast<size_t>(threads));
  // The CPUs this process may use (a cpuset-limited container allows fewer than are online).
  EXPECT_EQ(static_cast<int>(j["allowed_cpus"].size()), allowed_cpu_count());
}

TEST(TopoCli, SyntheticTwoSocketMapping) {
  // PUs 2k and 2k+1 are core k's siblings; cores 0-3 on package 0.
  const std::string topo = kPacer + " topo --synthetic 'pack:2 core:4 pu:2' --json";
  Result r = run(topo + " -t 4 --pin scatter");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["pinning"]["cpus"], nlohmann::json::array({0, 8, 2, 10}));
  r = run(topo + " -t 3 --pin compact");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["pinning"]["cpus"], nlohmann::json::array({0, 1, 2}));
  r = run(topo + " -t 3 --pin cores");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["pinning"]["cpus"], nlohmann::json::array({0, 2, 4}));
  r = run(topo + " -t 2 --pin list:5,3");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["pinning"]["cpus"], nlohmann::json::array({5, 3}));
}

TEST(TopoCli, ImpossibleRequestsFailWithOneLine) {
  Result r = run(kPacer + " topo --synthetic 'pack:2 core:4 pu:2' -t 9 --pin cores");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot place 9 threads"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  // Only 2 cores' worth of PUs allowed.
  r = run(kPacer + " topo --synthetic 'pack:1 core:4 pu:2' --allowed 0-3 -t 4 --pin cores");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("may run on CPUs 0-3"));
  r = run(kPacer + " topo --pin sideways");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("unknown pin policy 'sideways'"));
}

TEST(TopoCli, ProcessAffinityMaskIsRespected) {
  if (allowed_cpu_count() < 2 || run("command -v taskset").rc != 0) {
    GTEST_SKIP() << "needs taskset and two CPUs";
  }
  Result r = run("taskset -c 0 " + kPacer + " topo --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["allowed_cpus"], nlohmann::json::array({0}));
  r = run("taskset -c 0 " + kPacer + " topo -t 1 --pin list:1");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("CPU 1, which is outside the CPUs the process may run on (0)"));
}

}  // namespace
