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

#include "eventlog/schema.h"
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
      R"(load [0-9.]+ ms \| session setup [0-9.]+ ms \| TTFT [0-9.]+ ms \| prefill [0-9]+ tok [0-9.]+ tok/s \| decode 7 tok )"
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
  // The session's header objects use the keys eventlog/schema.h names (the reader's lookups).
  auto within = [](const nlohmann::json& obj, const auto& schema, const char* where) {
    ASSERT_TRUE(obj.is_object()) << where;
    for (const auto& [k, v] : obj.items())
      EXPECT_NE(std::find(schema.begin(), schema.end(), k), schema.end()) << where << k;
  };
  within(events.front()["model"], eventlog::model_key::kAll, "model.");
  within(events.front()["run"], eventlog::run_key::kAll, "run.");
  within(events.front()["host"]["topology"], eventlog::host_key::kTopologyAll, "host.topology.");
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
  // perf stat's habit: a counter summary at exit, every live counter with its total and every
  // unavailable one with the header's reason.
  EXPECT_THAT(r.err, HasSubstr("Counter summary of '" + log + "'"));
  EXPECT_THAT(r.err, HasSubstr("on-CPU time (task-clock)"));
  for (const auto& u : events.front()["counters"]["unavailable"]) {
    EXPECT_THAT(r.err, HasSubstr("<not counted>  " + u["event"].get<std::string>())) << r.err;
    EXPECT_THAT(r.err, HasSubstr(u["reason"].get<std::string>()));
  }
  for (const auto& name : events.front()["counters"]["live"]) {
    // task_clock_ns and runq_ns are the on-CPU and run-queue lines.
    if (name == "task_clock_ns" || name == "runq_ns") continue;
    EXPECT_THAT(r.err, HasSubstr("  " + name.get<std::string>())) << r.err;
  }
}

TEST_F(RunCli, ErrorsAreOneLineWithExitCode1) {
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {"-p x -t 64 --pin cores", "cannot place 64 threads"},
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

namespace pacer {
namespace {

// `pacer bench -o json|jsonl|csv|sql`: llama-bench's field names and shapes (llama.cpp's
// scripts read them), rows streamed as they finish, Ctrl-C keeps the finished rows and exits 130.
class BenchOutputCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = cli_test::write_tiny_model("bench-out");
    ASSERT_FALSE(model_.empty());
  }
  static void TearDownTestSuite() { std::filesystem::remove(model_); }
  static cli_test::CommandResult bench(const std::string& args) {
    return cli_test::run_command(std::string(PACER_BINARY) + " bench -m " + model_ +
                                 " -p 8 -n 4 -t 1 -r 2 --no-roofline " + args);
  }
  static std::string model_;
};
std::string BenchOutputCli::model_;

TEST_F(BenchOutputCli, JsonIsAnArrayOfLlamaBenchRows) {
  const auto r = bench("-o json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  for (const char* k :
       {"build_commit", "cpu_info", "model_type", "model_size", "model_n_params", "n_threads",
        "n_prompt", "n_gen", "n_depth", "type_k", "test_time", "avg_ns", "stddev_ns", "avg_ts",
        "stddev_ts", "samples_ns", "samples_ts", "pacer_pin", "pacer_flags"}) {
    EXPECT_TRUE(j[0].contains(k)) << k;
  }
  EXPECT_EQ(j[0]["n_prompt"], 8);
  EXPECT_EQ(j[1]["n_gen"], 4);
  // The tiny model's 2 layers have no llama.cpp size class: "?B", as llama-bench prints.
  EXPECT_THAT(j[0]["model_type"].get<std::string>(), ::testing::StartsWith("llama ?B "));
  // The key fields compare-llama-bench.py pairs rows on, as llama-bench c392e50 (a CPU-only
  // build, default flags) wrote them for the same file: -b 2048 -ub 512 -ngl 99, mmap.
  for (const auto& row : j) {
    EXPECT_EQ(row["n_batch"], 2048);
    EXPECT_EQ(row["n_ubatch"], 512);
    EXPECT_EQ(row["n_gpu_layers"], 99);
    EXPECT_EQ(row["use_mmap"], true);
    EXPECT_EQ(row["flash_attn"], 0);
    EXPECT_EQ(row["backends"], "CPU");
  }
  EXPECT_EQ(j[1]["samples_ts"].size(), 2u);
  // avg_ts is the mean of samples_ts, and avg_ns the mean time of a repetition's tokens.
  const double a = j[1]["samples_ts"][0], b = j[1]["samples_ts"][1];
  EXPECT_NEAR(j[1]["avg_ts"].get<double>(), (a + b) / 2, 1e-9 * (a + b));
  const double ns = j[1]["avg_ns"].get<double>();
  EXPECT_NEAR(ns, (4 / a + 4 / b) / 2 * 1e9, 2.0);
}

TEST_F(BenchOutputCli, CsvAndSqlUseTheSameFields) {
  auto r = bench("-o csv");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("build_commit,build_number,cpu_info,", 0), 0u) << r.out.substr(0, 200);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3);
  r = bench("-o sql");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("CREATE TABLE IF NOT EXISTS llama_bench (", 0), 0u);
  size_t inserts = 0;
  for (size_t at = r.out.find("INSERT INTO llama_bench ("); at != std::string::npos;
       at = r.out.find("INSERT INTO llama_bench (", at + 1)) {
    ++inserts;
  }
  EXPECT_EQ(inserts, 2u);
  EXPECT_NE(r.out.find("avg_ts"), std::string::npos);
  // The first row (pp) measured no roofline: its nulls still declare the columns' real types.
  for (const char* column :
       {"pacer_llc_bytes INTEGER", "pacer_kv_bytes_per_token INTEGER", "pacer_bandwidth_gbs REAL",
        "pacer_roofline_pct REAL", "pacer_roofline_applies INTEGER", "avg_ts REAL"}) {
    EXPECT_NE(r.out.find(std::string("  ") + column + ","), std::string::npos) << column;
  }
}

TEST_F(BenchOutputCli, CtrlCKeepsTheFinishedRowsAndExits130) {
  // tg4 finishes in milliseconds; tg100000 would take minutes: SIGINT lands in it, and the bench
  // polls it every 16 tokens.
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("pacer-bench-int-" + std::to_string(getpid()) + ".jsonl"))
                              .string();
  const auto r =
      cli_test::run_command("sh -c '" + std::string(PACER_BINARY) + " bench -m " + model_ +
                            " -p 0 -n 4,100000 -t 1 -r 2 --no-roofline -o jsonl > " + out +
                            " & pid=$!; sleep 1.5; kill -INT $pid; wait $pid; echo rc=$?'");
  EXPECT_NE(r.out.find("rc=130"), std::string::npos) << r.out << r.err;
  std::ifstream in(out);
  std::string line;
  int rows = 0;
  while (std::getline(in, line)) {
    EXPECT_EQ(nlohmann::json::parse(line)["n_gen"], 4);
    ++rows;
  }
  EXPECT_EQ(rows, 1);
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace pacer
