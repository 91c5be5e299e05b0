// The results history database: a run goes in and comes back field for field with its per-op
// summary and its log byte for byte; foreign, corrupt and newer files are refused and left as
// they were; concurrent writer processes keep every row; merges deduplicate by run UUID.
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "analysis/history_db.h"
#include "analysis/report.h"
#include "event_log_testlog.h"
#include "history_test_util.h"

namespace pacer::analysis {
namespace {

namespace fs = std::filesystem;
using history_test::make_record;
using history_test::slurp;
using history_test::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

// Runs SQL on a file through the SQLite C API directly (not through the code under test).
void raw_sql(const fs::path& file, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

fs::path write_synthetic_log(const fs::path& dir, const std::string& name,
                             const testlog::SyntheticRun& run = {}) {
  const fs::path p = dir / name;
  std::ofstream f(p, std::ios::binary);
  testlog::write_synthetic(f, run);
  return p;
}

TEST(HistoryDb, RoundTripKeepsEveryFieldTheOpSummaryAndTheLog) {
  TempDir dir;
  const fs::path log = write_synthetic_log(dir.path(), "run.jsonl", {.n_layers = 2, .n_decode = 5});
  BenchRecord rec = make_record("2026-11-20T10:00:00Z", {101.5, 99.25, 100.0});
  rec.host = "";  // from the log's header
  rec.kernel = "";
  rec.cpus = {3, 5};
  rec.flags = {"cv 6% > 5%: noisy", "a, comma"};
  rec.freq_min_mhz = 2800;
  rec.freq_mean_mhz = 2900.5;
  rec.freq_max_mhz = 3000;
  rec.bandwidth_gbs = 41.5;
  rec.roofline_pct = 62.25;
  rec.events_path = log.string();
  const fs::path file = dir.path() / "h.sqlite";
  std::string uuid;
  {
    HistoryDb db = HistoryDb::open(file, HistoryDb::Mode::ReadWrite);
    EXPECT_EQ(db.schema_version(), kHistorySchemaVersion);
    uuid = db.append(rec);
  }
  EXPECT_EQ(uuid.size(), 36u);
  EXPECT_EQ(uuid[14], '4');  // version 4

  const HistoryDb db = HistoryDb::open(file, HistoryDb::Mode::ReadOnly);
  const std::vector<StoredRun> runs = db.runs();
  ASSERT_EQ(runs.size(), 1u);
  const BenchRecord& got = runs[0].record;
  EXPECT_TRUE(runs[0].has_log);
  EXPECT_EQ(got.run_uuid, uuid);
  EXPECT_EQ(got.time_utc, rec.time_utc);
  EXPECT_EQ(got.host, "h");                 // the synthetic header's hostname
  EXPECT_EQ(got.kernel, "6.1.0");           // ditto
  EXPECT_EQ(got.cpu_model, rec.cpu_model);  // given: kept, not replaced by the header's
  EXPECT_EQ(got.git_sha, rec.git_sha);
  EXPECT_EQ(got.model_name, rec.model_name);
  EXPECT_EQ(got.model_hash, rec.model_hash);
  EXPECT_EQ(got.model_bytes, rec.model_bytes);
  EXPECT_EQ(got.test, "tg64");
  EXPECT_EQ(got.n_gen, 64);
  EXPECT_EQ(got.threads, 2);
  EXPECT_EQ(got.pin, "compact");
  EXPECT_EQ(got.cpus, (std::vector<int>{3, 5}));
  EXPECT_EQ(got.tok_s, rec.tok_s);
  EXPECT_DOUBLE_EQ(got.tok_s_mean, rec.tok_s_mean);
  EXPECT_DOUBLE_EQ(got.cv, rec.cv);
  EXPECT_DOUBLE_EQ(got.freq_mean_mhz, 2900.5);
  EXPECT_DOUBLE_EQ(got.roofline_pct, 62.25);
  EXPECT_EQ(got.flags, rec.flags);
  EXPECT_TRUE(got.events_path.empty());
  ASSERT_TRUE(db.find_run(uuid).has_value());
  EXPECT_EQ(db.find_run(uuid)->id, runs[0].id);

  // The log, byte for byte.
  const std::optional<std::string> stored = db.event_log(runs[0].id);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(*stored, slurp(log));

  // The per-op summary: the report's phase :: op rows of that log.
  const Report report = build_report(log.string());
  const std::vector<OpSummary> ops = db.op_summary(runs[0].id);
  ASSERT_EQ(ops.size(), report.by_phase_op.size());
  ASSERT_FALSE(ops.empty());
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(ops[i].op, report.by_phase_op[i].name);
    EXPECT_EQ(ops[i].phase, phase_name(report.by_phase_op[i].phase));
    EXPECT_EQ(ops[i].count, report.by_phase_op[i].dist.count);
    EXPECT_DOUBLE_EQ(ops[i].mean_ns, report.by_phase_op[i].dist.mean_ns());
    EXPECT_DOUBLE_EQ(ops[i].p95_ns, report.by_phase_op[i].dist.p95_ns);
  }
  // Every decode op of the synthetic run ran once per decode step at 2900 MHz.
  const auto decode = std::find_if(ops.begin(), ops.end(), [](const OpSummary& o) {
    return o.phase == "decode" && o.op == "attn_norm";
  });
  ASSERT_NE(decode, ops.end());
  EXPECT_EQ(decode->count, 5 * 2);  // 5 steps x 2 layers
  ASSERT_TRUE(decode->mean_mhz.has_value());
  EXPECT_NEAR(*decode->mean_mhz, 2900.0, 1.0);
}

TEST(HistoryDb, DatesAreCheckedAsTheFiltersCompareThem) {
  for (const char* good : {"2026-11-24", "2026-11-24Z", "2026-11-24T08:00", "2026-11-24T08:00:59Z",
                           "2024-02-29", "2026-12-31T23:59:60"}) {
    EXPECT_EQ(history_date_error(good), "") << good;
  }
  for (const char* bad : {"", "garbage", "yesterday", "2026-13-01", "2026-11-31", "2025-02-29",
                          "2026-11-24T25:00", "2026-11-24 08:00", "2026-11-24T08", "26-11-24",
                          "2026-11-24T08:00:61", "2026-11-24T08:00+01:00"}) {
    EXPECT_NE(history_date_error(bad), "") << bad;
  }
  EXPECT_EQ(history_date_error("2025-02-29"), "'2025-02-29': 2025-02 has no day 29");
}

// Sets `column` of every runs row to the SQL literal `value` behind pacer's back.
void damage_runs(const fs::path& path, const std::string& column, const std::string& value) {
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  const std::string sql = "UPDATE runs SET " + column + " = " + value;
  EXPECT_EQ(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  sqlite3_close(raw);
}

// Reading the runs of `path` throws a HistoryError naming the file and containing `want`.
void expect_runs_refused(const fs::path& path, const std::string& want) {
  const HistoryDb db = HistoryDb::open(path, HistoryDb::Mode::ReadOnly);
  try {
    (void)db.runs();
    ADD_FAILURE() << want << ": the row was read";
  } catch (const HistoryError& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
}

TEST(HistoryDb, ADamagedRowIsAnErrorNamingItNotAnEmptyList) {
  TempDir dir;
  const auto path = dir.path() / "h.sqlite";
  {
    HistoryDb db = HistoryDb::open(path, HistoryDb::Mode::ReadWrite);
    db.append(make_record("2026-11-20T10:00:00Z", {10, 11}));
  }
  for (const std::string column : {"tok_s", "flags", "cpus"}) {
    damage_runs(path, column, "'[NaN, 1'");
    expect_runs_refused(path, "column " + column);
    damage_runs(path, column, "'[]'");  // repaired for the next column
  }
}

TEST(HistoryDb, ANumberColumnHoldingTextIsAnErrorNotAZero) {
  // SQLite keeps text that is not a number as text even in an INTEGER or REAL column; read as a
  // number it was 0 (threads 0, tok/s 0), and regress compared runs on it.
  TempDir dir;
  const auto path = dir.path() / "h.sqlite";
  {
    HistoryDb db = HistoryDb::open(path, HistoryDb::Mode::ReadWrite);
    db.append(make_record("2026-11-20T10:00:00Z", {10, 11}));
  }
  for (const std::string column : {"threads", "n_depth", "tok_s_mean", "roofline_pct"}) {
    damage_runs(path, column, "'eight'");
    expect_runs_refused(path, "column " + column + " is not a number");
    damage_runs(path, column, "'2'");  // a number written as text: SQLite stores the number
    const HistoryDb db = HistoryDb::open(path, HistoryDb::Mode::ReadOnly);
    EXPECT_NO_THROW((void)db.runs()) << column;
  }
  const HistoryDb db = HistoryDb::open(path, HistoryDb::Mode::ReadOnly);
  EXPECT_EQ(db.runs().at(0).record.threads, 2);
}

TEST(HistoryDb, AppendWithoutALogStoresTheRowOnly) {
  TempDir dir;
  HistoryDb db = HistoryDb::open(dir.path() / "h.sqlite", HistoryDb::Mode::ReadWrite);
  db.append(make_record("2026-11-20T10:00:00Z", {10, 11}));
  const auto runs = db.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_FALSE(runs[0].has_log);
  EXPECT_FALSE(db.event_log(runs[0].id).has_value());
  EXPECT_TRUE(db.op_summary(runs[0].id).empty());
  EXPECT_EQ(runs[0].record.host, "host-a");
}

TEST(HistoryDb, ARowWhoseLogCannotBeSummarizedIsKeptAndFlagged) {
  TempDir dir;
  HistoryDb db = HistoryDb::open(dir.path() / "h.sqlite", HistoryDb::Mode::ReadWrite);
  const fs::path empty = dir.path() / "empty.jsonl";
  { std::ofstream f(empty); }
  const fs::path headless = dir.path() / "headless.jsonl";
  std::ofstream(headless) << "{\"type\":\"footer\",\"steps\":0}\n";
  for (const fs::path& log : {empty, headless}) {
    BenchRecord r = make_record("2026-11-20T10:00:00Z", {10, 11});
    r.events_path = log.string();
    const std::string uuid = db.append(r);
    const auto run = db.find_run(uuid);
    ASSERT_TRUE(run.has_value());
    ASSERT_EQ(run->record.flags.size(), 1u);
    EXPECT_THAT(run->record.flags[0], HasSubstr("no per-op summary"));
    EXPECT_TRUE(db.op_summary(run->id).empty());
    EXPECT_EQ(run->has_log, log == headless);  // an empty log is not stored
  }
}

// Opening `file` must fail with one line naming it, and leave its bytes as they were.
void expect_refused(const fs::path& file, HistoryDb::Mode mode, const std::string& why) {
  const std::string before = slurp(file);
  try {
    HistoryDb::open(file, mode);
    ADD_FAILURE() << file << " was accepted";
  } catch (const HistoryError& e) {
    const std::string msg = e.what();
    EXPECT_THAT(msg, HasSubstr(file.string()));
    EXPECT_THAT(msg, HasSubstr(why));
    EXPECT_THAT(msg, Not(HasSubstr("\n")));
  }
  EXPECT_EQ(slurp(file), before) << file << " was modified";
  // Not even put into WAL mode (a pacer file of a newer schema already is one; a reader of a
  // WAL file leaves an empty -wal beside it, as SQLite does).
  if (why != "newer pacer") {
    EXPECT_FALSE(fs::exists(file.string() + "-wal"));
  }
}

TEST(HistoryDb, RefusesAFileThatIsNotSQLite) {
  TempDir dir;
  const fs::path file = dir.path() / "notes.txt";
  {
    std::ofstream f(file);
    for (int i = 0; i < 200; ++i) f << "line " << i << " of somebody's notes\n";
  }
  expect_refused(file, HistoryDb::Mode::ReadWrite, "not a pacer history database");
  expect_refused(file, HistoryDb::Mode::ReadOnly, "not a pacer history database");
}

TEST(HistoryDb, RefusesACorruptHistoryFile) {
  TempDir dir;
  const fs::path file = dir.path() / "h.sqlite";
  {
    HistoryDb db = HistoryDb::open(file, HistoryDb::Mode::ReadWrite);
    db.append(make_record("2026-11-20T10:00:00Z", {10, 11}));
  }
  // Overwrite the SQLite header's magic string: the file no longer reads as a database.
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f << "garbage garbage!";
  }
  expect_refused(file, HistoryDb::Mode::ReadWrite, "not a pacer history database");
}

TEST(HistoryDb, RefusesAnotherApplicationsDatabase) {
  TempDir dir;
  const fs::path other = dir.path() / "llama-bench.sqlite";
  raw_sql(other,
          "CREATE TABLE llama_bench (build_commit TEXT, avg_ts REAL);"
          "INSERT INTO llama_bench VALUES ('abc', 12.5);");
  expect_refused(other, HistoryDb::Mode::ReadWrite, "llama_bench");
  const fs::path tagged = dir.path() / "tagged.sqlite";
  raw_sql(tagged, "PRAGMA application_id = 1234; CREATE TABLE t (x);");
  expect_refused(tagged, HistoryDb::Mode::ReadWrite, "another application");
}

TEST(HistoryDb, RefusesANewerSchemaAndReadsNoneWhenMissing) {
  TempDir dir;
  const fs::path file = dir.path() / "h.sqlite";
  { HistoryDb::open(file, HistoryDb::Mode::ReadWrite); }
  raw_sql(file, "UPDATE meta SET value = '99' WHERE key = 'schema_version'");
  expect_refused(file, HistoryDb::Mode::ReadWrite, "newer pacer");
  expect_refused(file, HistoryDb::Mode::ReadOnly, "newer pacer");
  EXPECT_THROW(HistoryDb::open(dir.path() / "missing.sqlite", HistoryDb::Mode::ReadOnly),
               HistoryError);
  EXPECT_FALSE(fs::exists(dir.path() / "missing.sqlite"));
  EXPECT_THROW(HistoryDb::open(dir.path(), HistoryDb::Mode::ReadWrite), HistoryError);
}

// A file as pacer wrote it before schema 2 (no cpu_signature, no kernel_ceiling_tok_s), written
// here by hand: read-only it reads with empty signatures and no ceilings and stays as it is;
// opened for writing it is migrated, its row kept, and new rows keep their signature and ceiling.
TEST(HistoryDb, ASchema1FileReadsAndMigrates) {
  TempDir dir;
  const fs::path file = dir.path() / "v1.sqlite";
  raw_sql(file,
          "PRAGMA application_id = 1348694600;"  // 0x50637248, "PcrH"
          "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
          "INSERT INTO meta VALUES ('schema_version', '1'), ('application', 'pacer');"
          "CREATE TABLE runs (id INTEGER PRIMARY KEY, run_uuid TEXT NOT NULL UNIQUE, time_utc TEXT "
          "NOT NULL, host TEXT NOT NULL, host_id TEXT NOT NULL, cpu_model TEXT NOT NULL, kernel "
          "TEXT NOT NULL, governor TEXT NOT NULL, microcode TEXT NOT NULL, pacer_version TEXT NOT "
          "NULL, git_sha TEXT NOT NULL, model_name TEXT NOT NULL, model_path TEXT NOT NULL, "
          "model_hash TEXT NOT NULL, model_bytes INTEGER NOT NULL, params INTEGER NOT NULL, arch "
          "TEXT NOT NULL, type TEXT NOT NULL, kv_type TEXT NOT NULL, test TEXT NOT NULL, n_prompt "
          "INTEGER NOT NULL, n_gen INTEGER NOT NULL, n_depth INTEGER NOT NULL, threads INTEGER NOT "
          "NULL, pin TEXT NOT NULL, cpus TEXT NOT NULL, tok_s TEXT NOT NULL, tok_s_mean REAL, "
          "tok_s_sd REAL, cv REAL, freq_min_mhz REAL, freq_mean_mhz REAL, freq_max_mhz REAL, "
          "bandwidth_gbs REAL, roofline_pct REAL, flags TEXT NOT NULL);"
          "CREATE TABLE op_summary (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE "
          "CASCADE, phase TEXT NOT NULL, op TEXT NOT NULL, count INTEGER NOT NULL, mean_ns REAL, "
          "p50_ns REAL, p95_ns REAL, mean_mhz REAL, gbs REAL, offcpu_share REAL);"
          "CREATE TABLE event_logs (run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE "
          "CASCADE, name TEXT NOT NULL, encoding TEXT NOT NULL, raw_bytes INTEGER NOT NULL, data "
          "BLOB NOT NULL);"
          "CREATE TABLE model_fingerprints (path TEXT NOT NULL, bytes INTEGER NOT NULL, mtime_ns "
          "INTEGER NOT NULL, fingerprint TEXT NOT NULL, PRIMARY KEY (path, bytes, mtime_ns));"
          "INSERT INTO runs VALUES (1, 'old-run', '2026-11-20T10:00:00Z', 'host-a', 'id-a', "
          "'AMD EPYC', '6.1', '', '0x1', '0.1.0', 'abc', 'tiny', '/m/tiny.gguf', 'fp64:0', 10, 1, "
          "'llama', 'q8_0', 'f16', 'tg64', 0, 64, 0, 2, 'compact', '[0,1]', '[40.5,41.5]', 41, "
          "0.7, 0.017, 0, 2900, 0, 0, 0, '[]');");
  {
    const HistoryDb ro = HistoryDb::open(file, HistoryDb::Mode::ReadOnly);
    EXPECT_EQ(ro.schema_version(), 1);
    const std::vector<StoredRun> runs = ro.runs();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].record.run_uuid, "old-run");
    EXPECT_EQ(runs[0].record.cpu_model, "AMD EPYC");
    EXPECT_EQ(runs[0].record.cpu_signature, "");
    EXPECT_EQ(runs[0].record.kernel_ceiling_tok_s, 0.0);  // schema 3's column, absent here
    EXPECT_EQ(runs[0].record.tok_s, (std::vector<double>{40.5, 41.5}));
    ASSERT_TRUE(ro.find_run("old-run").has_value());
  }
  {
    const HistoryDb again = HistoryDb::open(file, HistoryDb::Mode::ReadOnly);
    EXPECT_EQ(again.schema_version(), 1);  // reading migrated nothing
  }
  HistoryDb db = HistoryDb::open(file, HistoryDb::Mode::ReadWrite);
  EXPECT_EQ(db.schema_version(), 3);  // through 1 -> 2 -> 3
  BenchRecord r = make_record("2026-11-21T10:00:00Z", {30});
  r.cpu_signature = "family 23 model 1 stepping 2";
  r.kernel_ceiling_tok_s = 23.3;
  db.append(r);
  const std::vector<StoredRun> runs = db.runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].record.run_uuid, "old-run");
  EXPECT_EQ(runs[0].record.cpu_signature, "");
  EXPECT_EQ(runs[0].record.kernel_ceiling_tok_s, 0.0);
  EXPECT_DOUBLE_EQ(runs[0].record.tok_s_mean, 41);
  EXPECT_EQ(runs[1].record.cpu_signature, "family 23 model 1 stepping 2");
  EXPECT_DOUBLE_EQ(runs[1].record.kernel_ceiling_tok_s, 23.3);
}

TEST(HistoryDb, AnEmptyFileIsInitialized) {
  TempDir dir;
  const fs::path file = dir.path() / "empty.sqlite";
  { std::ofstream f(file); }
  HistoryDb db = HistoryDb::open(file, HistoryDb::Mode::ReadWrite);
  EXPECT_EQ(db.schema_version(), kHistorySchemaVersion);
  EXPECT_TRUE(db.runs().empty());
}

TEST(HistoryDb, FiltersByHostModelTestThreadsAndDate) {
  TempDir dir;
  HistoryDb db = HistoryDb::open(dir.path() / "h.sqlite", HistoryDb::Mode::ReadWrite);
  BenchRecord a = make_record("2026-11-20T10:00:00Z", {10});
  BenchRecord b = make_record("2026-11-21T10:00:00Z", {11});
  b.host = "host-b";
  b.host_id = "id-host-b";
  BenchRecord c = make_record("2026-11-22T10:00:00Z", {12});
  c.test = "pp512";
  c.threads = 4;
  c.model_name = "other";
  c.model_path = "/models/other.gguf";
  for (const auto& r : {c, a, b}) db.append(r);  // out of time order
  // RunFilter with one field set (designated initializers would leave the rest to -Wextra).
  auto only = [](auto set) {
    RunFilter f;
    set(f);
    return f;
  };
  auto times = [&](const RunFilter& f) {
    std::vector<std::string> t;
    for (const auto& r : db.runs(f)) t.push_back(r.record.time_utc.substr(0, 10));
    return t;
  };
  EXPECT_EQ(times({}), (std::vector<std::string>{"2026-11-20", "2026-11-21", "2026-11-22"}));
  EXPECT_EQ(times(only([](RunFilter& f) { f.host = "host-b"; })),
            (std::vector<std::string>{"2026-11-21"}));
  EXPECT_EQ(times(only([](RunFilter& f) { f.host = "id-host-b"; })),
            (std::vector<std::string>{"2026-11-21"}));
  EXPECT_EQ(times(only([](RunFilter& f) { f.model = "other.gguf"; })),
            (std::vector<std::string>{"2026-11-22"}));
  EXPECT_TRUE(times(only([](RunFilter& f) { f.model = "other_gguf"; })).empty());
  EXPECT_TRUE(times(only([](RunFilter& f) { f.model = "her.gguf"; })).empty());
  EXPECT_EQ(times(only([](RunFilter& f) { f.model = "other"; })),
            (std::vector<std::string>{"2026-11-22"}));
  EXPECT_EQ(times(only([](RunFilter& f) { f.test = "tg64"; })),
            (std::vector<std::string>{"2026-11-20", "2026-11-21"}));
  EXPECT_EQ(times(only([](RunFilter& f) { f.threads = 4; })),
            (std::vector<std::string>{"2026-11-22"}));
  EXPECT_EQ(times(only([](RunFilter& f) { f.since = "2026-11-21"; })),
            (std::vector<std::string>{"2026-11-21", "2026-11-22"}));
  EXPECT_EQ(times(only([](RunFilter& f) { f.until = "2026-11-21"; })),
            (std::vector<std::string>{"2026-11-20"}));
}

TEST(HistoryDb, ConcurrentWriterProcessesKeepEveryRow) {
  TempDir dir;
  const fs::path file = dir.path() / "h.sqlite";
  const fs::path log = write_synthetic_log(dir.path(), "run.jsonl");
  constexpr int kWriters = 3, kRows = 15;
  // The file does not exist yet: the writers also race to create it.
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      try {
        HistoryDb db = HistoryDb::open(file, HistoryDb::Mode::ReadWrite);
        for (int i = 0; i < kRows; ++i) {
          BenchRecord r = make_record(fmt::format("2026-11-20T10:{:02}:{:02}Z", w, i), {1.0 * i});
          r.events_path = log.string();
          db.append(r);
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "writer %d: %s\n", w, e.what());
        rc = 1;
      }
      _exit(rc);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a writer failed";
  }
  const HistoryDb db = HistoryDb::open(file, HistoryDb::Mode::ReadOnly);
  const auto runs = db.runs();
  ASSERT_EQ(runs.size(), static_cast<size_t>(kWriters * kRows));
  std::set<std::string> uuids, times;
  for (const auto& r : runs) {
    uuids.insert(r.record.run_uuid);
    times.insert(r.record.time_utc);
    EXPECT_TRUE(r.has_log);
    EXPECT_FALSE(db.op_summary(r.id).empty());
  }
  EXPECT_EQ(uuids.size(), runs.size());
  EXPECT_EQ(times.size(), runs.size());
}

TEST(HistoryDb, MergeCopiesMissingRunsOnceWithTheirLogs) {
  TempDir dir;
  const fs::path log = write_synthetic_log(dir.path(), "run.jsonl");
  const fs::path a = dir.path() / "a.sqlite", b = dir.path() / "b.sqlite";
  std::string shared_uuid;
  {
    HistoryDb da = HistoryDb::open(a, HistoryDb::Mode::ReadWrite);
    BenchRecord r = make_record("2026-11-20T10:00:00Z", {10});
    r.events_path = log.string();
    shared_uuid = da.append(r);
    da.append(make_record("2026-11-20T11:00:00Z", {11}));
  }
  {
    HistoryDb db = HistoryDb::open(b, HistoryDb::Mode::ReadWrite);
    BenchRecord r = make_record("2026-11-20T12:00:00Z", {12});
    r.host = "host-b";
    db.append(r);
    BenchRecord copy = make_record("2026-11-20T10:00:00Z", {10});
    copy.run_uuid = shared_uuid;  // the same run, already merged into b once
    db.append(copy);
  }
  const fs::path fleet = dir.path() / "fleet.sqlite";
  HistoryDb out = HistoryDb::open(fleet, HistoryDb::Mode::ReadWrite);
  MergeResult ma = out.merge_from(a);
  EXPECT_EQ(ma.added, 2);
  EXPECT_EQ(ma.skipped, 0);
  MergeResult mb = out.merge_from(b);
  EXPECT_EQ(mb.added, 1);
  EXPECT_EQ(mb.skipped, 1);
  MergeResult again = out.merge_from(a);
  EXPECT_EQ(again.added, 0);
  EXPECT_EQ(again.skipped, 2);
  const auto runs = out.runs();
  ASSERT_EQ(runs.size(), 3u);
  const auto merged = out.find_run(shared_uuid);
  ASSERT_TRUE(merged.has_value());
  ASSERT_TRUE(merged->has_log);
  EXPECT_EQ(*out.event_log(merged->id), slurp(log));
  EXPECT_FALSE(out.op_summary(merged->id).empty());
  EXPECT_THROW(out.merge_from(fleet), HistoryError);
  // A foreign input is refused and the output keeps what it had.
  const fs::path foreign = dir.path() / "foreign.txt";
  { std::ofstream(foreign) << "not a database at all, just some text that is long enough\n"; }
  EXPECT_THROW(out.merge_from(foreign), HistoryError);
  EXPECT_EQ(out.runs().size(), 3u);
}

TEST(HistoryDb, FingerprintDependsOnEveryByteAndTheLength) {
  TempDir dir;
  auto write = [&](const std::string& name, const std::string& bytes) {
    const fs::path p = dir.path() / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  };
  std::string big(100'003, 'x');
  const std::string f0 = file_fingerprint(write("a", big));
  EXPECT_EQ(f0, file_fingerprint(write("a2", big)));
  EXPECT_THAT(f0, ::testing::MatchesRegex("fp64:[0-9a-f]{16}"));
  std::set<std::string> seen = {f0};
  for (size_t pos : {size_t{0}, size_t{8}, size_t{50'000}, size_t{100'001}}) {
    std::string changed = big;
    changed[pos] = 'y';
    seen.insert(file_fingerprint(write("b" + std::to_string(pos), changed)));
  }
  seen.insert(file_fingerprint(write("c", big + "x")));
  seen.insert(file_fingerprint(write("d", "")));
  EXPECT_EQ(seen.size(), 7u);
}

TEST(HistoryDb, ModelFingerprintIsRememberedUntilTheFileChanges) {
  TempDir dir;
  const fs::path model = dir.path() / "m.gguf";
  std::ofstream(model, std::ios::binary) << std::string(4096, 'a');
  HistoryDb db = HistoryDb::open(dir.path() / "h.sqlite", HistoryDb::Mode::ReadWrite);
  const std::string first = db.model_fingerprint(model);
  EXPECT_EQ(first, file_fingerprint(model));
  EXPECT_EQ(db.model_fingerprint(model), first);  // from the cache
  // Same size, new bytes, a later modification time: hashed again.
  std::ofstream(model, std::ios::binary) << std::string(4096, 'b');
  fs::last_write_time(model, fs::last_write_time(model) + std::chrono::seconds(5));
  const std::string second = db.model_fingerprint(model);
  EXPECT_NE(second, first);
  EXPECT_EQ(second, file_fingerprint(model));
  EXPECT_THROW(db.model_fingerprint(dir.path() / "missing.gguf"), std::runtime_error);
}

}  // namespace
}  // namespace pacer::analysis
