// Report sections: what each renderer shows, in order. Units: totals in ms, per-event statistics
// in us (ops on small models take microseconds).
#include "analysis/report_sections.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/histogram.h"

namespace pacer::analysis::detail {

std::string fmt_ms(double ns) {
  return fmt::format("{:.3f}", ns / 1e6);
}
std::string fmt_us(double ns) {
  return fmt::format("{:.1f}", ns / 1e3);
}

std::string fmt_opt(const std::optional<double>& v, const char* spec) {
  if (!v) return "-";
  return fmt::format(fmt::runtime(spec), *v);
}

std::string op_label(const OpRow& row) {
  std::string s;
  if (row.phase != Phase::Other || row.name.empty()) s = std::string(phase_name(row.phase));
  if (row.layer >= 0) s += fmt::format("{}block_{}", s.empty() ? "" : " :: ", row.layer);
  if (!row.name.empty()) s += (s.empty() ? "" : " :: ") + row.name;
  return s;
}

namespace {

const std::vector<std::string> kStatHead = {"count",  "total ms", "avg us", "min us",
                                            "max us", "p50 us",   "p95 us", "p99 us"};

std::vector<std::string> stat_cells(const Dist& d) {
  return {std::to_string(d.count),
          fmt_ms(static_cast<double>(d.total_ns)),
          fmt_us(d.mean_ns()),
          fmt_us(static_cast<double>(d.min_ns)),
          fmt_us(static_cast<double>(d.max_ns)),
          fmt_us(d.p50_ns),
          fmt_us(d.p95_ns),
          fmt_us(d.p99_ns)};
}

const std::vector<std::string> kCpuHead = {"MHz mean", "MHz min", "IPC",  "GB/s",  "% roof",
                                           "% slice",  "off-CPU", "wait", "imbal", "rec"};

std::vector<std::string> cpu_cells(const CpuMetrics& c) {
  auto pct = [](const std::optional<double>& share) {
    return share ? fmt::format("{:.1f}%", 100 * *share) : std::string("-");
  };
  return {fmt_opt(c.freq_mean_mhz, "{:.0f}"),
          fmt_opt(c.freq_min_mhz, "{:.0f}"),
          fmt_opt(c.ipc, "{:.2f}"),
          fmt_opt(c.gbs, "{:.2f}"),
          fmt_opt(c.roofline_pct, "{:.0f}"),
          fmt_opt(c.slice_roofline_pct, "{:.0f}"),
          pct(c.offcpu_share),
          pct(c.wait_share),
          pct(c.imbalance_share),
          pct(c.recording_share)};
}

Table make_table(std::vector<std::string> head, size_t n_text_cols) {
  Table t;
  t.numeric.assign(head.size(), true);
  for (size_t i = 0; i < n_text_cols && i < head.size(); ++i) t.numeric[i] = false;
  t.head = std::move(head);
  return t;
}

template <class T>
std::vector<std::string> concat(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Table op_table(const std::vector<OpRow>& rows, int top, const char* first = "op") {
  Table t = make_table(concat(concat({first}, kStatHead), concat({"share"}, kCpuHead)), 1);
  for (const OpRow& row : rows) {
    if (top > 0 && static_cast<int>(t.rows.size()) >= top) {
      ++t.omitted;
      continue;
    }
    t.rows.push_back(concat(concat({op_label(row)}, stat_cells(row.dist)),
                            concat({fmt::format("{:.1f}%", 100 * row.share)}, cpu_cells(row.cpu))));
  }
  return t;
}

template <class V>
std::string opt_str(const std::optional<V>& v) {
  return v ? fmt::format("{}", *v) : std::string("-");
}
std::string or_dash(const std::string& s) {
  return s.empty() ? "-" : s;
}

Section run_section(const Report& r) {
  const Header& h = r.header;
  Section s{"run", "Run", {}, {}, {}};
  auto& f = s.facts;
  f.push_back({"log", fmt::format("{} (schema {}, {} lines, {} op events, {} steps){}", r.source,
                                  h.schema, r.read.lines, r.read.n_op, r.read.n_step,
                                  r.read.complete() ? "" : " -- INCOMPLETE RUN: no footer")});
  f.push_back({"pacer", fmt::format("{} ({}) command={} at {}", or_dash(h.pacer_version),
                                    or_dash(h.git_sha), or_dash(h.command), or_dash(h.time_utc))});
  std::string params = h.model.params ? fmt::format("{:.1f}M params", *h.model.params / 1e6) : "";
  f.push_back(
      {"model",
       fmt::format("{} arch={} type={}{} {}{}", h.model.name.empty() ? h.model.path : h.model.name,
                   h.model.arch, h.model.type,
                   h.model.file_type.empty() ? "" : fmt::format(" ({})", h.model.file_type), params,
                   h.model.bytes ? fmt::format(", {:.1f} MB", *h.model.bytes / 1e6) : "")});
  if (h.model.n_layers)
    f.push_back({"shape", fmt::format("n_layers={} n_embd={} n_heads={} n_kv_heads={} n_ff={} "
                                      "n_vocab={}",
                                      opt_str(h.model.n_layers), opt_str(h.model.n_embd),
                                      opt_str(h.model.n_heads), opt_str(h.model.n_kv_heads),
                                      opt_str(h.model.n_ff), opt_str(h.model.n_vocab))});
  f.push_back(
      {"run", fmt::format("threads={} pin={} cpus=[{}] ctx={} n_prompt={} n_predict={} "
                          "isa={} kv={} recording={}",
                          opt_str(h.run.threads), or_dash(h.run.pin), fmt::join(h.run.cpus, ","),
                          opt_str(h.run.ctx), opt_str(h.run.n_prompt), opt_str(h.run.n_predict),
                          or_dash(h.run.isa), or_dash(h.run.kv_type), or_dash(h.run.recording))});
  f.push_back(
      {"cpu", fmt::format("{}{} ({} packages, {} cores, {} PUs, L3 {}){}{}", h.host.cpu_model,
                          h.host.cpu_signature.empty() ? "" : " [" + h.host.cpu_signature + "]",
                          opt_str(h.host.packages), opt_str(h.host.cores), opt_str(h.host.pus),
                          h.host.l3_bytes ? fmt::format("{:.1f} MB", *h.host.l3_bytes / 1e6) : "-",
                          h.host.virtualized.value_or(false) ? ", virtualized" : "",
                          h.host.smt ? (*h.host.smt ? ", SMT on" : ", SMT off") : "")});
  f.push_back({"os", fmt::format("kernel {} governor={}", h.host.kernel,
                                 h.host.governor.empty() ? "(none)" : h.host.governor)});
  std::string unavailable;
  for (const UnavailableCounter& u : h.counters.unavailable)
    unavailable += fmt::format("; {} unavailable: {}", u.event, u.reason);
  f.push_back({"counters", fmt::format("mode={} live=[{}] read={}{}{}", h.counters.mode,
                                       fmt::join(h.counters.live, ","), h.counters.read,
                                       h.counters.bracket_ns
                                           ? fmt::format(" bracket={:.1f} us per op (rec column)",
                                                         *h.counters.bracket_ns / 1e3)
                                           : "",
                                       unavailable)});
  f.push_back(
      {"frequency",
       fmt::format("source={} nominal={} MHz{}; before=[{:.0f}] after=[{:.0f}]", h.frequency.source,
                   h.frequency.nominal_mhz ? fmt::format("{:.1f}", *h.frequency.nominal_mhz) : "-",
                   h.frequency.detail.empty() ? "" : " (" + h.frequency.detail + ")",
                   fmt::join(h.freq_before_mhz, ","),
                   fmt::join(r.footer ? r.footer->freq_after_mhz : std::vector<double>{}, ","))});
  f.push_back({"thermal", fmt::format("throttle counters={} rapl={}",
                                      h.throttle_counters.empty() ? "-" : h.throttle_counters,
                                      h.rapl.empty() ? "-" : h.rapl)});
  f.push_back({"bandwidth", h.bandwidth_gbs
                                ? fmt::format("{:.2f} GB/s (measured)", *h.bandwidth_gbs)
                                : "not measured (header bandwidth_gbs is null): no "
                                  "roofline %"});
  if (r.footer && !r.footer->stop.empty()) f.push_back({"stop", r.footer->stop});
  return s;
}

Section throughput_section(const Report& r) {
  Section s{"phases", "Phase breakdown", {}, {}, {}};
  Table t = make_table({"phase", "total ms", "count", "avg ms", "%", "from"}, 1);
  int64_t total = 0;
  for (const PhaseRow& p : r.phases) {
    total += p.total_ns;
    t.rows.push_back({p.name, fmt_ms(static_cast<double>(p.total_ns)), std::to_string(p.count),
                      p.count ? fmt_ms(static_cast<double>(p.total_ns) / p.count) : "-",
                      fmt::format("{:.1f}%", 100 * p.share), p.source});
  }
  t.rows.push_back({"TOTAL", fmt_ms(static_cast<double>(total)), "", "", "", ""});
  s.tables.push_back({"", std::move(t)});
  const Throughput& tp = r.throughput;
  auto& f = s.facts;
  f.push_back(
      {"TTFT", tp.ttft_ms ? fmt::format("{:.2f} ms (from {})", *tp.ttft_ms, tp.ttft_source) : "-"});
  auto with_footer = [](const std::optional<double>& mine, const std::optional<double>& footer) {
    std::string out = fmt_opt(mine, "{:.2f}");
    if (mine && footer && std::abs(*footer - *mine) > 0.01 * std::abs(*mine))
      out += fmt::format(" (footer says {:.2f})", *footer);
    return out;
  };
  // A phase without steps (a pp bench log has no decode, a `pacer run` cut before its first
  // token no prefill) says so instead of "- tok/s over 0 tokens".
  const std::string no_steps = "none: the log has no steps of this phase";
  f.push_back({"prefill", tp.prefill_tokens > 0 || tp.prefill_tok_s
                              ? fmt::format("{} tok/s over {} tokens",
                                            with_footer(tp.prefill_tok_s, tp.footer_prefill_tok_s),
                                            tp.prefill_tokens)
                              : no_steps});
  f.push_back(
      {"decode", tp.decode_tokens > 0 || tp.decode_tok_s
                     ? fmt::format("{} tok/s over {} tokens; step latency p50 {} / p95 "
                                   "{} / p99 {} ms",
                                   with_footer(tp.decode_tok_s, tp.footer_decode_tok_s),
                                   tp.decode_tokens, fmt_ms(r.decode_steps.p50_ns),
                                   fmt_ms(r.decode_steps.p95_ns), fmt_ms(r.decode_steps.p99_ns))
                     : no_steps});
  if (tp.decode_roofline_tok_s && tp.decode_tokens > 0) {
    std::string text = fmt::format(
        "{:.1f} tok/s (bandwidth / {} bytes per token){}", *tp.decode_roofline_tok_s,
        tp.decode_kv_bytes_per_token > 0
            ? fmt::format("(matmul + {} of KV cache)",
                          tp.decode_kv_bytes_per_token >= 1e6
                              ? fmt::format("{:.1f} MB", tp.decode_kv_bytes_per_token / 1e6)
                              : fmt::format("{:.1f} kB", tp.decode_kv_bytes_per_token / 1e3))
            : std::string("matmul"),
        tp.decode_tok_s ? fmt::format(": this run reaches {:.0f}%",
                                      100 * *tp.decode_tok_s / *tp.decode_roofline_tok_s)
                        : "");
    // Where the attention's flops bind, the ceiling is matmul bytes at the bandwidth plus them at
    // the measured rate: say so, and the run against bandwidth alone.
    if (tp.decode_bandwidth_roofline_tok_s && tp.fma_gflops) {
      text = fmt::format(
          "{:.1f} tok/s (matmul bytes at the bandwidth, then attention's {:.2f} GFLOP per token at "
          "the measured {:.0f} GFLOP/s: it is bound by its flops, not its {} of KV cache){}; "
          "bandwidth alone: {:.1f} tok/s{}",
          *tp.decode_roofline_tok_s, tp.decode_attention_flops_per_token / 1e9, *tp.fma_gflops,
          tp.decode_kv_bytes_per_token >= 1e6
              ? fmt::format("{:.1f} MB", tp.decode_kv_bytes_per_token / 1e6)
              : fmt::format("{:.1f} kB", tp.decode_kv_bytes_per_token / 1e3),
          tp.decode_tok_s ? fmt::format(": this run reaches {:.0f}%",
                                        100 * *tp.decode_tok_s / *tp.decode_roofline_tok_s)
                          : "",
          *tp.decode_bandwidth_roofline_tok_s,
          tp.decode_tok_s ? fmt::format(" ({:.0f}%)", 100 * *tp.decode_tok_s /
                                                          *tp.decode_bandwidth_roofline_tok_s)
                          : "");
    }
    f.push_back({"decode roofline", std::move(text)});
  }
  f.push_back({"load", fmt_opt(tp.load_ms, "{:.1f} ms")});
  f.push_back({"wall", fmt_opt(tp.wall_ms, "{:.1f} ms")});
  f.push_back(
      {"peak RSS", tp.peak_rss_kb ? fmt::format("{:.1f} MB", *tp.peak_rss_kb / 1024.0) : "-"});
  if (r.incomplete_steps)
    s.notes.push_back(
        fmt::format("{} step(s) have ops but no step line (cut off): they count in "
                    "the op tables only",
                    r.incomplete_steps));
  return s;
}

Section bottleneck_section(const Report& r) {
  const Bottleneck& b = r.bottleneck;
  Section s{"bottleneck", "Bottleneck analysis", {}, {}, {}};
  if (!b.dominant_phase.empty())
    s.facts.push_back(
        {"primary bottleneck", fmt::format("{} -- {} ({:.1f}% of the run)", b.dominant_phase,
                                           fmt_ms(static_cast<double>(b.dominant_phase_ns)) + " ms",
                                           100 * b.dominant_phase_share)});
  if (!b.dominant_op.empty())
    s.facts.push_back(
        {"dominant op",
         fmt::format("{} :: {} ({:.1f}% of {} op time)", phase_name(b.dominant_op_phase),
                     b.dominant_op, 100 * b.dominant_op_share, phase_name(b.dominant_op_phase))});
  s.facts.push_back({"verdict", std::string(bottleneck_name(b.verdict))});
  for (const Finding& f : b.findings) {
    s.notes.push_back(fmt::format("[{}] {}: {}", bottleneck_name(f.kind), f.subject, f.evidence));
    for (const std::string& sug : f.suggestions) s.notes.push_back("    - " + sug);
  }
  for (const std::string& n : b.notes) s.notes.push_back("note: " + n);
  return s;
}

}  // namespace

std::vector<Section> build_sections(const Report& r, int top) {
  std::vector<Section> out;
  out.push_back(run_section(r));

  Section ev{"events", "Event type summary", {}, {}, {}};
  Table et = make_table(concat({"type"}, kStatHead), 1);
  for (const EventTypeRow& e : r.event_types) {
    std::vector<std::string> row = {e.type};
    if (e.dist) {
      auto c = stat_cells(*e.dist);
      c[0] = std::to_string(e.count);
      row = concat(row, c);
    } else {
      row.push_back(std::to_string(e.count));
      row.resize(kStatHead.size() + 1, "");
    }
    et.rows.push_back(std::move(row));
  }
  ev.tables.push_back({"", std::move(et)});
  for (const std::string& w : r.read.warnings()) ev.notes.push_back("warning: " + w);
  out.push_back(std::move(ev));

  out.push_back(throughput_section(r));

  Section ops{"ops", "Op statistics", {}, {}, {}};
  ops.tables.push_back({"By parent (phase)", op_table(r.by_phase, 0, "phase")});
  ops.tables.push_back({"By parent :: op", op_table(r.by_phase_op, top)});
  ops.tables.push_back({"Op aggregate (all parents)", op_table(r.by_op, top)});
  out.push_back(std::move(ops));

  Section layers{"layers", "Per layer", {}, {}, {}};
  Table bt = make_table(concat(concat({"block (per step)"}, kStatHead), {"share"}), 1);
  std::vector<BlockRow> blocks = r.blocks;
  std::stable_sort(blocks.begin(), blocks.end(), [](const BlockRow& a, const BlockRow& b) {
    return a.per_step.total_ns > b.per_step.total_ns;
  });
  for (const BlockRow& b : blocks) {
    if (top > 0 && static_cast<int>(bt.rows.size()) >= top) {
      ++bt.omitted;
      continue;
    }
    bt.rows.push_back(
        concat(concat({fmt::format("{} :: block_{}_total", phase_name(b.phase), b.layer)},
                      stat_cells(b.per_step)),
               {fmt::format("{:.1f}%", 100 * b.share)}));
  }
  layers.tables.push_back({"Block totals per step", std::move(bt)});
  layers.tables.push_back({"Per layer :: op", op_table(r.by_layer_op, top)});
  out.push_back(std::move(layers));

  Section comp{"components", "Aggregated by component", {}, {}, {}};
  Table ct = make_table(
      {"phase", "component", "total ms", "%", "events", "per step avg ms", "p50 ms", "p95 ms"}, 2);
  for (const ComponentRow& c : r.components)
    ct.rows.push_back({std::string(phase_name(c.phase)), std::string(component_name(c.component)),
                       fmt_ms(static_cast<double>(c.per_step.total_ns)),
                       fmt::format("{:.1f}%", 100 * c.share), std::to_string(c.events),
                       fmt_ms(c.per_step.mean_ns()), fmt_ms(c.per_step.p50_ns),
                       fmt_ms(c.per_step.p95_ns)});
  comp.tables.push_back({"", std::move(ct)});
  out.push_back(std::move(comp));

  Section sh{"shapes", "Matmul shapes", {}, {}, {}};
  Table st = make_table({"op", "type", "rows x cols", "tokens", "count", "total ms", "avg us",
                         "p50 us", "p95 us", "p99 us", "GB/s", "% roof", "MHz"},
                        3);
  for (const ShapeRow& row : r.shapes) {
    if (top > 0 && static_cast<int>(st.rows.size()) >= top) {
      ++st.omitted;
      continue;
    }
    st.rows.push_back({row.name, row.wtype.empty() ? "-" : row.wtype,
                       fmt::format("{} x {}", row.rows, row.cols), std::to_string(row.tokens),
                       std::to_string(row.dist.count),
                       fmt_ms(static_cast<double>(row.dist.total_ns)), fmt_us(row.dist.mean_ns()),
                       fmt_us(row.dist.p50_ns), fmt_us(row.dist.p95_ns), fmt_us(row.dist.p99_ns),
                       fmt_opt(row.cpu.gbs, "{:.2f}"), fmt_opt(row.cpu.roofline_pct, "{:.0f}"),
                       fmt_opt(row.cpu.freq_mean_mhz, "{:.0f}")});
  }
  sh.tables.push_back({"", std::move(st)});
  out.push_back(std::move(sh));

  Section wk{"workers", "Workers", {}, {}, {}};
  Table wt = make_table(concat({"worker", "cpus", "chunks", "busy ms"}, kCpuHead), 2);
  wt.head.push_back("migrations");
  wt.numeric.push_back(true);
  for (const WorkerRow& w : r.workers)
    wt.rows.push_back(
        concat(concat({std::to_string(w.w), fmt::format("{}", fmt::join(w.cpus, ",")),
                       std::to_string(w.chunks), fmt_ms(static_cast<double>(w.busy_ns))},
                      cpu_cells(w.cpu)),
               {std::to_string(w.cpu.migrations)}));
  wk.tables.push_back({"", std::move(wt)});
  out.push_back(std::move(wk));

  out.push_back(bottleneck_section(r));

  Section legend{"legend", "Legend", {}, {}, {}};
  legend.notes = {
      fmt::format("count/total/avg/min/max are exact; p50/p95/p99 are nearest-rank percentiles "
                  "from a log-bucket histogram, within {:.1f}% of the exact value",
                  100 * LogHistogram::kRelativeError),
      "totals in ms, per-event statistics in us; share: of the phase's op time (by-parent rows: "
      "of all op time)",
      "MHz mean: effective frequency weighted by worker time; MHz min: lowest worker sample",
      "IPC: instructions / cycles (only where both counters were live)",
      "GB/s: bytes streamed (weights; attention: the KV cache) / op time; % roof: of the "
      "header's measured bandwidth_gbs",
      "% slice: the same bytes / each op's longest worker slice, % of the roofline: the "
      "kernels' own rate, without the dispatch, the join and the recorder's brackets around the "
      "slices (the bottleneck findings' \"worker slices alone\"; memory- or compute-bound is "
      "judged by it)",
      "off-CPU: run-queue time / worker wall time (runnable but not running)",
      "wait: op time not covered by its longest worker slice (dispatch, join, late-starting "
      "workers)",
      "imbal: in ops run by 2+ workers, the share of worker time spent done and waiting for the "
      "op's slowest worker (uneven worker speed that work stealing, when on, did not absorb)",
      "rec: at most this share of the op time is the recorder's own counter reads (ops x the "
      "header's bracket cost / op time; worker rows: slices x bracket / busy time); near 100% "
      "the op is shorter than its recorded time",
      "block_N_total: a block's summed op time per step; component rows likewise per step",
      "phase breakdown: prefill/decode = their step times minus sampling ops inside the steps"};
  const BottleneckThresholds& th = r.thresholds;
  legend.notes.push_back(fmt::format(
      "bottleneck thresholds: memory-bound at >= {:.0f}% of roofline; frequency-limited below "
      "{:.0f}% of the reference; off-CPU above {:.0f}% runq; overhead-bound above {:.0f}% of step "
      "time outside ops; load-imbalanced above {:.0f}% of worker time waiting at the joins; "
      "disturbed when decode steps over {:.1f}x the median of the steps around them add up to "
      "more than {:.0f}% of decode above it; low IPC below {:.1f}",
      th.memory_bound_roofline_pct, 100 * th.frequency_ratio, 100 * th.offcpu_share,
      100 * th.overhead_share, 100 * th.imbalance_share, th.slow_step_ratio,
      100 * th.disturbed_share, th.low_ipc));
  if (r.reference_freq_mhz)
    legend.notes.push_back(fmt::format("reference frequency: {:.0f} MHz ({})",
                                       *r.reference_freq_mhz, r.reference_freq_source));
  out.push_back(std::move(legend));
  return out;
}

}  // namespace pacer::analysis::detail
