// `pacer scenario`: the synthetic causes are named, a real configuration change is named, and
// scenarios that cannot run here say why in one line.
#include <sched.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace pacer::cli_test {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / ("pacer_scenario_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  return d;
}

int allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
}

TEST(ScenarioCli, SyntheticCausesAreNamed) {
  for (const char* cause : {"frequency", "ipc", "instructions", "runq", "blocked"}) {
    const fs::path dir = temp_dir(std::string("syn_") + cause);
    const CommandResult r = run_command(std::string(PACER_BINARY) + " scenario --synthetic " +
                                        cause + " -o " + dir.string());
    EXPECT_EQ(r.rc, 0) << cause << "\n" << r.out << r.err;
    const auto j = nlohmann::json::parse(slurp(dir / "compare.json"));
    const std::string expected = std::string(cause) == "runq" ? "run queue" : cause;
    EXPECT_EQ(j.at("leading_cause"), expected) << j.at("verdict");
    EXPECT_TRUE(fs::exists(dir / "compare.md"));
    fs::remove_all(dir);
  }
}

TEST(ScenarioCli, ThreadChangeIsNamedAsConfiguration) {
  if (allowed_cpus() < 2) GTEST_SKIP() << "needs 2 CPUs to change the thread count";
  const fs::path dir = temp_dir("threads");
  fs::create_directories(dir);
  const std::string model = (dir / "tiny.gguf").string();
  ASSERT_EQ(
      run_command(std::string(PACER_BINARY) + " gguf synth --arch tiny --type q8_0 -o " + model).rc,
      0);
  const CommandResult r = run_command(std::string(PACER_BINARY) + " scenario threads -m " + model +
                                      " -t 1 -n 8 -o " + dir.string());
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("threads trial 1/1: named -> configuration"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| threads | 2 threads instead of 1 | configuration | 1 of 1 | 100% |"),
            std::string::npos)
      << r.out;
  const auto summary = nlohmann::json::parse(slurp(dir / "scenario.json"));
  EXPECT_EQ(summary.at("named"), 1);
  const auto j = nlohmann::json::parse(slurp(dir / "compare.json"));
  EXPECT_EQ(j.at("leading_cause"), "configuration");
  fs::remove_all(dir);
}

TEST(ScenarioCli, ImpossibleScenariosSayWhy) {
  const fs::path dir = temp_dir("bad");
  CommandResult r = run_command(std::string(PACER_BINARY) + " scenario bogus -o " + dir.string());
  EXPECT_EQ(r.rc, 2) << r.err;
  r = run_command(std::string(PACER_BINARY) + " scenario -o " + dir.string());
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("a scenario name or --synthetic CAUSE is required"), std::string::npos)
      << r.err;
  // membw with every allowed CPU taken by workers: refused before any run, with the fix.
  fs::create_directories(dir);
  const std::string model = (dir / "tiny.gguf").string();
  ASSERT_EQ(
      run_command(std::string(PACER_BINARY) + " gguf synth --arch tiny --type q8_0 -o " + model).rc,
      0);
  r = run_command(std::string(PACER_BINARY) + " scenario membw -m " + model + " -t " +
                  std::to_string(allowed_cpus()) + " -o " + dir.string());
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("needs a CPU the workers do not use"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "normal.jsonl"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pacer::cli_test
