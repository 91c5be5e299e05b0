#include "event_log_testlog.h"

#include <algorithm>
#include <cstdio>
#include <string_view>

namespace pacer::analysis::testlog {
namespace {

struct OpSpec {
  const char* name;
  const char* kind;
  int64_t rows;  // 0: not a matmul
  int64_t cols;
  double time_scale;  // duration relative to op_ns
};

// Per-layer ops of a Llama block, shapes of a 256-wide toy model.
constexpr OpSpec kLayerOps[] = {
    {"attn_norm", "norm", 0, 0, 0.2},          {"attn_qkv", "matmul", 384, 256, 1.5},
    {"rope", "elementwise", 0, 0, 0.2},        {"kv_store", "other", 0, 0, 0.1},
    {"attention", "attention", 0, 0, 1.0},     {"attn_out", "matmul", 256, 256, 1.0},
    {"residual", "elementwise", 0, 0, 0.1},    {"ffn_norm", "norm", 0, 0, 0.2},
    {"ffn_gate_up", "matmul", 1536, 256, 3.0}, {"ffn_act", "elementwise", 0, 0, 0.3},
    {"ffn_down", "matmul", 256, 768, 2.0},     {"residual", "elementwise", 0, 0, 0.1},
};

class Writer {
 public:
  Writer(std::ostream& out, const SyntheticRun& run) : out_(out), run_(run) {}

  int64_t now() const { return t_; }
  void advance(int64_t ns) { t_ += ns; }

  // Frequency and time scale of a step (the throttle episode is the middle fifth of decode).
  void set_step(int64_t step) {
    const bool throttled =
        run_.n_decode >= 5 && step > run_.n_decode * 2 / 5 && step <= run_.n_decode * 3 / 5;
    freq_ = run_.freq_mhz * (throttled ? run_.throttle : 1.0);
    slow_ = throttled ? 1.0 / run_.throttle : 1.0;
    disturbed_ = step > 0 && std::find(run_.disturbed_steps.begin(), run_.disturbed_steps.end(),
                                       step) != run_.disturbed_steps.end();
    if (disturbed_) slow_ *= run_.spread;
    if (step > 0) slow_ *= 1.0 + run_.growth * static_cast<double>(step);
  }

  // Deterministic noise in [-1, 1) (an LCG: the same log every time).
  double noise() {
    lcg_ = lcg_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(lcg_ >> 11) / static_cast<double>(1ull << 52) - 1.0;
  }

  void op(int64_t step, const char* phase, const OpSpec& spec, int layer, int64_t tokens) {
    const double scale = slow_ * (1.0 + run_.jitter * noise());
    const int64_t dur =
        static_cast<int64_t>(static_cast<double>(run_.op_ns) * spec.time_scale * scale) *
            (tokens > 1 ? 2 : 1) +
        (disturbed_ && layer == 0 && std::string_view(spec.name) == "ffn_gate_up" ? run_.pause_ns
                                                                                  : 0);
    const int64_t t0 = t_;
    const int64_t t1 = t0 + dur;
    std::string line;
    line.reserve(512);
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "{\"kind\":\"%s\",\"layer\":%d,\"name\":\"%s\",\"phase\":\"%s\",", spec.kind,
                  layer, spec.name, phase);
    line += buf;
    if (spec.rows > 0) {
      std::snprintf(buf, sizeof buf, "\"rows\":%lld,\"cols\":%lld,", (long long)spec.rows,
                    (long long)spec.cols);
      line += buf;
    }
    std::snprintf(buf, sizeof buf, "\"step\":%lld,\"t0_ns\":%lld,\"t1_ns\":%lld,", (long long)step,
                  (long long)t0, (long long)t1);
    line += buf;
    if (spec.rows > 0) {
      std::snprintf(buf, sizeof buf, "\"tokens\":%lld,", (long long)tokens);
      line += buf;
    }
    line += "\"type\":\"op\",";
    if (spec.rows > 0) {
      // q8_0: 34 bytes per 32 weights.
      std::snprintf(buf, sizeof buf, "\"weight_bytes\":%lld,",
                    (long long)(spec.rows * spec.cols / 32 * 34));
      line += buf;
    }
    line += "\"workers\":[";
    const int n_workers =
        spec.rows > 0 || std::string_view(spec.kind) == "attention" ? run_.workers : 1;
    for (int w = 0; w < n_workers; ++w) {
      const int64_t wt0 = t0 + 5, wt1 = t1 - 5;
      const int64_t on = wt1 - wt0;
      if (w) line += ',';
      std::snprintf(buf, sizeof buf,
                    "{\"counters\":{%s\"task_clock_ns\":%lld},\"cpu\":%d,\"cpu_end\":%d,"
                    "\"freq_mhz\":%.1f,\"oncpu_ns\":%lld,\"runq_ns\":0,\"t0_ns\":%lld,"
                    "\"t1_ns\":%lld,\"w\":%d}",
                    run_.hw_counters ? "\"cycles\":2900,\"instructions\":5800," : "", (long long)on,
                    w, w, freq_, (long long)on, (long long)wt0, (long long)wt1, w);
      line += buf;
    }
    line += "]";
    if (spec.rows > 0) line += ",\"wtype\":\"q8_0\"";
    line += "}\n";
    out_ << line;
    t_ = t1 + run_.gap_ns;
    ++n_ops_;
  }

  void step(int64_t step, const char* phase, int64_t t0, int64_t n_tokens, int64_t n_past) {
    char buf[512];
    const double ms = static_cast<double>(t_ - t0) / 1e6;
    if (n_tokens > 1) {
      std::snprintf(
          buf, sizeof buf,
          "{\"freq\":[{\"cpu\":0,\"mhz\":%.1f,\"w\":0}],\"n_past\":%lld,\"n_tokens\":%lld,"
          "\"phase\":\"%s\",\"sched\":{\"nivcsw\":0,\"nvcsw\":0,\"oncpu_ns\":%lld,"
          "\"runq_ns\":0},\"step\":%lld,\"step_ms\":%.6f,\"t0_ns\":%lld,\"t1_ns\":%lld,"
          "\"type\":\"step\"}\n",
          freq_, (long long)n_past, (long long)n_tokens, phase, (long long)(t_ - t0),
          (long long)step, ms, (long long)t0, (long long)t_);
    } else {
      // VM steal, only in runs that report it (pause_steal): the pause of a disturbed step.
      char steal[48] = "";
      if (run_.pause_steal)
        std::snprintf(steal, sizeof steal, "\"steal_ms\":%.6f,",
                      disturbed_ ? static_cast<double>(run_.pause_ns) / 1e6 : 0.0);
      std::snprintf(buf, sizeof buf,
                    "{\"freq\":[{\"cpu\":0,\"mhz\":%.1f,\"w\":0}],\"n_past\":%lld,\"phase\":\"%s\","
                    "\"piece\":\" tok\",\"sched\":{\"nivcsw\":0,\"nvcsw\":0,\"oncpu_ns\":%lld,"
                    "\"runq_ns\":0},%s\"step\":%lld,\"step_ms\":%.6f,\"t0_ns\":%lld,"
                    "\"t1_ns\":%lld,\"token\":%lld,\"type\":\"step\"}\n",
                    freq_, (long long)n_past, phase, (long long)(t_ - t0), steal, (long long)step,
                    ms, (long long)t0, (long long)t_, (long long)(100 + step));
    }
    out_ << buf;
  }

  int64_t n_ops() const { return n_ops_; }

 private:
  std::ostream& out_;
  const SyntheticRun& run_;
  int64_t t_ = 1'000'000;
  int64_t n_ops_ = 0;
  double freq_ = 0, slow_ = 1;
  bool disturbed_ = false;
  uint64_t lcg_ = 42;
};

}  // namespace

std::string header_line(int schema, double bandwidth_gbs, int n_layers) {
  char bw[32];
  if (bandwidth_gbs > 0) {
    std::snprintf(bw, sizeof bw, "%.3f", bandwidth_gbs);
  } else {
    std::snprintf(bw, sizeof bw, "null");
  }
  char buf[2048];
  std::snprintf(
      buf, sizeof buf,
      "{\"bandwidth_gbs\":%s,\"command\":\"run\",\"counters\":{\"live\":[\"task_clock\"],"
      "\"mode\":\"software\",\"read\":\"read()\",\"unavailable\":[{\"event\":\"cycles\","
      "\"reason\":\"no hardware PMU exposed\"}]},\"freq_before_mhz\":[2900.0,2900.0],"
      "\"frequency\":{\"detail\":\"imul chain\",\"nominal_mhz\":2100.0,\"source\":"
      "\"calibrated_loop\"},\"git_sha\":\"abc\",\"host\":{\"cpu_model\":\"Test CPU @ 2.10GHz\","
      "\"governor\":null,\"hostname\":\"h\",\"kernel\":\"6.1.0\",\"smt\":false,\"topology\":"
      "{\"cores\":2,\"l3_bytes\":1048576,\"numa_nodes\":1,\"packages\":1,\"pus\":2},"
      "\"virtualized\":true},\"load_ms\":12.5,\"model\":{\"arch\":\"llama\",\"bytes\":5000000,"
      "\"matmul_bytes_per_token\":4000000,\"n_layers\":%d,\"name\":\"toy\",\"params\":4500000,"
      "\"path\":\"toy.gguf\",\"type\":\"q8_0\"},\"pacer_version\":\"0.1.0\",\"run\":{\"cpus\":"
      "[0,1],\"isa\":\"avx512\",\"n_predict\":3,\"n_prompt\":4,\"pin\":\"compact\",\"threads\":2},"
      "\"schema\":%d,\"type\":\"header\"}\n",
      bw, n_layers, schema);
  return buf;
}

int64_t write_synthetic(std::ostream& out, const SyntheticRun& run) {
  out << header_line(1, run.bandwidth_gbs, run.n_layers);
  Writer w(out, run);
  const OpSpec embed{"embed", "embed", 0, 0, 0.1};
  const OpSpec out_norm{"output_norm", "norm", 0, 0, 0.2};
  const OpSpec output{"output", "matmul", 4096, 256, 4.0};
  const OpSpec sample{"sample", "sample", 0, 0, 0.5};
  int64_t n_past = 0;
  for (int64_t s = 0; s <= run.n_decode; ++s) {
    const bool prefill = s == 0;
    const char* phase = prefill ? "prefill" : "decode";
    const int64_t tokens = prefill ? run.n_prompt : 1;
    const int64_t t0 = w.now();
    w.set_step(s);
    w.op(s, phase, embed, -1, tokens);
    for (int l = 0; l < run.n_layers; ++l)
      for (const OpSpec& spec : kLayerOps) w.op(s, phase, spec, l, tokens);
    w.op(s, phase, out_norm, -1, tokens);
    w.op(s, phase, output, -1, 1);
    w.op(s, "sample", sample, -1, 1);
    w.step(s, phase, t0, tokens, n_past);
    n_past += tokens;
  }
  if (run.footer) {
    out << "{\"n_generated\":" << run.n_decode + 1 << ",\"n_prompt\":" << run.n_prompt
        << ",\"peak_rss_kb\":123456,\"steps\":" << run.n_decode + 1
        << ",\"stop\":\"n_predict\",\"type\":\"footer\"}\n";
  }
  return w.n_ops();
}

}  // namespace pacer::analysis::testlog
