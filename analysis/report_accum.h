#pragma once
// Accumulators of the streaming report pass (internal to analysis/report_*.cpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "analysis/event_log.h"
#include "analysis/histogram.h"
#include "analysis/report.h"

namespace pacer::analysis::detail {

struct DistAccum {
  LogHistogram hist;
  int64_t total_ns = 0;

  void add(int64_t ns) {
    hist.add(ns);
    total_ns += ns;
  }
  void merge(const DistAccum& o) {
    hist.merge(o.hist);
    total_ns += o.total_ns;
  }
  Dist finish() const {
    Dist d;
    d.count = hist.count();
    d.total_ns = total_ns;
    d.min_ns = hist.min();
    d.max_ns = hist.max();
    d.p50_ns = hist.percentile(0.50);
    d.p95_ns = hist.percentile(0.95);
    d.p99_ns = hist.percentile(0.99);
    return d;
  }
};

// Sums behind CpuMetrics; see CpuMetrics for what each becomes.
struct CpuAccum {
  double freq_weighted = 0, freq_weight = 0;
  double freq_min = std::numeric_limits<double>::infinity();
  double instructions = 0, cycles = 0;
  // Bytes streamed (weights, KV cache) and the time of the ops that streamed them.
  int64_t weight_bytes = 0, kv_bytes = 0, weight_ns = 0;
  int64_t weight_slice_ns = 0;  // the same ops' longest worker slices (their op time without one)
  int64_t runq_ns = 0, runq_wall_ns = 0;
  bool has_runq = false;
  int64_t migrations = 0;
  int64_t wait_ns = 0, wait_wall_ns = 0;
  int64_t imbalance_ns = 0, imbalance_wall_ns = 0;
  int64_t n_ops = 0, op_wall_ns = 0;

  void add_worker(const WorkerSample& w) {
    const double wall = static_cast<double>(std::max<int64_t>(w.duration_ns(), 1));
    if (w.freq_mhz && *w.freq_mhz > 0) {
      freq_weighted += *w.freq_mhz * wall;
      freq_weight += wall;
      freq_min = std::min(freq_min, *w.freq_mhz);
    }
    std::optional<double> ins, cyc;
    for (const Counter& c : w.counters) {
      if (c.name == eventlog::counter_key::kInstructions) {
        ins = c.value;
      } else if (c.name == eventlog::counter_key::kCycles) {
        cyc = c.value;
      }
    }
    if (ins && cyc) {
      instructions += *ins;
      cycles += *cyc;
    }
    if (w.runq_ns) {
      has_runq = true;
      runq_ns += *w.runq_ns;
      runq_wall_ns += std::max<int64_t>(w.duration_ns(), 0);
    }
    if (w.cpu >= 0 && w.cpu_end >= 0 && w.cpu != w.cpu_end) ++migrations;
  }
  void add_op(const OpEvent& e) {
    ++n_ops;
    op_wall_ns += std::max<int64_t>(e.duration_ns(), 0);
    int64_t longest = -1;
    for (const WorkerSample& w : e.workers) {
      add_worker(w);
      longest = std::max(longest, w.duration_ns());
    }
    if (longest >= 0) {
      wait_ns += std::max<int64_t>(e.duration_ns() - longest, 0);
      wait_wall_ns += e.duration_ns();
    }
    if (e.workers.size() >= 2 && longest > 0) {
      for (const WorkerSample& w : e.workers) {
        imbalance_ns += longest - std::max<int64_t>(w.duration_ns(), 0);
      }
      imbalance_wall_ns += longest * static_cast<int64_t>(e.workers.size());
    }
    if (e.streamed_bytes() > 0) {
      weight_bytes += e.weight_bytes;
      kv_bytes += e.kv_bytes;
      weight_ns += e.duration_ns();
      weight_slice_ns += longest > 0 ? longest : e.duration_ns();
    }
  }
  void merge(const CpuAccum& o) {
    freq_weighted += o.freq_weighted;
    freq_weight += o.freq_weight;
    freq_min = std::min(freq_min, o.freq_min);
    instructions += o.instructions;
    cycles += o.cycles;
    weight_bytes += o.weight_bytes;
    kv_bytes += o.kv_bytes;
    weight_ns += o.weight_ns;
    weight_slice_ns += o.weight_slice_ns;
    runq_ns += o.runq_ns;
    runq_wall_ns += o.runq_wall_ns;
    has_runq = has_runq || o.has_runq;
    migrations += o.migrations;
    wait_ns += o.wait_ns;
    wait_wall_ns += o.wait_wall_ns;
    imbalance_ns += o.imbalance_ns;
    imbalance_wall_ns += o.imbalance_wall_ns;
    n_ops += o.n_ops;
    op_wall_ns += o.op_wall_ns;
  }
  CpuMetrics finish(std::optional<double> bandwidth_gbs,
                    std::optional<double> bracket_ns = std::nullopt) const {
    CpuMetrics m;
    if (freq_weight > 0) {
      m.freq_mean_mhz = freq_weighted / freq_weight;
      m.freq_min_mhz = freq_min;
    }
    if (cycles > 0) m.ipc = instructions / cycles;
    m.weight_bytes = weight_bytes;
    m.kv_bytes = kv_bytes;
    if (weight_bytes + kv_bytes > 0 && weight_ns > 0) {
      m.gbs =
          static_cast<double>(weight_bytes + kv_bytes) / static_cast<double>(weight_ns);  // B/ns
      if (bandwidth_gbs && *bandwidth_gbs > 0) m.roofline_pct = 100.0 * *m.gbs / *bandwidth_gbs;
    }
    if (weight_bytes + kv_bytes > 0 && weight_slice_ns > 0) {
      m.slice_gbs = static_cast<double>(weight_bytes + kv_bytes) /
                    static_cast<double>(weight_slice_ns);  // B/ns
      if (bandwidth_gbs && *bandwidth_gbs > 0)
        m.slice_roofline_pct = 100.0 * *m.slice_gbs / *bandwidth_gbs;
    }
    if (has_runq && runq_wall_ns > 0)
      m.offcpu_share = static_cast<double>(runq_ns) / static_cast<double>(runq_wall_ns);
    m.migrations = migrations;
    m.wait_ns = wait_ns;
    if (wait_wall_ns > 0)
      m.wait_share = static_cast<double>(wait_ns) / static_cast<double>(wait_wall_ns);
    m.imbalance_ns = imbalance_ns;
    if (imbalance_wall_ns > 0) {
      m.imbalance_share =
          static_cast<double>(imbalance_ns) / static_cast<double>(imbalance_wall_ns);
    }
    if (bracket_ns && op_wall_ns > 0) {
      m.recording_share =
          std::min(1.0, static_cast<double>(n_ops) * *bracket_ns / static_cast<double>(op_wall_ns));
    }
    return m;
  }
};

// Fills r.bottleneck from the rest of the report.
void classify_bottleneck(Report& r, const BottleneckThresholds& t);

}  // namespace pacer::analysis::detail
