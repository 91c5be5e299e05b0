// `pacer bench`: llama-bench style pp/tg benchmark with repeatability checks and the roofline.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/history_db.h"
#include "loader/synth.h"
#include "ops/types.h"
#include "pacer/version.h"
#include "runtime/bench.h"
#include "runtime/model.h"
#include "runtime/topology.h"
#include "tools/commands.h"

namespace pacer::tools {
namespace {

struct BenchArgs {
  std::string model;
  std::string synthetic;  // ARCH:TYPE
  std::string prompts = "512";
  std::string gens = "128";
  std::string depths = "0";
  std::string threads = "-1";
  std::vector<std::string> pins;
  int reps = 5;
  std::string output = "md";
  std::string events_dir;
  std::string kv_type = "f16";
  bool no_warmup = false;
  bool no_roofline = false;
  double cv_flag = 5.0;
  double drift_flag = 5.0;
  double bandwidth_drift_flag = 10.0;
  int64_t bandwidth_mb = 1024;
  int overhead_pairs = 0;
  std::string db;  // results database (--db / $PACER_DB); empty: none
  // llama-bench's spellings.
  std::vector<std::string> pg;             // -pg PP,TG (repeatable)
  std::string batch, ubatch;               // -b / -ub (one value; pacer has one prefill batch size)
  std::string cache_type_k, cache_type_v;  // -ctk / -ctv
  std::string cpu_mask;                    // -C/--cpu-mask: hex mask of the workers' CPUs
  std::string numa;                        // --numa distribute|isolate|interleave|numactl
  int prio = 0;                            // --prio 0..3
  double delay = 0;                        // --delay seconds between tests
  bool verbose = false;                    // -v: every rep's tok/s on stderr
  bool progress = false;                   // --progress: progress on stderr even if not a tty
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// A comma list of integers and llama-bench ranges, each >= min (or -1 where allow_auto):
// "16,32", "16-64+16" (16,32,48,64), "1-8*2" (1,2,4,8), "1-4" (step 1). A bad list is a usage
// error (exit 2) naming the flag.
std::vector<int64_t> parse_int_list(const std::string& s, const char* flag, int64_t min = 0,
                                    bool allow_auto = false,
                                    int64_t max = std::numeric_limits<int64_t>::max()) {
  auto bad = [&](const std::string& why) {
    return CLI::ValidationError(flag, fmt::format("'{}': {}", s, why));
  };
  auto integer = [&](const std::string& text) {
    long long v = 0;
    try {
      size_t used = 0;
      v = std::stoll(text, &used);
      if (used != text.size() || text.empty()) throw std::invalid_argument(text);
    } catch (const std::exception&) {
      throw bad(fmt::format("'{}' is not an integer", text));
    }
    return static_cast<int64_t>(v);
  };
  std::vector<int64_t> out;
  for (const std::string& item : split(s, ',')) {
    // A range: FIRST-LAST, FIRST-LAST+STEP or FIRST-LAST*FACTOR (FIRST >= 0, no leading '-').
    const size_t dash = item.find('-', 1);
    if (!item.empty() && item[0] != '-' && dash != std::string::npos) {
      const size_t op = item.find_first_of("+*", dash);
      const int64_t first = integer(item.substr(0, dash));
      const int64_t last = integer(
          item.substr(dash + 1, op == std::string::npos ? std::string::npos : op - dash - 1));
      const int64_t step = op == std::string::npos ? 1 : integer(item.substr(op + 1));
      const bool mult = op != std::string::npos && item[op] == '*';
      if (last < first) throw bad(fmt::format("range {} runs backwards", item));
      if (step < (mult ? 2 : 1))
        throw bad(fmt::format("range {}: the {} must be >= {}", item, mult ? "factor" : "step",
                              mult ? 2 : 1));
      if (mult && first == 0) throw bad(fmt::format("range {}: a *factor needs FIRST >= 1", item));
      for (int64_t v = first; v <= last; v = mult ? v * step : v + step) {
        out.push_back(v);
        if (out.size() > 10000) throw bad("more than 10000 values");
      }
    } else {
      out.push_back(integer(item));
    }
  }
  for (int64_t v : out)
    if ((v < min || v > max) && !(allow_auto && v == -1))
      throw bad(fmt::format("{} out of range: each value must be {}{}", v,
                            max == std::numeric_limits<int64_t>::max()
                                ? fmt::format(">= {}", min)
                                : fmt::format("in {}..{}", min, max),
                            allow_auto ? " (or -1: auto)" : ""));
  return out;
}

// SIGINT while a bench runs: a flag the bench polls between repetitions. The handler can only
// set a lock-free flag, so this one process-wide variable exists; the guard restores the previous
// handler when the bench ends.
volatile std::sig_atomic_t g_sigint = 0;
extern "C" void on_sigint(int) {
  g_sigint = 1;
}

class SigintGuard {
 public:
  SigintGuard() {
    g_sigint = 0;
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_);
  }
  ~SigintGuard() { sigaction(SIGINT, &old_, nullptr); }
  SigintGuard(const SigintGuard&) = delete;
  SigintGuard& operator=(const SigintGuard&) = delete;
  static bool interrupted() noexcept { return g_sigint != 0; }

 private:
  struct sigaction old_ {};
};

// Writes stdout and fails loudly (a full disk or closed pipe is an error, not a silent loss).
void put(const std::string& s) {
  if (std::fwrite(s.data(), 1, s.size(), stdout) != s.size() || std::fflush(stdout) != 0) {
    throw std::runtime_error(fmt::format("writing to stdout failed: {}", std::strerror(errno)));
  }
}

// llama-bench's SQL printer: one CREATE TABLE llama_bench, then one INSERT per row (sqlite3
// reads it; llama.cpp's scripts/compare-llama-bench.py compares such databases by build_commit).
std::string sql_value(const nlohmann::json& v) {
  if (v.is_null()) return "NULL";
  if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
  if (v.is_number()) return v.dump();
  std::string text;
  if (v.is_string()) {
    text = v.get<std::string>();
  } else {
    for (const auto& e : v) {
      if (!text.empty()) text.push_back(';');
      text += e.is_string() ? e.get<std::string>() : e.dump();
    }
  }
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out.push_back('\'');
    out.push_back(c);
  }
  return out + "'";
}

class BenchPrinter {
 public:
  explicit BenchPrinter(std::string format) : format_(std::move(format)) {}
  void row(const runtime::BenchResult& r, const runtime::BenchRow& row) {
    const bool first = rows_++ == 0;
    if (format_ == "md") {
      if (first) put(runtime::render_bench_markdown_header(r));
      put(runtime::render_bench_markdown_row(r, row));
    } else if (format_ == "csv") {
      if (first) put(runtime::llama_bench_csv_header());
      put(runtime::llama_bench_csv_row(r, row));
    } else if (format_ == "json") {
      put((first ? "[\n" : ",\n") + runtime::llama_bench_row(r, row).dump(2));
    } else if (format_ == "jsonl") {
      put(runtime::llama_bench_row(r, row).dump() + "\n");
    } else {  // sql
      const nlohmann::json j = runtime::llama_bench_row(r, row);
      if (first) {
        std::string cols;
        for (const auto& [k, v] : j.items()) {
          // A null (not measured in the first row) is one of pacer's numeric fields: byte counts
          // are integers, the rest measured reals.
          const bool bytes = k == "pacer_llc_bytes" || k == "pacer_kv_bytes_per_token";
          const char* type = v.is_number_integer() || v.is_boolean() || (v.is_null() && bytes)
                                 ? "INTEGER"
                             : v.is_number() || v.is_null() ? "REAL"
                                                            : "TEXT";
          cols += fmt::format("{}  {} {}", cols.empty() ? "" : ",\n", k, type);
        }
        put("CREATE TABLE IF NOT EXISTS llama_bench (\n" + cols + "\n);\n");
      }
      std::string names, values;
      for (const auto& [k, v] : j.items()) {
        names += (names.empty() ? "" : ", ") + k;
        values += (values.empty() ? "" : ", ") + sql_value(v);
      }
      put("INSERT INTO llama_bench (" + names + ") VALUES (" + values + ");\n");
    }
  }
  void finish(const runtime::BenchResult& r) {
    if (format_ == "md") {
      if (rows_ == 0) put(runtime::render_bench_markdown_header(r));
      put(runtime::render_bench_markdown_footer(r));
    } else if (format_ == "json") {
      put(rows_ == 0 ? "[]\n" : "\n]\n");
    } else if (format_ == "csv" && rows_ == 0) {
      put(runtime::llama_bench_csv_header());
    }
  }

 private:
  std::string format_;
  int rows_ = 0;
};

// "none,compact,list:0,2,cores": the numbers after a "list:" belong to it.
std::vector<runtime::PinSpec> parse_pins(const std::vector<std::string>& args) {
  std::vector<runtime::PinSpec> out;
  for (const std::string& arg : args) {
    std::vector<std::string> items;
    for (const std::string& tok : split(arg, ',')) {
      const bool numeric =
          !tok.empty() && tok.find_first_not_of("0123456789-") == std::string::npos;
      if (numeric && !items.empty() && items.back().rfind("list:", 0) == 0) {
        items.back() += "," + tok;
      } else {
        items.push_back(tok);
      }
    }
    for (const std::string& item : items) out.push_back(runtime::PinSpec::parse(item));
  }
  if (out.empty()) out.push_back(runtime::PinSpec{});
  return out;
}

std::filesystem::path cache_dir() {
  if (const char* d = std::getenv("PACER_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d)
    return std::filesystem::path(d) / "pacer";
  if (const char* h = std::getenv("HOME"); h && *h)
    return std::filesystem::path(h) / ".cache" / "pacer";
  return std::filesystem::temp_directory_path() / "pacer-cache";
}

// --synthetic ARCH:TYPE -> a generated model file, cached (same arch, type and seed = same bytes).
std::filesystem::path synthetic_model(const std::string& spec_text) {
  const auto colon = spec_text.find(':');
  if (colon == std::string::npos) {
    throw CLI::ValidationError(
        "--synthetic", fmt::format("'{}': expected ARCH:TYPE, e.g. qwen2.5-0.5b:q8_0", spec_text));
  }
  const std::string arch = spec_text.substr(0, colon), type = spec_text.substr(colon + 1);
  const std::vector<std::string_view> presets = loader::synth_preset_names();
  if (std::find(presets.begin(), presets.end(), arch) == presets.end()) {
    throw CLI::ValidationError(
        "--synthetic", fmt::format("unknown ARCH '{}' ({})", arch, fmt::join(presets, ", ")));
  }
  loader::SynthSpec spec = loader::synth_preset(arch);
  auto wt = ops::weight_type_from_name(type);
  if (!wt) throw CLI::ValidationError("--synthetic", fmt::format("unknown type '{}'", type));
  spec.type = *wt;
  spec.seed = 1;
  const std::filesystem::path dir = cache_dir() / "models";
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / fmt::format("{}-{}-seed1.gguf", arch, type);
  if (!std::filesystem::exists(path)) {
    std::fprintf(stderr, "bench: generating %s (cached for later runs)\n", path.c_str());
    loader::write_synthetic_model(spec, path);
  }
  return path;
}

void progress_bar(int done, int total, const std::string& label) {
  const int width = 30;
  const int filled = total > 0 ? done * width / total : width;
  std::fprintf(stderr, "\r[%.*s%*s] %d/%d %-40s", filled,
               "==============================", width - filled, "", done, total, label.c_str());
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

// A private directory under the temp directory, removed with everything in it when done: where
// `--db` records the rows' logs when the user keeps none (--events-out).
class ScopedTempDir {
 public:
  ScopedTempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pacer-bench-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) {
      throw std::runtime_error(
          fmt::format("bench: cannot create a temporary directory: {}", std::strerror(errno)));
    }
    path_ = tmpl;
  }
  ~ScopedTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

// What the results database keeps of a row (the host facts the record leaves empty come from the
// row's event log header).
analysis::BenchRecord history_record(const runtime::BenchResult& r, const runtime::BenchRow& row,
                                     const std::string& model_hash, const std::string& host_id) {
  analysis::BenchRecord rec;
  rec.time_utc = row.test_time;
  rec.host_id = host_id;
  rec.cpu_model = r.cpu_model;
  rec.cpu_signature = r.cpu_signature;
  rec.pacer_version = kVersion;
  rec.git_sha = kGitSha;
  rec.model_name = r.model_name;
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(r.model_path, ec);
  rec.model_path = ec ? r.model_path : abs.lexically_normal().string();
  rec.model_hash = model_hash;
  rec.model_bytes = r.model_bytes;
  rec.params = r.params;
  rec.arch = r.arch;
  rec.type = r.type;
  rec.kv_type = std::string(ops::type_name(r.kv_type));
  rec.test = row.test;
  rec.n_prompt = row.n_prompt;
  rec.n_gen = row.n_gen;
  rec.n_depth = row.n_depth;
  rec.threads = row.threads;
  rec.pin = row.pin;
  rec.cpus = row.cpus;
  rec.tok_s = row.tok_s;
  rec.tok_s_mean = row.mean;
  rec.tok_s_sd = row.sd;
  rec.cv = row.cv;
  rec.freq_min_mhz = row.freq_min_mhz;
  rec.freq_mean_mhz = row.freq_mean_mhz;
  rec.freq_max_mhz = row.freq_max_mhz;
  rec.bandwidth_gbs = row.bandwidth_gbs;
  rec.roofline_pct = row.roofline_pct;
  rec.kernel_ceiling_tok_s = row.kernel_ceiling_tok_s;
  rec.flags = row.flags;
  rec.events_path = row.events_path;
  return rec;
}

// A hex CPU mask (llama-bench's -C, e.g. 0x3 or ff) as a pin list.
runtime::PinSpec pin_from_mask(const std::string& mask) {
  std::string hex = mask;
  if (hex.rfind("0x", 0) == 0 || hex.rfind("0X", 0) == 0) hex = hex.substr(2);
  if (hex.empty() || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
    throw CLI::ValidationError("-C,--cpu-mask", fmt::format("'{}' is not a hex CPU mask", mask));
  std::vector<int> cpus;
  for (size_t i = 0; i < hex.size(); ++i) {
    const int nibble = std::stoi(std::string(1, hex[hex.size() - 1 - i]), nullptr, 16);
    for (int b = 0; b < 4; ++b)
      if (nibble >> b & 1) cpus.push_back(static_cast<int>(i) * 4 + b);
  }
  if (cpus.empty())
    throw CLI::ValidationError("-C,--cpu-mask", fmt::format("'{}' selects no CPU", mask));
  return runtime::PinSpec::parse("list:" + runtime::format_cpu_list(cpus));
}

// Everything the command line says, checked before the model loads (usage errors exit 2).
runtime::BenchOptions bench_options(const BenchArgs& a) {
  runtime::BenchOptions o;
  o.n_prompt = parse_int_list(a.prompts, "-p");
  o.n_gen = parse_int_list(a.gens, "-n");
  o.n_depth = parse_int_list(a.depths, "-d");
  o.threads.clear();
  for (int64_t t : parse_int_list(a.threads, "-t", 1, true, runtime::kMaxWorkerThreads))
    o.threads.push_back(static_cast<int>(t));
  for (const std::string& pg : a.pg) {
    const std::vector<int64_t> v = parse_int_list(pg, "-pg");
    if (v.size() != 2 || v[0] + v[1] == 0)
      throw CLI::ValidationError("-pg", fmt::format("'{}': expected PP,TG, not both 0", pg));
    o.n_pg.emplace_back(v[0], v[1]);
  }
  if (!a.pg.empty() && a.prompts == "512" && a.gens == "128") {
    o.n_prompt = {};  // as llama-bench: -pg alone runs only the pp+tg tests
    o.n_gen = {};
  }
  for (const auto& [flag, text] : {std::pair{"-b", a.batch}, std::pair{"-ub", a.ubatch}}) {
    if (text.empty()) continue;
    const std::vector<int64_t> v = parse_int_list(text, flag, 1);
    if (v.size() != 1)
      throw CLI::ValidationError(flag, "one value: pacer has one prefill batch size per run");
    o.n_batch = o.n_batch > 0 ? std::min(o.n_batch, v[0]) : v[0];
  }
  if (a.cpu_mask.empty() && a.numa.empty()) {
    o.pins = parse_pins(a.pins);
  } else if (!a.pins.empty()) {
    throw CLI::ValidationError("--pin", "give --pin or -C/--numa, not both");
  } else if (!a.cpu_mask.empty()) {
    o.pins = {pin_from_mask(a.cpu_mask)};
  } else {
    // llama-bench's --numa (docs/numa.md): distribute spreads the workers over the nodes, isolate
    // keeps them on the node the process starts on, both with memory following; interleave
    // spreads the memory; numactl leaves placement to the CPU set the process was given.
    o.pins = {runtime::PinSpec{}};
    o.numa = numa_policy_of(a.numa);
  }
  o.reps = a.reps;
  o.warmup = !a.no_warmup;
  o.events_dir = a.events_dir;
  o.cv_flag = a.cv_flag / 100.0;
  o.freq_drift_flag = a.drift_flag / 100.0;
  o.bandwidth_drift_flag = a.bandwidth_drift_flag / 100.0;
  o.roofline = !a.no_roofline;
  o.bandwidth_bytes = static_cast<size_t>(a.bandwidth_mb) << 20;
  o.delay_s = a.delay;
  // -ctk / -ctv name the KV cache type as --kv-type does; pacer keeps K and V in one type.
  std::string kv_name = a.kv_type;
  if (!a.cache_type_k.empty() && !a.cache_type_v.empty() && a.cache_type_k != a.cache_type_v)
    throw CLI::ValidationError("-ctv", fmt::format("'{}' differs from -ctk '{}': pacer keeps K "
                                                   "and V in one type",
                                                   a.cache_type_v, a.cache_type_k));
  if (!a.cache_type_k.empty()) kv_name = a.cache_type_k;
  if (!a.cache_type_v.empty()) kv_name = a.cache_type_v;
  auto kv = ops::weight_type_from_name(kv_name);
  if (!kv || (*kv != ops::WeightType::F16 && *kv != ops::WeightType::F32 &&
              *kv != ops::WeightType::Q8_0)) {
    throw CLI::ValidationError("--kv-type",
                               fmt::format("'{}': expected f16, f32 or q8_0", kv_name));
  }
  o.kv_type = *kv;
  return o;
}

// llama-bench's --prio: 0 normal, 1 medium, 2 high, 3 realtime, as a nice value (3: the highest
// nice priority, not SCHED_FIFO, so a runaway bench cannot lock the machine).
void apply_priority(int prio) {
  if (prio == 0) return;
  const int nice = prio == 1 ? -5 : prio == 2 ? -10 : -20;
  if (setpriority(PRIO_PROCESS, 0, nice) != 0)
    throw std::runtime_error(fmt::format("--prio {}: setpriority(nice {}) failed: {}", prio, nice,
                                         std::strerror(errno)));
}

void run(const BenchArgs& a) {
  if (a.model.empty() == a.synthetic.empty()) {
    throw CLI::ValidationError("-m", "give exactly one of -m MODEL or --synthetic ARCH:TYPE");
  }
  runtime::BenchOptions o = bench_options(a);
  apply_priority(a.prio);
  const std::filesystem::path path =
      a.model.empty() ? synthetic_model(a.synthetic) : std::filesystem::path(a.model);
  // --db: opened (or created) before the model loads, so a foreign file is refused at once.
  std::optional<analysis::HistoryDb> db;
  std::string model_hash, host_id;
  if (!a.db.empty()) {
    db = analysis::HistoryDb::open(a.db, analysis::HistoryDb::Mode::ReadWrite);
    model_hash = db->model_fingerprint(path);
    host_id = analysis::local_host_id();
  }
  const bool progress = a.progress || isatty(STDERR_FILENO);
  const auto load_start = std::chrono::steady_clock::now();
  if (progress) std::fprintf(stderr, "bench: loading %s\n", path.c_str());
  const runtime::Model model = runtime::Model::load(path);
  if (progress) {
    std::fprintf(
        stderr, "bench: loaded in %.2f s\n",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());
    o.progress = progress_bar;
  }

  // --db: every row is recorded (its last rep) so the database holds the log a later compare
  // needs.
  std::unique_ptr<ScopedTempDir> db_events;
  if (db && o.events_dir.empty()) {
    db_events = std::make_unique<ScopedTempDir>();
    o.events_dir = db_events->path().string();
  }

  // Rows are printed as each finishes; Ctrl-C stops after the current repetition, prints the
  // finished rows and the footer, and exits 130.
  BenchPrinter printer(a.output);
  o.on_row = [&](const runtime::BenchResult& so_far, const runtime::BenchRow& row) {
    printer.row(so_far, row);
    if (db) db->append(history_record(so_far, row, model_hash, host_id));
    if (a.verbose) {
      std::string samples;
      for (double v : row.tok_s) samples += fmt::format(" {:.2f}", v);
      std::fprintf(stderr, "bench: %s t%d %s: tok/s per rep:%s\n", row.test.c_str(), row.threads,
                   row.pin.c_str(), samples.c_str());
    }
  };
  const SigintGuard sigint;
  o.stop = [] { return SigintGuard::interrupted(); };
  const runtime::BenchResult r = runtime::run_bench(model, o);
  printer.finish(r);
  if (db) {
    fmt::print(stderr, "bench: {} row{} appended to {}\n", r.rows.size(),
               r.rows.size() == 1 ? "" : "s", a.db);
  }
  if (r.interrupted) throw ExitRequest{130};
  if (a.overhead_pairs > 0) {
    const std::filesystem::path log =
        a.events_dir.empty() ? std::filesystem::temp_directory_path() /
                                   fmt::format("pacer-overhead-{}.jsonl", getpid())
                             : std::filesystem::path(a.events_dir) / "recording-overhead.jsonl";
    const auto rows = runtime::measure_recording_overhead(model, o, a.overhead_pairs, log.string());
    if (a.events_dir.empty()) std::filesystem::remove(log);
    std::cout << runtime::render_overhead_markdown(rows);
    std::cout.flush();
  }
}

}  // namespace

std::string llama_bench_flag(const std::string& token) {
  if (token == "-pg") return "--pg";
  if (token == "-ub") return "--ubatch-size";
  if (token == "-ctk") return "--cache-type-k";
  if (token == "-ctv") return "--cache-type-v";
  return token;
}

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "llama-bench style pp/tg benchmark with roofline");
  cmd->add_option("-m,--model", args->model, "GGUF model file");
  cmd->add_option("--synthetic", args->synthetic,
                  "bench a generated model ARCH:TYPE (e.g. qwen2.5-0.5b:q8_0), cached");
  cmd->add_option("-p,--n-prompt", args->prompts,
                  "prompt sizes: comma list or llama-bench ranges 16-64+16, 1-8*2 (0: no pp test)")
      ->capture_default_str();
  cmd->add_option(
         "-d,--n-depth", args->depths,
         "context depths, comma list: each test runs after that many tokens (llama-bench's "
         "-d)")
      ->capture_default_str();
  cmd->add_option("-n,--n-gen", args->gens, "generation lengths, comma list (0: no tg test)")
      ->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "thread counts, comma list (-1: physical cores)")
      ->capture_default_str();
  cmd->add_option("--pin", args->pins,
                  "pin policies, comma list: none,compact,scatter,cores,list:0,2");
  cmd->add_option("-r,--reps", args->reps, "repetitions per row")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("-o,--output", args->output,
                  "md | csv | json | jsonl | sql (llama-bench's field names; rows stream out as "
                  "they finish)")
      ->check(CLI::IsMember({"md", "csv", "json", "jsonl", "sql"}))
      ->capture_default_str();
  cmd->add_option("--events-out", args->events_dir,
                  "record the last rep of every row into DIR/<arch>-<test>-t<T>-<pin>.jsonl");
  cmd->add_option("--db", args->db,
                  "append every row (with a per-op summary and its event log) to this results "
                  "database (SQLite; `pacer history`, `pacer regress`); default: $PACER_DB")
      ->envname("PACER_DB");
  cmd->add_option("--kv-type", args->kv_type, "f16 | f32 | q8_0")->capture_default_str();
  cmd->add_flag("--no-warmup", args->no_warmup, "skip the untimed warm-up run");
  cmd->add_flag("--no-roofline", args->no_roofline,
                "skip the bandwidth and multiply-add probes (no roofline)");
  cmd->add_option("--cv-flag", args->cv_flag, "flag rows whose CV exceeds this %")
      ->capture_default_str();
  cmd->add_option("--drift-flag", args->drift_flag,
                  "flag rows whose frequency range exceeds this % of the mean")
      ->capture_default_str();
  cmd->add_option("--bandwidth-drift-flag", args->bandwidth_drift_flag,
                  "flag tg rows whose read bandwidth before and after the row differ by more than "
                  "this % of their mean")
      ->capture_default_str()
      ->check(number_in(0, 1000));
  cmd->add_option("--bandwidth-mb", args->bandwidth_mb, "bandwidth probe buffer (MiB)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--pg", args->pg,
                  "PP,TG (or -pg): a prompt of PP tokens then TG generated, timed together "
                  "(llama-bench's -pg; repeatable)");
  cmd->add_option("-b,--batch-size", args->batch, "prompt tokens per prefill step");
  cmd->add_option("--ubatch-size", args->ubatch,
                  "-ub: as -b (pacer has one prefill batch size; the smaller of -b and -ub is "
                  "used)");
  cmd->add_option("--cache-type-k", args->cache_type_k, "KV cache type (-ctk; same as --kv-type)");
  cmd->add_option("--cache-type-v", args->cache_type_v,
                  "KV cache type (-ctv; must equal -ctk: one type for K and V)");
  cmd->add_option("-C,--cpu-mask", args->cpu_mask,
                  "hex mask of the CPUs the workers run on, e.g. 0x3 (a --pin list:...)");
  add_numa_option(cmd, &args->numa, true);
  cmd->add_option("--prio", args->prio, "0 normal, 1 medium, 2 high, 3 highest (nice -20)")
      ->check(CLI::Range(0, 3));
  cmd->add_option("--delay", args->delay, "seconds to wait before each test after the first")
      ->check(number_in(0, 3600));
  cmd->add_flag("-v,--verbose", args->verbose, "print every repetition's tok/s to stderr");
  cmd->add_flag("--progress", args->progress, "progress on stderr even when it is not a terminal");
  cmd->add_option("--recording-overhead", args->overhead_pairs,
                  "after the table: N off/on pairs per tg row, decode tok/s with full recording vs "
                  "without (medians and ratio)")
      ->check(CLI::Range(0, 1000));
  cmd->callback([args] { run(*args); });
}

}  // namespace pacer::tools
