// The results history end to end through the `pacer` binary: bench --db from concurrent
// processes keeps every row, foreign files are refused with one line and left alone, history
// writes its formats and merges, and regress finds a bench run slowed by a co-runner on its CPU,
// names run-queue contention (the verdict `pacer compare` gives on the stored logs) and exits 1,
// while the database without that run exits 0.
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace pacer::cli_test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kPacer = PACER_BINARY;

class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    path_ =
        fs::temp_directory_path() / ("pacer_history_cli_" + tag + "_" + std::to_string(getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

size_t lines_of(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

nlohmann::json history_json(const std::string& db) {
  const CommandResult r = run_command(kPacer + " history --db " + db + " --format json");
  EXPECT_EQ(r.rc, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

// "family F model M stepping S" of the first processor in /proc/cpuinfo, read here on its own
// ("" where it lacks one of the three, as on non-x86 kernels).
std::string cpuinfo_signature() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, family, model, stepping;
  const auto value = [&](const std::string& key, std::string& out) {
    if (out.empty() && line.rfind(key, 0) == 0 && line.find(':') != std::string::npos &&
        line.substr(0, line.find(':')).find_last_not_of(" \t") + 1 == key.size())
      out = line.substr(line.find(':') + 2);
  };
  while (std::getline(f, line) && !line.empty()) {
    value("cpu family", family);
    value("model", model);
    value("stepping", stepping);
  }
  if (family.empty() || model.empty() || stepping.empty()) return "";
  return "family " + family + " model " + model + " stepping " + stepping;
}

// A tiny model, bench rows of a few tokens: seconds per bench.
std::string tiny_model(const TempDir& dir) {
  const std::string model = dir / "tiny.gguf";
  const CommandResult r =
      run_command(kPacer + " gguf synth --arch tiny-llama3 --type q8_0 -o " + model);
  EXPECT_EQ(r.rc, 0) << r.err;
  return model;
}

std::string tiny_bench(const std::string& model, const std::string& gens = "4,8") {
  return kPacer + " bench -m " + model + " -p 0 -n " + gens +
         " -t 1 -r 2 --no-roofline --no-warmup -o jsonl";
}

TEST(HistoryCli, ConcurrentBenchProcessesKeepEveryRow) {
  TempDir dir("concurrent");
  const std::string model = tiny_model(dir);
  const std::string db = dir / "results.sqlite";
  // Two bench processes on one (not yet existing) file at the same time, 2 rows each.
  const std::string both = "sh -c '" + tiny_bench(model) + " --db " + db + " >" + (dir / "a.out") +
                           " & a=$!; " + tiny_bench(model) + " --db " + db + " >" +
                           (dir / "b.out") +
                           " & b=$!; wait $a; ra=$?; wait $b; rb=$?; exit $((ra + rb))'";
  const CommandResult r = run_command(both);
  ASSERT_EQ(r.rc, 0) << r.err;
  // And $PACER_DB names the database when --db is not given.
  const CommandResult env = run_command("PACER_DB=" + db + " " + tiny_bench(model, "16"));
  ASSERT_EQ(env.rc, 0) << env.err;

  const nlohmann::json runs = history_json(db);
  ASSERT_EQ(runs.size(), 5u);
  std::set<std::string> uuids;
  std::multiset<std::string> tests;
  for (const auto& run : runs) {
    uuids.insert(run["run_uuid"].get<std::string>());
    tests.insert(run["test"].get<std::string>());
    EXPECT_TRUE(run["has_log"].get<bool>());
    EXPECT_EQ(run["tok_s"].size(), 2u);
    EXPECT_FALSE(run["host"].get<std::string>().empty());
    EXPECT_FALSE(run["git_sha"].get<std::string>().empty());
    EXPECT_THAT(run["model_hash"].get<std::string>(), ::testing::StartsWith("fp64:"));
    EXPECT_EQ(run["cpu_signature"], cpuinfo_signature());
  }
  EXPECT_EQ(uuids.size(), 5u);
  EXPECT_EQ(tests, (std::multiset<std::string>{"tg4", "tg4", "tg8", "tg8", "tg16"}));
  // The rows on stdout are the rows in the database.
  EXPECT_EQ(lines_of(slurp(dir / "a.out")) + lines_of(slurp(dir / "b.out")), 4u);
  // The logs recorded for the database went to a temporary directory that is gone afterwards.
  fs::create_directories(dir.path() / "tmp");
  ASSERT_EQ(run_command("TMPDIR=" + (dir / "tmp") + " " + tiny_bench(model) + " --db " + db).rc, 0);
  EXPECT_TRUE(fs::is_empty(dir.path() / "tmp"));
  EXPECT_EQ(history_json(db).size(), 7u);
}

// A tg row with a roofline stores its kernels' ceiling (measured on its thread before its timed
// reps) as the bench's JSON row gave it; a pp row has none.
TEST(HistoryCli, ATgRowStoresItsKernelCeiling) {
  TempDir dir("ceiling");
  const std::string model = tiny_model(dir);
  const std::string db = dir / "results.sqlite";
  const CommandResult r = run_command(kPacer + " bench -m " + model +
                                      " -p 8 -n 4 -t 1 -r 2 --no-warmup --bandwidth-mb 64 -o "
                                      "json --db " +
                                      db);
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 2u);
  std::map<std::string, double> printed;
  for (const auto& row : rows)
    printed[row["n_gen"].get<int>() > 0 ? "tg4" : "pp8"] =
        row["pacer_kernel_ceiling_tok_s"].is_number()
            ? row["pacer_kernel_ceiling_tok_s"].get<double>()
            : 0.0;
  ASSERT_GT(printed.at("tg4"), 0.0);
  EXPECT_EQ(printed.at("pp8"), 0.0);
  const nlohmann::json runs = history_json(db);
  ASSERT_EQ(runs.size(), 2u);
  for (const auto& run : runs) {
    const std::string test = run["test"].get<std::string>();
    EXPECT_DOUBLE_EQ(run["kernel_ceiling_tok_s"].get<double>(), printed.at(test)) << test;
  }
}

TEST(HistoryCli, RefusesAForeignFileWithOneLineAndLeavesItAlone) {
  TempDir dir("foreign");
  const std::string notes = dir / "notes.txt";
  {
    std::ofstream f(notes);
    for (int i = 0; i < 100; ++i) f << "an important line " << i << "\n";
  }
  const std::string before = slurp(notes);
  const std::string model = tiny_model(dir);
  for (const std::string& cmd :
       {tiny_bench(model) + " --db " + notes, kPacer + " history --db " + notes,
        kPacer + " regress --db " + notes}) {
    const CommandResult r = run_command(cmd);
    EXPECT_EQ(r.rc, 1) << cmd;
    EXPECT_EQ(lines_of(r.err), 1u) << r.err;
    EXPECT_THAT(r.err, HasSubstr(notes + ": not a pacer history database"));
    EXPECT_TRUE(r.out.empty()) << "bench ran before refusing: " << r.out;
  }
  EXPECT_EQ(slurp(notes), before);
  const CommandResult missing = run_command(kPacer + " history --db " + (dir / "none.sqlite"));
  EXPECT_EQ(missing.rc, 1);
  EXPECT_THAT(missing.err, HasSubstr("no such history database"));
  // A malformed selector or threshold is a usage error (exit 2) naming the flag.
  for (const std::string& bad : {std::string("--baseline bogus:1"), std::string("--candidate rest"),
                                 std::string("--fail-above five")}) {
    const CommandResult r = run_command(kPacer + " regress --db " + notes + " " + bad);
    EXPECT_EQ(r.rc, 2) << bad << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(bad.substr(0, bad.find(' ')))) << r.err;
  }
  const CommandResult no_db = run_command("env -u PACER_DB " + kPacer + " regress");
  EXPECT_EQ(no_db.rc, 1);
  EXPECT_THAT(no_db.err, HasSubstr("--db"));
}

TEST(HistoryCli, WritesEveryFormatMergesAndExtractsLogs) {
  TempDir dir("formats");
  const std::string model = tiny_model(dir);
  const std::string a = dir / "a.sqlite", b = dir / "b.sqlite", fleet = dir / "fleet.sqlite";
  ASSERT_EQ(run_command(tiny_bench(model) + " --db " + a).rc, 0);
  ASSERT_EQ(run_command(tiny_bench(model, "16") + " --db " + b).rc, 0);

  const CommandResult merged =
      run_command(kPacer + " history --merge " + a + " " + b + " -o " + fleet);
  ASSERT_EQ(merged.rc, 0) << merged.err;
  EXPECT_THAT(merged.out, HasSubstr(a + ": 2 runs added, 0 already present"));
  EXPECT_THAT(merged.out, HasSubstr(fleet + ": 3 runs"));
  const CommandResult again = run_command(kPacer + " history --merge " + a + " -o " + fleet);
  EXPECT_THAT(again.out, HasSubstr(a + ": 0 runs added, 2 already present"));
  ASSERT_EQ(history_json(fleet).size(), 3u);

  // Formats by flag and by the output's extension.
  const CommandResult text = run_command(kPacer + " history --db " + fleet + " --test tg8");
  EXPECT_EQ(text.rc, 0);
  EXPECT_THAT(text.out, HasSubstr("1 run"));
  EXPECT_THAT(text.out, HasSubstr("tg8"));
  EXPECT_THAT(text.out, ::testing::Not(HasSubstr("tg16")));
  ASSERT_EQ(run_command(kPacer + " history --db " + fleet + " -o " + (dir / "h.html")).rc, 0);
  EXPECT_THAT(slurp(dir / "h.html"), HasSubstr("<figure class=\"trend\""));
  ASSERT_EQ(run_command(kPacer + " history --db " + fleet + " -o " + (dir / "h.prom")).rc, 0);
  const std::string prom = slurp(dir / "h.prom");
  EXPECT_TRUE(prom.ends_with("# EOF\n"));
  EXPECT_EQ(std::count(prom.begin(), prom.end(), '\n') > 10, true);
  const CommandResult csv = run_command(kPacer + " history --db " + fleet + " --format csv");
  EXPECT_EQ(lines_of(csv.out), 4u);  // header + 3 runs
  const CommandResult since =
      run_command(kPacer + " history --db " + fleet + " --format json --since 2999-01-01");
  EXPECT_EQ(nlohmann::json::parse(since.out).size(), 0u);

  // A stored log comes back out byte for byte usable: `pacer report` reads it.
  const std::string uuid = history_json(fleet)[0]["run_uuid"];
  const CommandResult log = run_command(kPacer + " history --db " + fleet + " --log " +
                                        uuid.substr(0, 8) + " -o " + (dir / "run.jsonl"));
  ASSERT_EQ(log.rc, 0) << log.err;
  const CommandResult report = run_command(kPacer + " report " + (dir / "run.jsonl"));
  EXPECT_EQ(report.rc, 0) << report.err;
  EXPECT_THAT(report.out, HasSubstr("decode"));

  // The per-op summary stored with the run: the decode ops of `pacer report --format json`.
  const CommandResult ops =
      run_command(kPacer + " history --db " + fleet + " --ops " + uuid + " --format json");
  ASSERT_EQ(ops.rc, 0) << ops.err;
  const nlohmann::json summary = nlohmann::json::parse(ops.out);
  EXPECT_EQ(summary["run_uuid"], uuid);
  std::set<std::string> decode_ops;
  for (const auto& o : summary["ops"]) {
    if (o["phase"] == "decode") decode_ops.insert(o["op"].get<std::string>());
    EXPECT_GT(o["count"].get<int64_t>(), 0);
  }
  EXPECT_TRUE(decode_ops.count("attn_qkv")) << ops.out;
  EXPECT_TRUE(decode_ops.count("ffn_down")) << ops.out;
  const CommandResult ops_text = run_command(kPacer + " history --db " + fleet + " --ops " + uuid);
  EXPECT_THAT(ops_text.out, HasSubstr("off-CPU %"));
  const CommandResult ambiguous = run_command(kPacer + " history --db " + fleet + " --ops \"\"x");
  EXPECT_EQ(ambiguous.rc, 1);
}

// A process busy-looping on `cpu` until killed.
pid_t start_co_runner(int cpu) {
  const pid_t pid = fork();
  if (pid == 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
    volatile unsigned long spin = 0;
    for (;;) spin = spin + 1;
  }
  return pid;
}

void stop(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

int last_allowed_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  int last = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) last = c;
  return last;
}

struct ScenarioResult {
  CommandResult dirty, clean;
  std::string compare_verdict;  // `pacer compare` on the logs regress compared
  std::string log;
};

// Two bench runs into clean.sqlite, merged into all.sqlite, then a third into all.sqlite with a
// co-runner on the worker's CPU; regress on both databases.
ScenarioResult run_scenario(const TempDir& dir, const std::string& model) {
  ScenarioResult s;
  const int cpu = last_allowed_cpu();
  // Steps of milliseconds (a 0.5B model): a worker waking from a short sleep would otherwise
  // preempt the co-runner on CFS's sleeper credit and show no run-queue delay.
  const std::string bench = kPacer + " bench -m " + model +
                            " -p 0 -n 32 -t 1 --pin list:" + std::to_string(cpu) +
                            " -r 4 --no-roofline -o jsonl";
  const std::string clean = dir / "clean.sqlite", all = dir / "all.sqlite";
  fs::remove(clean);
  fs::remove(all);
  for (int i = 0; i < 2; ++i) {
    const CommandResult r = run_command(bench + " --db " + clean);
    s.log += r.err;
  }
  s.log += run_command(kPacer + " history --merge " + clean + " -o " + all).err;
  const pid_t hog = start_co_runner(cpu);
  usleep(200'000);  // let the scheduler see it before the run starts
  s.log += run_command(bench + " --db " + all).err;
  stop(hog);
  s.dirty = run_command(kPacer + " regress --db " + all + " --fail-above 20");
  s.clean = run_command(kPacer + " regress --db " + clean + " --fail-above 20");
  s.log += run_command(kPacer + " history --db " + all).out;

  // The verdict `pacer compare` gives on the two logs regress compared.
  std::smatch m;
  const std::regex pair(R"(compare \(baseline run ([0-9a-f]{8}) vs candidate run ([0-9a-f]{8})\))");
  if (std::regex_search(s.dirty.out, m, pair)) {
    const std::string a = dir / "baseline.jsonl", b = dir / "candidate.jsonl";
    run_command(kPacer + " history --db " + all + " --log " + m[1].str() + " -o " + a);
    run_command(kPacer + " history --db " + all + " --log " + m[2].str() + " -o " + b);
    const CommandResult c = run_command(kPacer + " compare " + a + " " + b);
    const size_t at = c.out.find("**Verdict:** ");
    if (at != std::string::npos)
      s.compare_verdict = c.out.substr(at + 13, c.out.find('\n', at) - at - 13);
  }
  return s;
}

// End to end on a real machine, so timing noise is possible: a disturbed normal run can hide the
// slow one, so the scenario gets a second attempt; a real failure fails both.
TEST(HistoryScenario, RegressFindsTheCoRunnerAndNamesRunQueueContention) {
  TempDir dir("scenario");
  const std::string model = dir / "qwen.gguf";
  const CommandResult synth =
      run_command(kPacer + " gguf synth --arch qwen2.5-0.5b --type q4_0 -o " + model);
  ASSERT_EQ(synth.rc, 0) << synth.err;
  ScenarioResult s;
  for (int attempt = 0; attempt < 2; ++attempt) {
    s = run_scenario(dir, model);
    if (s.dirty.rc == 1 && s.clean.rc == 0 &&
        s.dirty.out.find("run-queue contention") != std::string::npos)
      break;
  }
  EXPECT_EQ(s.dirty.rc, 1) << s.dirty.out << s.dirty.err << s.log;
  EXPECT_THAT(s.dirty.out, HasSubstr("REGRESSION"));
  EXPECT_THAT(s.dirty.out, HasSubstr("run-queue contention")) << s.log;
  EXPECT_EQ(s.clean.rc, 0) << s.clean.out << s.clean.err << s.log;
  EXPECT_THAT(s.clean.out, HasSubstr("0 above 20%"));
  // regress printed the verdict line `pacer compare` prints for the same two logs.
  ASSERT_FALSE(s.compare_verdict.empty()) << s.dirty.out;
  EXPECT_THAT(s.dirty.out, HasSubstr("\n  " + s.compare_verdict + "\n"));
}

}  // namespace
}  // namespace pacer::cli_test
