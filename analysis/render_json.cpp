// JSON report: every row of every table, in ns and raw numbers, for scripts and dashboards.
// Absent measurements are null, never 0.
#include <nlohmann/json.hpp>

#include "analysis/histogram.h"
#include "analysis/report.h"
#include "analysis/report_json.h"

namespace pacer::analysis {
namespace detail {

using nlohmann::json;

namespace {

template <class T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json op_row(const OpRow& r) {
  return {{"phase", phase_name(r.phase)},
          {"name", r.name},
          {"layer", r.layer},
          {"component", component_name(r.component)},
          {"share", r.share},
          {"dist", dist_json(r.dist)},
          {"cpu", cpu_json(r.cpu)}};
}

}  // namespace

json dist_json(const Dist& d) {
  return {{"count", d.count},   {"total_ns", d.total_ns}, {"mean_ns", d.mean_ns()},
          {"min_ns", d.min_ns}, {"max_ns", d.max_ns},     {"p50_ns", d.p50_ns},
          {"p95_ns", d.p95_ns}, {"p99_ns", d.p99_ns}};
}

json cpu_json(const CpuMetrics& c) {
  return {{"freq_mean_mhz", opt(c.freq_mean_mhz)},
          {"freq_min_mhz", opt(c.freq_min_mhz)},
          {"ipc", opt(c.ipc)},
          {"weight_bytes", c.weight_bytes},
          {"kv_bytes", c.kv_bytes},
          {"gbs", opt(c.gbs)},
          {"roofline_pct", opt(c.roofline_pct)},
          {"slice_gbs", opt(c.slice_gbs)},
          {"slice_roofline_pct", opt(c.slice_roofline_pct)},
          {"offcpu_share", opt(c.offcpu_share)},
          {"migrations", c.migrations},
          {"wait_share", opt(c.wait_share)},
          {"wait_ns", c.wait_ns},
          {"imbalance_share", opt(c.imbalance_share)},
          {"imbalance_ns", c.imbalance_ns},
          {"recording_share", opt(c.recording_share)}};
}

json steps_json(const Report& r) {
  json steps = json::array();
  for (const StepRow& s : r.steps)
    steps.push_back({{"step", s.step},
                     {"phase", phase_name(s.phase)},
                     {"start_ns", s.start_ns},
                     {"dur_ns", s.dur_ns},
                     {"op_ns", s.op_ns},
                     {"sample_ns", s.sample_ns},
                     {"gap_ns", s.gap_ns()},
                     {"tokens", s.tokens},
                     {"freq_mhz", opt(s.freq_mhz)},
                     {"runq_ns", opt(s.runq_ns)},
                     {"tok_s", opt(s.tok_s)}});
  return steps;
}

json report_json(const Report& r) {
  json j;
  j["schema"] = 1;
  j["source"] = r.source;
  j["complete"] = r.read.complete();
  j["warnings"] = r.read.warnings();
  j["read"] = {{"lines", r.read.lines},
               {"bytes", r.read.bytes},
               {"malformed", r.read.malformed_count},
               {"truncated_last_line", r.read.truncated_last_line}};
  j["header"] = r.header.raw;
  if (r.footer) {
    const Footer& f = *r.footer;
    j["footer"] = {{"steps", opt(f.steps)},
                   {"n_prompt", opt(f.n_prompt)},
                   {"n_generated", opt(f.n_generated)},
                   {"ttft_ms", opt(f.ttft_ms)},
                   {"prefill_tok_s", opt(f.prefill_tok_s)},
                   {"decode_tok_s", opt(f.decode_tok_s)},
                   {"wall_ms", opt(f.wall_ms)},
                   {"peak_rss_kb", opt(f.peak_rss_kb)},
                   {"stop", f.stop}};
  } else {
    j["footer"] = nullptr;
  }
  json& ev = j["event_types"] = json::array();
  for (const EventTypeRow& e : r.event_types)
    ev.push_back({{"type", e.type},
                  {"count", e.count},
                  {"dist", e.dist ? dist_json(*e.dist) : json(nullptr)}});
  json& ph = j["phases"] = json::array();
  for (const PhaseRow& p : r.phases)
    ph.push_back({{"name", p.name},
                  {"total_ns", p.total_ns},
                  {"count", p.count},
                  {"share", p.share},
                  {"source", p.source}});
  const Throughput& t = r.throughput;
  j["throughput"] = {{"ttft_ms", opt(t.ttft_ms)},
                     {"ttft_source", t.ttft_source},
                     {"prefill_tok_s", opt(t.prefill_tok_s)},
                     {"decode_tok_s", opt(t.decode_tok_s)},
                     {"prefill_tokens", t.prefill_tokens},
                     {"decode_tokens", t.decode_tokens},
                     {"decode_kv_bytes_per_token", t.decode_kv_bytes_per_token},
                     {"decode_attention_flops_per_token", t.decode_attention_flops_per_token},
                     {"fma_gflops", opt(t.fma_gflops)},
                     {"decode_bandwidth_roofline_tok_s", opt(t.decode_bandwidth_roofline_tok_s)},
                     {"decode_roofline_tok_s", opt(t.decode_roofline_tok_s)},
                     {"load_ms", opt(t.load_ms)},
                     {"wall_ms", opt(t.wall_ms)},
                     {"peak_rss_kb", opt(t.peak_rss_kb)}};
  j["prefill_steps"] = dist_json(r.prefill_steps);
  j["decode_steps"] = dist_json(r.decode_steps);
  for (auto [key, rows] :
       {std::pair{"by_phase", &r.by_phase}, std::pair{"by_phase_op", &r.by_phase_op},
        std::pair{"by_layer_op", &r.by_layer_op}, std::pair{"by_op", &r.by_op}}) {
    json arr = json::array();
    for (const OpRow& row : *rows) arr.push_back(op_row(row));
    j[key] = std::move(arr);
  }
  json& bl = j["blocks"] = json::array();
  for (const BlockRow& b : r.blocks)
    bl.push_back({{"phase", phase_name(b.phase)},
                  {"layer", b.layer},
                  {"share", b.share},
                  {"per_step", dist_json(b.per_step)}});
  json& co = j["components"] = json::array();
  for (const ComponentRow& c : r.components)
    co.push_back({{"phase", phase_name(c.phase)},
                  {"component", component_name(c.component)},
                  {"share", c.share},
                  {"events", c.events},
                  {"per_step", dist_json(c.per_step)}});
  json& sh = j["shapes"] = json::array();
  for (const ShapeRow& s : r.shapes)
    sh.push_back({{"name", s.name},
                  {"wtype", s.wtype},
                  {"rows", s.rows},
                  {"cols", s.cols},
                  {"tokens", s.tokens},
                  {"dist", dist_json(s.dist)},
                  {"cpu", cpu_json(s.cpu)}});
  json& wk = j["workers"] = json::array();
  for (const WorkerRow& w : r.workers)
    wk.push_back({{"w", w.w},
                  {"cpus", w.cpus},
                  {"chunks", w.chunks},
                  {"busy_ns", w.busy_ns},
                  {"cpu", cpu_json(w.cpu)}});
  j["decode_cpu"] = cpu_json(r.decode_cpu);
  j["reference_freq_mhz"] = opt(r.reference_freq_mhz);
  j["reference_freq_source"] = r.reference_freq_source;
  j["incomplete_steps"] = r.incomplete_steps;
  const Bottleneck& b = r.bottleneck;
  json findings = json::array();
  for (const Finding& f : b.findings)
    findings.push_back({{"kind", bottleneck_name(f.kind)},
                        {"subject", f.subject},
                        {"evidence", f.evidence},
                        {"suggestions", f.suggestions}});
  j["bottleneck"] = {{"dominant_phase", b.dominant_phase},
                     {"dominant_phase_share", b.dominant_phase_share},
                     {"dominant_phase_ns", b.dominant_phase_ns},
                     {"dominant_op", b.dominant_op},
                     {"dominant_op_phase", phase_name(b.dominant_op_phase)},
                     {"dominant_op_share", b.dominant_op_share},
                     {"verdict", bottleneck_name(b.verdict)},
                     {"findings", std::move(findings)},
                     {"notes", b.notes}};
  j["steps"] = steps_json(r);
  j["percentile_relative_error"] = LogHistogram::kRelativeError;
  return j;
}

}  // namespace detail

std::string render_json(const Report& r) {
  // Replace invalid UTF-8 (a token piece cut mid-character) rather than fail.
  return detail::report_json(r).dump(1, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n";
}

}  // namespace pacer::analysis
