#pragma once
// The single-run report (`pacer report`): everything is computed in one streaming pass over the
// event log, keeping per distinct (phase, op, layer) key a fixed-size LogHistogram plus exact
// count/total/min/max and CPU sums, and one small row per step. Memory is proportional to
// distinct ops and steps, never to op events.
//
//   Report r = build_report("events.jsonl");
//   std::string text = render(r, Format::Text);
//
// Percentiles are nearest-rank values from the histogram, within LogHistogram::kRelativeError
// (0.4%) of exact; count/total/avg/min/max are exact.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/event_log.h"

namespace pacer::analysis {

// Distribution of durations (ns).
struct Dist {
  int64_t count = 0;
  int64_t total_ns = 0;
  int64_t min_ns = 0, max_ns = 0;
  double p50_ns = 0, p95_ns = 0, p99_ns = 0;
  double mean_ns() const noexcept {
    return count ? static_cast<double>(total_ns) / static_cast<double>(count) : 0.0;
  }
};

// What the CPU did during a group of ops. Absent when no worker entry measured it.
struct CpuMetrics {
  std::optional<double> freq_mean_mhz;  // worker-time-weighted effective frequency
  std::optional<double> freq_min_mhz;   // lowest worker sample
  std::optional<double> ipc;            // sum(instructions) / sum(cycles)
  int64_t weight_bytes = 0;             // weights streamed (matmuls, embed)
  int64_t kv_bytes = 0;                 // KV cache read (attention)
  std::optional<double> gbs;  // (weight_bytes + kv_bytes) / time of the ops that streamed them
  std::optional<double> roofline_pct;  // gbs / header bandwidth_gbs
  // The same bytes / the longest worker slice of each op that streamed them: the kernels' own
  // rate, without the dispatch, the join and the recorder's brackets around the slices (~2 us an
  // op, 5-7 % of a 40 us GEMV), and that / bandwidth_gbs. Absent where no op has workers.
  std::optional<double> slice_gbs, slice_roofline_pct;
  std::optional<double> offcpu_share;  // sum(runq) / sum(worker wall time)
  // Share of op time not covered by the op's longest worker slice: dispatch, join and workers
  // that started late (a worker thread waiting for a CPU shows here, not in runq).
  std::optional<double> wait_share;
  int64_t wait_ns = 0;
  // Share of the worker time inside ops run by two or more workers that a worker spent done and
  // waiting for the op's slowest one: sum over workers of (longest slice - own slice) / (workers x
  // longest slice): uneven worker speed (a noisy host, SMT siblings, hybrid cores, a core at a
  // lower clock) that work stealing, when on, did not absorb.
  std::optional<double> imbalance_share;
  int64_t imbalance_ns = 0;
  // Share of the op time that is the recorder's own counter reads, at most: ops x the header's
  // bracket cost / op time (nullopt: the log does not say what a bracket costs). Near 1, the
  // op's recorded time is mostly the recorder (tiny ops, many threads); its real cost is smaller.
  std::optional<double> recording_share;
  int64_t migrations = 0;  // worker chunks that ended on another CPU
};

// Components ops are aggregated into (the reference's "aggregated by component").
enum class Component {
  Attention,
  Ffn,
  Norms,
  Embedding,
  OutputProjection,
  Sampling,
  Tokenizer,
  Other
};
inline constexpr int kComponentCount = 8;
std::string_view component_name(Component c) noexcept;
Component component_of(std::string_view op_name) noexcept;

struct OpRow {
  Phase phase = Phase::Other;  // Phase::Other in rows that span phases (by_op)
  std::string name;            // op name; "" for phase / block rows
  int layer = -1;              // -1 outside blocks and in rows that span layers
  Component component = Component::Other;
  Dist dist;
  CpuMetrics cpu;
  double share = 0;  // of all op time (by_op, by_phase) or of the phase's op time
};

// A block's total op time per step, per phase (the reference's block_N_total).
struct BlockRow {
  Phase phase = Phase::Decode;
  int layer = 0;
  Dist per_step;     // one value per step: that block's summed op time
  double share = 0;  // of the phase's op time
};

struct ComponentRow {
  Phase phase = Phase::Decode;
  Component component = Component::Other;
  Dist per_step;  // one value per step: that component's summed op time
  int64_t events = 0;
  double share = 0;  // of the phase's op time
};

// Matmul shapes (the reference's "matmul shape summary").
struct ShapeRow {
  std::string name, wtype;
  int64_t rows = 0, cols = 0, tokens = 0;
  Dist dist;
  CpuMetrics cpu;
};

struct StepRow {
  int64_t step = 0;
  Phase phase = Phase::Decode;
  int64_t start_ns = 0;        // from the first timestamp of the run
  int64_t dur_ns = 0;          // t1 - t0 of the step line
  int64_t op_ns = 0;           // sum of op durations inside the step (sampling included)
  int64_t sample_ns = 0;       // sampling ops inside the step
  int64_t other_phase_ns = 0;  // ops inside the step of another phase (sampling, detokenize)
  int64_t tokens = 1;
  std::optional<double> freq_mhz;  // op-time-weighted worker frequency, else the step's `freq`
  std::optional<int64_t> runq_ns;
  std::optional<int64_t> steal_ns;      // VM steal over all CPUs during the step (`steal_ms`)
  std::optional<int64_t> throttled_ns;  // CPU quota throttling (`cgroup.throttled_ns`)
  std::optional<double> tok_s;
  // The step's longest op of its own phase (empty: none recorded): a step slowed by one long
  // pause (the host took the vCPUs) shows here, one slowed everywhere (bandwidth taken by other
  // work) does not.
  std::string longest_op;
  int64_t longest_op_ns = 0;
  int64_t gap_ns() const noexcept { return dur_ns > op_ns ? dur_ns - op_ns : 0; }
};

struct WorkerRow {
  int w = 0;
  std::vector<int> cpus;  // CPUs it ran on
  int64_t chunks = 0;
  int64_t busy_ns = 0;
  CpuMetrics cpu;
};

struct EventTypeRow {
  std::string type;
  int64_t count = 0;
  std::optional<Dist> dist;  // timed records (op, step)
};

struct PhaseRow {
  std::string name;  // tokenization, prefill, decode, sampling, detokenization
  int64_t total_ns = 0;
  int64_t count = 0;   // steps or ops
  double share = 0;    // of the sum of the rows
  std::string source;  // where the number came from (ops, steps, footer)
};

struct Throughput {
  std::optional<double> ttft_ms, prefill_tok_s, decode_tok_s, load_ms, wall_ms;
  std::optional<int64_t> peak_rss_kb;
  int64_t prefill_tokens = 0, decode_tokens = 0;
  std::string ttft_source;  // "footer" or "steps"
  // The KV-cache bytes the decode steps' attention read, per step (0: none recorded, e.g. logs
  // written before ops carried kv_bytes).
  double decode_kv_bytes_per_token = 0;
  // The decode steps' attention fp32 flops per step (0: none recorded: a Q8_0 cache, or logs
  // written before ops carried attention_flops) and the header's measured multiply-add rate.
  double decode_attention_flops_per_token = 0;
  std::optional<double> fma_gflops;
  // The roofline of decode, as `pacer bench` holds a tg row (eventlog/roofline.h): the header's
  // bandwidth_gbs over matmul_bytes_per_token, then attention at the slower of
  // decode_kv_bytes_per_token at that bandwidth and its flops at fma_gflops.
  std::optional<double> decode_roofline_tok_s;
  // Set only where the attention's flops bind: the bandwidth-only ceiling (bandwidth_gbs /
  // (matmul + KV bytes)), for the run against it.
  std::optional<double> decode_bandwidth_roofline_tok_s;
  // Footer values the computed ones are checked against (shown when they differ by > 1%).
  std::optional<double> footer_prefill_tok_s, footer_decode_tok_s;
};

enum class BottleneckKind {
  MemoryBound,
  ComputeBound,
  FrequencyLimited,
  OffCpu,
  OverheadBound,
  LoadImbalanced,
  Disturbed,  // some steps far slower than the typical one, at a normal clock
  Undetermined
};
std::string_view bottleneck_name(BottleneckKind k) noexcept;

struct Finding {
  BottleneckKind kind = BottleneckKind::Undetermined;
  std::string subject;   // "decode", "decode :: ffn_gate_up"
  std::string evidence;  // numbers, in words
  std::vector<std::string> suggestions;
};

struct Bottleneck {
  std::string dominant_phase;
  double dominant_phase_share = 0;
  int64_t dominant_phase_ns = 0;
  std::string dominant_op;  // in the dominant phase (or decode)
  Phase dominant_op_phase = Phase::Decode;
  double dominant_op_share = 0;  // of that phase's op time
  BottleneckKind verdict = BottleneckKind::Undetermined;
  std::vector<Finding> findings;   // the verdict's first, then the others that apply
  std::vector<std::string> notes;  // what could not be judged and why
};

// Thresholds of the bottleneck classification (the report's legend prints them).
struct BottleneckThresholds {
  double memory_bound_roofline_pct = 60;  // GB/s at or above this % of the roofline
  double frequency_ratio = 0.85;          // mean frequency below this fraction of the reference
  double offcpu_share = 0.10;             // runq share of worker time above this
  double overhead_share = 0.15;           // step time not covered by ops above this
  double imbalance_share = 0.10;          // worker time waiting for an op's slowest worker
  double low_ipc = 1.0;                   // below: stalls dominate (when IPC is measured)
  double slow_step_ratio = 1.5;           // a decode step over this x its 15 neighbours' median
  double disturbed_share = 0.05;          // such steps' time above that median, of decode time
};

struct Report {
  std::string source;  // log path
  ReadSummary read;
  Header header;
  std::optional<Footer> footer;
  std::vector<BenchEvent> bench;

  std::vector<EventTypeRow> event_types;
  std::vector<OpRow> by_phase;     // parent (phase) totals
  std::vector<OpRow> by_phase_op;  // phase :: op
  std::vector<OpRow> by_layer_op;  // phase :: block_N :: op (every distinct key)
  std::vector<OpRow> by_op;        // op across phases
  std::vector<BlockRow> blocks;
  std::vector<ComponentRow> components;
  std::vector<ShapeRow> shapes;
  std::vector<PhaseRow> phases;
  Throughput throughput;
  std::vector<StepRow> steps;
  Dist prefill_steps, decode_steps;
  std::vector<WorkerRow> workers;
  CpuMetrics decode_cpu;                     // all decode ops together
  std::optional<double> reference_freq_mhz;  // the run's max seen / nominal
  std::string reference_freq_source;
  Bottleneck bottleneck;
  int64_t incomplete_steps = 0;  // ops of a step whose step line never came
  BottleneckThresholds thresholds;
};

// Reads the log (LogError on fatal problems) and computes the report.
Report build_report(const std::string& path, const BottleneckThresholds& thresholds = {});
Report build_report_from_text(std::string_view text, const std::string& name,
                              const BottleneckThresholds& thresholds = {});

enum class Format { Text, Markdown, Json, Html };
Format parse_format(std::string_view s);  // throws std::invalid_argument

struct RenderOptions {
  int top = 25;  // rows per table in text/markdown (0: all); JSON and HTML always have all
};
std::string render(const Report& r, Format f, const RenderOptions& opts = {});
std::string render_text(const Report& r, const RenderOptions& opts = {});
std::string render_markdown(const Report& r, const RenderOptions& opts = {});
std::string render_json(const Report& r);
std::string render_html(const Report& r);

}  // namespace pacer::analysis
