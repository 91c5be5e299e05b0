// pacer regress on hand-built databases: a known slowdown is found with the exact one-sided
// Mann-Whitney p, listed largest first and gated by --fail-above; a clean database passes; the
// selectors pick the runs they say; the verdict is compare's verdict on the stored logs.
#include <filesystem>
#include <fstream>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/compare.h"
#include "analysis/compare_input.h"
#include "analysis/regress.h"
#include "event_log_testlog.h"
#include "history_test_util.h"

namespace pacer::analysis {
namespace {

namespace fs = std::filesystem;
using history_test::make_record;
using history_test::TempDir;
using ::testing::HasSubstr;

// One group's runs: each entry is one run's repetitions, a day apart, oldest first.
void add_runs(HistoryDb& db, const std::vector<std::vector<double>>& runs,
              const std::string& test = "tg64", const std::string& host = "host-a",
              const std::vector<std::string>& shas = {}) {
  for (size_t i = 0; i < runs.size(); ++i) {
    BenchRecord r = make_record(fmt::format("2026-11-{:02}T10:00:00Z", 10 + i), runs[i]);
    r.test = test;
    r.host = host;
    if (i < shas.size()) r.git_sha = shas[i];
    db.append(r);
  }
}

TEST(Regress, FindsAKnownSlowdownWithItsExactConfidence) {
  TempDir dir;
  HistoryDb db = HistoryDb::open(dir.path() / "h.sqlite", HistoryDb::Mode::ReadWrite);
  // Baseline 6 repetitions around 100 tok/s, the latest run 3 around 80: every baseline value
  // beats every candidate value, so U = 18 and the exact one-sided p is 1 / C(9, 3) = 1/84.
  add_runs(db, {{100, 102, 98}, {101, 99, 103}, {80, 81, 79}});
  RegressOptions o;
  o.explain = false;
  const RegressResult r = find_regressions(db, o);
  EXPECT_EQ(r.groups, 1);
  ASSERT_EQ(r.regressions.size(), 1u);
  const GroupTest& g = r.regressions[0];
  EXPECT_EQ(g.baseline_runs, 2);
  EXPECT_EQ(g.candidate_runs, 1);
  EXPECT_DOUBLE_EQ(g.baseline_median, 100.5);
  EXPECT_DOUBLE_EQ(g.candidate_median, 80);
  EXPECT_NEAR(g.slowdown_pct, 100 * (1 - 80 / 100.5), 1e-9);
  EXPECT_TRUE(g.exact);
  EXPECT_NEAR(g.p, 1.0 / 84, 1e-12);
  EXPECT_NEAR(g.confidence(), 83.0 / 84, 1e-12);
  EXPECT_TRUE(g.fails);
  EXPECT_TRUE(r.fails);

  // Above the threshold only: a 20% slowdown passes --fail-above 25 but is still listed.
  o.fail_above_pct = 25;
  const RegressResult lenient = find_regressions(db, o);
  ASSERT_EQ(lenient.regressions.size(), 1u);
  EXPECT_FALSE(lenient.fails);
  EXPECT_THAT(render_regress_text(lenient, o), HasSubstr("slowdown 20.4% slower"));
  EXPECT_THAT(render_regress_text(r, RegressOptions{}), HasSubstr("REGRESSION 20.4% slower"));
  const nlohmann::json j = nlohmann::json::parse(render_regress_json(r, RegressOptions{}));
  EXPECT_EQ(j["fails"], true);
  ASSERT_EQ(j["regressions"].size(), 1u);
  EXPECT_NEAR(j["regressions"][0]["p"].get<double>(), 1.0 / 84, 1e-12);
  EXPECT_EQ(j["regressions"][0]["candidate_tok_s"], nlohmann::json({80, 81, 79}));
}

// One host name, two CPU generations under one brand string (a cloud VM moved from Zen 4 to
// Zen 1): the older CPU's runs are no baseline for the newer one's, until it has its own.
TEST(Regress, ARunOnAnotherCpuIsNoBaseline) {
  TempDir dir;
  HistoryDb db = HistoryDb::open(dir.path() / "h.sqlite", HistoryDb::Mode::ReadWrite);
  const std::string zen4 = "family 25 model 17 stepping 1", zen1 = "family 23 model 1 stepping 2";
  int day = 10;
  const auto add = [&](const std::string& sig, std::vector<double> tok_s,
                       const std::string& brand = "AMD EPYC") {
    BenchRecord r = make_record(fmt::format("2026-11-{:02}T10:00:00Z", day++), tok_s);
    r.cpu_model = brand;
    r.cpu_signature = sig;
    db.append(r);
  };
  add(zen4, {100, 102, 98});
  add(zen4, {101, 99, 103});
  add(zen1, {60, 61, 59});
  RegressOptions o;
  o.explain = false;
  RegressResult r = find_regressions(db, o);
  EXPECT_TRUE(r.regressions.empty());
  EXPECT_TRUE(r.others.empty());
  EXPECT_FALSE(r.fails);
  EXPECT_EQ(r.untested, 1);
  ASSERT_EQ(r.other_cpu.size(), 1u);
  EXPECT_EQ(r.other_cpu[0].baseline_other_cpu, 2);
  EXPECT_EQ(r.other_cpu[0].candidate_cpus, "AMD EPYC [" + zen1 + "]");
  EXPECT_EQ(r.other_cpu[0].other_cpus, "AMD EPYC [" + zen4 + "]");
  const std::string text = render_regress_text(r, o);
  EXPECT_THAT(text, HasSubstr("not tested, CPU changed: host-a | tiny q8_0 | tg64"));
  EXPECT_THAT(text, HasSubstr("(1 with a baseline only on another CPU)"));
  const nlohmann::json j = nlohmann::json::parse(render_regress_json(r, o));
  ASSERT_EQ(j["other_cpu"].size(), 1u);
  EXPECT_EQ(j["other_cpu"][0]["baseline_other_cpu"], 2);

  // Zen 1 runs of its own, then a slower one: tested against those only (medians 60.75 -> 40,
  // no ties and every baseline value above every candidate value: exact p = 1 / C(9, 3)).
  add(zen1, {62.5, 60.5, 61.5});
  add(zen1, {40, 41, 39});
  r = find_regressions(db, o);
  ASSERT_EQ(r.regressions.size(), 1u);
  const GroupTest& g = r.regressions[0];
  EXPECT_EQ(g.baseline_runs, 2);
  EXPECT_EQ(g.baseline_other_cpu, 2);
  EXPECT_DOUBLE_EQ(g.baseline_median, 60.75);
  EXPECT_NEAR(g.p, 1.0 / 84, 1e-12);
  EXPECT_THAT(render_regress_text(r, o),
              HasSubstr("left out of the baseline: 2 runs on AMD EPYC [" + zen4 + "]"));

  // A row without a signature (stored before schema 2) stays comparable on the same brand; a
  // different brand string is another CPU whatever the signatures.
  add("", {61, 60, 62});
  add(zen1, {60, 61, 62}, "Intel(R) Xeon(R) Platinum 8480+");
  add(zen1, {41, 40, 39});
  r = find_regressions(db, o);
  ASSERT_EQ(r.regressions.size(), 1u);
  EXPECT_EQ(r.regressions[0].baseline_runs, 4);  // 3 Zen 1 runs and the unsigned one
  EXPECT_EQ(r.regressions[0].baseline_other_cpu, 3);
}

// The kernels' ceiling stored with each tg run says which side of a slowdown moved: three groups
// 100 -> 80 tok/s (20 % slower), whose kernels from L2 went 150 -> 120 (with it), 150 -> 149
// (held) and 150 -> 141 (6 %: part of it); a fourth without ceilings gets no note.
TEST(Regress, TheKernelCeilingSaysWhetherTheArithmeticSlowed) {
  TempDir dir;
  HistoryDb db = HistoryDb::open(dir.path() / "h.sqlite", HistoryDb::Mode::ReadWrite);
  const std::vector<std::vector<double>> runs = {{100, 102, 98}, {101, 99, 103}, {80, 81, 79}};
  const auto group = [&](const std::string& test, std::vector<double> ceilings) {
    for (size_t i = 0; i < runs.size(); ++i) {
      BenchRecord r = make_record(fmt::format("2026-11-{:02}T10:00:00Z", 10 + i), runs[i]);
      r.test = test;
      r.kernel_ceiling_tok_s = ceilings[i];
      db.append(r);
    }
  };
  group("tg64", {149, 151, 120});
  group("tg128", {150, 150, 149});
  group("tg256", {150, 150, 141});
  group("tg32", {0, 0, 0});
  RegressOptions o;
  o.explain = false;
  const RegressResult r = find_regressions(db, o);
  ASSERT_EQ(r.regressions.size(), 4u);
  std::map<std::string, const GroupTest*> by_test;
  for (const GroupTest& g : r.regressions) by_test[g.test] = &g;
  const GroupTest& with = *by_test.at("tg64");
  EXPECT_DOUBLE_EQ(with.baseline_kernel_tok_s, 150);  // median of 149, 151
  EXPECT_DOUBLE_EQ(with.candidate_kernel_tok_s, 120);
  EXPECT_THAT(with.kernel_note, HasSubstr("kernels from L2 150.0 -> 120.0 tok/s (-20.0%)"));
  EXPECT_THAT(with.kernel_note, HasSubstr("arithmetic slowed with it"));
  EXPECT_THAT(by_test.at("tg128")->kernel_note,
              HasSubstr("150.0 -> 149.0 tok/s (-0.7%): the matmuls' arithmetic held"));
  EXPECT_THAT(by_test.at("tg256")->kernel_note,
              HasSubstr("(-6.0%): the arithmetic explains part of the 20.4%"));
  EXPECT_EQ(by_test.at("tg32")->kernel_note, "");
  EXPECT_EQ(by_test.at("tg32")->baseline_kernel_tok_s, 0.0);
  const std::string text = render_regress_text(r, o);
  EXPECT_THAT(text, HasSubstr("\n  kernels from L2 150.0 -> 120.0 tok/s (-20.0%)"));
  const nlohmann::json j = nlohmann::json::parse(render_regress_json(r, o));
  bool seen = false;
  for (const auto& g : j["regressions"]) {
    if (g["test"] != "tg64") continue;
    seen = true;
    EXPECT_EQ(g["baseline_kernel_tok_s"], 150.0);
    EXPECT_EQ(g["candidate_kernel_tok_s"], 120.0);
    EXPECT_EQ(g["kernel_note"], with.kernel_note);
  }
  EXPECT_TRUE(seen);
  // No slowdown, or a side without a ceiling: no note.
  EXPECT_EQ(kernel_ceiling_note(-5, 150, 120), "");
  EXPECT_EQ(kernel_ceiling_note(20, 0, 120), "");
  EXPECT_EQ(kernel_ceiling_note(20, 150, 0), "");
}

TEST(Regress, ACleanDatabasePasses) {
  TempDir dir;
  HistoryDb db = HistoryDb::open(dir.path() / "h.sqlite", HistoryDb::Mode::ReadWrite);
  // Interleaved values: no ordering between the latest run and the others.
  add_runs(db, {{100, 104, 96}, {101, 97, 103}, {102, 98, 100}});
  // A faster latest run is not a regression either.
  add_runs(db, {{50, 51, 49}, {50, 52, 48}, {70, 71, 72}}, "pp512");
  const RegressResult r = find_regressions(db, {});
  EXPECT_EQ(r.groups, 2);
  EXPECT_TRUE(r.regressions.empty());
  EXPECT_EQ(r.others.size(), 2u);
  EXPECT_FALSE(r.fails);
  for (const GroupTest& g : r.others) EXPECT_GT(g.p, 0.05);
}

TEST(Regress, ListsSlowdownsLargestFirst) {
  TempDir dir;
  HistoryDb db = HistoryDb::open(dir.path() / "h.sqlite", HistoryDb::Mode::ReadWrite);
  add_runs(db, {{100, 101, 99, 100.5}, {100, 99.5, 100.2, 100.1}, {90, 89, 91, 90.5}}, "tg64");
  add_runs(db, {{50, 51, 49, 50.5}, {50, 49.5, 50.2, 50.1}, {30, 31, 29, 30.5}}, "tg128");
  add_runs(db, {{10, 10.3, 10.1, 10.4}, {10.2, 10.25, 10.15, 10.35}, {9.8, 9.7, 9.75, 9.72}},
           "pp512");
  RegressOptions o;
  o.explain = false;
  const RegressResult r = find_regressions(db, o);
  ASSERT_EQ(r.regressions.size(), 3u);
  EXPECT_EQ(r.regressions[0].test, "tg128");  // 40%
  EXPECT_EQ(r.regressions[1].test, "tg64");   // 10%
  EXPECT_EQ(r.regressions[2].test, "pp512");  // ~4.7%: significant, below --fail-above 5
  EXPECT_TRUE(r.regressions[0].fails);
  EXPECT_TRUE(r.regressions[1].fails);
  EXPECT_FALSE(r.regressions[2].fails);
}

TEST(Regress, SelectorsPickCommitsDatesAndTheFleet) {
  TempDir dir;
  HistoryDb db = HistoryDb::open(dir.path() / "h.sqlite", HistoryDb::Mode::ReadWrite);
  // Commit aaa fast, commit bbb slow, then a fast run of ccc as the latest.
  add_runs(db, {{100, 101, 99}, {100, 102, 98}, {80, 79, 81}, {80, 82, 78}, {100, 99, 101}}, "tg64",
           "host-a", {"aaa111", "aaa111", "bbb222", "bbb222", "ccc333"});
  RegressOptions o;
  o.explain = false;
  EXPECT_TRUE(find_regressions(db, o).regressions.empty());  // latest (ccc) vs the rest

  o.baseline = "commit:aaa";
  o.candidate = "commit:bbb";
  RegressResult r = find_regressions(db, o);
  ASSERT_EQ(r.regressions.size(), 1u);
  EXPECT_EQ(r.regressions[0].baseline_runs, 2);
  EXPECT_EQ(r.regressions[0].candidate_runs, 2);
  EXPECT_EQ(r.regressions[0].candidate_commit, "bbb222");
  EXPECT_NEAR(r.regressions[0].slowdown_pct, 20, 1e-9);

  o.baseline = "until:2026-11-12";
  o.candidate = "since:2026-11-12,until:2026-11-14";
  r = find_regressions(db, o);
  ASSERT_EQ(r.regressions.size(), 1u);
  EXPECT_EQ(r.regressions[0].baseline_runs, 2);
  EXPECT_EQ(r.regressions[0].candidate_runs, 2);

  // A host slower than the rest of the fleet.
  TempDir fleet_dir;
  HistoryDb fleet = HistoryDb::open(fleet_dir.path() / "f.sqlite", HistoryDb::Mode::ReadWrite);
  add_runs(fleet, {{100, 101, 99}}, "tg64", "h1");
  add_runs(fleet, {{100, 102, 98}}, "tg64", "h2");
  add_runs(fleet, {{99, 101, 100}}, "tg64", "h3");
  add_runs(fleet, {{70, 71, 69}}, "tg64", "h4");
  RegressOptions fo;
  fo.explain = false;
  fo.baseline = "fleet";
  fo.candidate = "host:h4";
  r = find_regressions(fleet, fo);
  ASSERT_EQ(r.regressions.size(), 1u);
  EXPECT_EQ(r.regressions[0].host, "h4");
  EXPECT_EQ(r.regressions[0].baseline_runs, 3);
  fo.candidate = "host:h2";
  EXPECT_TRUE(find_regressions(fleet, fo).regressions.empty());

  o.baseline = "bogus:1";
  EXPECT_THROW(find_regressions(db, o), std::invalid_argument);
  // A date that is no date would compare as text and select nothing: the gate would pass.
  for (const char* bad : {"since:garbage", "since:2026-13-45", "until:yesterday"}) {
    o.baseline = bad;
    EXPECT_THROW(find_regressions(db, o), std::invalid_argument) << bad;
  }
  o.baseline = "rest";
  o.candidate = "fleet";
  EXPECT_THROW(find_regressions(db, o), std::invalid_argument);
}

TEST(Regress, ExplainsWithCompareVerdictOnTheStoredLogs) {
  TempDir dir;
  // A normal run and one whose middle decode steps run at 60% of the clock.
  auto write_log = [&](const std::string& name, double throttle) {
    const fs::path p = dir.path() / name;
    std::ofstream f(p, std::ios::binary);
    testlog::write_synthetic(f,
                             {.n_layers = 2, .n_decode = 30, .jitter = 0.05, .throttle = throttle});
    return p;
  };
  const fs::path fast = write_log("fast.jsonl", 1.0);
  const fs::path slow = write_log("slow.jsonl", 0.6);
  HistoryDb db = HistoryDb::open(dir.path() / "h.sqlite", HistoryDb::Mode::ReadWrite);
  for (int i = 0; i < 2; ++i) {
    BenchRecord r = make_record(fmt::format("2026-11-1{}T10:00:00Z", i), {100.0 + i, 101, 99});
    r.events_path = fast.string();
    db.append(r);
  }
  BenchRecord bad = make_record("2026-11-15T10:00:00Z", {70, 71, 69});
  bad.events_path = slow.string();
  const std::string bad_uuid = db.append(bad);

  const RegressResult r = find_regressions(db, {});
  ASSERT_EQ(r.regressions.size(), 1u);
  const GroupTest& g = r.regressions[0];
  EXPECT_EQ(g.candidate_run, bad_uuid);
  EXPECT_TRUE(g.compare_error.empty()) << g.compare_error;
  // The verdict `pacer compare fast.jsonl slow.jsonl` states.
  const Comparison c = compare_runs(load_run(fast.string()), load_run(slow.string()), {});
  ASSERT_FALSE(c.verdict.empty());
  EXPECT_EQ(g.verdict, c.verdict);
  EXPECT_THAT(render_regress_text(r, {}), HasSubstr(c.verdict));
}

TEST(Regress, SaysWhyItCouldNotCompare) {
  TempDir dir;
  HistoryDb db = HistoryDb::open(dir.path() / "h.sqlite", HistoryDb::Mode::ReadWrite);
  add_runs(db, {{100, 102, 98}, {101, 99, 103}, {80, 81, 79}});  // rows without logs
  const RegressResult r = find_regressions(db, {});
  ASSERT_EQ(r.regressions.size(), 1u);
  EXPECT_TRUE(r.regressions[0].verdict.empty());
  EXPECT_THAT(r.regressions[0].compare_error, HasSubstr("no stored event log"));
  EXPECT_THAT(render_regress_text(r, {}), HasSubstr("compare: not run: no stored event log"));
}

}  // namespace
}  // namespace pacer::analysis
