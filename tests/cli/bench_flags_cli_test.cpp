// `pacer bench` with llama-bench's flags: ranges, -pg, -b/-ub, -ctk/-ctv, -C, --numa, --delay, -v,
// --progress; and every bad value a usage error (exit 2) naming the flag, checked before the
// model loads.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace pacer {
namespace {

class BenchFlagsCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = cli_test::write_tiny_model("bench-flags");
    ASSERT_FALSE(model_.empty());
  }
  static void TearDownTestSuite() { std::filesystem::remove(model_); }
  static cli_test::CommandResult bench(const std::string& args) {
    return cli_test::run_command(std::string(PACER_BINARY) + " bench -m " + model_ +
                                 " --no-roofline -r 1 " + args);
  }
  // The rows of `-o jsonl` output.
  static std::vector<nlohmann::json> rows(const std::string& out) {
    std::vector<nlohmann::json> v;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) v.push_back(nlohmann::json::parse(line));
    return v;
  }
  static std::string model_;
};
std::string BenchFlagsCli::model_;

TEST_F(BenchFlagsCli, RangesExpandAsLlamaBench) {
  const auto r = bench("-p 8-32+8 -n 0 -t 1-2*2 -o jsonl");
  ASSERT_EQ(r.rc, 0) << r.err;
  std::vector<std::pair<int64_t, int64_t>> got;  // (n_prompt, n_threads)
  for (const auto& j : rows(r.out)) got.emplace_back(j["n_prompt"], j["n_threads"]);
  const std::vector<std::pair<int64_t, int64_t>> want = {{8, 1}, {16, 1}, {24, 1}, {32, 1},
                                                         {8, 2}, {16, 2}, {24, 2}, {32, 2}};
  EXPECT_EQ(got, want);
}

TEST_F(BenchFlagsCli, PromptPlusGenerationBatchAndPlacement) {
  auto r = bench("-pg 16,8 -b 8 -ub 12 -t 1 -C 0x1 -o jsonl");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto v = rows(r.out);
  ASSERT_EQ(v.size(), 1u);  // -pg alone runs only the pp+tg test, as llama-bench
  EXPECT_EQ(v[0]["n_prompt"], 16);
  EXPECT_EQ(v[0]["n_gen"], 8);
  EXPECT_EQ(v[0]["n_batch"], 8);  // the smaller of -b and -ub
  EXPECT_GT(v[0]["avg_ts"].get<double>(), 0);
  EXPECT_EQ(v[0]["pacer_pin"], "list:0");
  r = bench("-p 0 -n 4 -t 1 --numa distribute -ctk f32 -ctv f32 -o jsonl");
  ASSERT_EQ(r.rc, 0) << r.err;
  v = rows(r.out);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0]["pacer_pin"], "numa:distribute");  // workers from the NUMA plan (docs/numa.md)
  EXPECT_EQ(v[0]["pacer_cpus"].size(), 1u);
  EXPECT_EQ(v[0]["type_k"], "f32");
}

TEST_F(BenchFlagsCli, DelayVerboseAndProgress) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = bench("-p 0 -n 2,3 -t 1 --delay 0.3 -v --progress -o jsonl");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_GE(s, 0.3);  // one pause, before the second row
  EXPECT_NE(r.err.find("bench: tg2 t1 none: tok/s per rep:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("] 2/2"), std::string::npos) << r.err;  // stderr is a file here
  EXPECT_NE(r.err.find("bench: loading "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bench: loaded in "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tg3 rep 2/2"), std::string::npos) << r.err;  // per repetition
}

TEST_F(BenchFlagsCli, BadValuesAreUsageErrorsNamingTheFlag) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"-p -5", "-p"},
      {"-p 8-4", "runs backwards"},
      {"-t 0", "-t"},
      {"-p 4-8*1", "factor"},
      {"-pg 16", "-pg"},
      {"-C zz", "hex CPU mask"},
      {"-ctk f16 -ctv f32", "-ctv"},
      {"-b 0", "-b"},
      {"--numa everywhere", "--numa"},
      {"--prio 7", "--prio"},
  };
  for (const auto& [args, expect] : cases) {
    const auto r = bench(args);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(expect), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << args;
  }
}

}  // namespace
}  // namespace pacer
