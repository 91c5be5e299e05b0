// The results history database (history_db.h): schema, migrations, refusal of foreign files,
// appends and queries.
#include "analysis/history_db.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "analysis/report.h"
#include "analysis/sqlite_db.h"

namespace pacer::analysis {

namespace fs = std::filesystem;

namespace {

// Concurrent writers wait this long for the write lock (a bench row's transaction holds it for
// milliseconds; a merge of a large fleet file for longer).
constexpr int kBusyTimeoutMs = 60'000;

// kMigrations[v] turns schema v into v + 1; schema 0 is an empty file. Append a step to change
// the schema, never edit a released one: a file written by an older pacer is migrated through
// every later step, in one transaction.
constexpr std::array<std::string_view, kHistorySchemaVersion> kMigrations = {
    // 0 -> 1: the first schema.
    R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  run_uuid TEXT NOT NULL UNIQUE,
  time_utc TEXT NOT NULL,
  host TEXT NOT NULL, host_id TEXT NOT NULL, cpu_model TEXT NOT NULL, kernel TEXT NOT NULL,
  governor TEXT NOT NULL, microcode TEXT NOT NULL,
  pacer_version TEXT NOT NULL, git_sha TEXT NOT NULL,
  model_name TEXT NOT NULL, model_path TEXT NOT NULL, model_hash TEXT NOT NULL,
  model_bytes INTEGER NOT NULL, params INTEGER NOT NULL,
  arch TEXT NOT NULL, type TEXT NOT NULL, kv_type TEXT NOT NULL,
  test TEXT NOT NULL, n_prompt INTEGER NOT NULL, n_gen INTEGER NOT NULL, n_depth INTEGER NOT NULL,
  threads INTEGER NOT NULL, pin TEXT NOT NULL,
  cpus TEXT NOT NULL,   -- JSON array of CPU ids
  tok_s TEXT NOT NULL,  -- JSON array, one tok/s per repetition
  tok_s_mean REAL, tok_s_sd REAL, cv REAL,
  freq_min_mhz REAL, freq_mean_mhz REAL, freq_max_mhz REAL,
  bandwidth_gbs REAL, roofline_pct REAL,
  flags TEXT NOT NULL   -- JSON array of strings
);
CREATE INDEX runs_by_group ON runs (host, model_name, test, threads, time_utc);
CREATE TABLE op_summary (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  phase TEXT NOT NULL, op TEXT NOT NULL, count INTEGER NOT NULL,
  mean_ns REAL, p50_ns REAL, p95_ns REAL, mean_mhz REAL, gbs REAL, offcpu_share REAL
);
CREATE INDEX op_summary_by_run ON op_summary (run_id);
CREATE TABLE event_logs (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  name TEXT NOT NULL,       -- the log's file name when it was recorded
  encoding TEXT NOT NULL,   -- 'identity': data is the JSONL text as written
  raw_bytes INTEGER NOT NULL,
  data BLOB NOT NULL
);
-- file_fingerprint() of a model file, by path, size and modification time: a later bench of the
-- same unchanged file skips reading it whole.
CREATE TABLE model_fingerprints (
  path TEXT NOT NULL, bytes INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
  fingerprint TEXT NOT NULL,
  PRIMARY KEY (path, bytes, mtime_ns)
);
)sql",
    // 1 -> 2: the CPU's family/model/stepping beside its brand string.
    R"sql(
ALTER TABLE runs ADD COLUMN cpu_signature TEXT NOT NULL DEFAULT '';
)sql",
    // 2 -> 3: a tg row's kernel ceiling (runtime/kernel_ceiling.h); 0: not measured.
    R"sql(
ALTER TABLE runs ADD COLUMN kernel_ceiling_tok_s REAL NOT NULL DEFAULT 0;
)sql",
};

// The only encoding this version writes: no compression library is linked into pacer, and SQLite
// pages hold the text as is. The column lets a later schema add one without a migration.
constexpr std::string_view kIdentityEncoding = "identity";

constexpr std::string_view kRunColumns =
    "run_uuid, time_utc, host, host_id, cpu_model, kernel, governor, microcode, pacer_version, "
    "git_sha, model_name, model_path, model_hash, model_bytes, params, arch, type, kv_type, test, "
    "n_prompt, n_gen, n_depth, threads, pin, cpus, tok_s, tok_s_mean, tok_s_sd, cv, freq_min_mhz, "
    "freq_mean_mhz, freq_max_mhz, bandwidth_gbs, roofline_pct, flags, cpu_signature, "
    "kernel_ceiling_tok_s";
constexpr int kRunColumnCount = 37;
// kRunColumns as a SELECT list for a file of `schema` (a read-only file may be older): a column
// its schema lacks reads as its default ('' or 0).
std::string run_select_columns(int schema) {
  std::string cols(kRunColumns);
  const auto absent = [&](std::string_view col, std::string_view value) {
    cols.replace(cols.rfind(col), col.size(), fmt::format("{} AS {}", value, col));
  };
  if (schema < 3) absent("kernel_ceiling_tok_s", "0");
  if (schema < 2) absent("cpu_signature", "''");
  return cols;
}

std::string read_whole_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f)
    throw std::runtime_error(fmt::format("{}: cannot read: {}", p.string(), std::strerror(errno)));
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int64_t query_int(sql::Database& db, std::string_view q) {
  sql::Statement s = db.prepare(q);
  return s.step() ? s.int64(0) : 0;
}

std::vector<std::string> table_names(sql::Database& db) {
  std::vector<std::string> out;
  sql::Statement s =
      db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  while (s.step()) out.push_back(s.text(0));
  return out;
}

int stored_schema_version(sql::Database& db) {
  sql::Statement s = db.prepare("SELECT value FROM meta WHERE key = 'schema_version'");
  if (!s.step())
    throw HistoryError(
        fmt::format("{}: pacer history database without a schema version", db.path()));
  try {
    return std::stoi(s.text(0));
  } catch (const std::exception&) {
    throw HistoryError(fmt::format(
        "{}: pacer history database with a malformed schema version '{}'", db.path(), s.text(0)));
  }
}

// Brings a file at schema `from` to kHistorySchemaVersion (from 0: creates it).
void migrate(sql::Database& db, int from) {
  for (int v = from; v < kHistorySchemaVersion; ++v) db.exec(kMigrations[static_cast<size_t>(v)]);
  db.exec(fmt::format("PRAGMA application_id = {}", kHistoryApplicationId));
  sql::Statement set = db.prepare(
      "INSERT INTO meta (key, value) VALUES ('schema_version', ?1), ('application', 'pacer') "
      "ON CONFLICT (key) DO UPDATE SET value = excluded.value");
  set.bind(1, std::to_string(kHistorySchemaVersion)).run();
}

nlohmann::json to_json_array(const std::vector<int>& v) {
  return nlohmann::json(v);
}

// A runs column holding a JSON array (cpus, tok_s, flags). Anything else is a damaged row: an
// error naming the database, the run and the column, never an empty list (a regression gate
// would then skip the run and pass).
template <typename T>
std::vector<T> parse_json_array(const std::string& text, const fs::path& db, int64_t run_id,
                                const char* column) {
  std::vector<T> out;
  if (text.empty()) return out;
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  bool ok = j.is_array();
  for (const auto& e : ok ? j : nlohmann::json::array()) {
    if constexpr (std::is_same_v<T, std::string>) {
      ok = ok && e.is_string();
      if (ok) out.push_back(e.get<std::string>());
    } else {
      ok = ok && e.is_number();
      if (ok) out.push_back(e.get<T>());
    }
  }
  if (!ok) {
    throw HistoryError(fmt::format("{}: runs row id {}: column {} is not a JSON array of {}: '{}'",
                                   db.string(), run_id, column,
                                   std::is_same_v<T, std::string> ? "strings" : "numbers",
                                   text.size() > 80 ? text.substr(0, 80) + "..." : text));
  }
  return out;
}

// Fills the host and build facts the record leaves empty from the log's header.
void fill_from_header(BenchRecord& r, const Header& h) {
  auto fill = [](std::string& field, const std::string& value) {
    if (field.empty()) field = value;
  };
  fill(r.host, h.host.hostname);
  fill(r.cpu_model, h.host.cpu_model);
  fill(r.cpu_signature, h.host.cpu_signature);
  fill(r.kernel, h.host.kernel);
  fill(r.governor, h.host.governor);
  fill(r.microcode, h.host.microcode);
  fill(r.pacer_version, h.pacer_version);
  fill(r.git_sha, h.git_sha);
  fill(r.model_name, h.model.name);
  fill(r.arch, h.model.arch);
  fill(r.type, h.model.type);
  fill(r.kv_type, h.run.kv_type);
}

std::vector<OpSummary> summarize_ops(const Report& report) {
  std::vector<OpSummary> out;
  for (const OpRow& row : report.by_phase_op) {
    OpSummary s;
    s.phase = std::string(phase_name(row.phase));
    s.op = row.name;
    s.count = row.dist.count;
    s.mean_ns = row.dist.mean_ns();
    s.p50_ns = row.dist.p50_ns;
    s.p95_ns = row.dist.p95_ns;
    s.mean_mhz = row.cpu.freq_mean_mhz;
    s.gbs = row.cpu.gbs;
    s.offcpu_share = row.cpu.offcpu_share;
    out.push_back(std::move(s));
  }
  return out;
}

// A number column holding text (a damaged or hand-edited row) is an error naming it, not a 0.
void check_number_column(const sql::Statement& s, int col, const fs::path& db, int64_t run_id,
                         std::string_view column) {
  if (!s.holds_text(col)) return;
  const std::string text = s.text(col);
  throw HistoryError(fmt::format("{}: runs row id {}: column {} is not a number: '{}'", db.string(),
                                 run_id, column,
                                 text.size() > 80 ? text.substr(0, 80) + "..." : text));
}

StoredRun read_run_row(const sql::Statement& s, const fs::path& db) {
  // Column 0 is the id, then kRunColumns in order, then has_log.
  StoredRun run;
  run.id = s.int64(0);
  // Number columns: checked, so that text in one is an error rather than a 0.
  const auto integer = [&](int col, std::string_view name) {
    check_number_column(s, col, db, run.id, name);
    return s.int64(col);
  };
  const auto number = [&](int col, std::string_view name) {
    check_number_column(s, col, db, run.id, name);
    return s.real(col);
  };
  BenchRecord& r = run.record;
  int c = 1;
  r.run_uuid = s.text(c++);
  r.time_utc = s.text(c++);
  r.host = s.text(c++);
  r.host_id = s.text(c++);
  r.cpu_model = s.text(c++);
  r.kernel = s.text(c++);
  r.governor = s.text(c++);
  r.microcode = s.text(c++);
  r.pacer_version = s.text(c++);
  r.git_sha = s.text(c++);
  r.model_name = s.text(c++);
  r.model_path = s.text(c++);
  r.model_hash = s.text(c++);
  r.model_bytes = integer(c++, "model_bytes");
  r.params = integer(c++, "params");
  r.arch = s.text(c++);
  r.type = s.text(c++);
  r.kv_type = s.text(c++);
  r.test = s.text(c++);
  r.n_prompt = integer(c++, "n_prompt");
  r.n_gen = integer(c++, "n_gen");
  r.n_depth = integer(c++, "n_depth");
  r.threads = static_cast<int>(integer(c++, "threads"));
  r.pin = s.text(c++);
  r.cpus = parse_json_array<int>(s.text(c++), db, run.id, "cpus");
  r.tok_s = parse_json_array<double>(s.text(c++), db, run.id, "tok_s");
  r.tok_s_mean = number(c++, "tok_s_mean");
  r.tok_s_sd = number(c++, "tok_s_sd");
  r.cv = number(c++, "cv");
  r.freq_min_mhz = number(c++, "freq_min_mhz");
  r.freq_mean_mhz = number(c++, "freq_mean_mhz");
  r.freq_max_mhz = number(c++, "freq_max_mhz");
  r.bandwidth_gbs = number(c++, "bandwidth_gbs");
  r.roofline_pct = number(c++, "roofline_pct");
  r.flags = parse_json_array<std::string>(s.text(c++), db, run.id, "flags");
  r.cpu_signature = s.text(c++);
  r.kernel_ceiling_tok_s = number(c++, "kernel_ceiling_tok_s");
  run.has_log = s.int64(c++) != 0;
  return run;
}

struct StoredLog {
  std::string name, encoding, data;
  int64_t raw_bytes = 0;
};

// SQLite answers SQLITE_BUSY without calling the busy handler to a journal-mode change while
// another connection has the file open, and to a reader that meets another process's first WAL
// set-up: such steps are retried here until the busy timeout has passed.
template <typename Step>
void retry_busy(sql::Database& db, Step&& step) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  for (;;) {
    try {
      step();
      return;
    } catch (const HistoryError&) {
      throw;
    } catch (const std::runtime_error&) {
      const int code = sqlite3_errcode(db.handle()) & 0xff;
      if ((code != SQLITE_BUSY && code != SQLITE_LOCKED) ||
          std::chrono::steady_clock::now() > deadline)
        throw;
      ::usleep(2000);
    }
  }
}

}  // namespace

struct HistoryDb::Impl {
  fs::path path;
  sql::Database db;
  int schema = 0;

  Impl(const fs::path& p, int flags) : path(p), db(p.string(), flags) {}

  // Inserts a complete run (row, ops, log) inside the caller's transaction; returns its id.
  int64_t insert(const BenchRecord& r, const std::vector<OpSummary>& ops,
                 const std::optional<StoredLog>& log) {
    sql::Statement ins =
        db.prepare(fmt::format("INSERT INTO runs ({}) VALUES ({})", kRunColumns, [] {
          std::string q;
          for (int i = 1; i <= kRunColumnCount; ++i)
            q += fmt::format("{}?{}", i > 1 ? ", " : "", i);
          return q;
        }()));
    int c = 0;
    auto bind = [&](const auto& v) { ins.bind(++c, v); };
    for (const std::string* text :
         {&r.run_uuid, &r.time_utc, &r.host, &r.host_id, &r.cpu_model, &r.kernel, &r.governor,
          &r.microcode, &r.pacer_version, &r.git_sha, &r.model_name, &r.model_path, &r.model_hash})
      bind(*text);
    bind(r.model_bytes);
    bind(r.params);
    for (const std::string* text : {&r.arch, &r.type, &r.kv_type, &r.test}) bind(*text);
    bind(r.n_prompt);
    bind(r.n_gen);
    bind(r.n_depth);
    bind(r.threads);
    bind(r.pin);
    bind(to_json_array(r.cpus).dump());
    bind(nlohmann::json(r.tok_s).dump());
    for (double v : {r.tok_s_mean, r.tok_s_sd, r.cv, r.freq_min_mhz, r.freq_mean_mhz,
                     r.freq_max_mhz, r.bandwidth_gbs, r.roofline_pct})
      bind(v);
    bind(nlohmann::json(r.flags).dump());
    bind(r.cpu_signature);
    bind(r.kernel_ceiling_tok_s);
    ins.run();
    const int64_t id = db.last_insert_rowid();

    sql::Statement op = db.prepare(
        "INSERT INTO op_summary (run_id, phase, op, count, mean_ns, p50_ns, p95_ns, mean_mhz, gbs, "
        "offcpu_share) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
    for (const OpSummary& o : ops) {
      op.bind(1, id).bind(2, o.phase).bind(3, o.op).bind(4, o.count).bind(5, o.mean_ns);
      op.bind(6, o.p50_ns).bind(7, o.p95_ns).bind(8, o.mean_mhz).bind(9, o.gbs);
      op.bind(10, o.offcpu_share).run();
    }
    if (log) {
      db.prepare(
            "INSERT INTO event_logs (run_id, name, encoding, raw_bytes, data) VALUES (?1, ?2, ?3, "
            "?4, ?5)")
          .bind(1, id)
          .bind(2, log->name)
          .bind(3, log->encoding)
          .bind(4, log->raw_bytes)
          .bind_blob(5, log->data)
          .run();
    }
    return id;
  }

  std::optional<StoredLog> stored_log(int64_t run_id) {
    sql::Statement s =
        db.prepare("SELECT name, encoding, raw_bytes, data FROM event_logs WHERE run_id = ?1");
    s.bind(1, run_id);
    if (!s.step()) return std::nullopt;
    return StoredLog{s.text(0), s.text(1), s.blob(3), s.int64(2)};
  }
};

HistoryDb::HistoryDb(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HistoryDb::~HistoryDb() = default;
HistoryDb::HistoryDb(HistoryDb&&) noexcept = default;
HistoryDb& HistoryDb::operator=(HistoryDb&&) noexcept = default;

HistoryDb HistoryDb::open(const fs::path& path, Mode mode) {
  const std::string name = path.string();
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    throw HistoryError(
        fmt::format("{}: not a regular file; refusing to use it as a history database", name));
  }
  if (mode == Mode::ReadOnly && !fs::exists(st)) {
    throw HistoryError(fmt::format("{}: no such history database", name));
  }
  const int flags =
      mode == Mode::ReadOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  std::unique_ptr<Impl> impl;
  try {
    impl = std::make_unique<Impl>(path, flags);
  } catch (const std::runtime_error& e) {
    throw HistoryError(e.what());
  }
  sql::Database& db = impl->db;
  sqlite3_busy_timeout(db.handle(), kBusyTimeoutMs);

  // Whose file is it? Only reads until the answer is "ours" or "empty": a foreign file is left
  // byte for byte as it was.
  auto identify = [&]() -> int32_t {
    try {
      return static_cast<int32_t>(query_int(db, "PRAGMA application_id"));
    } catch (const std::runtime_error&) {
      const int code = sqlite3_errcode(db.handle()) & 0xff;
      if (code == SQLITE_BUSY || code == SQLITE_LOCKED) throw;  // retry_busy waits
      if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT) {
        throw HistoryError(fmt::format(
            "{}: not a pacer history database (not an SQLite file, or a corrupt one); refusing "
            "to use it",
            name));
      }
      throw HistoryError(fmt::format("{}: cannot read: {}", name, sqlite3_errmsg(db.handle())));
    }
  };
  auto refuse_foreign = [&](int32_t app_id) {
    if (app_id != 0 && app_id != kHistoryApplicationId) {
      throw HistoryError(fmt::format(
          "{}: an SQLite database of another application (application_id {:#x}), not a pacer "
          "history database; refusing to use it",
          name, static_cast<uint32_t>(app_id)));
    }
    if (app_id == 0) {
      const std::vector<std::string> tables = table_names(db);
      if (!tables.empty()) {
        throw HistoryError(fmt::format(
            "{}: an SQLite database that is not a pacer history database (tables: {}); refusing "
            "to use it",
            name, fmt::join(tables, ", ")));
      }
    }
  };

  try {
    // One consistent snapshot: another process may be creating the file right now.
    int32_t app_id = 0;
    retry_busy(db, [&] {
      db.exec("BEGIN");
      try {
        app_id = identify();
        refuse_foreign(app_id);
        if (app_id == kHistoryApplicationId) impl->schema = stored_schema_version(db);
      } catch (...) {
        sqlite3_exec(db.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
      }
      db.exec("COMMIT");
    });
    if (app_id == 0 && mode == Mode::ReadOnly) {
      throw HistoryError(fmt::format("{}: an empty database, not a pacer history database", name));
    }
    if (impl->schema > kHistorySchemaVersion) {
      throw HistoryError(fmt::format(
          "{}: written by a newer pacer (history schema {}, this pacer reads up to {}); "
          "refusing to use it",
          name, impl->schema, kHistorySchemaVersion));
    }
    if (mode == Mode::ReadWrite && (app_id == 0 || impl->schema < kHistorySchemaVersion)) {
      // WAL lets readers run beside a writer and writers queue on the busy timeout; it is a
      // property of the file, set once (outside any transaction, as SQLite requires).
      // Rows carry multi-megabyte logs: 64 KiB pages store them in fewer, larger writes. The
      // page size only takes effect on a new file (before WAL mode is set), later opens keep it.
      if (app_id == 0) db.exec("PRAGMA page_size = 65536");
      retry_busy(db, [&] { db.exec("PRAGMA journal_mode = WAL"); });
      retry_busy(db, [&] {
        sql::Transaction tx(db);
        // Another process may have created or migrated the file since we looked: look again
        // under the write lock.
        app_id = static_cast<int32_t>(query_int(db, "PRAGMA application_id"));
        refuse_foreign(app_id);
        const int from = app_id == 0 ? 0 : stored_schema_version(db);
        if (from < kHistorySchemaVersion) migrate(db, from);
        tx.commit();
      });
      impl->schema = kHistorySchemaVersion;
    }
    if (mode == Mode::ReadWrite) {
      db.exec("PRAGMA foreign_keys = ON");
      // In WAL mode NORMAL syncs at checkpoints, not at every commit: a crash cannot corrupt the
      // file, a power loss can lose the last rows. A bench row is not worth an fsync per commit
      // on the machine being measured.
      db.exec("PRAGMA synchronous = NORMAL");
    }
  } catch (const HistoryError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw HistoryError(e.what());
  }
  return HistoryDb(std::move(impl));
}

const fs::path& HistoryDb::path() const noexcept {
  return impl_->path;
}

int HistoryDb::schema_version() const {
  return impl_->schema;
}

std::string HistoryDb::append(const BenchRecord& record) {
  BenchRecord r = record;
  if (r.run_uuid.empty()) r.run_uuid = random_uuid();
  std::vector<OpSummary> ops;
  std::optional<StoredLog> log;
  if (!r.events_path.empty()) {
    // Read and summarize outside the transaction: the write lock is held only for the inserts.
    StoredLog l;
    l.data = read_whole_file(r.events_path);
    l.name = fs::path(r.events_path).filename().string();
    l.encoding = std::string(kIdentityEncoding);
    l.raw_bytes = static_cast<int64_t>(l.data.size());
    // A log the report cannot read (bench records some rows without a header) still leaves its
    // row in the database, flagged, without a per-op summary.
    try {
      const Report report = build_report_from_text(l.data, r.events_path);
      fill_from_header(r, report.header);
      ops = summarize_ops(report);
    } catch (const LogError& e) {
      r.flags.push_back(fmt::format("no per-op summary: {}", e.what()));
    }
    if (!l.data.empty()) log = std::move(l);
  }
  r.events_path.clear();
  try {
    sql::Transaction tx(impl_->db);
    impl_->insert(r, ops, log);
    tx.commit();
  } catch (const std::runtime_error& e) {
    throw HistoryError(fmt::format("appending a run: {}", e.what()));
  }
  return r.run_uuid;
}

std::string HistoryDb::model_fingerprint(const fs::path& model) {
  struct stat st {};
  if (::stat(model.c_str(), &st) != 0) return file_fingerprint(model);  // throws with the reason
  std::error_code ec;
  const fs::path abs = fs::absolute(model, ec);
  const std::string key = (ec ? model : abs).lexically_normal().string();
  const int64_t mtime_ns =
      static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  try {
    sql::Statement q = impl_->db.prepare(
        "SELECT fingerprint FROM model_fingerprints WHERE path = ?1 AND bytes = ?2 AND "
        "mtime_ns = ?3");
    q.bind(1, key).bind(2, static_cast<int64_t>(st.st_size)).bind(3, mtime_ns);
    if (q.step()) return q.text(0);
  } catch (const std::runtime_error& e) {
    throw HistoryError(e.what());
  }
  const std::string fp = file_fingerprint(model);
  try {
    impl_->db
        .prepare(
            "INSERT OR REPLACE INTO model_fingerprints (path, bytes, mtime_ns, fingerprint) "
            "VALUES (?1, ?2, ?3, ?4)")
        .bind(1, key)
        .bind(2, static_cast<int64_t>(st.st_size))
        .bind(3, mtime_ns)
        .bind(4, fp)
        .run();
  } catch (const std::runtime_error& e) {
    throw HistoryError(e.what());
  }
  return fp;
}

std::vector<StoredRun> HistoryDb::runs(const RunFilter& f) const {
  std::string where = "1";
  if (!f.host.empty()) where += " AND (host = ?1 OR host_id = ?1)";
  if (!f.model.empty()) {
    // The file name: the path ends in '/' and the name (compared exactly, not as a LIKE
    // pattern, so '_' and '%' in a name are themselves).
    where +=
        " AND (model_name = ?2 OR model_path = ?2 OR "
        "substr(model_path, -length(?2) - 1) = '/' || ?2 OR model_hash = ?2)";
  }
  if (!f.test.empty()) where += " AND test = ?3";
  if (f.threads) where += " AND threads = ?4";
  if (!f.since.empty()) where += " AND time_utc >= ?5";
  if (!f.until.empty()) where += " AND time_utc < ?6";
  sql::Statement s = impl_->db.prepare(fmt::format(
      "SELECT id, {}, EXISTS (SELECT 1 FROM event_logs e WHERE e.run_id = runs.id) FROM runs "
      "WHERE {} ORDER BY time_utc, id",
      run_select_columns(impl_->schema), where));
  if (!f.host.empty()) s.bind(1, f.host);
  if (!f.model.empty()) s.bind(2, f.model);
  if (!f.test.empty()) s.bind(3, f.test);
  if (f.threads) s.bind(4, *f.threads);
  if (!f.since.empty()) s.bind(5, f.since);
  if (!f.until.empty()) s.bind(6, f.until);
  std::vector<StoredRun> out;
  while (s.step()) out.push_back(read_run_row(s, impl_->path));
  return out;
}

std::optional<StoredRun> HistoryDb::find_run(const std::string& run_uuid) const {
  sql::Statement s = impl_->db.prepare(fmt::format(
      "SELECT id, {}, EXISTS (SELECT 1 FROM event_logs e WHERE e.run_id = runs.id) FROM runs "
      "WHERE run_uuid = ?1",
      run_select_columns(impl_->schema)));
  s.bind(1, run_uuid);
  if (!s.step()) return std::nullopt;
  return read_run_row(s, impl_->path);
}

std::vector<OpSummary> HistoryDb::op_summary(int64_t run_id) const {
  sql::Statement s = impl_->db.prepare(
      "SELECT phase, op, count, mean_ns, p50_ns, p95_ns, mean_mhz, gbs, offcpu_share FROM "
      "op_summary WHERE run_id = ?1 ORDER BY rowid");
  s.bind(1, run_id);
  std::vector<OpSummary> out;
  while (s.step()) {
    OpSummary o;
    o.phase = s.text(0);
    o.op = s.text(1);
    o.count = s.int64(2);
    o.mean_ns = s.real(3);
    o.p50_ns = s.real(4);
    o.p95_ns = s.real(5);
    o.mean_mhz = s.optional_real(6);
    o.gbs = s.optional_real(7);
    o.offcpu_share = s.optional_real(8);
    out.push_back(std::move(o));
  }
  return out;
}

std::optional<std::string> HistoryDb::event_log(int64_t run_id) const {
  std::optional<StoredLog> log = impl_->stored_log(run_id);
  if (!log) return std::nullopt;
  if (log->encoding != kIdentityEncoding) {
    throw HistoryError(
        fmt::format("{}: run {}: event log in an encoding this pacer cannot read ('{}')",
                    impl_->path.string(), run_id, log->encoding));
  }
  return std::move(log->data);
}

MergeResult HistoryDb::merge_from(const fs::path& other) {
  if (fs::exists(other) && fs::exists(impl_->path) && fs::equivalent(other, impl_->path)) {
    throw HistoryError(fmt::format("{}: cannot merge a database into itself", other.string()));
  }
  HistoryDb src = open(other, Mode::ReadOnly);
  MergeResult res;
  try {
    sql::Transaction tx(impl_->db);
    sql::Statement present = impl_->db.prepare("SELECT 1 FROM runs WHERE run_uuid = ?1");
    for (const StoredRun& run : src.runs()) {
      present.bind(1, run.record.run_uuid);
      const bool have = present.step();
      present.reset();
      if (have) {
        ++res.skipped;
        continue;
      }
      impl_->insert(run.record, src.op_summary(run.id), src.impl_->stored_log(run.id));
      ++res.added;
    }
    tx.commit();
  } catch (const HistoryError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw HistoryError(fmt::format("merging {}: {}", other.string(), e.what()));
  }
  return res;
}

std::string history_date_error(std::string_view date) {
  const auto digits = [&](size_t at, size_t n, int lo, int hi) {
    if (date.size() < at + n) return false;
    int v = 0;
    for (size_t i = at; i < at + n; ++i) {
      if (date[i] < '0' || date[i] > '9') return false;
      v = v * 10 + (date[i] - '0');
    }
    return v >= lo && v <= hi;
  };
  const std::string want = "a date YYYY-MM-DD, optionally followed by THH:MM[:SS] and Z";
  if (date.size() < 10 || !digits(0, 4, 1970, 9999) || date[4] != '-' || !digits(5, 2, 1, 12) ||
      date[7] != '-' || !digits(8, 2, 1, 31)) {
    return fmt::format("'{}' is not {}", date, want);
  }
  const int year =
      (date[0] - '0') * 1000 + (date[1] - '0') * 100 + (date[2] - '0') * 10 + (date[3] - '0');
  const int month = (date[5] - '0') * 10 + (date[6] - '0');
  const int day = (date[8] - '0') * 10 + (date[9] - '0');
  constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  if (day > kDays[month - 1] + (month == 2 && leap ? 1 : 0)) {
    return fmt::format("'{}': {}-{:02} has no day {}", date, year, month, day);
  }
  std::string_view rest = date.substr(10);
  if (rest.empty() || rest == "Z") return {};
  if (rest[0] != 'T' || rest.size() < 6 || !digits(11, 2, 0, 23) || date[13] != ':' ||
      !digits(14, 2, 0, 59)) {
    return fmt::format("'{}' is not {}", date, want);
  }
  rest = date.substr(16);
  if (!rest.empty() && rest[0] == ':') {
    if (!digits(17, 2, 0, 60)) return fmt::format("'{}' is not {}", date, want);
    rest = date.substr(19);
  }
  if (!rest.empty() && rest != "Z") return fmt::format("'{}' is not {}", date, want);
  return {};
}

bool same_cpu(const BenchRecord& a, const BenchRecord& b) {
  const auto differ = [](const std::string& x, const std::string& y) {
    return !x.empty() && !y.empty() && x != y;
  };
  return !differ(a.cpu_model, b.cpu_model) && !differ(a.cpu_signature, b.cpu_signature);
}

std::string cpu_label(const BenchRecord& r) {
  const std::string model = r.cpu_model.empty() ? "unknown CPU" : r.cpu_model;
  return r.cpu_signature.empty() ? model : fmt::format("{} [{}]", model, r.cpu_signature);
}

std::string local_host_id() {
  for (const char* p : {"/etc/machine-id", "/var/lib/dbus/machine-id"}) {
    std::ifstream f(p);
    std::string id;
    if (f && std::getline(f, id) && !id.empty()) return id;
  }
  return "";
}

std::string file_fingerprint(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw std::runtime_error(
        fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw std::runtime_error(
        fmt::format("{}: cannot stat: {}", path.string(), std::strerror(errno)));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  // Four independent multiply-rotate lanes over 8-byte words (so the loop runs at memory speed),
  // then the tail and the size; folded with splitmix64's finalizer.
  constexpr uint64_t kPrime = 0x9E3779B97F4A7C15ull;
  std::array<uint64_t, 4> lane = {1, 2, 3, 4};
  uint64_t tail = 0;
  if (size > 0) {
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      ::close(fd);
      throw std::runtime_error(
          fmt::format("{}: cannot map: {}", path.string(), std::strerror(errno)));
    }
    const auto* bytes = static_cast<const unsigned char*>(map);
    const size_t words = size / 32 * 4;
    for (size_t i = 0; i < words; i += 4) {
      for (size_t k = 0; k < 4; ++k) {
        uint64_t w;
        std::memcpy(&w, bytes + 8 * (i + k), 8);
        lane[k] = std::rotl((lane[k] ^ w) * kPrime, 29);
      }
    }
    for (size_t i = words * 8; i < size; ++i) tail = (tail ^ bytes[i]) * kPrime;
    ::munmap(map, size);
  }
  ::close(fd);
  uint64_t h = static_cast<uint64_t>(size) ^ tail;
  for (uint64_t l : lane) {
    h = (h ^ l) * kPrime;
    h ^= h >> 31;
  }
  h ^= h >> 30;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 27;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 31;
  return fmt::format("fp64:{:016x}", h);
}

std::string random_uuid() {
  std::random_device rd;
  std::array<unsigned char, 16> b{};
  for (size_t i = 0; i < b.size(); i += 4) {
    const uint32_t v = rd();
    std::memcpy(b.data() + i, &v, 4);
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  std::string s;
  for (size_t i = 0; i < b.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s.push_back('-');
    s += fmt::format("{:02x}", b[i]);
  }
  return s;
}

}  // namespace pacer::analysis
