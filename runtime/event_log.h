#pragma once
// The writing side of the JSONL event log (docs/event-log.md): the fixed-size records the
// recorder fills on the hot path, their serialisation into `op` lines at step end, and the file
// writer that flushes once per step (a killed run loses at most the step in flight).
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "hwcounters/counter_set.h"
#include "hwcounters/host_facts.h"

#include "runtime/recorder.h"

namespace pacer::runtime {

// Distinct counter keys one log can carry (hardware + software + user events).
inline constexpr int kMaxCounterKeys = 32;

// One worker's share of one op, written on that worker's thread between its chunk brackets
// (several chunks of one op by the same worker accumulate). POD, preallocated per step.
struct WorkerSlice {
  int32_t chunks = 0;              // 0: the worker took no part in the op
  int32_t cpu = -1, cpu_end = -1;  // CPU at the first chunk's start and the last chunk's end
  int64_t t0_ns = 0, t1_ns = 0;    // first chunk start, last chunk end
  float freq_mhz = NAN;            // the worker's step estimate; NaN: none
  float mux = 1.0f;                // smallest counting fraction of its hardware group
  int64_t runq_ns = -1;            // < 0: not measured
  int64_t oncpu_ns = -1;           // < 0: not measured
  uint32_t present = 0;            // bit k set: counters[k] was measured
  std::array<uint64_t, kMaxCounterKeys> counters{};  // mux-scaled deltas, by recorder key index
};

// One op of one step. The name is copied (ops may pass names that do not outlive the step).
struct OpRecord {
  std::array<char, 40> name{};
  int32_t layer = -1;
  OpKind kind = OpKind::Other;
  Phase phase = Phase::Decode;
  ops::WeightType wtype = ops::WeightType::F32;
  int64_t rows = 0, cols = 0, tokens = 0, weight_bytes = 0, kv_bytes = 0, attention_flops = 0;
  int64_t step = 0;
  int64_t t0_ns = 0, t1_ns = 0;
};

// How per-op frequency is derived from a slice's counters (indices into the key table, -1: none).
struct FrequencyKeys {
  int cycles = -1, ref_cycles = -1, task_clock = -1;
  double tsc_mhz = 0;
};

// Appends one `op` line ('\n'-terminated). `slices` holds one entry per executor slot; those
// with chunks == 0 are left out. Hand-formatted: a step has hundreds of ops and this runs on the
// critical path at step end.
void append_op_line(std::string& out, const OpRecord& op, std::span<const WorkerSlice> slices,
                    std::span<const std::string> counter_keys, const FrequencyKeys& fk);

// A slice's frequency: cycles/ref-cycles x TSC, else cycles/task-clock, else its step estimate.
double slice_frequency_mhz(const WorkerSlice& s, const FrequencyKeys& fk) noexcept;

// One `step` line (docs/event-log.md `step`), typed: what the recorder measured over one prefill
// batch or decoded token. Values are raw; step_json() applies the log's rounding.
struct StepRecord {
  struct Freq {
    int worker = 0;
    int cpu = -1;      // where the worker last ran
    double mhz = NAN;  // over the step's ops (counter sources) or the step estimate
  };
  struct SchedWorker {
    int worker = 0;
    int tid = 0;
    int64_t runq_ns = 0, oncpu_ns = 0, nvcsw = 0, nivcsw = 0;
  };
  struct Cgroup {
    int64_t nr_periods = 0, nr_throttled = 0, throttled_ns = 0;
  };
  struct Throttle {
    int64_t core = 0, package = 0;
  };

  int64_t step = 0;
  Phase phase = Phase::Decode;
  int64_t n_past = 0;
  std::optional<int64_t> n_tokens;  // prefill and multi-token steps
  std::optional<int32_t> token;     // a decode step's sampled token, with its piece
  std::string piece;
  int64_t t0_ns = 0, t1_ns = 0;
  std::optional<double> tok_s;  // running decode throughput (decode steps)
  std::vector<Freq> freq;
  std::vector<SchedWorker> sched;  // empty: no thread's schedstat was readable
  std::optional<double> process_cpu_usage, host_cpu_usage;  // CPUs busy over the step
  std::optional<double> steal_ms;
  // VM steal per CPU (ms) of the CPUs that had any; nullopt when per-CPU figures were unreadable.
  std::optional<std::vector<std::pair<int, double>>> steal_cpus_ms;
  std::optional<double> energy_j, power_w;
  std::optional<Cgroup> cgroup;
  std::optional<Throttle> throttle;
  // The recorder's own cost.
  size_t ops = 0;
  int64_t serialize_ns = 0, calibrate_ns = 0;
};

// The step line as JSON (pure: the record in, the line's object out).
nlohmann::json step_json(const StepRecord& r);

// The run header (docs/event-log.md `header`), typed: what the recorder knows or measured itself,
// plus the caller's fields (model, run, command, ...) as it gave them. header_json() is the one
// place that assembles the line.
struct RunHeader {
  struct Frequency {
    std::string source, detail, granularity;  // granularity: per_op | per_step
    double nominal_mhz = 0;
    double tsc_mhz = 0;
    std::string tsc_source;
    std::vector<hwcounters::Unavailable> rejected;  // better sources that were not available
  };
  struct Thermal {
    bool throttle_counters = false;
    std::string throttle_reason;  // why absent
    std::string rapl;             // the energy meter's name; empty: absent
    std::string rapl_reason;      // why absent
  };
  struct Cgroup {  // the process's cgroup CPU controller
    int version = 0;
    std::string path;
    int64_t quota_us = -1, period_us = 0;
    double quota_cpus = 0;
    int64_t nr_periods = 0, nr_throttled = 0, throttled_ns = 0;
  };

  // Caller's fields (not owned; null: none), merged into the line: its `host` keys into `host`,
  // the rest at the top level (the recorder's own keys below win over the caller's).
  const nlohmann::json* caller_fields = nullptr;
  std::string time_utc;
  hwcounters::HostFacts host;
  hwcounters::CounterSetStatus counters;
  bool sched_per_op = true;
  Frequency frequency;
  Thermal thermal;
  std::optional<Cgroup> cgroup;  // nullopt: none readable, see cgroup_reason
  std::string cgroup_reason;
  // The per-CPU frequency before the run (NaN: not measured on that CPU), on freq_cpus; empty
  // when not measured.
  std::vector<int> freq_cpus;
  std::optional<std::vector<double>> freq_before_mhz;
  // What one op bracket's counter reads cost on the calling thread (median; nullopt: no counter
  // sources were open): each recorded op's time includes up to this much of the recorder.
  std::optional<int64_t> bracket_ns;
};

// The `footer` line (docs/event-log.md `footer`), typed: the recorder's totals, the caller's
// fields (stop reason, timings, ...; they win over the totals) and the recorder's own counts.
struct FooterRecord {
  const nlohmann::json* caller_fields = nullptr;  // not owned; null: none
  int64_t steps = 0;
  std::optional<double> decode_tok_s, prefill_tok_s;
  std::optional<std::vector<double>> freq_after_mhz;  // NaN: not measured on that CPU
  struct RecorderCounts {
    int64_t ops = 0, dropped_slices = 0, unattributed_chunks = 0;
    int threads = 0;
    int64_t runq_reads = 0, bytes = 0;
  } recorder;
};

// The footer line as JSON (pure).
nlohmann::json footer_json(const FooterRecord& f);

// The header line as JSON (pure: the record in, the line's object out).
nlohmann::json header_json(const RunHeader& h);
// The current UTC time as the header writes it (2026-11-21T15:00:00Z).
std::string utc_now();
// Each CPU's frequency now (calibrated loop pinned to it; NaN where it could not pin).
std::vector<double> measure_per_cpu_mhz(const std::vector<int>& cpus);

// Header pieces (docs/event-log.md `header`): the host facts, the counter status and the
// derived-metric table.
nlohmann::json host_json(const hwcounters::HostFacts& h);
nlohmann::json counters_json(const hwcounters::CounterSetStatus& st, bool sched_per_op);
nlohmann::json derived_metrics_json();
// A number rounded to 0.1, or null when not finite.
nlohmann::json nan_to_null(double v);

// Appends `s` as a JSON string literal (quotes and escapes included).
void append_json_string(std::string& out, std::string_view s);

// Line-oriented writer. Everything is buffered until flush(); flush() hands the bytes to the
// kernel (enough for a kill; a machine crash may still lose the page cache).
class EventLogWriter {
 public:
  // Throws std::runtime_error naming the path and the OS error. An existing file is replaced
  // when the first line is written (until then it is left as it was); a file this writer created
  // and never wrote to is removed again.
  explicit EventLogWriter(std::string path);
  ~EventLogWriter();
  EventLogWriter(const EventLogWriter&) = delete;
  EventLogWriter& operator=(const EventLogWriter&) = delete;

  void write_json(const nlohmann::json& line);
  void write_raw(std::string_view lines);  // one or more complete '\n'-terminated lines
  void flush();                            // throws on a write error (disk full, ...)
  const std::string& path() const noexcept { return path_; }
  int64_t bytes_written() const noexcept { return bytes_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  int64_t bytes_ = 0;
  bool created_ = false;  // the file did not exist before
  bool regular_ = true;   // a regular file (truncated on the first write; a FIFO or device not)
};

}  // namespace pacer::runtime
