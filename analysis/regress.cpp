// `pacer regress` (regress.h): selectors, the per-group test, and the compare of stored logs.
#include "analysis/regress.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "analysis/compare.h"
#include "analysis/compare_input.h"
#include "analysis/history_db.h"
#include "analysis/stats.h"

namespace pacer::analysis {
namespace {

struct Selector {
  bool latest = false, rest = false, fleet = false;
  std::string since, until, commit, host, run;
};

Selector parse_selector(const std::string& text, const char* what) {
  Selector s;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string term =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (term.empty()) continue;
    const size_t colon = term.find(':');
    const std::string key = term.substr(0, colon);
    const std::string value = colon == std::string::npos ? "" : term.substr(colon + 1);
    auto need_value = [&](std::string& field) {
      if (value.empty())
        throw std::invalid_argument(
            fmt::format("--{} '{}': '{}' needs a value ({}:...)", what, text, key, key));
      field = value;
    };
    if (term == "latest") {
      s.latest = true;
    } else if (term == "rest") {
      s.rest = true;
    } else if (term == "fleet") {
      s.fleet = true;
    } else if (key == "since" || key == "until") {
      need_value(key == "since" ? s.since : s.until);
      if (const std::string why = history_date_error(value); !why.empty())
        throw std::invalid_argument(fmt::format("--{} '{}': {}: {}", what, text, key, why));
    } else if (key == "commit") {
      need_value(s.commit);
    } else if (key == "host") {
      need_value(s.host);
    } else if (key == "run") {
      need_value(s.run);
    } else {
      throw std::invalid_argument(
          fmt::format("--{} '{}': unknown term '{}' (latest, rest, fleet, since:DATE, until:DATE, "
                      "commit:SHA, host:NAME, run:UUID)",
                      what, text, term));
    }
  }
  return s;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The runs of a group that a selector's terms take (before `latest` and `rest`).
bool matches(const Selector& s, const BenchRecord& r) {
  if (!s.since.empty() && r.time_utc < s.since) return false;
  if (!s.until.empty() && r.time_utc >= s.until) return false;
  if (!s.commit.empty() && !starts_with(r.git_sha, s.commit)) return false;
  if (!s.host.empty() && r.host != s.host && r.host_id != s.host) return false;
  if (!s.run.empty() && !starts_with(r.run_uuid, s.run)) return false;
  return true;
}

std::string cpus_of(const std::vector<const StoredRun*>& runs) {
  std::set<std::string> labels;
  for (const StoredRun* r : runs) labels.insert(cpu_label(r->record));
  return fmt::format("{}", fmt::join(labels, ", "));
}

double median(std::vector<double> v) {
  return stats::quantile(v, 0.5);
}

std::vector<double> pooled_rates(const std::vector<const StoredRun*>& runs) {
  std::vector<double> out;
  for (const StoredRun* r : runs)
    for (double v : r->record.tok_s)
      if (std::isfinite(v)) out.push_back(v);
  return out;
}

// The run whose mean is closest to `target` among those with a stored log (nullptr: none).
const StoredRun* closest_with_log(const std::vector<const StoredRun*>& runs, double target) {
  const StoredRun* best = nullptr;
  for (const StoredRun* r : runs) {
    if (!r->has_log) continue;
    if (!best ||
        std::fabs(r->record.tok_s_mean - target) < std::fabs(best->record.tok_s_mean - target))
      best = r;
  }
  return best;
}

// `pacer compare BASELINE CANDIDATE` on the stored logs: the same loader, options and verdict.
void explain(const HistoryDb& db, const StoredRun& base, const StoredRun& cand, GroupTest& g) {
  g.baseline_run = base.record.run_uuid;
  g.candidate_run = cand.record.run_uuid;
  try {
    const std::optional<std::string> a = db.event_log(base.id);
    const std::optional<std::string> b = db.event_log(cand.id);
    if (!a || !b) {
      g.compare_error = "no stored event log";
      return;
    }
    const RunCycles normal = load_run_text(*a, "run " + base.record.run_uuid);
    const RunCycles abnormal = load_run_text(*b, "run " + cand.record.run_uuid);
    const Comparison c = compare_runs(normal, abnormal, CompareOptions{});
    g.verdict = c.verdict;
  } catch (const std::exception& e) {
    g.compare_error = e.what();
  }
}

std::string commits_of(const std::vector<const StoredRun*>& runs) {
  std::set<std::string> shas;
  for (const StoredRun* r : runs) shas.insert(r->record.git_sha.substr(0, 12));
  return fmt::format("{}", fmt::join(shas, ","));
}

// The median kernel ceiling of the runs that stored one; 0 when none did.
double median_kernel_ceiling(const std::vector<const StoredRun*>& runs) {
  std::vector<double> v;
  for (const StoredRun* r : runs)
    if (r->record.kernel_ceiling_tok_s > 0) v.push_back(r->record.kernel_ceiling_tok_s);
  return v.empty() ? 0 : median(v);
}

}  // namespace

std::string selector_error(const std::string& text, bool candidate) {
  try {
    const Selector s = parse_selector(text, candidate ? "candidate" : "baseline");
    if (candidate && (s.rest || s.fleet)) return "'rest' and 'fleet' describe a baseline";
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

RegressResult find_regressions(const HistoryDb& db, const RegressOptions& opts) {
  const Selector base_sel =
      parse_selector(opts.baseline.empty() ? "rest" : opts.baseline, "baseline");
  const Selector cand_sel =
      parse_selector(opts.candidate.empty() ? "latest" : opts.candidate, "candidate");
  if (cand_sel.rest || cand_sel.fleet)
    throw std::invalid_argument("--candidate: 'rest' and 'fleet' describe a baseline");
  const bool fleet = base_sel.fleet;

  const std::vector<StoredRun> runs = db.runs(opts.filter);
  // (host, model, type, test, threads, pin); the host is "" when the baseline is the fleet.
  using Key = std::tuple<std::string, std::string, std::string, std::string, int, std::string>;
  std::map<Key, std::vector<const StoredRun*>> groups;
  for (const StoredRun& s : runs) {
    const BenchRecord& r = s.record;
    groups[{fleet ? "" : r.host, r.model_name.empty() ? r.model_path : r.model_name, r.type, r.test,
            r.threads, r.pin}]
        .push_back(&s);
  }

  RegressResult res;
  res.groups = static_cast<int>(groups.size());
  for (const auto& [key, members] : groups) {
    // Candidate: the terms, then the newest of them for `latest`.
    std::vector<const StoredRun*> cand;
    for (const StoredRun* r : members)
      if (matches(cand_sel, r->record)) cand.push_back(r);
    if (cand_sel.latest && !cand.empty()) cand = {cand.back()};  // runs are oldest first
    std::set<const StoredRun*> in_cand(cand.begin(), cand.end());
    std::set<std::string> cand_hosts;
    for (const StoredRun* r : cand) cand_hosts.insert(r->record.host);

    std::vector<const StoredRun*> base, other_cpu;
    for (const StoredRun* r : members) {
      if (in_cand.count(r)) continue;
      if (fleet && cand_hosts.count(r->record.host)) continue;  // the fleet is the other hosts
      if (!matches(base_sel, r->record)) continue;
      const bool shares_cpu = std::any_of(cand.begin(), cand.end(), [&](const StoredRun* c) {
        return same_cpu(r->record, c->record);
      });
      (shares_cpu || cand.empty() ? base : other_cpu).push_back(r);
    }
    if (base_sel.latest && !base.empty()) base = {base.back()};

    GroupTest g;
    const auto& [host, model, type, test, threads, pin] = key;
    g.host = fleet ? fmt::format("{}", fmt::join(cand_hosts, ",")) : host;
    g.model = model;
    g.type = type;
    g.test = test;
    g.threads = threads;
    g.pin = pin;
    g.baseline_runs = static_cast<int>(base.size());
    g.candidate_runs = static_cast<int>(cand.size());
    g.baseline_tok_s = pooled_rates(base);
    g.candidate_tok_s = pooled_rates(cand);
    g.baseline_other_cpu = static_cast<int>(other_cpu.size());
    if (!other_cpu.empty()) {
      g.candidate_cpus = cpus_of(cand);
      g.other_cpus = cpus_of(other_cpu);
    }
    if (g.baseline_tok_s.empty() || g.candidate_tok_s.empty()) {
      ++res.untested;
      if (!g.candidate_tok_s.empty() && !other_cpu.empty()) {
        g.candidate_time = cand.back()->record.time_utc;
        g.candidate_commit = commits_of(cand);
        res.other_cpu.push_back(std::move(g));
      }
      continue;
    }
    g.baseline_median = median(g.baseline_tok_s);
    g.candidate_median = median(g.candidate_tok_s);
    g.slowdown_pct = g.baseline_median > 0 ? 100 * (1 - g.candidate_median / g.baseline_median) : 0;
    // U counts the (baseline, candidate) pairs where the baseline was faster: large U = slower
    // candidate. The two-sided p halves into the one-sided one on that side.
    const stats::MannWhitneyResult u = stats::mann_whitney_u(g.baseline_tok_s, g.candidate_tok_s);
    const double mean_u =
        static_cast<double>(g.baseline_tok_s.size() * g.candidate_tok_s.size()) / 2;
    g.exact = u.exact;
    g.p = !std::isfinite(u.p) ? 1.0 : u.u > mean_u ? u.p / 2 : 1 - u.p / 2;
    g.significant = g.slowdown_pct > 0 && g.p < opts.alpha;
    g.fails = g.significant && g.slowdown_pct > opts.fail_above_pct;
    g.candidate_time = cand.back()->record.time_utc;
    g.candidate_commit = commits_of(cand);
    g.baseline_commits = commits_of(base);
    g.baseline_kernel_tok_s = median_kernel_ceiling(base);
    g.candidate_kernel_tok_s = median_kernel_ceiling(cand);
    if (g.significant) {
      g.kernel_note =
          kernel_ceiling_note(g.slowdown_pct, g.baseline_kernel_tok_s, g.candidate_kernel_tok_s);
    }
    if (g.significant && opts.explain) {
      // The slowest candidate run against the baseline run most like the baseline's median.
      const StoredRun* slow = nullptr;
      for (const StoredRun* r : cand)
        if (r->has_log && (!slow || r->record.tok_s_mean < slow->record.tok_s_mean)) slow = r;
      const StoredRun* typical = closest_with_log(base, g.baseline_median);
      if (slow && typical) {
        explain(db, *typical, *slow, g);
      } else {
        g.compare_error = "no stored event log to compare";
      }
    }
    res.fails = res.fails || g.fails;
    (g.significant ? res.regressions : res.others).push_back(std::move(g));
  }
  std::stable_sort(
      res.regressions.begin(), res.regressions.end(),
      [](const GroupTest& a, const GroupTest& b) { return a.slowdown_pct > b.slowdown_pct; });
  return res;
}

std::string render_regress_text(const RegressResult& r, const RegressOptions& opts) {
  std::string out = fmt::format(
      "pacer regress: {} group{} (host, model, type, test, threads, pin); baseline '{}', "
      "candidate '{}'; one-sided Mann-Whitney U on the tok/s of every repetition, alpha {}\n",
      r.groups, r.groups == 1 ? "" : "s", opts.baseline, opts.candidate, opts.alpha);
  auto title = [](const GroupTest& g) {
    return fmt::format("{} | {} {} | {} | {} thread{} | pin {}", g.host, g.model, g.type, g.test,
                       g.threads, g.threads == 1 ? "" : "s", g.pin);
  };
  for (const GroupTest& g : r.regressions) {
    out += fmt::format(
        "\n{} {:.1f}% slower: {}\n  {:.2f} -> {:.2f} tok/s (medians); p = {:.4f} ({}), "
        "confidence {:.1f}%\n  baseline: {} run{}, {} reps, commit {}; candidate: {} run{}, {} "
        "reps, commit {}, {}\n",
        g.fails ? "REGRESSION" : "slowdown", g.slowdown_pct, title(g), g.baseline_median,
        g.candidate_median, g.p, g.exact ? "exact" : "normal approximation", 100 * g.confidence(),
        g.baseline_runs, g.baseline_runs == 1 ? "" : "s", g.baseline_tok_s.size(),
        g.baseline_commits, g.candidate_runs, g.candidate_runs == 1 ? "" : "s",
        g.candidate_tok_s.size(), g.candidate_commit, g.candidate_time);
    if (g.baseline_other_cpu > 0) {
      out += fmt::format("  left out of the baseline: {} run{} on {} (candidate on {})\n",
                         g.baseline_other_cpu, g.baseline_other_cpu == 1 ? "" : "s", g.other_cpus,
                         g.candidate_cpus);
    }
    if (!g.kernel_note.empty()) out += fmt::format("  {}\n", g.kernel_note);
    if (!g.verdict.empty()) {
      out += fmt::format("  compare (baseline run {} vs candidate run {}):\n  {}\n",
                         g.baseline_run.substr(0, 8), g.candidate_run.substr(0, 8), g.verdict);
    } else if (!g.compare_error.empty()) {
      out += fmt::format("  compare: not run: {}\n", g.compare_error);
    }
  }
  for (const GroupTest& g : r.other_cpu) {
    out += fmt::format(
        "\nnot tested, CPU changed: {}\n  candidate on {} (commit {}, {}); the {} baseline "
        "run{} on {}\n",
        title(g), g.candidate_cpus, g.candidate_commit, g.candidate_time, g.baseline_other_cpu,
        g.baseline_other_cpu == 1 ? "" : "s", g.other_cpus);
  }
  int failing = 0;
  for (const GroupTest& g : r.regressions) failing += g.fails;
  out += fmt::format(
      "\n{} significant slowdown{} ({} above {}%), {} group{} without one, {} without baseline or "
      "candidate runs{}\n",
      r.regressions.size(), r.regressions.size() == 1 ? "" : "s", failing, opts.fail_above_pct,
      r.others.size(), r.others.size() == 1 ? "" : "s", r.untested,
      r.other_cpu.empty()
          ? ""
          : fmt::format(" ({} with a baseline only on another CPU)", r.other_cpu.size()));
  return out;
}

std::string render_regress_json(const RegressResult& r, const RegressOptions& opts) {
  auto group = [](const GroupTest& g) {
    nlohmann::json j = {{"host", g.host},
                        {"model", g.model},
                        {"type", g.type},
                        {"test", g.test},
                        {"threads", g.threads},
                        {"pin", g.pin},
                        {"baseline_runs", g.baseline_runs},
                        {"candidate_runs", g.candidate_runs},
                        {"baseline_tok_s", g.baseline_tok_s},
                        {"candidate_tok_s", g.candidate_tok_s},
                        {"baseline_median", g.baseline_median},
                        {"candidate_median", g.candidate_median},
                        {"slowdown_pct", g.slowdown_pct},
                        {"p", g.p},
                        {"exact", g.exact},
                        {"confidence", g.confidence()},
                        {"significant", g.significant},
                        {"fails", g.fails},
                        {"baseline_kernel_tok_s", g.baseline_kernel_tok_s},
                        {"candidate_kernel_tok_s", g.candidate_kernel_tok_s},
                        {"kernel_note", g.kernel_note},
                        {"candidate_time", g.candidate_time},
                        {"candidate_commit", g.candidate_commit},
                        {"baseline_commits", g.baseline_commits}};
    if (!g.baseline_run.empty()) j["baseline_run"] = g.baseline_run;
    if (!g.candidate_run.empty()) j["candidate_run"] = g.candidate_run;
    if (!g.verdict.empty()) j["verdict"] = g.verdict;
    if (!g.compare_error.empty()) j["compare_error"] = g.compare_error;
    if (g.baseline_other_cpu > 0) {
      j["baseline_other_cpu"] = g.baseline_other_cpu;
      j["candidate_cpus"] = g.candidate_cpus;
      j["other_cpus"] = g.other_cpus;
    }
    return j;
  };
  nlohmann::json regressions = nlohmann::json::array(), others = nlohmann::json::array();
  for (const GroupTest& g : r.regressions) regressions.push_back(group(g));
  for (const GroupTest& g : r.others) others.push_back(group(g));
  nlohmann::json other_cpu = nlohmann::json::array();
  for (const GroupTest& g : r.other_cpu) other_cpu.push_back(group(g));
  const nlohmann::json j = {{"baseline", opts.baseline}, {"candidate", opts.candidate},
                            {"alpha", opts.alpha},       {"fail_above_pct", opts.fail_above_pct},
                            {"groups", r.groups},        {"untested", r.untested},
                            {"fails", r.fails},          {"regressions", regressions},
                            {"others", others},          {"other_cpu", other_cpu}};
  return j.dump(2) + "\n";
}

}  // namespace pacer::analysis
