#pragma once
// Streaming reader of the pacer event log (docs/event-log.md, schema v1, JSONL).
//
//   struct MyVisitor : analysis::LogVisitor {
//     void on_op(const analysis::OpEvent& op) override { ... }
//   };
//   MyVisitor v;
//   analysis::ReadSummary s = analysis::LogReader("events.jsonl").read(v);
//   for (const auto& w : s.warnings()) fmt::print(stderr, "{}\n", w);
//
// The reader holds one line at a time and hands each record to the visitor, so memory is what the
// visitor keeps. Records are reused between lines: copy what you need inside the callback.
// op/step/footer/bench lines go through a hand-written JSON scanner (no DOM per line); the header
// (one line) is parsed with nlohmann::json and kept whole in Header::raw.
//
// Errors (exceptions, LogError): the file cannot be opened, the first record is not a valid
// header, or the header's schema is newer than kSchemaVersion. Everything else is a warning in the
// ReadSummary: malformed lines are skipped and counted with their line numbers, a truncated final
// line is noted, and a missing footer marks the run incomplete.
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "eventlog/schema.h"

namespace pacer::analysis {

// The newest schema this reader understands is the one this build writes.
using eventlog::kSchemaVersion;

class LogError : public std::runtime_error {
 public:
  LogError(const std::string& file, int64_t line, int64_t offset, const std::string& what);
  const std::string& file() const noexcept { return file_; }
  int64_t line() const noexcept { return line_; }      // 1-based; 0 when not about a line
  int64_t offset() const noexcept { return offset_; }  // byte offset in the file; -1 unknown

 private:
  std::string file_;
  int64_t line_;
  int64_t offset_;
};

// The log's enums and their names belong to the schema (eventlog/schema.h): unknown names parse
// to Phase::Other / OpKind::Other.
using eventlog::kPhaseCount;
using eventlog::op_kind_name;
using eventlog::OpKind;
using eventlog::parse_op_kind;
using eventlog::parse_phase;
using eventlog::Phase;
using eventlog::phase_name;

// One hardware/software counter value of a worker's slice of an op. `name` points into a table
// owned by the LogReader (valid while the reader lives); values are already mux-scaled.
struct Counter {
  std::string_view name;
  double value = 0;
  bool integral = true;  // written as a JSON integer (counts); false: a fraction such as `mux`
};

// One executor worker's slice of an op (`workers[]` in an op line).
struct WorkerSample {
  int w = -1;        // executor slot
  int cpu = -1;      // CPU at chunk start; -1 absent
  int cpu_end = -1;  // CPU at chunk end; -1 absent (differs from cpu: migrated)
  int64_t t0_ns = 0, t1_ns = 0;
  std::optional<double> freq_mhz;
  std::optional<int64_t> runq_ns;   // time runnable but not running during the chunk
  std::optional<int64_t> oncpu_ns;  // time on CPU during the chunk
  std::optional<int> chunks;        // chunks the worker ran of the op; absent: one
  std::vector<Counter> counters;    // instructions, cycles, task_clock_ns, mux, ...

  // The counter's value, or nullopt when the source did not measure it.
  std::optional<double> counter(std::string_view name) const noexcept;
  int64_t duration_ns() const noexcept { return t1_ns - t0_ns; }
};

// `op` line: one recorded op in one step.
struct OpEvent {
  int64_t line = 0;  // line number in the log (1-based)
  int64_t step = 0;
  Phase phase = Phase::Other;
  std::string name;  // attn_qkv, ffn_down, ...
  int layer = -1;    // -1 outside the blocks
  OpKind kind = OpKind::Other;
  // Matmuls only (empty / 0 otherwise).
  std::string wtype;
  int64_t rows = 0, cols = 0, tokens = 0, weight_bytes = 0;
  int64_t kv_bytes = 0;  // attention: the KV-cache bytes it read (0 in logs before the key)
  // attention over a float cache: its fp32 flops (0 for a Q8_0 cache and in logs before the key)
  int64_t attention_flops = 0;
  int64_t t0_ns = 0, t1_ns = 0;
  std::vector<WorkerSample> workers;
  // Which of the optional keys above the line had (consumers that pass a line's keys on as they
  // are, such as pacer trace, need absent told apart from 0).
  enum OptionalKey : uint8_t {
    kWtype = 1,
    kRows = 2,
    kCols = 4,
    kTokens = 8,
    kWeightBytes = 16,
    kKvBytes = 32,
    kAttentionFlops = 64
  };
  uint8_t optional_keys = 0;

  bool has(OptionalKey k) const noexcept { return (optional_keys & k) != 0; }
  int64_t duration_ns() const noexcept { return t1_ns - t0_ns; }
  // Bytes the op streamed from memory: weights and KV cache.
  int64_t streamed_bytes() const noexcept { return weight_bytes + kv_bytes; }
};

struct StepFreq {
  int w = -1;
  int cpu = -1;
  double mhz = 0;
};

// One worker thread's scheduler deltas over a step (`sched.workers[]`).
struct StepSchedWorker {
  int w = -1;
  int64_t tid = 0;
  int64_t runq_ns = 0, oncpu_ns = 0, nvcsw = 0, nivcsw = 0;
};

// `step` line: one prefill batch or one decoded token, after its ops.
struct StepEvent {
  int64_t line = 0;
  int64_t step = 0;
  Phase phase = Phase::Other;
  int64_t n_past = 0;
  std::optional<int64_t> n_tokens;  // prefill batch size
  std::optional<int64_t> token;     // decode: sampled token id
  std::string piece;
  int64_t t0_ns = 0, t1_ns = 0;
  std::optional<double> step_ms;
  std::optional<double> tok_s;  // running decode throughput
  std::vector<StepFreq> freq;
  std::optional<int64_t> runq_ns, oncpu_ns, nvcsw, nivcsw;  // `sched`
  std::vector<StepSchedWorker> sched_workers;               // `sched.workers`
  std::optional<double> process_cpu_usage, host_cpu_usage;
  std::optional<int64_t> cgroup_throttled_ns;  // `cgroup.throttled_ns`: CPU quota throttling
  std::optional<double> steal_ms;              // `steal_ms`: VM steal over all CPUs
  // `steal_cpus`: (cpu, ms) of the CPUs with steal during the step; nullopt: not recorded.
  std::optional<std::vector<std::pair<int, double>>> steal_cpus_ms;
  std::optional<double> energy_j, power_w;  // RAPL, when the header's thermal.rapl has one

  int64_t duration_ns() const noexcept { return t1_ns - t0_ns; }
  // Tokens this step processed: n_tokens for prefill, else 1.
  int64_t tokens() const noexcept { return n_tokens.value_or(1); }
};

// `footer` line: the end of a complete run.
struct Footer {
  int64_t line = 0;
  std::optional<int64_t> steps, n_prompt, n_generated, peak_rss_kb;
  std::optional<double> load_ms, ttft_ms, prefill_tok_s, decode_tok_s, wall_ms, tokenize_ms,
      detokenize_ms;
  std::vector<double> freq_after_mhz;
  std::string stop;
};

// `bench` line (pacer bench): one result row.
struct BenchEvent {
  int64_t line = 0;
  std::string test;  // pp512, tg128, ...
  std::optional<int64_t> n_prompt, n_gen, threads, reps;
  std::string pin;
  std::optional<double> tok_s_mean, tok_s_sd, cv, freq_mhz_mean, roofline_pct;
  std::vector<std::string> flags;
};

struct UnavailableCounter {
  std::string event;
  std::string reason;
};

// `header` line: the typed fields of docs/event-log.md, plus the whole object in `raw` for keys a
// renderer wants to show as they are. Absent numbers are nullopt / empty.
struct Header {
  int64_t line = 0;
  int schema = 0;
  std::string pacer_version, git_sha, time_utc, command;
  std::vector<std::string> argv;
  struct Model {
    std::string path, name, arch, type;
    std::string file_type;  // llama.cpp's name for the file's type ("Q4_K - Medium"), or empty
    std::optional<int64_t> params, bytes, matmul_bytes_per_token;
    std::optional<int64_t> n_layers, n_embd, n_heads, n_kv_heads, n_ff, n_vocab;
  } model;
  struct Run {
    std::optional<int64_t> threads, ctx, n_prompt, n_predict, seed;
    std::string pin, isa, kv_type, recording;
    std::string numa = "none";  // run.numa.policy (logs from before --numa: none)
    std::vector<int> cpus;
    std::optional<double> temperature;
    // How the kernels and the executor ran (absent in logs older than the key): each changes the
    // work, so `pacer compare` names a difference as a configuration change.
    std::optional<bool> vnni, amx, bf16_dot, gemv_prefetch, gemv_prefetch_unpacking, work_stealing,
        work_stealing_balanced, idle_prefetch, attention_one_pass;
    std::optional<int64_t> gemv_streams, repacked_matrices;
    // run.x16_gemv as one line: "bf16 1 stream, prefetch, page touch 8192 B; ...; q8_0 ..."
    // (types in name order).
    std::optional<std::string> x16_gemv;
  } run;
  struct Host {
    std::string hostname, cpu_model, microcode, kernel, governor;  // governor empty when null
    std::string cpu_signature;  // "family 23 model 1 stepping 2"; empty in logs before it
    std::optional<bool> smt, virtualized;
    std::optional<double> tsc_mhz;
    std::optional<int64_t> packages, numa_nodes, cores, pus, l3_bytes;  // host.topology
    std::vector<int> allowed_cpus;
  } host;
  struct Counters {
    std::string mode;  // hardware | software | off
    std::vector<std::string> live;
    std::vector<UnavailableCounter> unavailable;
    std::string read;
    // "user+kernel" or "user" (perf_event_paranoid forbade kernel counting): whether the counts
    // include the kernel's share (page faults, syscalls). Empty in older logs.
    std::string scope, software_scope;
    // What one op bracket's counter reads cost the writer (median ns); nullopt in older logs and
    // without counters. Each op's time includes up to this much of the recorder.
    std::optional<double> bracket_ns;
  } counters;
  struct Frequency {
    std::string source, detail;
    std::optional<double> nominal_mhz;
  } frequency;
  std::string throttle_counters, rapl;  // `thermal`
  std::optional<double> bandwidth_gbs;  // measured memory bandwidth; nullopt: not measured
  std::optional<double> fma_gflops;     // measured fp32 multiply-add rate; nullopt: not measured
  // The decode matmuls alone with their weights in L2, for the run's threads (tok/s); nullopt:
  // not measured (runtime/kernel_ceiling.h).
  std::optional<double> kernel_ceiling_tok_s;
  std::vector<double> freq_before_mhz;
  std::optional<double> load_ms;
  nlohmann::json raw;
};

// Receives records in file order. Default implementations ignore the record.
class LogVisitor {
 public:
  virtual ~LogVisitor() = default;
  virtual void on_header(const Header&) {}
  virtual void on_op(const OpEvent&) {}
  virtual void on_step(const StepEvent&) {}
  virtual void on_footer(const Footer&) {}
  virtual void on_bench(const BenchEvent&) {}
  // A well-formed line whose "type" this reader does not know (a newer writer): ignored.
  virtual void on_unknown(std::string_view type, int64_t line) {}
};

struct LineIssue {
  int64_t line = 0;    // 1-based
  int64_t offset = 0;  // byte offset of the line's start in the file
  std::string message;
};

struct ReadSummary {
  std::string path;
  int64_t lines = 0;  // lines seen, including blank and malformed ones
  int64_t bytes = 0;
  int64_t n_header = 0, n_op = 0, n_step = 0, n_footer = 0, n_bench = 0, n_unknown = 0;
  int64_t n_blank = 0;
  int64_t malformed_count = 0;       // all skipped lines
  std::vector<LineIssue> malformed;  // the first kMaxIssues of them, with line numbers
  static constexpr size_t kMaxIssues = 100;
  bool truncated_last_line = false;  // the file ended mid-line (killed writer); line skipped
  int64_t truncated_line = 0;
  bool has_footer = false;
  int schema = 0;

  // A run is complete when it has its footer; otherwise the writer was killed or crashed.
  bool complete() const noexcept { return has_footer; }
  // One line per problem, ready to print to stderr ("events.jsonl:17: skipped malformed line:
  // ...").
  std::vector<std::string> warnings() const;
};

class LogReader {
 public:
  explicit LogReader(std::string path);
  ~LogReader();
  LogReader(const LogReader&) = delete;
  LogReader& operator=(const LogReader&) = delete;

  // Reads the whole file, calling `visitor` for every record. Throws LogError (see top).
  ReadSummary read(LogVisitor& visitor);

  // Same, over text already in memory (tests, stdin). `name` is used in messages.
  static ReadSummary read_text(std::string_view text, LogVisitor& visitor,
                               std::string name = "<memory>");
  // Same, over an open stream, read in chunks. `name` is used in messages.
  static ReadSummary read_stream(std::istream& in, LogVisitor& visitor, std::string name);

 private:
  struct Impl;
  std::string path_;
  std::unique_ptr<Impl> impl_;
};

// Callback-style adapter: only the callbacks that are set are called.
struct LogCallbacks : LogVisitor {
  std::function<void(const Header&)> header;
  std::function<void(const OpEvent&)> op;
  std::function<void(const StepEvent&)> step;
  std::function<void(const Footer&)> footer;
  std::function<void(const BenchEvent&)> bench;
  void on_header(const Header& h) override {
    if (header) header(h);
  }
  void on_op(const OpEvent& e) override {
    if (op) op(e);
  }
  void on_step(const StepEvent& e) override {
    if (step) step(e);
  }
  void on_footer(const Footer& e) override {
    if (footer) footer(e);
  }
  void on_bench(const BenchEvent& e) override {
    if (bench) bench(e);
  }
};

}  // namespace pacer::analysis
