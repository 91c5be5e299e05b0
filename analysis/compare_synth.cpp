#include "analysis/compare_synth.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace pacer::analysis::synth {
namespace {

using Json = nlohmann::ordered_json;

// The combined effect on one slice: effects multiply (scales) and add (times).
struct SliceEffect {
  double freq = 1, cpi = 1, instr = 1, runq_ns = 0, blocked_ns = 0;
};

SliceEffect effect_for(const RunSpec& spec, const std::string& op, int cpu, int step) {
  SliceEffect e;
  for (const Effect& fx : spec.effects) {
    const bool op_hit =
        fx.ops.empty() || std::find(fx.ops.begin(), fx.ops.end(), op) != fx.ops.end();
    const bool cpu_hit =
        fx.cpus.empty() || std::find(fx.cpus.begin(), fx.cpus.end(), cpu) != fx.cpus.end();
    const bool step_hit =
        fx.steps.empty() || std::find(fx.steps.begin(), fx.steps.end(), step) != fx.steps.end();
    if (!op_hit || !cpu_hit || !step_hit) continue;
    e.freq *= fx.freq_scale;
    e.cpi *= fx.cpi_scale;
    e.instr *= fx.instr_scale;
    e.runq_ns += fx.runq_ns;
    e.blocked_ns += fx.blocked_ns;
  }
  return e;
}

Json header_json(const RunSpec& spec) {
  Json counters_live = Json::array({"task_clock", "context_switches", "cpu_migrations"});
  Json unavailable = Json::array();
  if (spec.hardware_counters) {
    for (const char* ev : {"instructions", "cycles", "llc_misses"}) counters_live.push_back(ev);
  } else {
    for (const char* ev : {"instructions", "cycles", "llc_misses"})
      unavailable.push_back({{"event", ev}, {"reason", "synthetic run without a PMU"}});
  }
  Json freq_before = Json::array();
  for (size_t i = 0; i < spec.cpus.size(); ++i) freq_before.push_back(spec.freq_mhz);
  return Json{
      {"type", "header"},
      {"schema", 1},
      {"pacer_version", "0.1.0"},
      {"git_sha", "synthetic"},
      {"time_utc", "2026-01-01T00:00:00Z"},
      {"command", "run"},
      {"argv", Json::array({"pacer", "run", "-m", "synthetic.gguf"})},
      {"model",
       {{"path", "synthetic.gguf"},
        {"name", "synthetic"},
        {"arch", spec.arch},
        {"type", spec.type},
        {"params", 1000000},
        {"bytes", 1100000},
        {"matmul_bytes_per_token", 1000000},
        {"n_layers", spec.n_layers},
        {"n_embd", spec.n_embd},
        {"n_heads", spec.n_heads},
        {"n_kv_heads", spec.n_kv_heads},
        {"n_ff", spec.n_ff},
        {"n_vocab", spec.n_vocab}}},
      {"run",
       {{"threads", static_cast<int>(spec.cpus.size())},
        {"pin", spec.pin},
        {"cpus", spec.cpus},
        {"ctx", 256},
        {"n_prompt", spec.prompt_tokens},
        {"n_predict", spec.steps},
        {"seed", spec.seed},
        {"temperature", 0.0},
        {"isa", "avx2"},
        {"kv_type", "f16"},
        {"recording", "full"}}},
      {"host",
       {{"hostname", "synth"},
        {"cpu_model", spec.cpu_model},
        {"microcode", "0x1"},
        {"kernel", "6.1.0"},
        {"governor", nullptr},
        {"smt", false},
        {"virtualized", true},
        {"tsc_mhz", spec.nominal_mhz},
        {"topology",
         {{"packages", 1},
          {"numa_nodes", 1},
          {"cores", spec.cpus.size()},
          {"pus", spec.cpus.size()},
          {"l3_bytes", 32 << 20}}},
        {"allowed_cpus", spec.cpus}}},
      {"counters",
       {{"mode", spec.hardware_counters ? "hardware" : "software"},
        {"live", counters_live},
        {"unavailable", unavailable},
        {"read", "read()"}}},
      {"frequency", spec.frequency
                        ? Json{{"source", spec.hardware_counters ? "cycles" : "calibrated_loop"},
                               {"nominal_mhz", spec.nominal_mhz},
                               {"detail", "synthetic"}}
                        : Json{{"source", "none"}, {"nominal_mhz", spec.nominal_mhz}}},
      {"thermal", {{"throttle_counters", "absent"}, {"rapl", "absent"}}},
      {"bandwidth_gbs", nullptr},
      {"freq_before_mhz", freq_before},
      {"load_ms", 1.0}};
}

class Generator {
 public:
  explicit Generator(const RunSpec& spec)
      : spec_(spec), ops_(spec.ops.empty() ? default_ops() : spec.ops), rng_(spec.seed) {}

  std::string run() {
    out_ += header_json(spec_).dump() + "\n";
    now_ns_ = 1'000'000'000;
    emit_step(0, "prefill", spec_.prompt_tokens);
    double decode_ns = 0;
    for (int s = 1; s <= spec_.steps; ++s) decode_ns += emit_step(s, "decode", 1);
    if (spec_.footer) {
      Json freq_after = Json::array();
      for (size_t i = 0; i < spec_.cpus.size(); ++i) freq_after.push_back(spec_.freq_mhz);
      Json footer = {{"type", "footer"},
                     {"steps", spec_.steps + 1},
                     {"n_prompt", spec_.prompt_tokens},
                     {"n_generated", spec_.steps},
                     {"load_ms", 1.0},
                     {"ttft_ms", 1.0},
                     {"prefill_tok_s", 100.0},
                     {"decode_tok_s", decode_ns > 0 ? spec_.steps / (decode_ns * 1e-9) : 0.0},
                     {"wall_ms", static_cast<double>(now_ns_ - 1'000'000'000) * 1e-6},
                     {"peak_rss_kb", 10000},
                     {"freq_after_mhz", freq_after},
                     {"stop", "n_predict"}};
      out_ += footer.dump() + "\n";
    }
    return std::move(out_);
  }

 private:
  double noisy(double sd) { return sd > 0 ? std::exp(sd * normal_(rng_)) : 1.0; }

  struct WorkerAcc {
    double freq_weighted = 0, oncpu = 0;
  };

  // Emits the op lines and the step line of one step; returns the step's duration in ns.
  double emit_step(int step, const char* phase, int tokens) {
    const size_t n_workers = spec_.cpus.size();
    std::vector<WorkerAcc> acc(n_workers);
    double runq_total = 0, oncpu_total = 0;
    int64_t nvcsw = 0, nivcsw = 0;
    const int64_t step_t0 = now_ns_;
    int64_t cursor = step_t0 + static_cast<int64_t>(spec_.step_overhead_ns / 2);
    for (const OpSpec& op : ops_) {
      const int instances = op.per_layer ? spec_.n_layers : 1;
      for (int inst = 0; inst < instances; ++inst) {
        const size_t slices = op.parallel ? n_workers : 1;
        const int64_t op_t0 = cursor;
        const int64_t slice_t0 =
            op_t0 + static_cast<int64_t>(op.parallel ? spec_.fork_join_ns / 2 : 100);
        int64_t op_end = slice_t0;
        Json workers = Json::array();
        for (size_t w = 0; w < slices; ++w) {
          const int cpu = spec_.cpus[w];
          const SliceEffect fx = effect_for(spec_, op.name, cpu, step);
          const double instr = op.instructions * tokens * fx.instr / static_cast<double>(slices) *
                               noisy(spec_.noise);
          const double cycles = instr * op.cpi * fx.cpi * noisy(spec_.noise);
          const double mhz = spec_.freq_mhz * fx.freq * noisy(spec_.noise / 4);
          const auto oncpu = static_cast<int64_t>(std::llround(cycles / (mhz * 1e-3)));
          const auto runq = static_cast<int64_t>(std::llround(spec_.runq_base_ns + fx.runq_ns));
          const auto blocked = static_cast<int64_t>(std::llround(fx.blocked_ns));
          const int64_t t1 = slice_t0 + oncpu + runq + blocked;
          op_end = std::max(op_end, t1);
          Json wj = {{"w", w}, {"cpu", cpu}, {"cpu_end", cpu}, {"t0_ns", slice_t0}, {"t1_ns", t1}};
          if (spec_.frequency && spec_.slice_frequency) wj["freq_mhz"] = std::round(mhz * 10) / 10;
          if (spec_.sched) {
            wj["runq_ns"] = runq;
            wj["oncpu_ns"] = oncpu;
          }
          Json counters = {{"task_clock_ns", oncpu},
                           {"context_switches", (runq > 0 ? 1 : 0) + (blocked > 0 ? 1 : 0)}};
          if (spec_.hardware_counters) {
            counters["instructions"] = std::llround(instr);
            counters["cycles"] = std::llround(cycles);
            counters["llc_misses"] = std::llround(instr * 1e-3);
          }
          wj["counters"] = counters;
          workers.push_back(std::move(wj));
          acc[w].freq_weighted += mhz * static_cast<double>(oncpu);
          acc[w].oncpu += static_cast<double>(oncpu);
          runq_total += static_cast<double>(runq);
          oncpu_total += static_cast<double>(oncpu);
          nivcsw += runq > 0 ? 1 : 0;
          nvcsw += blocked > 0 ? 1 : 0;
        }
        const int64_t op_t1 =
            op_end + static_cast<int64_t>(op.parallel ? spec_.fork_join_ns / 2 : 100);
        Json oj = {{"type", "op"},
                   {"step", step},
                   {"phase", op.phase == "decode" ? std::string(phase) : op.phase},
                   {"name", op.name},
                   {"layer", op.per_layer ? inst : -1},
                   {"kind", op.kind}};
        if (op.kind == "matmul") {
          oj["wtype"] = spec_.type;
          oj["rows"] = 256;
          oj["cols"] = spec_.n_embd;
          oj["tokens"] = tokens;
          oj["weight_bytes"] = static_cast<int64_t>(op.instructions);
        }
        oj["t0_ns"] = op_t0;
        oj["t1_ns"] = op_t1;
        oj["workers"] = std::move(workers);
        out_ += oj.dump() + "\n";
        cursor = op_t1 + 150;  // glue between ops: counted in the step, outside every op
      }
    }
    const int64_t step_t1 = cursor + static_cast<int64_t>(spec_.step_overhead_ns / 2);
    const double step_ns = static_cast<double>(step_t1 - step_t0);
    Json sj = {{"type", "step"}, {"step", step}, {"phase", phase}, {"n_past", step + tokens}};
    if (std::string(phase) == "prefill") {
      sj["n_tokens"] = tokens;
    } else {
      sj["token"] = 100 + step;
      sj["piece"] = fmt::format(" t{}", step);
    }
    sj["t0_ns"] = step_t0;
    sj["t1_ns"] = step_t1;
    sj["step_ms"] = step_ns * 1e-6;
    decode_ns_total_ += std::string(phase) == "decode" ? step_ns : 0;
    sj["tok_s"] = decode_ns_total_ > 0 ? step / (decode_ns_total_ * 1e-9) : 0.0;
    if (spec_.frequency) {
      Json freq = Json::array();
      for (size_t w = 0; w < n_workers; ++w) {
        const double mhz = acc[w].oncpu > 0 ? acc[w].freq_weighted / acc[w].oncpu : spec_.freq_mhz;
        freq.push_back({{"w", w}, {"cpu", spec_.cpus[w]}, {"mhz", std::round(mhz * 10) / 10}});
      }
      sj["freq"] = freq;
    }
    if (spec_.sched) {
      sj["sched"] = {{"runq_ns", std::llround(runq_total)},
                     {"oncpu_ns", std::llround(oncpu_total)},
                     {"nvcsw", nvcsw},
                     {"nivcsw", nivcsw}};
    }
    sj["process_cpu_usage"] = oncpu_total / step_ns;
    sj["host_cpu_usage"] = oncpu_total / step_ns + spec_.host_extra_cpu;
    out_ += sj.dump() + "\n";
    now_ns_ = step_t1 + 1000;
    return step_ns;
  }

  const RunSpec& spec_;
  std::vector<OpSpec> ops_;
  std::mt19937_64 rng_;
  std::normal_distribution<double> normal_{0.0, 1.0};
  std::string out_;
  int64_t now_ns_ = 0;
  double decode_ns_total_ = 0;
};

}  // namespace

std::vector<OpSpec> default_ops() {
  // Instruction counts ~ weight bytes of a tiny model (n_embd 256, n_ff 768) at ~1 instr/byte;
  // CPI reflects how memory-bound each op is.
  return {
      {.name = "attn_norm", .kind = "norm", .instructions = 4e3, .cpi = 0.6},
      {.name = "attn_qkv", .kind = "matmul", .instructions = 1.2e5, .cpi = 0.8},
      {.name = "rope", .kind = "elementwise", .instructions = 3e3, .cpi = 0.7, .parallel = false},
      {.name = "attention", .kind = "attention", .instructions = 3e4, .cpi = 0.9},
      {.name = "attn_out", .kind = "matmul", .instructions = 6.5e4, .cpi = 0.8},
      {.name = "ffn_norm", .kind = "norm", .instructions = 4e3, .cpi = 0.6},
      {.name = "ffn_gate_up", .kind = "matmul", .instructions = 4e5, .cpi = 0.8},
      {.name = "ffn_act", .kind = "elementwise", .instructions = 8e3, .cpi = 0.5},
      {.name = "ffn_down", .kind = "matmul", .instructions = 2e5, .cpi = 0.8},
      {.name = "output_norm", .kind = "norm", .per_layer = false, .instructions = 4e3, .cpi = 0.6},
      {.name = "output", .kind = "matmul", .per_layer = false, .instructions = 1.1e6, .cpi = 0.9},
      {.name = "sample",
       .kind = "sample",
       .per_layer = false,
       .instructions = 2e4,
       .cpi = 0.6,
       .parallel = false,
       .phase = "sample"},
  };
}

std::string event_log(const RunSpec& spec) {
  if (spec.cpus.empty()) throw std::invalid_argument("synth::RunSpec: cpus must not be empty");
  Generator gen(spec);
  return gen.run();
}

void write_event_log(const std::string& path, const RunSpec& spec) {
  const std::string text = event_log(spec);
  std::ofstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(fmt::format("{}: cannot open for writing", path));
  f << text;
  if (!f) throw std::runtime_error(fmt::format("{}: write failed", path));
}

}  // namespace pacer::analysis::synth
