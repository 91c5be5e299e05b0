// A real log from `pacer run` (tiny synthetic model, 2 threads) read back by `pacer report`: the
// report's numbers are recomputed here from the raw JSONL lines, independently of analysis/, and
// the log is checked for internal consistency (ops inside their step and not overlapping, per-op
// totals summing to step time within the recorder's gaps, token counts agreeing with
// `pacer tokenize` and with the requested generation length).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace {

namespace fs = std::filesystem;
namespace cli_test = pacer::cli_test;
using cli_test::slurp;
using nlohmann::json;

class RunReportConsistency : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pacer_run_report_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // Runs `pacer ARGS`, returns stdout; stderr is kept for the failure message.
  std::string pacer(const std::string& args, int* rc) {
    const cli_test::CommandResult r = cli_test::run_command(std::string(PACER_BINARY) + " " + args);
    *rc = r.rc;
    last_err_ = r.err;
    return r.out;
  }
  fs::path dir_;
  std::string last_err_;
};

struct RawOp {
  int64_t step, t0, t1;
  std::string phase, name;
};

TEST_F(RunReportConsistency, ReportAgreesWithTheRawLogOfARealRun) {
  int rc = 0;
  const std::string model = (dir_ / "tiny.gguf").string();
  pacer("gguf synth --arch tiny --type q4_0 --seed 7 -o " + model, &rc);
  ASSERT_EQ(rc, 0) << last_err_;

  const std::string prompt = "Once upon a time there was";
  const int n_predict = 12;
  const std::string log = (dir_ / "run.jsonl").string();
  pacer("run -m " + model + " -p '" + prompt + "' -n " + std::to_string(n_predict) +
            " --temp 0 --ignore-eos -t 2 --events-out " + log,
        &rc);
  ASSERT_EQ(rc, 0) << last_err_;

  // The prompt's token count from `pacer tokenize` ("N tokens, ..." on its last line).
  const std::string tok_out = pacer("tokenize -m " + model + " '" + prompt + "'", &rc);
  ASSERT_EQ(rc, 0) << last_err_;
  std::smatch m;
  const std::string tok_all = tok_out + last_err_;
  ASSERT_TRUE(std::regex_search(tok_all, m, std::regex(R"(([0-9]+) tokens, )"))) << tok_all;
  const int64_t n_prompt = std::stoll(m[1]);

  // --- The raw log, read line by line.
  std::istringstream lines(slurp(log));
  json header, footer;
  std::vector<json> steps;
  std::vector<RawOp> ops;
  for (std::string line; std::getline(lines, line);) {
    const json e = json::parse(line);
    const std::string type = e.at("type");
    if (type == "header") header = e;
    if (type == "footer") footer = e;
    if (type == "step") steps.push_back(e);
    if (type == "op") {
      ops.push_back({e.at("step"), e.at("t0_ns"), e.at("t1_ns"), e.at("phase"), e.at("name")});
      // Every worker slice lies inside its op.
      for (const json& w : e.at("workers")) {
        EXPECT_GE(w.at("t0_ns").get<int64_t>(), ops.back().t0) << line;
        EXPECT_LE(w.at("t1_ns").get<int64_t>(), ops.back().t1) << line;
      }
    }
  }
  ASSERT_FALSE(header.is_null());
  ASSERT_FALSE(footer.is_null());

  // Token counts: one prefill step over the whole prompt, then one decode step per further token.
  ASSERT_EQ(steps.size(), static_cast<size_t>(n_predict));
  EXPECT_EQ(steps.front().at("phase"), "prefill");
  EXPECT_EQ(steps.front().at("n_tokens").get<int64_t>(), n_prompt);
  EXPECT_EQ(footer.at("n_prompt").get<int64_t>(), n_prompt);
  EXPECT_EQ(footer.at("n_generated").get<int64_t>(), n_predict);
  EXPECT_EQ(footer.at("steps").get<int64_t>(), n_predict);
  for (size_t i = 1; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].at("phase"), "decode");
    EXPECT_EQ(steps[i].at("n_past").get<int64_t>(), n_prompt + static_cast<int64_t>(i));
  }

  // Per step: the ops of its window (forward pass, sampling, detokenization) lie inside it, in
  // order, without overlap; their sum plus the gaps between them is the step time, and the gaps
  // (the recorder's bookkeeping plus the runtime's glue) are a minority of it.
  std::map<int64_t, int64_t> op_ns_by_step;
  std::map<std::string, int64_t> op_ns_by_phase, op_count_by_phase;
  std::vector<double> gap_shares;
  for (const json& s : steps) {
    const int64_t step = s.at("step"), t0 = s.at("t0_ns"), t1 = s.at("t1_ns");
    EXPECT_NEAR(s.at("step_ms").get<double>(), (t1 - t0) / 1e6, 1e-6);
    int64_t prev_end = t0, sum = 0;
    for (const RawOp& op : ops) {
      // Tokenize precedes step 0's window; sample and detokenize fall inside their step.
      if (op.step != step || op.t0 < t0) continue;
      EXPECT_GE(op.t0, prev_end) << op.name << " step " << step << " overlaps the previous op";
      EXPECT_LE(op.t1, t1) << op.name << " step " << step << " ends after its step";
      EXPECT_LE(op.t0, op.t1);
      prev_end = op.t1;
      sum += op.t1 - op.t0;
    }
    ASSERT_GT(sum, 0) << "step " << step;
    op_ns_by_step[step] = sum;
    gap_shares.push_back(1.0 - static_cast<double>(sum) / static_cast<double>(t1 - t0));
  }
  for (const RawOp& op : ops) {
    op_ns_by_phase[op.phase] += op.t1 - op.t0;
    ++op_count_by_phase[op.phase];
  }
  std::sort(gap_shares.begin(), gap_shares.end());
  // Median step: ops cover at least 60% of it (about 85% on an idle 2-vCPU VM; the margin is for
  // a loaded CI machine, where a preempted thread between two ops shows up as gap).
  EXPECT_LT(gap_shares[gap_shares.size() / 2], 0.40);

  // --- The report, as JSON, against the raw numbers.
  const std::string report_text = pacer("report " + log + " --format json", &rc);
  ASSERT_EQ(rc, 0) << last_err_;
  const json r = json::parse(report_text);
  EXPECT_EQ(r.at("read").at("malformed").get<int64_t>(), 0);
  EXPECT_TRUE(r.at("complete").get<bool>());
  ASSERT_EQ(r.at("steps").size(), steps.size());
  int64_t decode_ns = 0, prefill_ns = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& rs = r.at("steps")[i];
    const int64_t dur = steps[i].at("t1_ns").get<int64_t>() - steps[i].at("t0_ns").get<int64_t>();
    EXPECT_EQ(rs.at("dur_ns").get<int64_t>(), dur);
    EXPECT_EQ(rs.at("op_ns").get<int64_t>(), op_ns_by_step[steps[i].at("step")]);
    EXPECT_EQ(rs.at("op_ns").get<int64_t>() + rs.at("gap_ns").get<int64_t>(), dur);
    (i == 0 ? prefill_ns : decode_ns) += dur;
  }
  const json& tp = r.at("throughput");
  EXPECT_EQ(tp.at("prefill_tokens").get<int64_t>(), n_prompt);
  EXPECT_EQ(tp.at("decode_tokens").get<int64_t>(), n_predict - 1);
  EXPECT_NEAR(tp.at("decode_tok_s").get<double>(), (n_predict - 1) / (decode_ns / 1e9),
              1e-6 * tp.at("decode_tok_s").get<double>());
  EXPECT_NEAR(tp.at("prefill_tok_s").get<double>(), n_prompt / (prefill_ns / 1e9),
              1e-6 * tp.at("prefill_tok_s").get<double>());
  EXPECT_EQ(r.at("decode_steps").at("count").get<int64_t>(), n_predict - 1);
  EXPECT_EQ(r.at("decode_steps").at("total_ns").get<int64_t>(), decode_ns);

  // Per-phase op totals and counts (by_phase rows carry the phase's ops).
  std::map<std::string, int64_t> report_ns, report_count;
  for (const json& row : r.at("by_phase")) {
    report_ns[row.at("phase")] += row.at("dist").at("total_ns").get<int64_t>();
    report_count[row.at("phase")] += row.at("dist").at("count").get<int64_t>();
  }
  for (const auto& [phase, ns] : op_ns_by_phase) {
    EXPECT_EQ(report_ns[phase], ns) << phase;
    EXPECT_EQ(report_count[phase], op_count_by_phase[phase]) << phase;
  }
  // The per-op rows of a phase add up to the same totals.
  std::map<std::string, int64_t> by_op_ns;
  for (const json& row : r.at("by_phase_op"))
    by_op_ns[row.at("phase")] += row.at("dist").at("total_ns").get<int64_t>();
  for (const auto& [phase, ns] : op_ns_by_phase) EXPECT_EQ(by_op_ns[phase], ns) << phase;
  // The step phase shares sum to at most 1 and the decode share is decode time / wall time.
  double share_sum = 0;
  for (const json& p : r.at("phases")) share_sum += p.at("share").get<double>();
  EXPECT_LE(share_sum, 1.0 + 1e-9);
}

}  // namespace
