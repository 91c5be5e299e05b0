// `pacer run` end to end on a tiny synthetic model: streamed text equal to the library's greedy
// generation, the timing line, stop strings, the event log, and one-line errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loader/synth.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "tests/cli/cli_test_util.h"

namespace pacer {
namespace {

using cli_test::slurp;
using ::testing::HasSubstr;
using Result = cli_test::CommandResult;
inline Result run(const std::string& cmd) {
  return cli_test::run_command(cmd);
}

class RunCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_path_ = new std::string(::testing::TempDir() + "run_cli_tiny_" +
                                  std::to_string(getpid()) + ".gguf");
    loader::SynthSpec spec = loader::synth_preset("tiny");
    spec.type = ops::WeightType::Q8_0;
    loader::write_synthetic_model(spec, *model_path_);
  }
  static void TearDownTestSuite() {
    std::filesystem::remove(*model_path_);
    delete model_path_;
  }
  static std::string pacer_run(const std::string& args) {
    return std::string(PACER_BINARY) + " run -m " + *model_path_ + " " + args;
  }
  // The library's greedy generation for the same prompt (1 thread: results do not depend on it).
  static runtime::Generation library_generation(const std::string& prompt, int64_t n,
                                                std::vector<std::string> stop = {}) {
    const runtime::Model model = runtime::Model::load(*model_path_);
    runtime::SessionOptions so;
    so.threads = 1;
    so.sampler.temperature = 0;
    runtime::Session s(model, so);
    runtime::GenerateOptions go;
    go.n_predict = n;
    go.ignore_eos = true;
    go.stop = std::move(stop);
    return s.generate(prompt, go);
  }
  static std::string* model_path_;
};
std::string* RunCli::model_path_ = nullptr;

TEST_F(RunCli, PrintsTheGreedyTextThenOneTimingLine) {
  const Result r = run(pacer_run("-p 'Hello world' -n 8 --temp 0 -t 2 --ignore-eos"));
  ASSERT_EQ(r.rc, 0) << r.err;
  const runtime::Generation want = library_generation("Hello world", 8);
  EXPECT_EQ(r.out, want.text + "\n");
  const std::regex timing(
      R"(load [0-9.]+ ms \| TTFT [0-9.]+ ms \| prefill [0-9]+ tok [0-9.]+ tok/s \| decode 7 tok )"
      R"([0-9.]+ tok/s \| peak RSS [0-9.]+ MiB \| 2 threads, pin none \| stop: n_predict\n)");
  EXPECT_TRUE(std::regex_search(r.err, timing)) << r.err;
}

TEST_F(RunCli, StopStringPromptFileAndPinning) {
  const runtime::Generation full = library_generation("Once upon", 16);
  ASSERT_GE(full.text.size(), 6u);
  const std::string stop = full.text.substr(full.text.size() / 2, 2);
  const std::string prompt_file =
      ::testing::TempDir() + "run_cli_prompt_" + std::to_string(getpid());
  std::ofstream(prompt_file) << "Once upon";
  // Single quotes protect the stop string from the shell (the vocabulary has no quotes).
  const Result r = run(pacer_run("-f " + prompt_file +
                                 " -n 16 --temp 0 --ignore-eos --pin cores "
                                 "-t 1 --stop '" +
                                 stop + "'"));
  std::remove(prompt_file.c_str());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, full.text.substr(0, full.text.find(stop)) + "\n");
  EXPECT_THAT(r.err, HasSubstr("1 threads, pin cores | stop: stop_string"));
}

TEST_F(RunCli, EventLogHasHeaderStepsAndFooterWithPlacements) {
  const std::string log = ::testing::TempDir() + "run_cli_events_" + std::to_string(getpid());
  const Result r = run(pacer_run("-p hi -n 4 --temp 0 -t 2 --ignore-eos --events-out " + log));
  ASSERT_EQ(r.rc, 0) << r.err;
  std::istringstream lines(slurp(log));
  std::remove(log.c_str());
  std::vector<nlohmann::json> events;
  for (std::string line; std::getline(lines, line);) events.push_back(nlohmann::json::parse(line));
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.front()["type"], "header");
  EXPECT_EQ(events.front()["model"]["arch"], "llama");
  EXPECT_EQ(events.front()["run"]["threads"], 2);
  EXPECT_EQ(events.front()["run"]["kv_type"], "f16");
  const nlohmann::json& footer = events.back();
  ASSERT_EQ(footer["type"], "footer");
  EXPECT_EQ(footer["n_generated"], 4);
  EXPECT_EQ(footer["stop"], "n_predict");
  ASSERT_EQ(footer["workers"].size(), 2u);
  int steps = 0, qkv_ops = 0;
  for (const auto& e : events) {
    if (e["type"] == "step") ++steps;
    if (e["type"] == "op" && e["name"] == "attn_qkv") ++qkv_ops;
  }
  EXPECT_EQ(steps, 4);        // one prefill step (the prompt) + 3 decode steps
  EXPECT_EQ(qkv_ops, 4 * 2);  // per step, per layer
}

TEST_F(RunCli, ErrorsAreOneLineWithExitCode1) {
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {"-p x -t 64 --pin cores", "cannot place 64 threads"},
      {"-p x --kv-type q8_0", "--kv-type must be f16 or f32"},
      {"-p x -c 100000000000", "MemAvailable"},
      {"-p x --pin list:4000 -t 1", "CPU 4000"},
  };
  for (const Case& c : cases) {
    const Result r = run(pacer_run(c.args));
    EXPECT_EQ(r.rc, 1) << c.args;
    EXPECT_THAT(r.err, HasSubstr(c.expect)) << c.args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  const Result missing = run(std::string(PACER_BINARY) + " run -m /nonexistent.gguf -p x");
  EXPECT_EQ(missing.rc, 1);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent.gguf"));
}

}  // namespace
}  // namespace pacer
