#include "analysis/compare.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/compare_words.h"

namespace pacer::analysis {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double finite_or(double v, double fallback) {
  return std::isfinite(v) ? v : fallback;
}

bool significant(double p_welch, double p_u, double alpha) {
  return (std::isfinite(p_welch) && p_welch < alpha) || (std::isfinite(p_u) && p_u < alpha);
}

double pct_change(double a, double b) {
  return a != 0 ? (b - a) / std::fabs(a) * 100 : kNaN;
}

template <class T>
std::string opt_text(const std::optional<T>& v) {
  return v ? fmt::format("{}", *v) : std::string("(absent)");
}

void compare_field(std::vector<std::string>& out, const char* what, const std::string& a,
                   const std::string& b) {
  if (a != b) out.push_back(fmt::format("{} differs: '{}' vs '{}'", what, a, b));
}

// A setting both logs record (a log older than the key has none: not a difference).
template <class T>
void compare_recorded(std::vector<std::string>& out, const char* what, const std::optional<T>& a,
                      const std::optional<T>& b) {
  if (a && b) compare_field(out, what, fmt::format("{}", *a), fmt::format("{}", *b));
}

CycleStats cycle_stats(const std::vector<double>& step_ns) {
  CycleStats c;
  std::vector<double> ms;
  ms.reserve(step_ns.size());
  for (double ns : step_ns) ms.push_back(ns * 1e-6);
  c.ms = stats::summarize_series(ms);
  c.p50 = stats::quantile(ms, 0.5);
  c.p90 = stats::quantile(ms, 0.9);
  c.p99 = stats::quantile(ms, 0.99);
  c.min = *std::min_element(ms.begin(), ms.end());
  c.max = *std::max_element(ms.begin(), ms.end());
  c.sorted_desc_ms = ms;
  std::sort(c.sorted_desc_ms.begin(), c.sorted_desc_ms.end(), std::greater<>());
  return c;
}

std::vector<double> beta_series(const RunCycles& run, const std::vector<Cell>* cells) {
  std::vector<double> beta(run.cycles(), 0.0);
  if (!cells) return beta;
  for (size_t i = 0; i < run.cycles(); ++i) beta[i] = (*cells)[i].time_ns / run.step_ns[i] * 100;
  return beta;
}

std::vector<double> mu_series(const RunCycles& run, const std::vector<Cell>* cells, Metric m) {
  std::vector<double> mu(run.cycles(), kNaN);
  if (!cells) return mu;
  for (size_t i = 0; i < run.cycles(); ++i) mu[i] = (*cells)[i].value(m);
  return mu;
}

size_t count_finite(const std::vector<double>& x) {
  return static_cast<size_t>(
      std::count_if(x.begin(), x.end(), [](double v) { return std::isfinite(v); }));
}

struct RowContext {
  const RunCycles* run[2];
  double t0_ns;    // normal mean step time
  double workers;  // CPUs the workers ran on (host pseudo-op rows sum over them)
  const CompareOptions* opts;
  const Attribution* attribution;  // the impact of host rows is their attribution part
};

const OpAttribution* find_op(const Attribution& a, const std::string& op) {
  for (const OpAttribution& o : a.ops)
    if (o.op == op) return &o;
  return nullptr;
}

// The time (ns per step, signed) a metric's change accounts for, by the attribution's own model
// (compare_attribution.h): the op's (or, for the pseudo-ops, the whole step's) LMDI part.
// NaN when the model does not cover the metric or the op could not be split.
double attributed_ns(const Attribution& a, const OpAttribution* op, Metric m) {
  auto part = [&](Part p) { return op ? op->part(p) : a.part(p); };
  if (op && op->level == SplitLevel::None) return kNaN;
  switch (m) {
    case Metric::CpuFrequency:
      return part(Part::Frequency);
    case Metric::Ipc:
      return part(Part::Ipc);
    case Metric::Instructions:
      return part(Part::Instructions);
    // The composite rows carry what no row of their own covers: cycles at a constant clock that
    // no PMU split into IPC and instructions ("CPU work"), and on-CPU time that could not be
    // split at all. Where the counters split them, the IPC / instructions / frequency rows carry
    // the parts and the composite adds nothing (impact 0) instead of repeating them.
    case Metric::Cycles:
      return part(Part::CpuWork);
    case Metric::OncpuTime:
      return part(Part::CpuWork) + part(Part::OnCpu);
    case Metric::RunqDelay:
      return part(Part::RunQueue);
    default:
      return kNaN;
  }
}

MetricRow make_row(const RowContext& ctx, const std::string& op, int device,
                   std::optional<Metric> metric, const std::vector<double> beta[2]) {
  MetricRow r;
  r.op = op;
  r.device = device;
  r.metric = metric;
  r.pseudo = op == kOncpuOp || op == kRunqOp;
  for (int i = 0; i < 2; ++i) r.beta[i] = stats::summarize_series(beta[i]);
  r.d_beta = r.beta[1].mean - r.beta[0].mean;
  r.z_beta = stats::z_score(r.beta[0], r.beta[1], stats::relative_sd_floor(r.beta[0], r.beta[1]));
  r.p_beta = stats::welch_t_test(r.beta[0], r.beta[1]).p;
  r.u_p_beta = stats::mann_whitney_u_series(beta[0], beta[1]).p;
  // Host pseudo-op time sums over the workers; per-worker terms keep it comparable to op rows.
  const double per_worker = (r.pseudo && device == kHostDevice) ? ctx.workers : 1.0;
  double model = kNaN;
  if (metric) {
    std::vector<double> mu[2];
    for (int i = 0; i < 2; ++i) {
      mu[i] = mu_series(*ctx.run[i], ctx.run[i]->find(op, device), *metric);
      r.mu[i] = stats::summarize_series(mu[i]);
    }
    r.d_mu = r.mu[1].mean - r.mu[0].mean;
    r.z_mu = stats::z_score(r.mu[0], r.mu[1], stats::relative_sd_floor(r.mu[0], r.mu[1]));
    const double offset = stats::log_offset(mu[0], mu[1]);
    const std::vector<double> log_a = stats::log_transform(mu[0], offset);
    const std::vector<double> log_b = stats::log_transform(mu[1], offset);
    r.z_log_mu =
        stats::z_score(stats::summarize(log_a), stats::summarize(log_b), stats::kLogSdFloor);
    r.p_mu = stats::welch_t_test(r.mu[0], r.mu[1]).p;
    r.u_p_mu = stats::mann_whitney_u_series(mu[0], mu[1]).p;
    // The time the metric's change accounts for, by the one time model of
    // compare_attribution.h, so the table's Impact and the attribution agree. Host rows take
    // their op's attribution part (the pseudo-ops: the step's); a CPU's rows apply the same LMDI
    // to that CPU's own on-CPU time: L(on-CPU_a, on-CPU_b) x |ln(μ_b / μ_a)| for the factors of
    // on-CPU time (frequency, IPC, instructions, cycles), and time itself for on-CPU time and
    // run-queue wait.
    const double m0 = r.mu[0].mean, m1 = r.mu[1].mean;
    if (device == kHostDevice) {
      const OpAttribution* oa = r.pseudo ? nullptr : find_op(*ctx.attribution, op);
      const bool covered =
          r.pseudo ? (op == kOncpuOp || *metric == Metric::RunqDelay) : oa != nullptr;
      if (covered)
        model = std::fabs(attributed_ns(*ctx.attribution, oa, *metric)) / ctx.t0_ns * 100;
    } else {
      std::array<double, 2> oncpu{}, mhz{};
      for (int i = 0; i < 2; ++i) {
        const auto* cells = ctx.run[i]->find(op, device);
        oncpu[i] = stats::summarize(mu_series(*ctx.run[i], cells, Metric::OncpuTime)).mean;
        mhz[i] = stats::summarize(mu_series(*ctx.run[i], cells, Metric::CpuFrequency)).mean;
      }
      const bool have_oncpu = oncpu[0] > 0 && oncpu[1] > 0;
      const double lm = have_oncpu ? stats::log_mean(oncpu[0], oncpu[1]) : kNaN;
      switch (*metric) {
        case Metric::CpuFrequency:
        case Metric::Ipc:
        case Metric::Instructions:
          if (m0 > 0 && m1 > 0 && have_oncpu)
            model = lm * std::fabs(std::log(m1 / m0)) / ctx.t0_ns * 100;
          break;
        case Metric::OncpuTime: {
          // What the CPU's clock does not explain (its frequency row carries that part).
          const double from_clock =
              mhz[0] > 0 && mhz[1] > 0 && have_oncpu ? -lm * std::log(mhz[1] / mhz[0]) : 0.0;
          model = std::fabs(r.d_mu - from_clock) / ctx.t0_ns * 100;
          break;
        }
        case Metric::RunqDelay:
          model = std::fabs(r.d_mu) / ctx.t0_ns * 100;
          break;
        default:
          break;
      }
    }
  }
  // Rows the model covers take its figure; the others the change of their share of the step.
  r.impact_pts = std::isfinite(model) ? model : std::fabs(r.d_beta) / per_worker;
  const double cap = ctx.opts->z_cap;
  const double evidence = std::min(std::fabs(finite_or(r.z_beta, 0)), cap) +
                          std::min(std::fabs(finite_or(r.z_log_mu, 0)), cap);
  r.score = r.impact_pts * evidence;
  return r;
}

std::vector<MetricRow> build_rows(const RowContext& ctx) {
  std::set<std::pair<std::string, int>> keys;
  for (const RunCycles* run : ctx.run)
    for (const auto& [key, series] : run->cells) keys.insert(key);
  std::vector<MetricRow> rows;
  for (const auto& [op, device] : keys) {
    std::vector<double> beta[2];
    for (int i = 0; i < 2; ++i) beta[i] = beta_series(*ctx.run[i], ctx.run[i]->find(op, device));
    bool any_metric = false;
    for (int m = 0; m < kMetricCount; ++m) {
      const auto metric = static_cast<Metric>(m);
      const size_t n0 = count_finite(mu_series(*ctx.run[0], ctx.run[0]->find(op, device), metric));
      const size_t n1 = count_finite(mu_series(*ctx.run[1], ctx.run[1]->find(op, device), metric));
      if (n0 == 0 || n1 == 0) continue;
      any_metric = true;
      rows.push_back(make_row(ctx, op, device, metric, beta));
    }
    if (!any_metric) rows.push_back(make_row(ctx, op, device, std::nullopt, beta));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const MetricRow& x, const MetricRow& y) {
    if (x.score != y.score) return x.score > y.score;
    return x.impact_pts > y.impact_pts;
  });
  return rows;
}

std::vector<DeviceFrequency> device_frequencies(const RunCycles& a, const RunCycles& b) {
  std::vector<DeviceFrequency> out;
  std::set<int> devices;
  for (const auto& [dev, s] : a.step_freq_mhz) devices.insert(dev);
  for (int dev : devices) {
    auto ib = b.step_freq_mhz.find(dev);
    if (ib == b.step_freq_mhz.end()) continue;
    const std::vector<double>& sa = a.step_freq_mhz.at(dev);
    const std::vector<double>& sb = ib->second;
    DeviceFrequency f;
    f.device = dev;
    f.mhz = {stats::summarize_series(sa), stats::summarize_series(sb)};
    if (f.mhz[0].n == 0 || f.mhz[1].n == 0) continue;
    f.pct_change = pct_change(f.mhz[0].mean, f.mhz[1].mean);
    f.p_welch = stats::welch_t_test(f.mhz[0], f.mhz[1]).p;
    f.p_u = stats::mann_whitney_u_series(sa, sb).p;
    out.push_back(f);
  }
  // CPUs first (ascending), the host last.
  std::stable_sort(out.begin(), out.end(), [](const auto& x, const auto& y) {
    return (x.device == kHostDevice) < (y.device == kHostDevice);
  });
  return out;
}

const MetricRow* find_row(const std::vector<MetricRow>& rows, const std::string& op, int device,
                          Metric m) {
  for (const MetricRow& r : rows)
    if (r.op == op && r.device == device && r.metric == m) return &r;
  return nullptr;
}

std::vector<Flag> rule_flags(const Comparison& c, const RowContext& ctx, const CompareOptions& o) {
  std::vector<Flag> flags;
  // 1. Frequency: a CPU's clock fell. Drops move every op's time alike and so barely move β; the
  //    rule catches them whatever their suspicion score.
  std::vector<int> dropped;
  std::array<double, 2> sum{};
  const DeviceFrequency* host = nullptr;
  for (const DeviceFrequency& f : c.frequency) {
    if (f.device == kHostDevice) {
      host = &f;
      continue;
    }
    if (f.pct_change <= -o.freq_drop_pct && significant(f.p_welch, f.p_u, o.alpha)) {
      dropped.push_back(f.device);
      sum[0] += f.mhz[0].mean;
      sum[1] += f.mhz[1].mean;
    }
  }
  if (dropped.empty() && host && host->pct_change <= -o.freq_drop_pct &&
      significant(host->p_welch, host->p_u, o.alpha)) {
    dropped.push_back(kHostDevice);
    sum = {host->mhz[0].mean, host->mhz[1].mean};
  }
  if (!dropped.empty()) {
    const auto k = static_cast<double>(dropped.size());
    const double a = sum[0] / k, b = sum[1] / k;
    Flag f{FlagKind::FrequencyDrop, "", dropped, "", pct_change(a, b)};
    // Against the normal run's own reference: its pre-run clock (freq_before_mhz, measured on
    // idle workers) where the log has one, else the highest step clock of either run. The TSC
    // ("nominal") rate is no reference: a turbo clock reads 142% of it.
    double ref = 0;
    std::string ref_name;
    const auto& before = c.header[0].freq_before_mhz;
    if (!before.empty()) {
      for (double v : before) ref += v / static_cast<double>(before.size());
      ref_name = "the normal run's pre-run clock";
    } else {
      for (const auto& series : c.step_freq_mhz)
        for (double v : series)
          if (std::isfinite(v)) ref = std::max(ref, v);
      ref_name = "the highest step clock seen";
    }
    f.text = fmt::format("CPU frequency dropped on {}: {:.0f} -> {:.0f} MHz ({:+.1f}%){}",
                         describe_devices(dropped), a, b, f.pct_change,
                         ref > 0 ? fmt::format("; {:.0f}% -> {:.0f}% of {} ({:.0f} MHz)",
                                               a / ref * 100, b / ref * 100, ref_name, ref)
                                 : "");
    flags.push_back(std::move(f));
  } else {
    // No CPU-wide drop: look for ops that ran at a lower clock (a drop confined to some phases).
    std::vector<const MetricRow*> hits;
    for (const MetricRow& r : c.rows) {
      if (r.pseudo || r.device != kHostDevice || r.metric != Metric::CpuFrequency) continue;
      const double share = (r.beta[0].mean + r.beta[1].mean) / 2;
      if (share < 1.0) continue;
      if (pct_change(r.mu[0].mean, r.mu[1].mean) <= -o.freq_drop_pct &&
          significant(r.p_mu, r.u_p_mu, o.alpha))
        hits.push_back(&r);
    }
    for (size_t i = 0; i < hits.size() && i < 3; ++i) {
      const MetricRow& r = *hits[i];
      Flag f{
          FlagKind::FrequencyDrop, "", {kHostDevice}, r.op, pct_change(r.mu[0].mean, r.mu[1].mean)};
      f.text = fmt::format("CPU frequency during {} dropped: {:.0f} -> {:.0f} MHz ({:+.1f}%)", r.op,
                           r.mu[0].mean, r.mu[1].mean, f.pct_change);
      flags.push_back(std::move(f));
    }
  }
  // 2. Run queue: the workers waited for a CPU noticeably longer.
  if (const MetricRow* rq =
          find_row(c.rows, std::string(kRunqOp), kHostDevice, Metric::RunqDelay)) {
    const double pts = rq->d_mu / ctx.workers / ctx.t0_ns * 100;
    if (pts >= o.runq_flag_pts && significant(rq->p_mu, rq->u_p_mu, o.alpha)) {
      std::vector<int> devs;
      for (int dev : ctx.run[1]->cpu_devices) {
        const MetricRow* d = find_row(c.rows, std::string(kRunqOp), dev, Metric::RunqDelay);
        if (d && d->d_mu > 0 && significant(d->p_mu, d->u_p_mu, o.alpha)) devs.push_back(dev);
      }
      Flag f{FlagKind::RunQueue, "", devs, "", pct_change(rq->mu[0].mean, rq->mu[1].mean)};
      f.text = fmt::format(
          "Run-queue wait grew{}: {:.1f} -> {:.1f} us per step summed over workers "
          "(+{:.1f} pts of the step per worker)",
          devs.empty() ? "" : " on " + describe_devices(devs), rq->mu[0].mean * 1e-3,
          rq->mu[1].mean * 1e-3, pts);
      flags.push_back(std::move(f));
    }
  }
  // 3. and 4. Counters of an op that matters (>= 1% of the cycle).
  for (const MetricRow& r : c.rows) {
    if (r.pseudo || r.device != kHostDevice || !r.metric) continue;
    if ((r.beta[0].mean + r.beta[1].mean) / 2 < 1.0) continue;
    if (!significant(r.p_mu, r.u_p_mu, o.alpha)) continue;
    const double pct = pct_change(r.mu[0].mean, r.mu[1].mean);
    if (r.metric == Metric::Ipc && pct <= -o.counter_flag_pct) {
      flags.push_back({FlagKind::IpcLoss,
                       fmt::format("IPC of {} fell: {:.2f} -> {:.2f} ({:+.1f}%)", r.op,
                                   r.mu[0].mean, r.mu[1].mean, pct),
                       {kHostDevice},
                       r.op,
                       pct});
    } else if (r.metric == Metric::Instructions && std::fabs(pct) >= o.counter_flag_pct) {
      flags.push_back(
          {FlagKind::Instructions,
           fmt::format("{} executed {} instructions: {:.3g} -> {:.3g} per step "
                       "({:+.1f}%)",
                       r.op, pct > 0 ? "more" : "fewer", r.mu[0].mean, r.mu[1].mean, pct),
           {kHostDevice},
           r.op,
           pct});
    }
  }
  return flags;
}

void mark_flagged_rows(Comparison& c, const CompareOptions& opts) {
  for (MetricRow& r : c.rows) {
    if (!r.metric) continue;
    for (const Flag& f : c.flags) {
      const bool device_hit =
          std::find(f.devices.begin(), f.devices.end(), r.device) != f.devices.end() ||
          f.devices.empty();
      switch (f.kind) {
        case FlagKind::FrequencyDrop:
          // Only rows whose own clock fell: a CPU-wide flag should not mark ops that kept theirs.
          if (r.metric == Metric::CpuFrequency &&
              (f.op.empty() ? device_hit || r.device == kHostDevice : r.op == f.op) &&
              pct_change(r.mu[0].mean, r.mu[1].mean) <= -opts.freq_drop_pct)
            r.flagged = true;
          break;
        case FlagKind::RunQueue:
          if (r.metric == Metric::RunqDelay && (r.op == kRunqOp || r.d_mu > 0) &&
              (device_hit || r.device == kHostDevice))
            r.flagged = true;
          break;
        case FlagKind::IpcLoss:
          if (r.metric == Metric::Ipc && r.op == f.op) r.flagged = true;
          break;
        case FlagKind::Instructions:
          if (r.metric == Metric::Instructions && r.op == f.op) r.flagged = true;
          break;
      }
    }
  }
}

double vector_sum(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v;
  return s;
}

// See Comparison::membw_contention. Thresholds: the streaming rate falls by at least 5%, the
// streaming ops carry at least half of the step-time growth, the other ops grow by less than half
// the streaming ops' relative growth, the clock moves less than the frequency rule's threshold,
// and the run queue, quota and steal explain less than a quarter of the growth.
void detect_membw_contention(Comparison& c, const RunCycles& a, const RunCycles& b,
                             const CompareOptions& o) {
  const RunCycles* runs[2] = {&a, &b};
  std::array<double, 2> stream_ms{};
  for (size_t i = 0; i < 2; ++i) {
    const RunCycles& r = *runs[i];
    const double bytes = vector_sum(r.stream_bytes), ns = vector_sum(r.stream_ns);
    const auto n = static_cast<double>(r.cycles());
    c.stream_gbs[i] = bytes > 0 && ns > 0 ? bytes / ns : kNaN;  // bytes per ns = GB/s
    stream_ms[i] = ns / n * 1e-6;
    c.other_ops_ms[i] = vector_sum(r.other_ops_ns) / n * 1e-6;
  }
  const double d_step = c.attribution.delta_ns();
  if (!(d_step > 0) || !std::isfinite(c.stream_gbs[0]) || !std::isfinite(c.stream_gbs[1])) return;
  if (!c.compat.work_changes.empty()) return;
  const double rate_change = pct_change(c.stream_gbs[0], c.stream_gbs[1]);
  if (!(rate_change <= -5.0)) return;
  if ((stream_ms[1] - stream_ms[0]) * 1e6 < 0.5 * d_step) return;
  const double stream_growth = stream_ms[1] / stream_ms[0] - 1;
  const double other_growth =
      c.other_ops_ms[0] > 0 ? c.other_ops_ms[1] / c.other_ops_ms[0] - 1 : 0.0;
  if (other_growth >= 0.5 * stream_growth) return;
  // Contention for DRAM slows every op that streams weights, not one of them (that is the op's
  // own IPC or instructions): each streaming op with at least 5% of the streaming time must grow
  // by at least half the streaming ops' growth.
  for (const std::string& op : a.streaming_ops) {
    auto ia = a.timing.find(op), ib = b.timing.find(op);
    if (ia == a.timing.end() || ib == b.timing.end()) continue;
    std::array<double, 2> wall{};
    for (const OpTiming& t : ia->second) wall[0] += t.wall_ns;
    for (const OpTiming& t : ib->second) wall[1] += t.wall_ns;
    wall[0] /= static_cast<double>(a.cycles());
    wall[1] /= static_cast<double>(b.cycles());
    if (wall[0] < 0.05 * stream_ms[0] * 1e6) continue;
    if (wall[1] / wall[0] - 1 < 0.5 * stream_growth) return;
  }
  for (const DeviceFrequency& f : c.frequency)
    if (f.device == kHostDevice && std::fabs(f.pct_change) >= o.freq_drop_pct) return;
  const double runq = std::max(0.0, c.attribution.part(Part::RunQueue));
  if (runq >= 0.25 * d_step || c.quota_throttling || c.vm_steal) return;
  c.membw_contention = true;
}

}  // namespace

double Comparison::delta_pct() const noexcept {
  return pct_change(attribution.mean_ns[0], attribution.mean_ns[1]);
}

Compatibility check_compatibility(const Header& a, const Header& b) {
  Compatibility c;
  compare_field(c.errors, "model architecture", a.model.arch, b.model.arch);
  compare_field(c.errors, "weight type", a.model.type, b.model.type);
  const std::pair<const char*, const std::optional<int64_t> Header::Model::*> shape[] = {
      {"n_layers", &Header::Model::n_layers}, {"n_embd", &Header::Model::n_embd},
      {"n_heads", &Header::Model::n_heads},   {"n_kv_heads", &Header::Model::n_kv_heads},
      {"n_ff", &Header::Model::n_ff},         {"n_vocab", &Header::Model::n_vocab},
      {"params", &Header::Model::params}};
  for (const auto& [name, field] : shape)
    compare_field(c.errors, fmt::format("model shape {}", name).c_str(), opt_text(a.model.*field),
                  opt_text(b.model.*field));

  auto& work = c.work_changes;
  compare_field(work, "threads", opt_text(a.run.threads), opt_text(b.run.threads));
  compare_field(work, "pinning", a.run.pin, b.run.pin);
  compare_field(work, "NUMA policy (where workers and their memory are)", a.run.numa, b.run.numa);
  compare_field(work, "worker CPUs", fmt::format("{}", a.run.cpus), fmt::format("{}", b.run.cpus));
  compare_field(work, "ISA", a.run.isa, b.run.isa);
  compare_field(work, "KV cache type", a.run.kv_type, b.run.kv_type);
  compare_field(work, "prompt length (attention cost grows with position)",
                opt_text(a.run.n_prompt), opt_text(b.run.n_prompt));
  compare_recorded(work, "work stealing in the decode matmuls (PACER_WORK_STEALING)",
                   a.run.work_stealing, b.run.work_stealing);
  compare_recorded(work, "work stealing in the prefill GEMMs (PACER_WORK_STEALING)",
                   a.run.work_stealing_balanced, b.run.work_stealing_balanced);
  compare_recorded(work, "idle workers' prefetch of the next matmul (PACER_IDLE_PREFETCH)",
                   a.run.idle_prefetch, b.run.idle_prefetch);
  compare_recorded(work, "GEMV streams per worker (PACER_GEMV_STREAMS)", a.run.gemv_streams,
                   b.run.gemv_streams);
  compare_recorded(work,
                   "16-row GEMVs' streams, prefetch and page touch (PACER_GEMV_STREAMS, "
                   "PACER_PREFETCH, PACER_PAGE_TOUCH)",
                   a.run.x16_gemv, b.run.x16_gemv);
  compare_recorded(work, "GEMV software prefetch (PACER_PREFETCH)", a.run.gemv_prefetch,
                   b.run.gemv_prefetch);
  compare_recorded(work, "Q4_0/K-quant GEMV software prefetch (PACER_PREFETCH)",
                   a.run.gemv_prefetch_unpacking, b.run.gemv_prefetch_unpacking);
  compare_recorded(work, "matrices repacked into 16-row groups (PACER_REPACK)",
                   a.run.repacked_matrices, b.run.repacked_matrices);
  compare_recorded(work, "AVX-512 VNNI kernels (PACER_VNNI)", a.run.vnni, b.run.vnni);
  compare_recorded(work, "AMX prefill (PACER_AMX)", a.run.amx, b.run.amx);
  compare_recorded(work, "BF16 prefill dot (PACER_BF16_DOT)", a.run.bf16_dot, b.run.bf16_dot);
  compare_recorded(work,
                   "AVX2 attention: all of a KV head's query heads a pass (PACER_ATTENTION_PASS)",
                   a.run.attention_one_pass, b.run.attention_one_pass);
  auto& w = c.warnings;
  w = work;
  compare_field(w, "recording mode", a.run.recording, b.run.recording);
  compare_field(w, "CPU model", a.host.cpu_model, b.host.cpu_model);
  // (A log older than the key has none: not a difference.)
  if (!a.host.cpu_signature.empty() && !b.host.cpu_signature.empty())
    compare_field(w, "CPU signature (family/model/stepping)", a.host.cpu_signature,
                  b.host.cpu_signature);
  compare_field(w, "host", a.host.hostname, b.host.hostname);
  compare_field(w, "governor", a.host.governor, b.host.governor);
  compare_field(w, "counter mode", a.counters.mode, b.counters.mode);
  // User-only counts leave out the kernel's instructions and cycles (page faults, syscalls):
  // instructions and IPC of a user-only run are not comparable with a user+kernel one.
  if (!a.counters.scope.empty() && !b.counters.scope.empty())
    compare_field(w,
                  "counter scope (instructions/IPC of 'user' exclude kernel work, so they are not "
                  "comparable with 'user+kernel')",
                  a.counters.scope, b.counters.scope);
  compare_field(w, "live counters", fmt::format("{}", a.counters.live),
                fmt::format("{}", b.counters.live));
  compare_field(w, "frequency source", a.frequency.source, b.frequency.source);
  compare_field(w, "pacer version", a.pacer_version + " " + a.git_sha,
                b.pacer_version + " " + b.git_sha);
  return c;
}

std::string describe_devices(const std::vector<int>& devices) {
  std::vector<int> cpus;
  bool host = false;
  std::vector<std::string> others;
  for (int d : devices) {
    if (d >= 0) {
      cpus.push_back(d);
    } else if (d == kHostDevice) {
      host = true;
    } else {
      others.push_back(device_label(d));
    }
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::vector<std::string> parts;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    parts.push_back(j > i ? fmt::format("{}-{}", cpus[i], cpus[j]) : fmt::format("{}", cpus[i]));
    i = j + 1;
  }
  std::string out;
  if (!cpus.empty())
    out = fmt::format("{} {}", cpus.size() > 1 ? "CPUs" : "CPU", fmt::join(parts, ","));
  for (const std::string& o : others) out += (out.empty() ? "" : ", ") + o;
  if (host) out += out.empty() ? "host" : ", host";
  return out;
}

Comparison compare_runs(const RunCycles& normal, const RunCycles& abnormal,
                        const CompareOptions& opts) {
  Comparison c;
  c.compat = check_compatibility(normal.header, abnormal.header);
  // Decode steps at other context positions do other attention work (and a short run is all
  // warm-up): more than 20% apart in count is a configuration difference too.
  const auto n0 = static_cast<double>(normal.decode_steps_seen),
             n1 = static_cast<double>(abnormal.decode_steps_seen);
  if (n0 > 0 && n1 > 0 && std::max(n0, n1) > 1.2 * std::min(n0, n1)) {
    const std::string d =
        fmt::format("decode steps differ: {} vs {} (other context positions, other attention cost)",
                    normal.decode_steps_seen, abnormal.decode_steps_seen);
    c.compat.work_changes.push_back(d);
    c.compat.warnings.push_back(d);
  }
  if (!c.compat.errors.empty() && !opts.force)
    throw CompareError(
        fmt::format("{} and {} are runs of different models ({}); use --force to "
                    "compare them anyway",
                    normal.path, abnormal.path, fmt::join(c.compat.errors, "; ")));
  c.forced = !c.compat.errors.empty();
  const RunCycles* runs[2] = {&normal, &abnormal};
  for (int i = 0; i < 2; ++i) {
    const RunCycles& r = *runs[i];
    c.path[i] = r.path;
    c.header[i] = r.header;
    c.notes[i] = r.notes;
    if (r.migrations > 0)
      c.notes[i].push_back(
          fmt::format("{}: {} worker slice(s) migrated between CPUs; each is "
                      "counted on the CPU it started on",
                      r.path, r.migrations));
    c.cycles[i] = cycle_stats(r.step_ns);
    for (double ns : r.step_ns) c.step_ms[i].push_back(ns * 1e-6);
    auto it = r.step_freq_mhz.find(kHostDevice);
    c.step_freq_mhz[i] =
        it != r.step_freq_mhz.end() ? it->second : std::vector<double>(r.cycles(), kNaN);
  }
  // Steps are a time series: both tests use each run's effective sample size (stats.h).
  c.step_welch = stats::welch_t_test(stats::summarize_series(normal.step_ns),
                                     stats::summarize_series(abnormal.step_ns));
  c.step_u = stats::mann_whitney_u_series(normal.step_ns, abnormal.step_ns);
  c.attribution = attribute(normal, abnormal);
  for (int i = 0; i < 2; ++i) {
    const RunCycles& r = i == 0 ? normal : abnormal;
    double sum = 0;
    size_t n = 0;
    for (double v : r.throttled_ns) {
      if (std::isfinite(v)) sum += v, ++n;
    }
    c.throttled_ns[static_cast<size_t>(i)] = n > 0 ? sum / static_cast<double>(n) : kNaN;
  }
  // Steal on the workers' CPUs where both logs have it for every step (steal on a CPU the
  // workers did not use cost them nothing), else over all CPUs.
  const auto all_finite = [](const std::vector<double>& v) {
    return !v.empty() && std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
  };
  const bool per_worker_cpu =
      all_finite(normal.steal_workers_ns) && all_finite(abnormal.steal_workers_ns);
  c.steal_scope = per_worker_cpu ? "the workers' CPUs" : "all CPUs";
  for (int i = 0; i < 2; ++i) {
    const RunCycles& r = i == 0 ? normal : abnormal;
    double sum = 0;
    size_t n = 0;
    for (double v : per_worker_cpu ? r.steal_workers_ns : r.steal_ns) {
      if (std::isfinite(v)) sum += v, ++n;
    }
    c.steal_ns[static_cast<size_t>(i)] = n > 0 ? sum / static_cast<double>(n) : kNaN;
  }
  {
    const double d_step = c.attribution.mean_ns[1] - c.attribution.mean_ns[0];
    const double d_steal = c.steal_ns[1] - c.steal_ns[0];
    c.vm_steal = std::isfinite(d_steal) && d_step > 0 && d_steal >= 0.25 * d_step;
  }
  // Throttling that grew by at least half of the run-queue growth is the run queue's cause: the
  // workers waited for the next quota period, not for other threads.
  const double d_runq = c.attribution.part(Part::RunQueue);
  const double d_thr =
      c.throttled_ns[1] - (std::isfinite(c.throttled_ns[0]) ? c.throttled_ns[0] : 0);
  c.quota_throttling = std::isfinite(d_thr) && d_runq > 0 && d_thr >= 0.5 * d_runq;
  c.frequency = device_frequencies(normal, abnormal);

  // Workers: the header's thread count where a log has one (the devices seen can include CPUs an
  // unpinned worker migrated to), else the devices the decode steps' slices ran on.
  std::set<int> cpus(normal.cpu_devices);
  cpus.insert(abnormal.cpu_devices.begin(), abnormal.cpu_devices.end());
  double workers = static_cast<double>(std::max<size_t>(1, cpus.size()));
  const auto t0 = normal.header.run.threads, t1 = abnormal.header.run.threads;
  if (t0 && t1 && *t0 > 0 && *t1 > 0) workers = static_cast<double>(std::max(*t0, *t1));
  const RowContext ctx{
      {&normal, &abnormal}, c.attribution.mean_ns[0], workers, &opts, &c.attribution};
  detect_membw_contention(c, normal, abnormal, opts);
  c.same_build_and_config = c.compat.work_changes.empty() && c.compat.errors.empty() &&
                            normal.header.pacer_version == abnormal.header.pacer_version &&
                            normal.header.git_sha == abnormal.header.git_sha &&
                            !normal.header.git_sha.empty();
  {
    std::array<double, 2> total{};
    for (const OpAttribution& o : c.attribution.ops)
      if (std::isfinite(o.oncpu_ns[0]) && std::isfinite(o.oncpu_ns[1]))
        for (size_t i = 0; i < 2; ++i) total[i] += o.oncpu_ns[i];
    const double growth = total[0] > 0 ? total[1] / total[0] - 1 : 0.0;
    bool broad = growth != 0;  // either way: a faster abnormal run means a disturbed normal one
    for (const OpAttribution& o : c.attribution.ops) {
      if (!broad) break;
      if (!std::isfinite(o.oncpu_ns[0]) || !std::isfinite(o.oncpu_ns[1])) continue;
      if (o.oncpu_ns[0] < 0.05 * total[0] || !(o.oncpu_ns[0] > 0)) continue;
      broad = (o.oncpu_ns[1] / o.oncpu_ns[0] - 1) / growth >= 0.25;
    }
    c.oncpu_growth_broad = broad;
  }
  c.rows = build_rows(ctx);
  c.flags = rule_flags(c, ctx, opts);
  mark_flagged_rows(c, opts);
  detail::write_words(c, opts);
  return c;
}

}  // namespace pacer::analysis
