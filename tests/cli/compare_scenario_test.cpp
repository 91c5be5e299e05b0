// The run-queue scenario end to end (scripts/scenario-runq.sh): the same tiny-model decode run
// twice, the second with a busy loop pinned to each worker CPU; `pacer compare` must name
// run-queue contention, not frequency, as the main cause.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(CompareScenario, RunQueueContentionIsNamed) {
  const fs::path dir =
      fs::temp_directory_path() / ("pacer_scenario_runq_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string cmd = std::string(PACER_SOURCE_DIR) + "/scripts/scenario-runq.sh --pacer " +
                          PACER_BINARY + " --out " + dir.string() + " -n 32 -t 2 >" +
                          (dir / "stdout.txt").string() + " 2>" + (dir / "stderr.txt").string();
  const int status = std::system(cmd.c_str());
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  const std::string out = slurp(dir / "stdout.txt"), err = slurp(dir / "stderr.txt");
  if (rc == 77) {
    fs::remove_all(dir);
    GTEST_SKIP() << "pacer run/gguf synth not available in this build: " << err;
  }
  ASSERT_TRUE(fs::exists(dir / "compare.json")) << "rc " << rc << "\n" << out << err;
  const auto j = nlohmann::json::parse(slurp(dir / "compare.json"));
  const std::string verdict = j["verdict"];
  EXPECT_EQ(j["main_cause"], "run queue") << verdict << "\n" << err;
  EXPECT_NE(verdict.find("run-queue contention"), std::string::npos) << verdict;
  EXPECT_EQ(rc, 0) << out << err;
  fs::remove_all(dir);
}

}  // namespace
