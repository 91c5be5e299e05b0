#pragma once
// `pacer regress`: which benchmark got slower, how sure we are, and why.
//
// The stored runs (history_db.h) are grouped by (host, model, type, test, threads, pin). In each
// group a candidate selection is tested against a baseline selection: the tok/s of every
// repetition of the selected runs, pooled, with a one-sided Mann-Whitney U test (exact for up to
// stats::kExactMaxTotal values without ties; a bench row has a handful of repetitions, too few
// for a normal approximation or a t-test's assumptions). A group is a regression when the
// candidate's median is lower and p < alpha; those above --fail-above are what gate CI. For each
// regression the stored event logs of a representative baseline run and the slowest candidate
// run go through `pacer compare` (compare_runs, the same call and options as the CLI), whose
// verdict line says why.
//
// Selectors (comma-separated terms, all must hold):
//   latest          the newest run of the group (after the other terms)
//   since:DATE      time_utc >= DATE (ISO 8601 prefix: 2026-11-24, 2026-11-24T08:00)
//   until:DATE      time_utc <  DATE
//   commit:SHA      git sha starting with SHA
//   host:NAME       host name or host id
//   run:UUID        run UUID starting with UUID
//   rest            (baseline only, the default) every run of the group the candidate did not take
//   fleet           (baseline only) the other hosts' runs of the same (model, type, test, threads,
//                   pin): groups then span hosts, and the candidate should name one (host:NAME)
// The default candidate is `latest`, the default baseline `rest`.
//
// A baseline run on another CPU than every candidate run (brand string or CPUID family/model/
// stepping differ, where both runs recorded one) is left out of the test: one host name can move
// to another CPU generation (a cloud VM, a re-imaged server) under the same brand string, and a
// Zen 4 baseline makes a Zen 1 candidate "slower" without any change in pacer. A group whose only
// baseline runs were on another CPU is untested and listed (RegressResult::other_cpu).
//
// Where both sides stored the kernels' ceiling (their rate with the weights in cache, measured
// before each tg run), a slowdown says which side moved: kernels that slowed by at least half as
// much (and 3 %) point at the arithmetic (the code, the clock, a sibling on the core); kernels
// within 3 % point outside it (memory, attention, the threads' waits). Without stored logs to
// compare, that is the only why a regression gets.
#include <optional>
#include <string>
#include <vector>

#include "analysis/history_db.h"

namespace pacer::analysis {

struct RegressOptions {
  std::string baseline = "rest";
  std::string candidate = "latest";
  double fail_above_pct = 5.0;  // a significant slowdown above this fails (exit 1)
  double alpha = 0.05;          // one-sided significance level
  RunFilter filter;             // which runs take part at all
  bool explain = true;          // run compare on the stored logs of each regression
};

// One group's test.
struct GroupTest {
  std::string host;  // the candidate's host ("fleet" groups: the candidate's hosts)
  std::string model, type, test, pin;
  int threads = 0;
  int baseline_runs = 0, candidate_runs = 0;
  std::vector<double> baseline_tok_s, candidate_tok_s;  // pooled repetitions
  double baseline_median = 0, candidate_median = 0;
  double slowdown_pct = 0;                  // 100 * (1 - candidate / baseline medians); < 0: faster
  double p = 1;                             // one-sided: P(a slowdown this large | no change)
  bool exact = false;                       // p from the exact distribution
  bool significant = false;                 // slower and p < alpha
  bool fails = false;                       // significant and slowdown_pct > fail_above_pct
  std::string baseline_run, candidate_run;  // UUIDs of the runs compared
  std::string candidate_time, candidate_commit, baseline_commits;
  int baseline_other_cpu = 0;  // baseline runs left out: on another CPU than the candidate's
  std::string candidate_cpus, other_cpus;  // "brand [signature]" of each, ", "-joined
  // The decode matmul kernels' rate from cache (BenchRecord::kernel_ceiling_tok_s, measured
  // before each tg run): medians over the runs that stored one, 0 where none did; and, for a
  // slowdown with both, what they say (kernel_note: compare.h kernel_ceiling_note).
  double baseline_kernel_tok_s = 0, candidate_kernel_tok_s = 0;
  std::string kernel_note;
  std::string verdict;        // compare's verdict line ("" when not compared)
  std::string compare_error;  // why the compare could not run
  double confidence() const noexcept { return 1 - p; }
};

struct RegressResult {
  std::vector<GroupTest> regressions;  // significant slowdowns, largest first
  std::vector<GroupTest> others;       // tested groups without a significant slowdown
  int groups = 0;                      // groups with runs after the filter
  int untested = 0;                    // groups without baseline or candidate runs
  std::vector<GroupTest> other_cpu;    // of those: every baseline run on another CPU
  bool fails = false;                  // some regression is above fail_above_pct
};

// Why `text` is not a valid selector ("" when it is); `candidate` refuses rest and fleet.
std::string selector_error(const std::string& text, bool candidate);

// Throws std::invalid_argument for a malformed selector.
RegressResult find_regressions(const HistoryDb& db, const RegressOptions& opts);

std::string render_regress_text(const RegressResult& r, const RegressOptions& opts);
// {"groups", "untested", "fails", "regressions": [...], "others": [...]}: every GroupTest field,
// the repetitions included, for a CI job that wants more than the exit code.
std::string render_regress_json(const RegressResult& r, const RegressOptions& opts);

}  // namespace pacer::analysis
