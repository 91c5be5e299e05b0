#include "analysis/counter_summary.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "eventlog/metrics.h"
#include "eventlog/schema.h"

namespace pacer::analysis {
namespace {

namespace ck = eventlog::counter_key;

class CounterSummer : public LogVisitor {
 public:
  explicit CounterSummer(CounterSummary& s) : s_(s) {}

  void on_header(const Header& h) override { s_.header = h; }

  void on_op(const OpEvent& op) override {
    ++s_.ops;
    first_ns_ = std::min(first_ns_, op.t0_ns);
    last_ns_ = std::max(last_ns_, op.t1_ns);
    s_.op_wall_ns += static_cast<double>(op.t1_ns - op.t0_ns);
    for (const WorkerSample& w : op.workers) {
      ++s_.slices;
      if (w.oncpu_ns) {
        s_.oncpu_ns += static_cast<double>(*w.oncpu_ns);
        s_.has_oncpu = true;
      } else if (auto tc = w.counter(ck::kTaskClockNs)) {
        s_.oncpu_ns += *tc;
        s_.has_oncpu = true;
      }
      if (w.runq_ns) {
        s_.runq_ns += static_cast<double>(*w.runq_ns);
        s_.has_runq = true;
      }
      for (const Counter& c : w.counters) {
        auto it = std::find_if(s_.counters.begin(), s_.counters.end(),
                               [&](const CounterTotal& t) { return t.name == c.name; });
        if (it == s_.counters.end()) {
          s_.counters.push_back({std::string(c.name), 0, 0});
          it = s_.counters.end() - 1;
        }
        it->total += c.value;
        ++it->slices;
      }
    }
  }

  void on_step(const StepEvent& st) override {
    StepTotals& t = s_.steps;
    if (st.phase == Phase::Decode) ++t.decode_steps;
    if (st.phase == Phase::Prefill) ++t.prefill_steps;
    t.wall_ns += static_cast<double>(st.duration_ns());
    if (st.oncpu_ns) {
      t.has_sched = true;
      t.oncpu_ns += static_cast<double>(*st.oncpu_ns);
      t.runq_ns += static_cast<double>(st.runq_ns.value_or(0));
      t.context_switches += st.nvcsw.value_or(0) + st.nivcsw.value_or(0);
    }
  }

  void finish() {
    s_.wall_ns = last_ns_ > first_ns_ ? static_cast<double>(last_ns_ - first_ns_) : 0.0;
  }

 private:
  CounterSummary& s_;
  int64_t first_ns_ = std::numeric_limits<int64_t>::max(), last_ns_ = 0;
};

// 1234567.8 -> "1,234,568" (perf's grouping); `decimals` digits after the point.
std::string grouped(double v, int decimals) {
  const std::string s = fmt::format("{:.{}f}", std::fabs(v), decimals);
  const size_t dot = s.find('.');
  const size_t int_end = dot == std::string::npos ? s.size() : dot;
  std::string out = v < 0 ? "-" : "";
  for (size_t i = 0; i < int_end; ++i) {
    if (i > 0 && (int_end - i) % 3 == 0) out += ',';
    out += s[i];
  }
  out.append(s, int_end, std::string::npos);
  return out;
}

std::string line(const std::string& value, const std::string& event, const std::string& note) {
  return fmt::format("  {:>20}  {:<26}{}\n", value, event, note.empty() ? "" : "#  " + note);
}

}  // namespace

const CounterTotal* CounterSummary::find(std::string_view name) const noexcept {
  for (const CounterTotal& c : counters)
    if (c.name == name) return &c;
  return nullptr;
}

CounterSummary summarize_counters(const std::string& path) {
  CounterSummary s;
  s.path = path;
  CounterSummer v(s);
  LogReader(path).read(v);
  v.finish();
  return s;
}

CounterSummary summarize_counters_text(std::string_view text, const std::string& name) {
  CounterSummary s;
  s.path = name;
  CounterSummer v(s);
  LogReader::read_text(text, v, name);
  v.finish();
  return s;
}

std::string render_counter_summary(const CounterSummary& s) {
  const Header& h = s.header;
  std::string o = fmt::format("\n Counter summary of '{}' ({} counters{}):\n", s.path,
                              h.counters.mode.empty() ? "no" : h.counters.mode,
                              h.counters.scope.empty() ? "" : ", scope " + h.counters.scope);
  const StepTotals& st = s.steps;
  if (st.has_sched && st.wall_ns > 0) {
    // The window perf stat would see: each step from start to end, every worker, the sleeps and
    // wake-ups between ops included.
    const double step_s = st.wall_ns * 1e-9;
    o += fmt::format(
        "\n whole steps ({} prefill + {} decode, {:.3f} s; every worker, between ops included):\n",
        st.prefill_steps, st.decode_steps, step_s);
    o += line(grouped(st.oncpu_ns * 1e-6, 2) + " msec", "on-CPU time (task-clock)",
              fmt::format("{:.2f} CPUs utilized", st.oncpu_ns * 1e-9 / step_s));
    o +=
        line(grouped(st.runq_ns * 1e-6, 2) + " msec", "run-queue wait",
             st.oncpu_ns > 0 ? fmt::format("{:.1f}% of on-CPU time", st.runq_ns / st.oncpu_ns * 100)
                             : "");
    o +=
        line(grouped(static_cast<double>(st.context_switches), 0), "context_switches",
             fmt::format("{} /sec", grouped(static_cast<double>(st.context_switches) / step_s, 1)));
  }
  // Inside ops: each op from its start to its end (the op brackets' counter reads), so the
  // rates are per second of op time.
  const double wall_s = s.op_wall_ns * 1e-9;
  o += fmt::format("\n inside recorded ops ({} op slices in {} ops, {:.3f} s of op time):\n",
                   grouped(s.slices, 0), grouped(s.ops, 0), wall_s);
  auto per_sec = [&](double v) {
    return wall_s > 0 ? fmt::format("{} /sec", grouped(v / wall_s, 1)) : std::string();
  };
  if (s.has_oncpu)
    o += line(grouped(s.oncpu_ns * 1e-6, 2) + " msec", "on-CPU time (task-clock)",
              wall_s > 0 ? fmt::format("{:.2f} CPUs utilized", s.oncpu_ns * 1e-9 / wall_s) : "");
  if (s.has_runq)
    o += line(
        grouped(s.runq_ns * 1e-6, 2) + " msec", "run-queue wait",
        s.oncpu_ns > 0 ? fmt::format("{:.1f}% of on-CPU time", s.runq_ns / s.oncpu_ns * 100) : "");
  const CounterTotal* cycles = s.find(ck::kCycles);
  const CounterTotal* instructions = s.find(ck::kInstructions);
  for (const CounterTotal& c : s.counters) {
    if (c.name == ck::kTaskClockNs || c.name == ck::kMux || c.name.ends_with("_enabled") ||
        c.name.ends_with("_running"))
      continue;
    std::string note;
    // The formulas are the schema's derived metrics (eventlog/metrics.h): ipc,
    // freq_mhz_task_clock (on-CPU time stands for task-clock) and the *_mpki rates.
    constexpr const eventlog::DerivedMetric& ipc = eventlog::metric(eventlog::metric_name::kIpc);
    constexpr const eventlog::DerivedMetric& clock =
        eventlog::metric(eventlog::metric_name::kFreqMhzTaskClock);
    const eventlog::DerivedMetric* mpki = nullptr;
    for (const eventlog::DerivedMetric& m : eventlog::kDerivedMetrics) {
      if (m.numerator == c.name && m.denominator == ck::kInstructions &&
          m.scale == eventlog::MetricScale::PerKilo)
        mpki = &m;
    }
    // Another counter named a miss (a user's event) gets the same per-1k-instructions rate.
    if (!mpki && c.name.find("miss") != std::string::npos)
      mpki = &eventlog::metric(eventlog::metric_name::kLlcMpki);
    std::optional<double> v;
    if (c.name == ipc.numerator && cycles &&
        (v = eventlog::evaluate_metric(ipc, c.total, cycles->total))) {
      note = fmt::format("{:.2f} insn per cycle", *v);
    } else if (c.name == clock.numerator && s.oncpu_ns > 0 &&
               (v = eventlog::evaluate_metric(clock, c.total, s.oncpu_ns))) {
      note = fmt::format("{:.3f} GHz", *v / 1000);
    } else if (mpki && instructions &&
               (v = eventlog::evaluate_metric(*mpki, c.total, instructions->total))) {
      note = fmt::format("{:.2f} per 1k instructions", *v);
    } else {
      note = per_sec(c.total);
    }
    o += line(grouped(c.total, 0), c.name, note);
  }
  for (const UnavailableCounter& u : h.counters.unavailable)
    o += line("<not counted>", u.event, u.reason);
  o += "\n";
  o += fmt::format("  {:>20}  seconds from the first recorded op's start to the last one's end\n",
                   fmt::format("{:.3f}", s.wall_ns * 1e-9));
  if (!h.frequency.source.empty())
    o += fmt::format("  clock: {}{}\n", h.frequency.source,
                     h.frequency.nominal_mhz
                         ? fmt::format(", nominal {:.0f} MHz", *h.frequency.nominal_mhz)
                         : "");
  return o;
}

}  // namespace pacer::analysis
