// --numa on `pacer run`, `pacer perplexity` and `pacer bench`: the policy places the workers and
// lands in the event-log header (run.numa); bad values and --pin together are usage errors (exit
// 2) naming the flag, before the model loads.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace pacer {
namespace {

using ::testing::HasSubstr;

class NumaCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = cli_test::write_tiny_model("numa");
    ASSERT_FALSE(model_.empty());
  }
  static void TearDownTestSuite() { std::filesystem::remove(model_); }
  static cli_test::CommandResult pacer(const std::string& args) {
    return cli_test::run_command(std::string(PACER_BINARY) + " " + args);
  }
  static std::string log_path(const std::string& tag) {
    return ::testing::TempDir() + "numa_cli_" + tag + "_" + std::to_string(getpid()) + ".jsonl";
  }
  static nlohmann::json header_of(const std::string& log) {
    std::ifstream f(log);
    std::string line;
    std::getline(f, line);
    std::filesystem::remove(log);
    return nlohmann::json::parse(line);
  }
  static std::string model_;
};
std::string NumaCli::model_;

TEST_F(NumaCli, RunDistributeRecordsThePolicyAndWorkersPerNode) {
  const std::string log = log_path("run");
  const auto r = pacer("run -m " + model_ + " -p hi -n 2 --temp 0 -t 2 --numa distribute " +
                       "--events-out " + log);
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json h = header_of(log);
  const nlohmann::json& numa = h["run"]["numa"];
  EXPECT_EQ(numa["policy"], "distribute");
  ASSERT_EQ(numa["worker_node"].size(), 2u);
  int workers = 0;
  for (const auto& n : numa["workers_per_node"]) workers += n["workers"].get<int>();
  EXPECT_EQ(workers, 2);
  EXPECT_EQ(h["run"]["threads"], 2);
  EXPECT_TRUE(h["run"]["pinned"].get<bool>());  // the plan pins every worker
  // On this machine mbind is allowed (the memory tests check it): the weights were placed.
  EXPECT_FALSE(numa.contains("error")) << numa.dump();
  EXPECT_GT(numa["weight_bytes_file"].get<int64_t>() + numa["weight_bytes_owned"].get<int64_t>(),
            0);
  EXPECT_EQ(numa["kv"], numa["memory_nodes"].size() == 1 ? "bind" : "interleave");
}

TEST_F(NumaCli, RunWithoutNumaRecordsNone) {
  const std::string log = log_path("none");
  const auto r = pacer("run -m " + model_ + " -p hi -n 2 --temp 0 -t 1 --events-out " + log);
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json h = header_of(log);
  EXPECT_EQ(h["run"]["numa"]["policy"], "none");
  EXPECT_EQ(h["run"]["numa"]["weights"], "kernel");
}

TEST_F(NumaCli, PerplexityAcceptsNuma) {
  const std::string text = log_path("text") + ".txt";
  {
    std::ofstream f(text);
    for (int i = 0; i < 40; ++i) f << "the quick brown fox jumps over the lazy dog ";
  }
  const std::string log = log_path("ppl");
  const auto r = pacer("perplexity -m " + model_ + " -f " + text +
                       " -c 16 -b 16 --chunks 1 -t 1 --numa interleave --events-out " + log);
  std::filesystem::remove(text);
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json h = header_of(log);
  EXPECT_EQ(h["run"]["numa"]["policy"], "interleave");
  EXPECT_EQ(h["run"]["numa"]["weights"], "interleave");
  EXPECT_EQ(h["run"]["numa"]["kv"], "interleave");
}

TEST_F(NumaCli, BadValuesAndPinTogetherAreUsageErrors) {
  for (const std::string& cmd : {"run -m " + model_ + " -p hi --numa everywhere",
                                 "perplexity -m " + model_ + " -f x --numa numactl",
                                 "bench -m " + model_ + " --numa spread"}) {
    const auto r = pacer(cmd);
    EXPECT_EQ(r.rc, 2) << cmd << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr("--numa")) << cmd;
  }
  const auto r = pacer("run -m /nonexistent.gguf -p hi --numa isolate --pin compact");
  EXPECT_EQ(r.rc, 2) << r.err;  // before the (missing) model is opened
  EXPECT_THAT(r.err, HasSubstr("give --pin or --numa, not both"));
}

}  // namespace
}  // namespace pacer
