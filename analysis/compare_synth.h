#pragma once
// Synthetic event logs (schema v1, docs/event-log.md) with known, injected causes, for testing
// `pacer compare` against ground truth: per-op instructions, CPI, frequency, run-queue wait and
// blocked time are chosen, and every time in the log is derived from them exactly as a real run
// would relate them (on-CPU = instructions x CPI / frequency; a worker's slice = on-CPU + run-queue
// wait + blocked; a parallel op lasts as long as its slowest worker plus fork/join).
//
//   synth::RunSpec normal;                                  // tiny llama-like decode, 2 workers
//   synth::RunSpec slow = normal;
//   slow.effects.push_back({.ops = {"ffn_down"}, .freq_scale = 0.7});
//   std::string log = synth::event_log(slow);
#include <cstdint>
#include <string>
#include <vector>

namespace pacer::analysis::synth {

struct OpSpec {
  std::string name = {};         // docs/event-log.md op name
  std::string kind = {};         // matmul | attention | norm | elementwise | embed | sample | other
  bool per_layer = true;         // one instance per layer (layer = 0..n_layers-1), else one (-1)
  double instructions = 1e6;     // per instance, all workers together
  double cpi = 0.5;              // cycles per instruction
  bool parallel = true;          // split evenly across the workers; else runs on worker 0 alone
  std::string phase = "decode";  // the op line's phase (sampling ops say "sample")
};

// An injected cause. Applies to the slices of the listed ops (all when empty) on the listed CPUs
// (all when empty).
struct Effect {
  std::vector<std::string> ops = {};
  std::vector<int> cpus = {};
  double freq_scale = 1.0;   // multiplies the clock
  double cpi_scale = 1.0;    // multiplies cycles per instruction (IPC loss > 1)
  double instr_scale = 1.0;  // multiplies instructions
  double runq_ns = 0;        // runnable-but-waiting time added to each slice
  double blocked_ns = 0;     // off-CPU, not runnable, added to each slice
  std::vector<int> steps = {};  // the steps (numbers as logged) it applies to (all when empty)
};

struct RunSpec {
  int steps = 24;                  // decode steps (cycles)
  int prompt_tokens = 4;           // one prefill step first (not a cycle)
  std::vector<int> cpus = {0, 1};  // one worker per CPU, pinned
  double freq_mhz = 3000;
  double nominal_mhz = 3000;
  double noise = 0.01;      // relative sd of the log-normal noise on instructions, CPI and clock
  double runq_base_ns = 0;  // run-queue wait in every slice, before effects
  uint64_t seed = 1;
  bool hardware_counters = true;  // instructions, cycles, llc_misses (else software events only)
  bool frequency = true;          // per-step freq (and per-slice freq_mhz, see below)
  bool slice_frequency = true;    // per-slice freq_mhz (false: the step's clock only)
  bool sched = true;              // per-slice runq_ns/oncpu_ns and per-step sched
  bool footer = true;
  double step_overhead_ns = 20000;  // time of a step outside its ops (sampling glue, bookkeeping)
  double fork_join_ns = 800;        // per parallel op: dispatch before, join after the slices
  double host_extra_cpu = 0;        // CPUs busy outside the process (co-runners), for host usage
  int n_layers = 4;
  std::vector<OpSpec> ops;  // empty: default_ops()
  std::vector<Effect> effects;
  // Header facts (compatibility checks compare these).
  std::string arch = "llama", type = "q8_0", cpu_model = "Synthetic CPU @ 3.00GHz", pin = "compact";
  int64_t n_embd = 256, n_heads = 8, n_kv_heads = 4, n_ff = 768, n_vocab = 4096;
};

// A small Llama-like decode step: per-layer norm/qkv/rope/attention/out/ffn ops, then the output
// matmul and sampling. Instruction counts are roughly proportional to each op's weight bytes.
std::vector<OpSpec> default_ops();

// The whole log as JSONL text (header, prefill step, decode steps, footer).
std::string event_log(const RunSpec& spec);
// Writes event_log(spec) to `path`; throws std::runtime_error naming the path on failure.
void write_event_log(const std::string& path, const RunSpec& spec);

}  // namespace pacer::analysis::synth
