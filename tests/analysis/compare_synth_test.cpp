// pacer compare against ground truth: synthetic logs with injected causes (compare_synth.h).
// For each injected cause: it ranks first in the suspicion table and in the verdict, and the
// attribution adds up to the measured difference, which the test computes itself from the log
// text (step lines parsed with nlohmann::json, not with pacer's reader).
#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/compare.h"
#include "analysis/compare_synth.h"
#include "eventlog/schema.h"

namespace pacer::analysis {
namespace {

using synth::Effect;
using synth::RunSpec;

// Mean decode step (ns) straight from the JSONL text.
double mean_decode_step_ns(const std::string& log) {
  std::istringstream in(log);
  std::string line;
  double sum = 0;
  int n = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] == "step" && j["phase"] == "decode") {
      sum += j["t1_ns"].get<double>() - j["t0_ns"].get<double>();
      ++n;
    }
  }
  return sum / n;
}

// Mean per-step on-CPU time of one op's slices on worker 0 (layer instances summed).
double mean_oncpu_ns(const std::string& log, const std::string& op) {
  std::istringstream in(log);
  std::string line;
  double sum = 0;
  std::set<int64_t> steps;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] != "op" || j["phase"] != "decode" || j["name"] != op) continue;
    steps.insert(j["step"].get<int64_t>());
    sum += j["workers"][0]["oncpu_ns"].get<double>();
  }
  return sum / static_cast<double>(steps.size());
}

struct Case {
  std::string normal_log, abnormal_log;
  Comparison c;
};

Case run_case(const RunSpec& normal, const RunSpec& abnormal) {
  Case k;
  k.normal_log = synth::event_log(normal);
  k.abnormal_log = synth::event_log(abnormal);
  const RunCycles a = load_run_text(k.normal_log, "normal.jsonl");
  const RunCycles b = load_run_text(k.abnormal_log, "abnormal.jsonl");
  k.c = compare_runs(a, b);
  return k;
}

RunSpec abnormal_of(const RunSpec& normal, Effect fx) {
  RunSpec s = normal;
  s.seed = normal.seed + 100;  // independent noise
  s.effects.push_back(std::move(fx));
  return s;
}

const Flag* flag_of(const Comparison& c, FlagKind k) {
  for (const Flag& f : c.flags)
    if (f.kind == k) return &f;
  return nullptr;
}

const MetricRow& top_real_op_row(const Comparison& c) {
  for (const MetricRow& r : c.rows)
    if (!r.pseudo) return r;
  throw std::runtime_error("no op rows");
}

void expect_adds_up(const Case& k) {
  const double measured = mean_decode_step_ns(k.abnormal_log) - mean_decode_step_ns(k.normal_log);
  const Attribution& a = k.c.attribution;
  EXPECT_NEAR(a.delta_ns(), measured, 1e-6 * std::fabs(measured));
  // The requirement is 1%; by construction the parts sum exactly.
  EXPECT_NEAR(a.sum_of_parts(), measured, 0.01 * std::fabs(measured));
  EXPECT_NEAR(a.sum_of_parts(), measured, 1e-6 * std::fabs(measured));
}

TEST(CompareSynth, FrequencyLoweredOnSomeOps) {
  RunSpec n;
  const std::vector<std::string> hit = {"ffn_gate_up", "ffn_down"};
  const Case k = run_case(n, abnormal_of(n, {.ops = hit, .freq_scale = 0.7}));
  const Comparison& c = k.c;
  expect_adds_up(k);
  ASSERT_TRUE(c.main_cause.has_value());
  EXPECT_EQ(*c.main_cause, Part::Frequency);
  EXPECT_NE(c.verdict.find("frequency reduction"), std::string::npos) << c.verdict;
  EXPECT_NE(c.verdict.find("ffn_gate_up"), std::string::npos) << c.verdict;
  // Ranks first in the suspicion table, on an op that was slowed.
  ASSERT_FALSE(c.rows.empty());
  EXPECT_EQ(c.rows[0].metric, Metric::CpuFrequency);
  const MetricRow& top = top_real_op_row(c);
  EXPECT_EQ(top.metric, Metric::CpuFrequency);
  EXPECT_TRUE(std::find(hit.begin(), hit.end(), top.op) != hit.end()) << top.op;
  EXPECT_NE(flag_of(c, FlagKind::FrequencyDrop), nullptr);
  // The frequency part carries the difference, and per op it matches the injected physics:
  // on-CPU time at 0.7x the clock grows by 1/0.7 - 1.
  EXPECT_GT(c.attribution.part(Part::Frequency), 0.95 * c.attribution.delta_ns());
  for (const OpAttribution& o : c.attribution.ops) {
    if (std::find(hit.begin(), hit.end(), o.op) == hit.end()) continue;
    const double expected = mean_oncpu_ns(k.normal_log, o.op) * (1 / 0.7 - 1);
    EXPECT_NEAR(o.part(Part::Frequency), expected, 0.05 * expected) << o.op;
  }
}

TEST(CompareSynth, UniformFrequencyDropIsNotBuried) {
  // Every op slows alike: no op's share of the cycle moves much, which a score proportional to
  // |Δβ| would rank low. pacer ranks it first and flags it.
  RunSpec n;
  const Case k = run_case(n, abnormal_of(n, {.freq_scale = 0.7}));
  const Comparison& c = k.c;
  expect_adds_up(k);
  EXPECT_EQ(c.main_cause, Part::Frequency);
  const MetricRow& top = c.rows.at(0);
  EXPECT_EQ(top.metric, Metric::CpuFrequency);
  EXPECT_LT(std::fabs(top.d_beta), 5.0);                 // β barely moved ...
  EXPECT_GT(top.impact_pts, 5 * std::fabs(top.d_beta));  // ... yet the impact is counted
  EXPECT_TRUE(top.flagged);
  const Flag* f = flag_of(c, FlagKind::FrequencyDrop);
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->pct_change, -30, 1.0);
  EXPECT_EQ(f->devices, std::vector<int>({0, 1}));
}

TEST(CompareSynth, RunQueueDelayOnOneCpu) {
  RunSpec n;
  const Case k = run_case(n, abnormal_of(n, {.cpus = {1}, .runq_ns = 4000}));
  const Comparison& c = k.c;
  expect_adds_up(k);
  EXPECT_EQ(c.main_cause, Part::RunQueue);
  EXPECT_NE(c.verdict.find("run-queue contention"), std::string::npos) << c.verdict;
  EXPECT_NE(c.verdict.find("CPU 1"), std::string::npos) << c.verdict;
  const MetricRow& top = c.rows.at(0);
  EXPECT_TRUE(top.op == kRunqOp || top.metric == Metric::RunqDelay) << top.op;
  EXPECT_NE(flag_of(c, FlagKind::RunQueue), nullptr);
  EXPECT_EQ(flag_of(c, FlagKind::FrequencyDrop), nullptr);
  EXPECT_GT(c.attribution.part(Part::RunQueue), 0.9 * c.attribution.delta_ns());
}

TEST(CompareSynth, InstructionsAddedToOneOp) {
  RunSpec n;
  const Case k = run_case(n, abnormal_of(n, {.ops = {"ffn_down"}, .instr_scale = 1.5}));
  const Comparison& c = k.c;
  expect_adds_up(k);
  EXPECT_EQ(c.main_cause, Part::Instructions);
  EXPECT_NE(c.verdict.find("more instructions"), std::string::npos) << c.verdict;
  const MetricRow& top = c.rows.at(0);
  EXPECT_EQ(top.op, "ffn_down");
  EXPECT_EQ(top.metric, Metric::Instructions);
  const Flag* f = flag_of(c, FlagKind::Instructions);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->op, "ffn_down");
  EXPECT_NEAR(f->pct_change, 50, 3);
}

TEST(CompareSynth, IpcLossInOneOp) {
  RunSpec n;
  const Case k = run_case(n, abnormal_of(n, {.ops = {"output"}, .cpi_scale = 1.4}));
  expect_adds_up(k);
  EXPECT_EQ(k.c.main_cause, Part::Ipc);
  EXPECT_EQ(top_real_op_row(k.c).op, "output");
  EXPECT_EQ(top_real_op_row(k.c).metric, Metric::Ipc);
  EXPECT_NE(flag_of(k.c, FlagKind::IpcLoss), nullptr);
}

TEST(CompareSynth, SoftwareEventsOnlyStillFindFrequency) {
  RunSpec n;
  n.hardware_counters = false;
  const Case k = run_case(n, abnormal_of(n, {.freq_scale = 0.75}));
  const Comparison& c = k.c;
  expect_adds_up(k);
  EXPECT_EQ(c.attribution.level, SplitLevel::Frequency);
  EXPECT_EQ(c.main_cause, Part::Frequency);
  EXPECT_EQ(c.attribution.part(Part::Ipc), 0);
  ASSERT_FALSE(c.attribution.not_measured.empty());
  EXPECT_NE(c.attribution.not_measured[0].find("no hardware PMU"), std::string::npos);
  for (const MetricRow& r : c.rows) EXPECT_NE(r.metric, Metric::Ipc);
}

TEST(CompareSynth, StepClockPricesSlicesWithoutTheirOwn) {
  // The frequency source sampled once per step per worker; slices carry no freq_mhz.
  RunSpec n;
  n.hardware_counters = false;
  n.slice_frequency = false;
  const Case k = run_case(n, abnormal_of(n, {.freq_scale = 0.8}));
  expect_adds_up(k);
  EXPECT_EQ(k.c.attribution.level, SplitLevel::Frequency);
  EXPECT_EQ(k.c.main_cause, Part::Frequency);
  EXPECT_GT(k.c.attribution.part(Part::Frequency), 0.9 * k.c.attribution.delta_ns());
  const MetricRow& top = top_real_op_row(k.c);
  EXPECT_EQ(top.metric, Metric::CpuFrequency);
}

TEST(CompareSynth, OnCpuOnlySaysWhatIsMissing) {
  RunSpec n;
  n.hardware_counters = false;
  n.frequency = false;
  const Case k = run_case(n, abnormal_of(n, {.cpi_scale = 1.3}));
  expect_adds_up(k);
  EXPECT_EQ(k.c.attribution.level, SplitLevel::OnCpu);
  EXPECT_EQ(k.c.main_cause, Part::OnCpu);
  bool freq_missing = false;
  for (const auto& s : k.c.attribution.not_measured)
    freq_missing = freq_missing || s.find("no frequency source") != std::string::npos;
  EXPECT_TRUE(freq_missing);
}

TEST(CompareSynth, CombinedCausesSplitApart) {
  // Clock at 0.85x everywhere and 2 us of run-queue wait per slice on CPU 0.
  RunSpec n;
  RunSpec b = abnormal_of(n, {.freq_scale = 0.85});
  b.effects.push_back({.cpus = {0}, .runq_ns = 2000});
  const Case k = run_case(n, b);
  expect_adds_up(k);
  const Attribution& a = k.c.attribution;
  const double freq = a.part(Part::Frequency), runq = a.part(Part::RunQueue);
  EXPECT_GT(freq, 0);
  EXPECT_GT(runq, 0);
  EXPECT_GT(freq + runq, 0.9 * a.delta_ns());
  EXPECT_NE(flag_of(k.c, FlagKind::FrequencyDrop), nullptr);
  EXPECT_NE(flag_of(k.c, FlagKind::RunQueue), nullptr);
}

TEST(CompareSynth, SameConfigurationIsNoDifference) {
  RunSpec n;
  RunSpec b = n;
  b.seed = 77;
  const Case k = run_case(n, b);
  EXPECT_FALSE(k.c.significant);
  EXPECT_FALSE(k.c.main_cause.has_value());
  EXPECT_TRUE(k.c.flags.empty());
  EXPECT_NE(k.c.verdict.find("No significant difference"), std::string::npos) << k.c.verdict;
}

TEST(CompareSynth, FasterRunReadsTheOtherWay) {
  RunSpec n;
  const Case k = run_case(abnormal_of(n, {.freq_scale = 0.7}), n);
  EXPECT_EQ(k.c.main_cause, Part::Frequency);
  EXPECT_LT(k.c.attribution.part(Part::Frequency), 0);
  EXPECT_NE(k.c.verdict.find("faster"), std::string::npos) << k.c.verdict;
  EXPECT_NE(k.c.verdict.find("frequency increase"), std::string::npos) << k.c.verdict;
}

TEST(CompareSynth, TruncatedAbnormalLogStillCompares) {
  RunSpec n;
  RunSpec b = abnormal_of(n, {.freq_scale = 0.7});
  b.footer = false;
  std::string log = synth::event_log(b);
  log.resize(log.size() - 40);  // killed mid-line
  const RunCycles ra = load_run_text(synth::event_log(n), "normal.jsonl");
  const RunCycles rb = load_run_text(log, "cut.jsonl");
  EXPECT_EQ(rb.cycles(), static_cast<size_t>(b.steps - 1));  // the last step's line was cut
  const Comparison c = compare_runs(ra, rb);
  EXPECT_EQ(c.main_cause, Part::Frequency);
  bool noted = false;
  for (const auto& s : c.notes[1]) noted = noted || s.find("truncated") != std::string::npos;
  EXPECT_TRUE(noted);
}

// The suspicion table's Impact and the attribution are one model: a host row's impact is its op's
// attribution part, in pts of the normal step (the defect: 35.6 pts in the table against 42.8 pts
// in the attribution for the same clock drop).
TEST(CompareSynth, ImpactIsTheAttributionPart) {
  RunSpec n;
  const Case k = run_case(n, abnormal_of(n, {.ops = {"ffn_gate_up"}, .freq_scale = 0.6}));
  const Comparison& c = k.c;
  const double t0 = c.attribution.mean_ns[0];
  int checked = 0;
  for (const MetricRow& r : c.rows) {
    if (r.device != kHostDevice || r.pseudo || !r.metric) continue;
    const OpAttribution* o = nullptr;
    for (const OpAttribution& x : c.attribution.ops)
      if (x.op == r.op) o = &x;
    ASSERT_NE(o, nullptr) << r.op;
    if (r.metric == Metric::CpuFrequency) {
      EXPECT_NEAR(r.impact_pts, std::fabs(o->part(Part::Frequency)) / t0 * 100, 1e-9) << r.op;
      ++checked;
    } else if (r.metric == Metric::Instructions) {
      EXPECT_NEAR(r.impact_pts, std::fabs(o->part(Part::Instructions)) / t0 * 100, 1e-9);
      ++checked;
    }
  }
  EXPECT_GT(checked, 4);
  // And the top frequency row's impact is the verdict's frequency figure for that op.
  const MetricRow& top = top_real_op_row(c);
  ASSERT_EQ(top.metric, Metric::CpuFrequency);
  EXPECT_EQ(top.op, "ffn_gate_up");
}

// AVX-512 -> AVX2 without a PMU: every op does 59% more work at the same clock, so no op's share
// of the step moves and the per-op rows barely score. The host on-CPU time row carries the CPU-work
// part by the same log model and ranks near the top (the defect: 85th).
TEST(CompareSynth, UniformMoreWorkWithoutPmuRanksOnCpuTime) {
  RunSpec n;
  n.hardware_counters = false;
  const Case k = run_case(n, abnormal_of(n, {.instr_scale = 1.59}));
  const Comparison& c = k.c;
  expect_adds_up(k);
  ASSERT_EQ(c.main_cause, Part::CpuWork);
  size_t rank = c.rows.size();
  for (size_t i = 0; i < c.rows.size(); ++i)
    if (c.rows[i].op == kOncpuOp && c.rows[i].device == kHostDevice &&
        c.rows[i].metric == Metric::OncpuTime) {
      rank = i;
      break;
    }
  EXPECT_LT(rank, 3u);
  ASSERT_LT(rank, c.rows.size());
  const double t0 = c.attribution.mean_ns[0];
  EXPECT_NEAR(
      c.rows[rank].impact_pts,
      std::fabs(c.attribution.part(Part::CpuWork) + c.attribution.part(Part::OnCpu)) / t0 * 100,
      1e-9);
}

// The generator writes its lines with literal keys; every one of them must be a key
// eventlog/schema.h owns, so a renamed key cannot leave the synthetic logs (and the compare
// tests built on them) reading a field that real logs no longer have.
TEST(CompareSynth, EveryKeyWrittenIsOneTheSchemaOwns) {
  RunSpec spec;
  spec.hardware_counters = true;
  const std::string log = event_log(spec);
  std::set<std::string> missing;
  auto within = [&](const nlohmann::json& obj, const auto& schema, const std::string& where) {
    ASSERT_TRUE(obj.is_object()) << where;
    for (const auto& [k, v] : obj.items()) {
      if (k == eventlog::record::kType) continue;
      if (std::find(schema.begin(), schema.end(), k) == schema.end()) missing.insert(where + k);
    }
  };
  std::istringstream in(log);
  std::string line;
  std::set<std::string> types;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    const std::string type = j.at("type");
    types.insert(type);
    if (type == eventlog::record::kHeader) {
      within(j, eventlog::header_key::kAll, "");
      within(j.at("model"), eventlog::model_key::kAll, "model.");
      within(j.at("run"), eventlog::run_key::kAll, "run.");
      within(j.at("host"), eventlog::host_key::kAll, "host.");
      within(j.at("counters"), eventlog::counters_key::kAll, "counters.");
      within(j.at("frequency"), eventlog::frequency_key::kAll, "frequency.");
      within(j.at("thermal"), eventlog::thermal_key::kAll, "thermal.");
    } else if (type == eventlog::record::kOp) {
      within(j, eventlog::op_key::kAll, "op.");
      for (const auto& w : j.at("workers")) within(w, eventlog::op_key::kAll, "op.workers[].");
    } else if (type == eventlog::record::kStep) {
      within(j, eventlog::step_key::kAll, "step.");
    } else if (type == eventlog::record::kFooter) {
      within(j, eventlog::footer_key::kAll, "footer.");
    }
  }
  EXPECT_EQ(types, (std::set<std::string>{"header", "op", "step", "footer"}));
  EXPECT_TRUE(missing.empty()) << "keys the schema does not own: "
                               << ::testing::PrintToString(missing);
}

}  // namespace
}  // namespace pacer::analysis
