// The streaming pass that turns an event log into a Report.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "analysis/report.h"
#include "analysis/report_accum.h"
#include "eventlog/roofline.h"

namespace pacer::analysis {

std::string_view component_name(Component c) noexcept {
  switch (c) {
    case Component::Attention:
      return "attention";
    case Component::Ffn:
      return "ffn";
    case Component::Norms:
      return "norms";
    case Component::Embedding:
      return "embedding";
    case Component::OutputProjection:
      return "output projection";
    case Component::Sampling:
      return "sampling";
    case Component::Tokenizer:
      return "tokenizer";
    case Component::Other:
      break;
  }
  return "other (residual, ...)";
}

Component component_of(std::string_view n) noexcept {
  if (n == "embed") return Component::Embedding;
  if (n == "output") return Component::OutputProjection;
  if (n == "sample") return Component::Sampling;
  if (n == "tokenize" || n == "detokenize") return Component::Tokenizer;
  if (n.ends_with("_norm")) return Component::Norms;
  if (n.starts_with("attn") || n.starts_with("attention") || n == "rope" || n.starts_with("kv_"))
    return Component::Attention;
  if (n.starts_with("ffn")) return Component::Ffn;
  return Component::Other;
}

namespace {

using detail::CpuAccum;
using detail::DistAccum;

struct KeyView {
  Phase phase;
  int layer;
  std::string_view name;
};
struct Key {
  Phase phase;
  int layer;
  std::string name;
};
struct KeyHash {
  using is_transparent = void;
  size_t operator()(const KeyView& k) const noexcept {
    return std::hash<std::string_view>{}(k.name) ^
           (static_cast<size_t>(k.layer) * 0x9E3779B97F4A7C15ull) ^ static_cast<size_t>(k.phase);
  }
  size_t operator()(const Key& k) const noexcept {
    return (*this)(KeyView{k.phase, k.layer, k.name});
  }
};
struct KeyEq {
  using is_transparent = void;
  template <class A, class B>
  bool operator()(const A& a, const B& b) const noexcept {
    return a.phase == b.phase && a.layer == b.layer && std::string_view(a.name) == b.name;
  }
};

struct KeyAccum {
  Key key;
  DistAccum dist;
  CpuAccum cpu;
};

struct ShapeKey {
  std::string name, wtype;
  int64_t rows, cols, tokens;
  auto operator<=>(const ShapeKey&) const = default;
};
struct ShapeAccum {
  DistAccum dist;
  CpuAccum cpu;
};

// An op of the step in flight, kept until its step line says where the step began and ended.
struct PendingOp {
  int64_t t0, t1;
  Phase phase;
  int layer;
  Component component;
  double freq_weighted, freq_weight;
  size_t key;  // into Builder::accums_ (the op's name)
};

struct WorkerAccum {
  std::vector<int> cpus;
  int64_t chunks = 0, busy_ns = 0;
  CpuAccum cpu;
};

bool is_step_phase(Phase p) {
  return p == Phase::Prefill || p == Phase::Decode;
}

// The phases that have steps, in the order of the per-phase accumulator arrays (components_,
// component_events_, blocks_).
constexpr std::array<Phase, 2> kStepPhases = {Phase::Prefill, Phase::Decode};
constexpr size_t step_phase_index(Phase p) {
  return p == Phase::Prefill ? 0 : 1;
}

class Builder : public LogVisitor {
 public:
  explicit Builder(Report& r) : r_(r) {}

  void on_header(const Header& h) override { r_.header = h; }
  void on_footer(const Footer& f) override { r_.footer = f; }
  void on_bench(const BenchEvent& b) override { r_.bench.push_back(b); }

  void on_op(const OpEvent& e) override {
    note_time(e.t0_ns);
    const int64_t dur = e.duration_ns();
    auto it = keys_.find(KeyView{e.phase, e.layer, e.name});
    if (it == keys_.end()) {
      it = keys_.emplace(Key{e.phase, e.layer, e.name}, accums_.size()).first;
      accums_.push_back(KeyAccum{Key{e.phase, e.layer, e.name}, {}, {}});
    }
    KeyAccum& k = accums_[it->second];
    if (e.phase == Phase::Decode) {
      decode_kv_bytes_ += e.kv_bytes;
      decode_attention_flops_ += e.attention_flops;
      if (e.step != last_decode_op_step_) ++decode_op_steps_;
      last_decode_op_step_ = e.step;
    }
    k.dist.add(dur);
    k.cpu.add_op(e);
    all_ops_.add(dur);

    if (e.kind == OpKind::Matmul || e.rows > 0) {
      ShapeKey sk{e.name, e.wtype, e.rows, e.cols, e.tokens};
      ShapeAccum& s = shapes_[std::move(sk)];
      s.dist.add(dur);
      s.cpu.add_op(e);
    }
    for (const WorkerSample& w : e.workers) {
      if (w.w < 0 || w.w > 4096) continue;
      if (static_cast<size_t>(w.w) >= workers_.size()) workers_.resize(w.w + 1);
      WorkerAccum& wa = workers_[w.w];
      for (int cpu : {w.cpu, w.cpu_end})
        if (cpu >= 0 && std::find(wa.cpus.begin(), wa.cpus.end(), cpu) == wa.cpus.end())
          wa.cpus.push_back(cpu);
      ++wa.chunks;
      wa.busy_ns += std::max<int64_t>(w.duration_ns(), 0);
      wa.cpu.add_worker(w);
    }

    if (e.phase == Phase::Sample && e.step == prefill_last_step_)
      ttft_end_ns_ = std::max(ttft_end_ns_, e.t1_ns);
    // Tokenization runs before the first step; sampling and detokenization run inside their
    // step's window and count as its op time (not as a gap between ops).
    if (e.phase == Phase::Tokenize) return;
    if (pending_active_ && e.step != pending_step_) flush_orphan();
    pending_active_ = true;
    pending_step_ = e.step;
    CpuAccum c;
    for (const WorkerSample& w : e.workers) c.add_worker(w);
    pending_.push_back(PendingOp{e.t0_ns, e.t1_ns, e.phase, e.layer, component_of(e.name),
                                 c.freq_weighted, c.freq_weight, it->second});
  }

  void on_step(const StepEvent& e) override {
    note_time(e.t0_ns);
    StepRow row;
    row.step = e.step;
    row.phase = e.phase;
    row.start_ns = e.t0_ns;  // made relative in finish()
    row.dur_ns = e.duration_ns();
    row.tokens = e.tokens();
    row.runq_ns = e.runq_ns;
    if (e.steal_ms) row.steal_ns = static_cast<int64_t>(*e.steal_ms * 1e6);
    row.throttled_ns = e.cgroup_throttled_ns;
    row.tok_s = e.tok_s;
    const PendingOp* longest = nullptr;
    std::array<int64_t, kComponentCount> comp{};
    std::vector<int64_t>& layers = layer_scratch_;
    layers.assign(layers.size(), 0);
    double fw = 0, fwt = 0;
    const bool mine = pending_active_ && pending_step_ == e.step;
    if (mine) {
      for (const PendingOp& p : pending_) {
        if (p.t0 < e.t0_ns || p.t1 > e.t1_ns) continue;  // not inside this step
        const int64_t d = p.t1 - p.t0;
        row.op_ns += d;
        if (p.phase == e.phase && (!longest || d > longest->t1 - longest->t0)) longest = &p;
        if (p.phase != e.phase) row.other_phase_ns += d;
        if (p.phase == Phase::Sample) row.sample_ns += d;
        comp[static_cast<int>(p.component)] += d;
        if (is_step_phase(e.phase))
          ++component_events_[step_phase_index(e.phase)][static_cast<int>(p.component)];
        if (p.layer >= 0 && p.layer < 100000) {
          if (static_cast<size_t>(p.layer) >= layers.size()) layers.resize(p.layer + 1, 0);
          layers[p.layer] += d;
        }
        fw += p.freq_weighted;
        fwt += p.freq_weight;
      }
      if (longest) {
        row.longest_op = accums_[longest->key].key.name;
        row.longest_op_ns = longest->t1 - longest->t0;
      }
      pending_.clear();
      pending_active_ = false;
    }
    if (fwt > 0) {
      row.freq_mhz = fw / fwt;
    } else if (!e.freq.empty()) {
      double s = 0;
      for (const StepFreq& f : e.freq) s += f.mhz;
      row.freq_mhz = s / static_cast<double>(e.freq.size());
    }
    if (is_step_phase(e.phase)) {
      const size_t pi = step_phase_index(e.phase);
      for (int c = 0; c < kComponentCount; ++c)
        if (comp[c] > 0) components_[pi][c].add(comp[c]);
      for (size_t l = 0; l < layers.size(); ++l)
        if (layers[l] > 0) {
          auto& v = blocks_[pi];
          if (v.size() <= l) v.resize(l + 1);
          v[l].add(layers[l]);
        }
      (e.phase == Phase::Prefill ? prefill_steps_ : decode_steps_).add(row.dur_ns);
      if (e.phase == Phase::Prefill) {
        prefill_last_step_ = e.step;
        ttft_end_ns_ = std::max(ttft_end_ns_, e.t1_ns);
      }
    }
    all_steps_.add(row.dur_ns);
    r_.steps.push_back(row);
  }

  void finish();

 private:
  void finish_op_groups();
  void finish_blocks_and_components();
  void finish_shapes();
  void finish_event_types();
  void finish_steps_and_phases();
  void finish_workers();
  void finish_reference_frequency();
  void note_time(int64_t t) {
    if (!origin_) origin_ = t;
    origin_ = std::min(*origin_, t);
  }
  void flush_orphan() {
    for (const PendingOp& p : pending_)
      if (p.phase != Phase::Sample) {
        ++r_.incomplete_steps;
        break;
      }
    pending_.clear();
    pending_active_ = false;
  }

  Report& r_;
  std::unordered_map<Key, size_t, KeyHash, KeyEq> keys_;
  std::vector<KeyAccum> accums_;
  std::map<ShapeKey, ShapeAccum> shapes_;
  std::vector<WorkerAccum> workers_;
  DistAccum all_ops_, all_steps_, prefill_steps_, decode_steps_;
  std::array<std::array<DistAccum, kComponentCount>, kStepPhases.size()> components_;
  std::array<std::array<int64_t, kComponentCount>, kStepPhases.size()> component_events_{};
  std::array<std::vector<DistAccum>, kStepPhases.size()> blocks_;
  std::vector<PendingOp> pending_;
  std::vector<int64_t> layer_scratch_;
  bool pending_active_ = false;
  int64_t pending_step_ = 0;
  int64_t prefill_last_step_ = std::numeric_limits<int64_t>::min();
  int64_t ttft_end_ns_ = 0;
  int64_t decode_kv_bytes_ = 0;         // kv_bytes of the decode ops
  int64_t decode_attention_flops_ = 0;  // their attention_flops
  // Decode steps seen through their ops (for logs cut before their step lines).
  int64_t decode_op_steps_ = 0;
  int64_t last_decode_op_step_ = std::numeric_limits<int64_t>::min();
  std::optional<int64_t> origin_;
};

}  // namespace
}  // namespace pacer::analysis

namespace pacer::analysis {
namespace {

template <class Row>
void sort_by_total(std::vector<Row>& rows) {
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.dist.total_ns > b.dist.total_ns; });
}

double share_of(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

// The passes of finish(), in order: each fills its own part of the Report from the accumulators.
void Builder::finish() {
  if (pending_active_) flush_orphan();  // the log ended inside a step
  finish_op_groups();
  finish_blocks_and_components();
  finish_shapes();
  finish_event_types();
  finish_steps_and_phases();
  finish_workers();
  finish_reference_frequency();
}

// Op rows: every distinct key, then merged up to phase::op, phase and op.
void Builder::finish_op_groups() {
  const std::optional<double> bw = r_.header.bandwidth_gbs;
  const std::optional<double> rec = r_.header.counters.bracket_ns;
  struct Group {
    DistAccum dist;
    CpuAccum cpu;
  };
  std::map<std::pair<Phase, std::string>, Group> phase_op;
  std::map<Phase, Group> phase;
  std::map<std::string, Group> op;
  Group decode_all;
  for (const KeyAccum& k : accums_) {
    for (Group* g : {&phase_op[{k.key.phase, k.key.name}], &phase[k.key.phase], &op[k.key.name]}) {
      g->dist.merge(k.dist);
      g->cpu.merge(k.cpu);
    }
    if (k.key.phase == Phase::Decode) decode_all.cpu.merge(k.cpu);
  }
  std::map<Phase, int64_t> phase_total;
  for (const auto& [p, g] : phase) phase_total[p] = g.dist.total_ns;
  const int64_t all_total = all_ops_.total_ns;

  auto make_row = [&](Phase p, std::string name, int layer, const DistAccum& d, const CpuAccum& c) {
    OpRow row;
    row.phase = p;
    row.component = component_of(name);
    row.name = std::move(name);
    row.layer = layer;
    row.dist = d.finish();
    row.cpu = c.finish(bw, rec);
    return row;
  };
  for (const KeyAccum& k : accums_) {
    OpRow row = make_row(k.key.phase, k.key.name, k.key.layer, k.dist, k.cpu);
    row.share = share_of(row.dist.total_ns, phase_total[k.key.phase]);
    r_.by_layer_op.push_back(std::move(row));
  }
  for (const auto& [key, g] : phase_op) {
    OpRow row = make_row(key.first, key.second, -1, g.dist, g.cpu);
    row.share = share_of(row.dist.total_ns, phase_total[key.first]);
    r_.by_phase_op.push_back(std::move(row));
  }
  for (const auto& [p, g] : phase) {
    OpRow row = make_row(p, "", -1, g.dist, g.cpu);
    row.component = Component::Other;
    row.share = share_of(row.dist.total_ns, all_total);
    r_.by_phase.push_back(std::move(row));
  }
  for (const auto& [name, g] : op) {
    OpRow row = make_row(Phase::Other, name, -1, g.dist, g.cpu);
    row.share = share_of(row.dist.total_ns, all_total);
    r_.by_op.push_back(std::move(row));
  }
  sort_by_total(r_.by_layer_op);
  sort_by_total(r_.by_phase_op);
  sort_by_total(r_.by_phase);
  sort_by_total(r_.by_op);
  r_.decode_cpu = decode_all.cpu.finish(bw, rec);
}

// Per-step sums of the blocks and components, as shares of the phase's in-step op time.
void Builder::finish_blocks_and_components() {
  for (size_t pi = 0; pi < kStepPhases.size(); ++pi) {
    const Phase p = kStepPhases[pi];
    int64_t in_steps = 0;
    for (const DistAccum& c : components_[pi]) in_steps += c.total_ns;
    for (size_t l = 0; l < blocks_[pi].size(); ++l) {
      if (blocks_[pi][l].hist.count() == 0) continue;
      BlockRow b{p, static_cast<int>(l), blocks_[pi][l].finish(), 0};
      b.share = share_of(b.per_step.total_ns, in_steps);
      r_.blocks.push_back(b);
    }
    for (int c = 0; c < kComponentCount; ++c) {
      const DistAccum& d = components_[pi][c];
      if (d.hist.count() == 0) continue;
      ComponentRow row{p, static_cast<Component>(c), d.finish(), component_events_[pi][c], 0};
      row.share = share_of(d.total_ns, in_steps);
      r_.components.push_back(row);
    }
  }
  std::stable_sort(r_.components.begin(), r_.components.end(),
                   [](const ComponentRow& a, const ComponentRow& b) {
                     if (a.phase != b.phase) return a.phase == Phase::Decode;
                     return a.per_step.total_ns > b.per_step.total_ns;
                   });
}

void Builder::finish_shapes() {
  const std::optional<double> bw = r_.header.bandwidth_gbs;
  const std::optional<double> rec = r_.header.counters.bracket_ns;
  for (const auto& [key, s] : shapes_) {
    ShapeRow row{key.name,
                 key.wtype,
                 key.rows,
                 key.cols,
                 key.tokens,
                 s.dist.finish(),
                 s.cpu.finish(bw, rec)};
    r_.shapes.push_back(std::move(row));
  }
  sort_by_total(r_.shapes);
}

void Builder::finish_event_types() {
  const ReadSummary& rs = r_.read;
  r_.event_types.push_back({"header", rs.n_header, std::nullopt});
  r_.event_types.push_back(
      {"op", rs.n_op, all_ops_.hist.count() ? std::optional(all_ops_.finish()) : std::nullopt});
  r_.event_types.push_back(
      {"step", rs.n_step,
       all_steps_.hist.count() ? std::optional(all_steps_.finish()) : std::nullopt});
  r_.event_types.push_back({"footer", rs.n_footer, std::nullopt});
  if (rs.n_bench) r_.event_types.push_back({"bench", rs.n_bench, std::nullopt});
  if (rs.n_unknown) r_.event_types.push_back({"(unknown type)", rs.n_unknown, std::nullopt});
  if (rs.malformed_count)
    r_.event_types.push_back({"(malformed, skipped)", rs.malformed_count, std::nullopt});
}

// Steps (times from the run's origin), the phase breakdown and the throughput figures.
void Builder::finish_steps_and_phases() {
  const std::optional<double> bw = r_.header.bandwidth_gbs;
  const int64_t origin = origin_.value_or(0);
  int64_t prefill_ns = 0, decode_ns = 0, n_prefill = 0, n_decode = 0;
  int64_t prefill_step_ns = 0, decode_step_ns = 0;
  for (StepRow& s : r_.steps) {
    s.start_ns -= origin;
    const int64_t own = std::max<int64_t>(s.dur_ns - s.other_phase_ns, 0);
    if (s.phase == Phase::Prefill) {
      prefill_ns += own;
      prefill_step_ns += s.dur_ns;
      ++n_prefill;
      r_.throughput.prefill_tokens += s.tokens;
    } else if (s.phase == Phase::Decode) {
      decode_ns += own;
      decode_step_ns += s.dur_ns;
      ++n_decode;
      r_.throughput.decode_tokens += 1;
    }
  }
  r_.prefill_steps = prefill_steps_.finish();
  r_.decode_steps = decode_steps_.finish();
  const Footer* f = r_.footer ? &*r_.footer : nullptr;
  auto ms_to_ns = [](double ms) { return static_cast<int64_t>(ms * 1e6); };
  auto phase_ops = [&](Phase p) -> std::pair<int64_t, int64_t> {
    for (const OpRow& row : r_.by_phase)
      if (row.phase == p) return {row.dist.total_ns, row.dist.count};
    return {0, 0};
  };
  auto [tok_ns, tok_n] = phase_ops(Phase::Tokenize);
  auto [detok_ns, detok_n] = phase_ops(Phase::Detokenize);
  auto [sample_ns, sample_n] = phase_ops(Phase::Sample);
  PhaseRow tokenize{"tokenization", tok_ns, tok_n, 0, "ops"};
  if (tok_n == 0 && f && f->tokenize_ms)
    tokenize = {"tokenization", ms_to_ns(*f->tokenize_ms), 1, 0, "footer"};
  PhaseRow detokenize{"detokenization", detok_ns, detok_n, 0, "ops"};
  if (detok_n == 0 && f && f->detokenize_ms)
    detokenize = {"detokenization", ms_to_ns(*f->detokenize_ms), 1, 0, "footer"};
  PhaseRow prefill{"prefill", prefill_ns, n_prefill, 0, "steps"};
  PhaseRow decode{"decode", decode_ns, n_decode, 0, "steps"};
  if (r_.steps.empty()) {  // a log cut before its first step line: fall back to op sums
    std::tie(prefill.total_ns, prefill.count) = phase_ops(Phase::Prefill);
    std::tie(decode.total_ns, decode.count) = phase_ops(Phase::Decode);
    prefill.source = decode.source = "ops";
  }
  r_.phases = {tokenize, prefill, decode, PhaseRow{"sampling", sample_ns, sample_n, 0, "ops"},
               detokenize};
  int64_t phases_total = 0;
  for (const PhaseRow& p : r_.phases) phases_total += p.total_ns;
  for (PhaseRow& p : r_.phases) p.share = share_of(p.total_ns, phases_total);

  Throughput& t = r_.throughput;
  if (prefill_step_ns > 0)
    t.prefill_tok_s = static_cast<double>(t.prefill_tokens) / (prefill_step_ns * 1e-9);
  if (decode_step_ns > 0) t.decode_tok_s = static_cast<double>(n_decode) / (decode_step_ns * 1e-9);
  if (f && f->ttft_ms) {
    t.ttft_ms = f->ttft_ms;
    t.ttft_source = "footer";
  } else if (ttft_end_ns_ > origin && n_prefill > 0) {
    t.ttft_ms = static_cast<double>(ttft_end_ns_ - origin) / 1e6;
    t.ttft_source = "steps";
  }
  t.load_ms = r_.header.load_ms;
  if (!t.load_ms && f) t.load_ms = f->load_ms;
  if (f) {
    t.wall_ms = f->wall_ms;
    t.peak_rss_kb = f->peak_rss_kb;
    t.footer_prefill_tok_s = f->prefill_tok_s;
    t.footer_decode_tok_s = f->decode_tok_s;
  }
  const int64_t decode_count = n_decode > 0 ? n_decode : decode_op_steps_;
  if (decode_count > 0) {
    t.decode_kv_bytes_per_token =
        static_cast<double>(decode_kv_bytes_) / static_cast<double>(decode_count);
    t.decode_attention_flops_per_token =
        static_cast<double>(decode_attention_flops_) / static_cast<double>(decode_count);
  }
  t.fma_gflops = r_.header.fma_gflops;
  if (bw && *bw > 0 && r_.header.model.matmul_bytes_per_token &&
      *r_.header.model.matmul_bytes_per_token > 0) {
    const int64_t weights = *r_.header.model.matmul_bytes_per_token;
    const auto kv = static_cast<int64_t>(std::llround(t.decode_kv_bytes_per_token));
    const auto flops = static_cast<int64_t>(std::llround(t.decode_attention_flops_per_token));
    t.decode_roofline_tok_s =
        eventlog::decode_ceiling_tok_s(*bw, weights, kv, flops, t.fma_gflops.value_or(0));
    const double bytes_only = eventlog::decode_ceiling_tok_s(*bw, weights, kv, 0, 0);
    if (*t.decode_roofline_tok_s < 0.995 * bytes_only)
      t.decode_bandwidth_roofline_tok_s = bytes_only;
  }
}

void Builder::finish_workers() {
  const std::optional<double> bw = r_.header.bandwidth_gbs;
  for (size_t w = 0; w < workers_.size(); ++w) {
    const WorkerAccum& wa = workers_[w];
    if (wa.chunks == 0) continue;
    WorkerRow row{static_cast<int>(w), wa.cpus, wa.chunks, wa.busy_ns, wa.cpu.finish(bw)};
    // One bracket per slice (the executor brackets each worker once per op).
    if (const auto& rec = r_.header.counters.bracket_ns; rec && wa.busy_ns > 0) {
      row.cpu.recording_share =
          std::min(1.0, static_cast<double>(wa.chunks) * *rec / static_cast<double>(wa.busy_ns));
    }
    std::sort(row.cpus.begin(), row.cpus.end());
    r_.workers.push_back(std::move(row));
  }
}

// The frequency the run could reach: nominal or what the CPU showed before the run.
void Builder::finish_reference_frequency() {
  double ref = 0;
  std::string src;
  if (r_.header.frequency.nominal_mhz && *r_.header.frequency.nominal_mhz > 0) {
    ref = *r_.header.frequency.nominal_mhz;
    src = "nominal";
  }
  for (double fb : r_.header.freq_before_mhz)
    if (fb > ref) {
      ref = fb;
      src = "measured before the run";
    }
  if (ref <= 0) {
    for (const StepRow& s : r_.steps)
      if (s.freq_mhz && *s.freq_mhz > ref) {
        ref = *s.freq_mhz;
        src = "highest step mean in this run";
      }
  }
  if (ref > 0) {
    r_.reference_freq_mhz = ref;
    r_.reference_freq_source = src;
  }
}

Report build_with(const BottleneckThresholds& th, const std::string& name,
                  const std::function<ReadSummary(LogVisitor&)>& read) {
  Report r;
  r.source = name;
  r.thresholds = th;
  Builder b(r);
  r.read = read(b);
  b.finish();
  detail::classify_bottleneck(r, th);
  return r;
}

}  // namespace

Report build_report(const std::string& path, const BottleneckThresholds& thresholds) {
  LogReader reader(path);
  return build_with(thresholds, path, [&](LogVisitor& v) { return reader.read(v); });
}

Report build_report_from_text(std::string_view text, const std::string& name,
                              const BottleneckThresholds& thresholds) {
  return build_with(thresholds, name,
                    [&](LogVisitor& v) { return LogReader::read_text(text, v, name); });
}

}  // namespace pacer::analysis
