#pragma once
// `pacer bench`: llama-bench style prompt-processing (pp) and text-generation (tg) tests over every
// combination of prompt sizes, generation lengths, thread counts and pin policies, with the
// numbers a performance engineer needs to trust a row: mean ± sd tok/s over repetitions, the
// coefficient of variation, the effective frequency seen on every worker during the reps (and its
// drift), and for tg the share of the memory-bandwidth roofline (bandwidth / bytes per token).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ops/kernel_set.h"
#include "ops/types.h"
#include "runtime/model.h"
#include "runtime/numa.h"
#include "runtime/topology.h"

namespace pacer::runtime {

struct BenchResult;
struct BenchRow;

struct BenchOptions {
  std::vector<int64_t> n_prompt = {512};  // one pp test per entry (0 = none)
  std::vector<int64_t> n_gen = {128};     // one tg test per entry (0 = none)
  // Every test runs after a context of each depth (llama-bench's -d/--n-depth): that many random
  // tokens are prefilled first, untimed, so pp/tg measure the attention over a long KV cache.
  std::vector<int64_t> n_depth = {0};
  // pp+tg tests (llama-bench's -pg): process a prompt of `first` tokens, then generate `second`;
  // tok/s = (first + second) / the time of both.
  std::vector<std::pair<int64_t, int64_t>> n_pg;
  int64_t n_batch = 0;  // prompt tokens per prefill step (llama-bench's -b/-ub); 0: max(512, pp)
  double delay_s = 0;   // pause before every row after the first (llama-bench's --delay)
  std::vector<int> threads = {-1};  // -1: one per allowed physical core
  std::vector<PinSpec> pins = {PinSpec{}};
  // --numa (runtime/numa.h): not none = every row's workers come from plan_numa for its thread
  // count (from the CPU the bench started on) and its memory follows them; `pins` is then
  // ignored and rows say pin "numa:<policy>" (their CPUs in `cpus`).
  NumaPolicy numa = NumaPolicy::None;
  int reps = 5;
  bool warmup = true;             // one untimed run of each test first
  double cv_flag = 0.05;          // flag rows whose CV exceeds this
  double freq_drift_flag = 0.05;  // flag rows whose frequency range / mean exceeds this
  std::string events_dir;         // non-empty: record the last rep of every row there
  ops::WeightType kv_type = ops::WeightType::F16;
  uint64_t seed = 1234;  // random tokens for pp/tg (llama-bench feeds random tokens)
  bool roofline = true;  // measure read bandwidth per thread count (and around every tg row)
  double bandwidth_drift_flag = 0.10;  // flag tg rows whose before/after bandwidths differ more
  size_t bandwidth_bytes = size_t{1} << 30;
  // Progress: (rows done, rows total, current row label); called on the calling thread.
  std::function<void(int, int, const std::string&)> progress;
  // Called with each row as soon as it is finished (the result so far holds the model facts and
  // the rows before it), so a caller can stream rows instead of waiting for the table.
  std::function<void(const BenchResult&, const BenchRow&)> on_row;
  // Polled between repetitions: true stops the run; the finished rows are kept (interrupted).
  std::function<bool()> stop;
};

struct BenchRow {
  std::string test;  // "pp512" | "tg128" | "pp512+tg128" | "tg128 @ d4096"
  int64_t n_prompt = 0, n_gen = 0;
  int64_t n_depth = 0;  // tokens already in the cache when the test starts
  int64_t n_batch = 0;  // prompt tokens per prefill step
  int threads = 0;
  std::string pin;            // PinSpec::to_string()
  std::vector<int> cpus;      // pinned CPUs (empty when not pinned)
  std::vector<double> tok_s;  // one per rep
  double mean = 0, sd = 0, cv = 0;
  double freq_mean_mhz = 0, freq_min_mhz = 0, freq_max_mhz = 0;  // over reps and workers
  double bandwidth_gbs = 0;  // measured read bandwidth at this thread count (0: not measured)
  // tg rows: the best read loop of the placement measured again just before the row's timed reps
  // and just after them; bandwidth_gbs is their mean (0: not measured)
  double bandwidth_before_gbs = 0, bandwidth_after_gbs = 0;
  // tg rows of 2+ timed reps: the same loop measured again between each two of them, so that
  // every rep has a probe just before and just after it (before, these, after).
  std::vector<double> bandwidth_between_gbs;
  // tg rows with a ceiling: each timed rep's rate against the ceiling of the mean of the probes
  // on either side of it (pair_reps_with_probes), and their median (0: not measured). On a host
  // whose bandwidth moves within a row, closer to the truth than one ceiling for the whole row.
  std::vector<double> rep_roofline_pct;
  double roofline_rep_p50_pct = 0;
  // tg: the KV-cache bytes attention reads per timed token (kv_read_bytes_per_token) and the
  // fp32 flops it does on them (attention_flops_per_token; 0 for a Q8_0 cache), the fp32
  // multiply-add rate of the row's threads on its CPUs (ops::probe_fma_rate, once per placement)
  // and how it was found. The ceiling is eventlog::decode_ceiling_tok_s of these: the matmul
  // weights at the bandwidth, then attention at the slower of its bytes at the bandwidth and its
  // flops at that rate; bandwidth_ceiling_tok_s is bandwidth / (matmul + KV bytes) alone (the same
  // where the attention is not bound by its flops: short contexts, a Q8_0 cache).
  int64_t kv_bytes_per_token = 0;
  int64_t attention_flops_per_token = 0;
  double fma_gflops = 0;
  std::string fma_method;
  double ceiling_tok_s = 0;
  double bandwidth_ceiling_tok_s = 0;
  double roofline_pct = 0;  // tg: mean / ceiling
  // tg rows: seconds of every decode token of the timed reps not recorded (--events-out records
  // the last one), their median's rate, and that rate / ceiling. Where the mean falls well below
  // the median token's rate, a few tokens ran far slower than the rest (host steal, other load):
  // the kernels' speed is the median's, the run's the mean's.
  std::vector<double> token_s;
  double tok_s_p50 = 0;          // 0: no per-token times
  double roofline_p50_pct = 0;   // 0: no ceiling or no per-token times
  std::string bandwidth_method;  // how the bandwidth was found (ops::BandwidthProbe::method)
  // tg rows with a roofline: the matmul kernels' own ceiling with their weights in cache
  // (runtime/kernel_ceiling.h: measured on the row's own threads and CPUs, once per placement),
  // mean / it, and how it was measured. Below the DRAM ceiling, the row is bound by the kernels'
  // arithmetic on this CPU, not by memory.
  double kernel_ceiling_tok_s = 0;
  double kernel_pct = 0;
  std::string kernel_ceiling_method;
  bool roofline_applies = true;  // false: weights fit the LLC (no DRAM streaming to bound)
  // tg rows with a roofline: the cache the LLC rule held the weights against (flag_roofline):
  // the working set the row's threads were measured to keep cached (ops::measure_cache_reach,
  // from 4 MiB up; below that the topology's L3 stands; the topology's L3 alone where the probe
  // buffer is too small to measure against), and how it was found, next to what the topology
  // reports.
  int64_t llc_bytes = 0;
  std::string llc_method;
  bool idle_prefetch = false;      // the row's workers prefetched the next decode matmul
  std::vector<std::string> flags;  // reasons not to trust the row
  std::string events_path;
  std::string test_time;  // UTC start of the row, ISO 8601 (llama-bench's test_time)
};

// The KV-cache bytes attention reads per decode token, averaged over `n` tokens at positions
// first_pos .. first_pos + n - 1: K and V of every key each layer's query sees (all before it, or
// the sliding window's). At depth these are a real share of a token's bytes (TinyLlama F16 KV at
// depth 4096: 92 MB against 607 MB of Q4_0 weights), so a tg row's roofline counts them.
int64_t kv_read_bytes_per_token(const loader::ModelConfig& cfg, ops::WeightType kv_type,
                                int64_t first_pos, int64_t n);
// The fp32 flops of attention per decode token over the same keys: per key and query head, a
// head_dim dot product with K and a head_dim multiply-add of V (4 x head_dim flops; the softmax's
// exp and scaling are left out, so the ceiling below stays an upper bound). 0 for a Q8_0 cache:
// its scores are integer dot products (vpmaddubsw/vpdpbusd), not bound by the fp32 FMA rate.
int64_t attention_flops_per_token(const loader::ModelConfig& cfg, ops::WeightType kv_type,
                                  int64_t first_pos, int64_t n);

struct BenchResult {
  std::string model_path, model_name, arch;
  std::string type;          // the type of most matmul bytes (ggml's name: "q4_K")
  std::string file_type;     // llama.cpp's name for general.file_type ("Q4_K - Medium"), else type
  std::string size_class;    // llama.cpp's size class of the shape ("1B", "?B": llama_size_class)
  int64_t model_bytes = 0;   // the file's size
  int64_t tensor_bytes = 0;  // its tensors' bytes (llama-bench's model_size)
  int64_t params = 0, matmul_bytes_per_token = 0;
  int64_t repacked_matrices = 0;  // matmul weights repacked at load (Model::repacked_matrices)
  bool bf16_dot = false;          // BF16 prefill on vdpbf16ps (Model::bf16_dot_prefill)
  bool attention_isa_avx2 = false;  // the attention kernels are the AVX2 tier's
  bool attention_one_pass = false;  // and take all of a KV head's query heads a pass
  int gemv_streams = 1;           // of the quantized x16 GEMVs (ops::X16Kernels::gemv_streams)
  std::vector<ops::X16GemvChoice> x16_gemv;  // every x16 GEMV's plan (KernelSet::x16_gemv_choices)
  // The types whose GEMV prefetches twice as far in rows of one thread (KernelSet::for_workers).
  std::vector<ops::WeightType> x16_prefetch_far_one_worker;
  std::string cpu_model, frequency_source;
  std::string cpu_signature;  // "family 23 model 1 stepping 2" (/proc/cpuinfo); may be empty
  // How the tg rows' kernel ceilings were measured (runtime/kernel_ceiling.h): the rows'
  // distinct BenchRow::kernel_ceiling_method, " | " between them; empty: not measured.
  std::string kernel_ceiling_method;
  ops::WeightType kv_type = ops::WeightType::F16;
  int64_t n_batch_opt = 0;  // BenchOptions::n_batch (0: the default, llama-bench's -b 2048)
  std::vector<BenchRow> rows;
  bool interrupted = false;  // BenchOptions::stop ended the run early
};

BenchResult run_bench(const Model& model, const BenchOptions& opts);

// Cost of full recording on decode: for every tg test, thread count and pin policy, `pairs`
// pairs of generate() runs with recording off and on (fresh session each, order alternating
// off-on / on-off so a drift of the machine cancels), decode tok/s of each. The recorded runs
// write their logs to `events_path` (overwritten by each run; the caller removes it).
struct OverheadRow {
  std::string test;  // "tg64"
  int threads = 0;
  std::string pin;
  std::vector<double> off, on;  // decode tok/s per run
  double off_median = 0, on_median = 0;
  double ratio = 0;  // on_median / off_median
  // on/off of each adjacent pair, and their median: robust to a machine whose speed drifts
  // during the measurement (a shared VM), which moves both runs of a pair together.
  std::vector<double> pair_ratios;
  double pair_ratio_median = 0;
};
std::vector<OverheadRow> measure_recording_overhead(const Model& model, const BenchOptions& opts,
                                                    int pairs, const std::string& events_path);
std::string render_overhead_markdown(const std::vector<OverheadRow>& rows);

// Fills rep_roofline_pct and roofline_rep_p50_pct from tok_s and the probes around each rep
// (bandwidth_before_gbs, bandwidth_between_gbs, bandwidth_after_gbs): rep i against
// eventlog::decode_ceiling_tok_s((probe i + probe i+1) / 2, weight_bytes, the row's
// kv_bytes_per_token, attention_flops_per_token and fma_gflops). Leaves them empty unless there is
// one probe more than reps, all of them positive, and weight_bytes > 0.
void pair_reps_with_probes(BenchRow& row, int64_t weight_bytes);
// mean, sample sd and CV of a set of rates (sd = 0 for fewer than two values).
void summarize_rates(BenchRow& row);  // mean, sd, cv of tok_s; tok_s_p50 of token_s
// Adds a flag when the mean rate of the tokens in token_s is over 5 % below the median token's
// (tok_s_p50).
void flag_slow_tokens(BenchRow& row);
// A tg row's roofline against where its weights live: weight_bytes (the matmul bytes one token
// reads) that fit the last-level cache (llc_bytes; 0: unknown) are not streamed from DRAM, so
// roofline_applies turns false and a flag says why; weights within 2x the LLC are streamed but
// part of them can stay cached between tokens (an adaptive replacement policy keeps some of a
// working set larger than the cache), so the % stands with a flag that it can read high; above
// that a % over 100 flags the bandwidth probe as having under-read. Needs roofline_pct.
void flag_roofline(BenchRow& row, int64_t weight_bytes, int64_t llc_bytes);

std::string render_bench_markdown(const BenchResult& r);
std::string render_bench_csv(const BenchResult& r);  // llama_bench_csv_header + a row per row
// The same table in pieces, for streaming: header (model line and column titles), one line per
// row, footer (legend, flags note, bandwidth method).
std::string render_bench_markdown_header(const BenchResult& r);
std::string render_bench_markdown_row(const BenchResult& r, const BenchRow& row);
std::string render_bench_markdown_footer(const BenchResult& r);
nlohmann::json bench_json(const BenchResult& r);       // {"model":{...},"rows":[...]}
std::string render_bench_jsonl(const BenchResult& r);  // one `bench` event per row
// One row as llama-bench's JSON/CSV/SQL printers write it (its field names and types: build_commit,
// cpu_info, model_type, model_size, model_n_params, n_threads, n_prompt, n_gen, n_depth, type_k,
// test_time, avg_ns, stddev_ns, avg_ts, stddev_ts, samples_ns, samples_ts, ...), plus pacer's own
// fields prefixed "pacer_" (pin, cv, clock, roofline, flags). llama.cpp's comparison scripts read
// these rows as they read llama-bench's.
nlohmann::json llama_bench_row(const BenchResult& r, const BenchRow& row);
// The CSV header line and a row line of the same fields (arrays joined by ';').
std::string llama_bench_csv_header();
std::string llama_bench_csv_row(const BenchResult& r, const BenchRow& row);

}  // namespace pacer::runtime
