#pragma once
// The results history: every `pacer bench --db FILE` row in one SQLite file, with a per-op summary
// of the row's recorded run and the raw event log itself, so `pacer history` can list and plot
// the runs and `pacer regress` can compare any two of them later with nothing else at hand.
//
//   HistoryDb db = HistoryDb::open("results.sqlite", HistoryDb::Mode::ReadWrite);
//   db.append(record);                                  // one transaction per bench row
//   for (const StoredRun& r : db.runs({.test = "tg64"})) ...
//
// The file is a pacer history database or it is refused: SQLite's application_id says whose file
// it is and the `meta` table says the schema version. A file that is not SQLite, a SQLite file of
// another application, or a newer schema is refused with one line naming the file, and nothing is
// written to it. Older schemas are migrated forward (history_db.cpp: kMigrations) when opened for
// writing. Writers use WAL and a busy timeout, so concurrent `pacer bench --db` processes on one
// file each keep every row.
//
// Tables (schema 3): meta(key, value); runs (one row per bench row, unique run_uuid; schema 2
// added cpu_signature, '' in rows written before it; schema 3 kernel_ceiling_tok_s, 0 before);
// op_summary (run_id, phase, op, ...); event_logs (run_id, encoding, raw_bytes, data);
// model_fingerprints (a cache of file_fingerprint). docs/history.md.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace pacer::analysis {

inline constexpr int kHistorySchemaVersion = 3;
// SQLite's PRAGMA application_id of a pacer history file: "PcrH".
inline constexpr int32_t kHistoryApplicationId = 0x50637248;

// One bench row as the database stores it. Plain data: `pacer bench` fills it from its result
// row; the host and build facts come from the row's event log header when it has one (that is the
// record of what ran), else stay as given.
struct BenchRecord {
  std::string run_uuid;  // empty: append() makes one (random, RFC 4122 version 4)
  std::string time_utc;  // row start, ISO 8601 UTC ("2026-11-24T08:10:00Z")
  std::string host, host_id, cpu_model, kernel, governor, microcode;
  // CPUID family/model/stepping ("family 23 model 1 stepping 2"): one host name (a cloud VM, a
  // re-imaged server) can run on another CPU generation under the same brand string ("AMD EPYC"
  // for Zen 1 to Zen 5 guests). Empty in rows stored before schema 2.
  std::string cpu_signature;
  std::string pacer_version, git_sha;
  std::string model_name, model_path, model_hash, arch, type, kv_type;
  int64_t model_bytes = 0, params = 0;
  std::string test;  // pp512, tg64, "tg64 @ d512"
  int64_t n_prompt = 0, n_gen = 0, n_depth = 0;
  int threads = 0;
  std::string pin;
  std::vector<int> cpus;
  std::vector<double> tok_s;  // one per repetition
  double tok_s_mean = 0, tok_s_sd = 0, cv = 0;
  double freq_min_mhz = 0, freq_mean_mhz = 0, freq_max_mhz = 0;
  double bandwidth_gbs = 0, roofline_pct = 0;
  // tg rows with a roofline: the matmul kernels' rate with their weights in cache, on the row's
  // threads (runtime/kernel_ceiling.h). 0: not measured (and in rows stored before schema 3).
  double kernel_ceiling_tok_s = 0;
  std::vector<std::string> flags;
  std::string events_path;  // the row's recorded log: summarized per op and stored; may be empty
};

// One op of a stored run (the report's phase :: op row).
struct OpSummary {
  std::string phase, op;
  int64_t count = 0;
  double mean_ns = 0, p50_ns = 0, p95_ns = 0;
  std::optional<double> mean_mhz, gbs, offcpu_share;
};

// A run as read back: the record (events_path empty) plus its database identity.
struct StoredRun {
  int64_t id = 0;
  BenchRecord record;
  bool has_log = false;
};

// Which runs to read; empty fields match everything. Dates compare as ISO 8601 text, so
// "2026-11-24" means from that day's start.
// Why `date` is not a DATE the filters take (YYYY-MM-DD, optionally THH:MM or THH:MM:SS, and a
// trailing Z: a prefix of the stored ISO 8601 UTC times, compared as text), or "" when it is one.
// A date that is not one would compare as text anyway and match nothing, or everything.
std::string history_date_error(std::string_view date);

struct RunFilter {
  std::string host;   // host name or host id
  std::string model;  // model name, model path, or the path's file name
  std::string test;
  std::optional<int> threads;
  std::string since;  // time_utc >= since
  std::string until;  // time_utc < until
};

// A database that cannot be used: not SQLite, another application's, a newer schema, or a
// SQLite error. The message names the file.
class HistoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct MergeResult {
  int64_t added = 0;    // runs copied
  int64_t skipped = 0;  // runs already present (same run_uuid)
};

class HistoryDb {
 public:
  enum class Mode { ReadOnly, ReadWrite };
  // ReadWrite creates a missing (or empty) file and migrates an older schema; ReadOnly needs an
  // existing pacer history file of this schema version or older. Throws HistoryError.
  static HistoryDb open(const std::filesystem::path& path, Mode mode);
  ~HistoryDb();
  HistoryDb(HistoryDb&&) noexcept;
  HistoryDb& operator=(HistoryDb&&) noexcept;

  const std::filesystem::path& path() const noexcept;
  int schema_version() const;

  // The row, its per-op summary (built from record.events_path) and the log, in one transaction.
  // A log without a header (or empty) is no error: the row is stored with a flag saying why it
  // has no per-op summary (and without a log when it is empty). Returns the run's UUID.
  std::string append(const BenchRecord& record);

  // file_fingerprint(model), remembered in the database by path, size and modification time so
  // that benchmarking the same unchanged file again does not read it whole again.
  std::string model_fingerprint(const std::filesystem::path& model);

  // Oldest first (time, then insertion order).
  std::vector<StoredRun> runs(const RunFilter& filter = {}) const;
  std::optional<StoredRun> find_run(const std::string& run_uuid) const;
  std::vector<OpSummary> op_summary(int64_t run_id) const;
  // The stored event log of a run, decoded to its original text; nullopt when none was stored.
  std::optional<std::string> event_log(int64_t run_id) const;

  // Copies the runs of `other` (a pacer history file, opened read-only) that this one lacks, by
  // run_uuid, with their op summaries and logs, in one transaction.
  MergeResult merge_from(const std::filesystem::path& other);

 private:
  struct Impl;
  explicit HistoryDb(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Whether two rows may have run on one CPU: the brand strings, then the CPUID signatures,
// compared where both rows recorded one (rows from before schema 2 have no signature).
bool same_cpu(const BenchRecord& a, const BenchRecord& b);
// "AMD EPYC [family 23 model 1 stepping 2]"; the brand alone without a signature.
std::string cpu_label(const BenchRecord& r);

// This machine's stable id: /etc/machine-id (systemd), else /var/lib/dbus/machine-id, else "".
std::string local_host_id();

// A 64-bit content hash of a file, "fp64:<16 hex digits>": an identity check that two runs used
// the same bytes (not a cryptographic digest). Reads the whole file at memory speed.
std::string file_fingerprint(const std::filesystem::path& path);

// A random RFC 4122 version 4 UUID.
std::string random_uuid();

}  // namespace pacer::analysis
