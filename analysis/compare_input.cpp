#include "analysis/compare_input.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "eventlog/metrics.h"
#include "eventlog/schema.h"

namespace pacer::analysis {
namespace {

namespace ck = eventlog::counter_key;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Sum metrics are per-cycle totals (present when den > 0); the others are ratios num/den.
bool is_sum_metric(Metric m) {
  switch (m) {
    case Metric::Instructions:
    case Metric::Cycles:
    case Metric::LlcMisses:
    case Metric::RunqDelay:
    case Metric::ContextSwitches:
    case Metric::OncpuTime:
      return true;
    default:
      return false;
  }
}

// The device a slice is charged to: its CPU for pinned runs; its worker for unpinned ones (pin
// "none"), where the scheduler moves a worker between CPUs and a per-CPU row would compare where
// a thread happened to run ("oncpu CPU 0: 99.7% -> 0%") instead of what it did.
int worker_device(const WorkerSample& w, bool by_worker) {
  return w.cpu >= 0 && !by_worker ? w.cpu : -2 - std::max(w.w, 0);
}

double opt_or_nan(const std::optional<double>& v) {
  return v ? *v : kNaN;
}

// Everything collected for one step while its op lines stream by.
struct StepAcc {
  std::map<std::pair<std::string, int>, Cell> cells;
  std::map<std::string, OpTiming> timing;
  std::map<int, double> oncpu_by_device, runq_by_device;
  std::map<int, std::pair<double, double>> freq_by_device;  // (mhz x weight, weight)
  // Critical slices with on-CPU time but no clock of their own (no freq_mhz, no cycles): their
  // on-CPU ns per op and device, priced at the step line's per-CPU clock once it arrives.
  std::map<std::string, std::map<int, double>> oncpu_awaiting_clock;
  std::set<int> devices;  // CPUs (or unpinned workers) this step's slices ran on
  bool any_oncpu = false, any_runq = false;
  double stream_bytes = 0, stream_ns = 0, other_ops_ns = 0;  // see RunCycles
  double slice_runq_ns = 0;          // runq_ns summed over every slice of the step
  bool slices_without_runq = false;  // some slice has no runq_ns
};

class CycleBuilder : public LogVisitor {
 public:
  CycleBuilder(RunCycles& run, const LoadOptions& opts) : run_(run), opts_(opts) {}

  void on_header(const Header& h) override {
    run_.header = h;
    by_worker_ = h.run.pin == "none";
    if (by_worker_) {
      run_.notes.push_back(fmt::format(
          "{}: unpinned run (pin none): rows are keyed by worker, not by CPU (workers migrate)",
          run_.path));
    }
  }

  void on_op(const OpEvent& op) override {
    StepAcc& acc = pending_[op.step];
    if (!seen_ops_.count(op.name)) {
      seen_ops_.insert(op.name);
      run_.op_order.push_back(op.name);
    }
    Cell& host = acc.cells[{op.name, kHostDevice}];
    host.time_ns += static_cast<double>(op.duration_ns());
    if (op.streamed_bytes() > 0) {
      run_.streaming_ops.insert(op.name);
      acc.stream_bytes += static_cast<double>(op.streamed_bytes());
      acc.stream_ns += static_cast<double>(op.duration_ns());
    } else {
      acc.other_ops_ns += static_cast<double>(op.duration_ns());
    }
    OpTiming& t = acc.timing[op.name];
    t.wall_ns += static_cast<double>(op.duration_ns());
    ++t.instances;
    if (op.workers.empty()) {
      ++t.instances_without_workers;
      t.span_ns = t.oncpu_ns = t.runq_ns = t.instructions = t.cycles = t.freq_cycles = kNaN;
      t.dispatch_ns = t.join_ns = t.excess_ns = kNaN;
      return;
    }
    // The critical worker is the one the op waited for: the last to finish (the longest slice
    // breaks ties). A worker woken late starts late and finishes last with a normal-length slice.
    const WorkerSample* critical = &op.workers.front();
    double slices = 0;
    for (const WorkerSample& w : op.workers) {
      slices += static_cast<double>(w.duration_ns());
      if (w.t1_ns > critical->t1_ns ||
          (w.t1_ns == critical->t1_ns && w.duration_ns() > critical->duration_ns()))
        critical = &w;
      add_worker(acc, op.name, w, host);
      if (w.runq_ns) {
        acc.slice_runq_ns += static_cast<double>(*w.runq_ns);
      } else {
        acc.slices_without_runq = true;
      }
    }
    add_critical(t, *critical);
    t.excess_ns += static_cast<double>(critical->duration_ns()) -
                   slices / static_cast<double>(op.workers.size());
    // Sync split: before the critical chunk began and after it ended (clamped to the op's wall:
    // slice clocks are read a little inside the op's bracket).
    const double wall = static_cast<double>(op.duration_ns());
    const double sync = std::max(0.0, wall - static_cast<double>(critical->duration_ns()));
    const double dispatch = std::clamp(static_cast<double>(critical->t0_ns - op.t0_ns), 0.0, sync);
    t.dispatch_ns += dispatch;
    t.join_ns += sync - dispatch;
    const double oncpu = slice_oncpu(*critical);
    if (!critical->freq_mhz && !critical->counter(ck::kCycles) && std::isfinite(oncpu)) {
      acc.oncpu_awaiting_clock[op.name][worker_device(*critical, by_worker_)] += oncpu;
    }
  }

  void on_step(const StepEvent& step) override {
    auto node = pending_.extract(step.step);
    if (step.phase == Phase::Prefill) ++run_.prefill_steps;
    if (step.phase != Phase::Decode) return;
    ++run_.decode_steps_seen;
    if (run_.decode_steps_seen <= opts_.skip_steps) {
      ++run_.skipped_steps;
      return;
    }
    StepAcc acc = node.empty() ? StepAcc{} : std::move(node.mapped());
    append_cycle(step, acc);
  }

  void finish() {
    const size_t n = run_.cycles();
    for (auto& [key, series] : run_.cells) series.resize(n);
    for (auto& [key, series] : run_.timing) series.resize(n);
    for (auto& [key, series] : run_.step_freq_mhz) series.resize(n, kNaN);
    size_t orphan_ops = 0;
    for (const auto& [step, acc] : pending_) orphan_ops += acc.timing.size();
    if (orphan_ops > 0)
      run_.notes.push_back(fmt::format(
          "{}: {} op group(s) of {} step(s) without a step line were dropped (run cut short?)",
          run_.path, orphan_ops, pending_.size()));
  }

 private:
  void add_worker(StepAcc& acc, const std::string& name, const WorkerSample& w, Cell& host) {
    const int dev = worker_device(w, by_worker_);
    // Counted as a worker device only if this step becomes a decode cycle (append_cycle): a
    // tokenize or prefill slice on another CPU is not a worker of the compared steps.
    acc.devices.insert(dev);
    if (w.cpu >= 0 && w.cpu_end >= 0 && w.cpu_end != w.cpu) ++run_.migrations;
    Cell& cell = acc.cells[{name, dev}];
    const auto dur = static_cast<double>(w.duration_ns());
    cell.time_ns += dur;
    const std::optional<double> instr = w.counter(ck::kInstructions);
    const std::optional<double> cycles = w.counter(ck::kCycles);
    std::optional<double> oncpu;
    if (w.oncpu_ns) {
      oncpu = static_cast<double>(*w.oncpu_ns);
    } else if (auto tc = w.counter(ck::kTaskClockNs)) {
      oncpu = *tc;
    }
    std::optional<double> mhz = w.freq_mhz;
    // No clock of its own: the schema's freq_mhz_task_clock, on-CPU time standing for task-clock.
    if (!mhz && cycles && oncpu && *oncpu > 0)
      mhz = eventlog::evaluate_metric(eventlog::metric(eventlog::metric_name::kFreqMhzTaskClock),
                                      *cycles, *oncpu);
    for (Cell* c : {&cell, &host}) {
      if (mhz) c->add(Metric::CpuFrequency, *mhz * (oncpu ? *oncpu : dur), oncpu ? *oncpu : dur);
      // Metric::Ipc's mean is sum(instructions) / sum(cycles): the schema's ipc.
      static_assert(eventlog::metric(eventlog::metric_name::kIpc).numerator == ck::kInstructions &&
                    eventlog::metric(eventlog::metric_name::kIpc).denominator == ck::kCycles &&
                    eventlog::metric(eventlog::metric_name::kIpc).scale ==
                        eventlog::MetricScale::One);
      if (instr && cycles) c->add(Metric::Ipc, *instr, *cycles);
      if (instr) c->add(Metric::Instructions, *instr, 1);
      if (cycles) c->add(Metric::Cycles, *cycles, 1);
      if (auto v = w.counter(ck::kLlcMisses)) c->add(Metric::LlcMisses, *v, 1);
      if (w.runq_ns) c->add(Metric::RunqDelay, static_cast<double>(*w.runq_ns), 1);
      if (auto v = w.counter(ck::kContextSwitches)) c->add(Metric::ContextSwitches, *v, 1);
      if (oncpu) c->add(Metric::OncpuTime, *oncpu, 1);
    }
    if (oncpu) {
      acc.any_oncpu = true;
      acc.oncpu_by_device[dev] += *oncpu;
    }
    if (w.runq_ns) {
      acc.any_runq = true;
      acc.runq_by_device[dev] += static_cast<double>(*w.runq_ns);
    }
    if (mhz) {
      const double weight = oncpu ? *oncpu : dur;
      acc.freq_by_device[dev].first += *mhz * weight;
      acc.freq_by_device[dev].second += weight;
    }
  }

  static double slice_oncpu(const WorkerSample& w) {
    if (w.oncpu_ns) return static_cast<double>(*w.oncpu_ns);
    if (auto tc = w.counter(ck::kTaskClockNs)) return *tc;
    return kNaN;
  }

  static void add_critical(OpTiming& t, const WorkerSample& w) {
    t.span_ns += static_cast<double>(w.duration_ns());
    const double oncpu = slice_oncpu(w);
    t.oncpu_ns += oncpu;
    t.runq_ns += w.runq_ns ? static_cast<double>(*w.runq_ns) : kNaN;
    t.instructions += opt_or_nan(w.counter(ck::kInstructions));
    const double cycles = opt_or_nan(w.counter(ck::kCycles));
    t.cycles += cycles;
    // Cycles implied by the clock: the frequency source's estimate, else the cycle counter.
    if (w.freq_mhz) {
      t.freq_cycles += oncpu * *w.freq_mhz * 1e-3;
    } else if (std::isfinite(cycles)) {
      t.freq_cycles += cycles;
    } else if (!std::isfinite(oncpu)) {
      t.freq_cycles += kNaN;
    }  // else: priced from the step line's clock when it arrives (price_from_step_clock)
  }

  void append_cycle(const StepEvent& step, StepAcc& acc) {
    const size_t index = run_.cycles();
    double ns = static_cast<double>(step.duration_ns());
    if (!(ns > 0) && step.step_ms) ns = *step.step_ms * 1e6;
    if (!(ns > 0)) {
      run_.notes.push_back(fmt::format("{}:{}: decode step {} has no positive duration; skipped",
                                       run_.path, step.line, step.step));
      return;
    }
    run_.step_ids.push_back(step.step);
    run_.step_ns.push_back(ns);
    run_.cpu_devices.insert(acc.devices.begin(), acc.devices.end());
    run_.tok_s.push_back(opt_or_nan(step.tok_s));
    run_.steal_ns.push_back(step.steal_ms ? *step.steal_ms * 1e6 : kNaN);
    {
      // The workers' CPUs: their slices' CPUs (pinned runs), else the step's freq[] entries.
      std::set<int> cpus;
      for (int d : acc.devices)
        if (d >= 0) cpus.insert(d);
      if (cpus.empty())
        for (const StepFreq& f : step.freq)
          if (f.cpu >= 0) cpus.insert(f.cpu);
      double ns = kNaN;
      if (step.steal_cpus_ms && !cpus.empty()) {
        ns = 0;
        for (const auto& [cpu, ms] : *step.steal_cpus_ms)
          if (cpus.count(cpu)) ns += ms * 1e6;
      }
      run_.steal_workers_ns.push_back(ns);
    }
    run_.throttled_ns.push_back(
        step.cgroup_throttled_ns ? static_cast<double>(*step.cgroup_throttled_ns) : kNaN);
    run_.stream_bytes.push_back(acc.stream_bytes);
    run_.stream_ns.push_back(acc.stream_ns);
    run_.other_ops_ns.push_back(acc.other_ops_ns);
    run_.runq_outside_ns.push_back(
        step.runq_ns && !acc.slices_without_runq && !acc.devices.empty()
            ? std::max(0.0, static_cast<double>(*step.runq_ns) - acc.slice_runq_ns)
            : kNaN);

    // Per-device clock of the step: the step line's freq[], else the slices' weighted mean.
    std::map<int, double> freq;
    for (const StepFreq& f : step.freq) {
      const int dev = f.cpu >= 0 && !by_worker_ ? f.cpu : -2 - std::max(f.w, 0);
      run_.cpu_devices.insert(dev);
      freq[dev] = f.mhz;
    }
    for (const auto& [dev, wsum] : acc.freq_by_device)
      if (!freq.count(dev) && wsum.second > 0) freq[dev] = wsum.first / wsum.second;
    double freq_sum = 0;
    for (const auto& [dev, mhz] : freq) {
      put_freq(dev, index, mhz);
      freq_sum += mhz;
    }
    if (!freq.empty()) put_freq(kHostDevice, index, freq_sum / static_cast<double>(freq.size()));

    price_from_step_clock(acc, freq);

    // Pseudo-ops from the scheduler's view of the step.
    const bool has_oncpu = step.oncpu_ns.has_value() || acc.any_oncpu;
    const bool has_runq = step.runq_ns.has_value() || acc.any_runq;
    double oncpu_total = 0, runq_total = 0;
    for (const auto& [dev, v] : acc.oncpu_by_device) oncpu_total += v;
    for (const auto& [dev, v] : acc.runq_by_device) runq_total += v;
    if (step.oncpu_ns) oncpu_total = static_cast<double>(*step.oncpu_ns);
    if (step.runq_ns) runq_total = static_cast<double>(*step.runq_ns);
    auto host_metrics = [&](Cell& c) {
      for (const auto& [dev, mhz] : freq) c.add(Metric::CpuFrequency, mhz, 1);
      if (step.process_cpu_usage) c.add(Metric::ProcessCpuUsage, *step.process_cpu_usage, 1);
      if (step.host_cpu_usage) c.add(Metric::HostCpuUsage, *step.host_cpu_usage, 1);
      if (step.nvcsw || step.nivcsw)
        c.add(Metric::ContextSwitches,
              static_cast<double>(step.nvcsw.value_or(0) + step.nivcsw.value_or(0)), 1);
      if (has_runq) c.add(Metric::RunqDelay, runq_total, 1);
      if (has_oncpu) c.add(Metric::OncpuTime, oncpu_total, 1);
    };
    if (has_oncpu) {
      Cell& c = acc.cells[{std::string(kOncpuOp), kHostDevice}];
      c.time_ns = oncpu_total;
      host_metrics(c);
    }
    if (has_runq) {
      Cell& c = acc.cells[{std::string(kRunqOp), kHostDevice}];
      c.time_ns = runq_total;
      host_metrics(c);
    }
    for (int dev : run_.cpu_devices) {
      auto dev_metrics = [&](Cell& c) {
        if (auto it = freq.find(dev); it != freq.end()) c.add(Metric::CpuFrequency, it->second, 1);
        if (acc.runq_by_device.count(dev)) c.add(Metric::RunqDelay, acc.runq_by_device[dev], 1);
        if (acc.oncpu_by_device.count(dev)) c.add(Metric::OncpuTime, acc.oncpu_by_device[dev], 1);
      };
      if (acc.oncpu_by_device.count(dev)) {
        Cell& c = acc.cells[{std::string(kOncpuOp), dev}];
        c.time_ns = acc.oncpu_by_device[dev];
        dev_metrics(c);
      }
      if (acc.runq_by_device.count(dev)) {
        Cell& c = acc.cells[{std::string(kRunqOp), dev}];
        c.time_ns = acc.runq_by_device[dev];
        dev_metrics(c);
      }
    }

    for (auto& [key, cell] : acc.cells) {
      auto& series = run_.cells[key];
      series.resize(index);
      series.push_back(cell);
    }
    for (auto& [name, t] : acc.timing) {
      auto& series = run_.timing[name];
      series.resize(index);
      series.push_back(t);
    }
  }

  // Slices without a clock of their own run at their CPU's clock of the step (the frequency
  // source may sample once per step per worker): price the critical path's on-CPU time with it
  // and give op cells that lack cpu_frequency the same value.
  static void price_from_step_clock(StepAcc& acc, const std::map<int, double>& freq) {
    for (auto& [op, by_dev] : acc.oncpu_awaiting_clock) {
      OpTiming& t = acc.timing[op];
      for (const auto& [dev, oncpu] : by_dev) {
        auto it = freq.find(dev);
        t.freq_cycles += it != freq.end() ? oncpu * it->second * 1e-3 : kNaN;
      }
    }
    const auto f = static_cast<size_t>(Metric::CpuFrequency);
    const auto on = static_cast<size_t>(Metric::OncpuTime);
    std::map<std::string, std::pair<double, double>> host_fill;  // op -> (mhz x ns, ns)
    for (auto& [key, cell] : acc.cells) {
      const auto& [op, dev] = key;
      if (dev == kHostDevice || cell.den[f] > 0) continue;
      auto it = freq.find(dev);
      if (it == freq.end()) continue;
      const double weight = cell.den[on] > 0 ? cell.num[on] : cell.time_ns;
      if (!(weight > 0)) continue;
      cell.add(Metric::CpuFrequency, it->second * weight, weight);
      host_fill[op].first += it->second * weight;
      host_fill[op].second += weight;
    }
    for (const auto& [op, sums] : host_fill) {
      auto it = acc.cells.find({op, kHostDevice});
      if (it != acc.cells.end() && it->second.den[f] == 0)
        it->second.add(Metric::CpuFrequency, sums.first, sums.second);
    }
  }

  void put_freq(int dev, size_t index, double mhz) {
    auto& series = run_.step_freq_mhz[dev];
    series.resize(index, kNaN);
    series.push_back(mhz);
  }

  RunCycles& run_;
  const LoadOptions& opts_;
  bool by_worker_ = false;  // pin none: slices are keyed by worker (worker_device)
  std::map<int64_t, StepAcc> pending_;
  std::set<std::string> seen_ops_;
};

void finish_run(RunCycles& run, CycleBuilder& builder) {
  builder.finish();
  for (const std::string& w : run.summary.warnings()) run.notes.push_back(w);
  if (run.cycles() == 0)
    throw std::runtime_error(fmt::format(
        "{}: no decode steps to compare ({} seen, {} skipped; a step is one decode step)", run.path,
        run.decode_steps_seen, run.skipped_steps));
}

}  // namespace

const MetricInfo& metric_info(Metric m) noexcept {
  static const std::array<MetricInfo, kMetricCount> kInfo = {{
      {"cpu_frequency", "MHz", 1.0},
      {"ipc", "instr/cycle", 1.0},
      {"instructions", "per step", 1.0},
      {"cycles", "per step", 1.0},
      {"llc_misses", "per step", 1.0},
      {"runq_delay", "us/step", 1e-3},
      {"context_switches", "per step", 1.0},
      {"oncpu_time", "us/step", 1e-3},
      {"process_cpu_usage", "CPUs", 1.0},
      {"host_cpu_usage", "CPUs", 1.0},
  }};
  return kInfo[static_cast<size_t>(m)];
}

std::string device_label(int device) {
  if (device == kHostDevice) return "host";
  if (device >= 0) return fmt::format("CPU {}", device);
  return fmt::format("worker {}", -2 - device);
}

double Cell::value(Metric m) const noexcept {
  const auto i = static_cast<size_t>(m);
  if (!(den[i] > 0)) return kNaN;
  return is_sum_metric(m) ? num[i] : num[i] / den[i];
}

const std::vector<Cell>* RunCycles::find(const std::string& op, int device) const {
  auto it = cells.find({op, device});
  return it == cells.end() ? nullptr : &it->second;
}

RunCycles load_run(const std::string& path, const LoadOptions& opts) {
  RunCycles run;
  run.path = path;
  CycleBuilder builder(run, opts);
  run.summary = LogReader(path).read(builder);
  finish_run(run, builder);
  return run;
}

RunCycles load_run_text(std::string_view text, const std::string& name, const LoadOptions& opts) {
  RunCycles run;
  run.path = name;
  CycleBuilder builder(run, opts);
  run.summary = LogReader::read_text(text, builder, name);
  finish_run(run, builder);
  return run;
}

}  // namespace pacer::analysis
