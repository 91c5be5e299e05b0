// `pacer compare` end to end through the binary: synthetic logs in, reports and errors out.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/compare_synth.h"

namespace {

namespace fs = std::filesystem;
using pacer::analysis::synth::RunSpec;

struct Result {
  int rc = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class CompareCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("pacer_compare_cli_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    RunSpec slow;
    slow.seed = 5;
    slow.effects.push_back({.freq_scale = 0.7});
    pacer::analysis::synth::write_event_log(path("normal.jsonl"), RunSpec{});
    pacer::analysis::synth::write_event_log(path("slow.jsonl"), slow);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  Result pacer(const std::string& args) const {
    const std::string cmd = std::string(PACER_BINARY) + " " + args + " >" + path("stdout.txt") +
                            " 2>" + path("stderr.txt");
    const int status = std::system(cmd.c_str());
    Result r;
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(path("stdout.txt"));
    r.err = slurp(path("stderr.txt"));
    return r;
  }

  fs::path dir_;
};

TEST_F(CompareCli, JsonReportNamesTheCause) {
  const Result r = pacer("compare " + path("normal.jsonl") + " " + path("slow.jsonl") +
                         " --format json -o " + path("out.json"));
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(path("out.json")));
  EXPECT_EQ(j["main_cause"], "frequency");
  EXPECT_EQ(j["flags"][0]["kind"], "frequency_drop");
  // With -o, the verdict still reaches the terminal.
  EXPECT_NE(r.err.find("Decode "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("frequency reduction"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST_F(CompareCli, MarkdownToStdoutByDefault) {
  const Result r = pacer("compare " + path("normal.jsonl") + " " + path("slow.jsonl"));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("# Performance Comparison", 0), 0u);
  EXPECT_NE(r.out.find("**Verdict:** Decode"), std::string::npos);
  EXPECT_NE(r.out.find("## 6. Legend"), std::string::npos);
}

TEST_F(CompareCli, FormatFollowsOutputExtension) {
  const Result r = pacer("compare " + path("normal.jsonl") + " " + path("slow.jsonl") + " -o " +
                         path("report.html"));
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string html = slurp(path("report.html"));
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<svg class=\"plot\" id=\"timeline\""), std::string::npos);
}

TEST_F(CompareCli, RefusesDifferentModelsUnlessForced) {
  RunSpec other;
  other.arch = "qwen2";
  pacer::analysis::synth::write_event_log(path("other.jsonl"), other);
  const Result refused = pacer("compare " + path("normal.jsonl") + " " + path("other.jsonl"));
  EXPECT_EQ(refused.rc, 1);
  EXPECT_NE(refused.err.find("model architecture differs: 'llama' vs 'qwen2'"), std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("--force"), std::string::npos);
  EXPECT_TRUE(refused.out.empty());
  const Result forced =
      pacer("compare --force " + path("normal.jsonl") + " " + path("other.jsonl"));
  EXPECT_EQ(forced.rc, 0) << forced.err;
  EXPECT_NE(forced.err.find("forced despite"), std::string::npos) << forced.err;
}

TEST_F(CompareCli, WarnsWhenPinningDiffers) {
  RunSpec moved;
  moved.cpus = {4, 5};
  pacer::analysis::synth::write_event_log(path("moved.jsonl"), moved);
  const Result r = pacer("compare " + path("normal.jsonl") + " " + path("moved.jsonl"));
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("warning: worker CPUs differs"), std::string::npos) << r.err;
}

TEST_F(CompareCli, BadInputsAreOneLineErrors) {
  {
    std::ofstream(path("garbage.jsonl")) << "{\"type\":\"op\",\"step\":1}\n";
    const Result r = pacer("compare " + path("normal.jsonl") + " " + path("garbage.jsonl"));
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find("garbage.jsonl"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  {
    std::ofstream(path("prefill_only.jsonl"))
        << R"({"type":"header","schema":1,"model":{"arch":"llama","type":"q8_0"}})"
        << "\n"
        << R"({"type":"step","step":0,"phase":"prefill","t0_ns":0,"t1_ns":100})"
        << "\n";
    const Result r = pacer("compare " + path("normal.jsonl") + " " + path("prefill_only.jsonl"));
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find("prefill_only.jsonl: no decode steps"), std::string::npos) << r.err;
  }
  {
    const Result r = pacer("compare " + path("normal.jsonl") + " " + path("missing.jsonl"));
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("missing.jsonl"), std::string::npos) << r.err;
  }
}

}  // namespace
