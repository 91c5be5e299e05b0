#include "analysis/chrome_trace.h"

#include "analysis/event_log.h"
#include "analysis/output_file.h"

#include <istream>
#include <map>
#include <optional>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "eventlog/schema.h"

namespace pacer::analysis {
namespace {

using json = nlohmann::json;
namespace op_key = eventlog::op_key;
namespace step_key = eventlog::step_key;

constexpr int kPid = 1;
constexpr int kStepsTid = 0;  // worker w is tid w + 1

// Chrome trace timestamps are microseconds; the log's are CLOCK_MONOTONIC ns. Absolute values
// keep every event positive; three decimals keep ns resolution.
double us(int64_t ns) {
  return static_cast<double>(ns) / 1000.0;
}

class TraceWriter {
 public:
  TraceWriter(std::ostream& out, ChromeTraceSummary& summary) : out_(out), summary_(summary) {
    out_ << "{\"traceEvents\":[\n";
  }
  void emit(const json& event) {
    if (summary_.events > 0) out_ << ",\n";
    out_ << event.dump(-1, ' ', false, json::error_handler_t::replace);
    ++summary_.events;
  }
  void finish(const json& other) {
    out_ << "\n],\"displayTimeUnit\":\"ns\",\"otherData\":"
         << other.dump(-1, ' ', false, json::error_handler_t::replace) << "}\n";
  }

 private:
  std::ostream& out_;
  ChromeTraceSummary& summary_;
};

struct Converter {
  const ChromeTraceOptions& opts;
  ChromeTraceSummary& summary;
  TraceWriter& writer;
  std::map<int, std::map<int, int64_t>> worker_cpus;  // worker -> cpu -> chunks seen there

  // Perfetto names a counter track "<name> <arg key>", so the key carries the unit.
  void counter(const std::string& name, const char* unit, int64_t ts_ns, double value) {
    writer.emit(
        {{"ph", "C"}, {"name", name}, {"pid", kPid}, {"ts", us(ts_ns)}, {"args", {{unit, value}}}});
  }

  void op(const OpEvent& op) {
    ++summary.ops;
    json base = {{op_key::kStep, op.step},
                 {op_key::kLayer, op.layer},
                 {op_key::kKind, op_kind_name(op.kind)}};
    if (op.has(OpEvent::kWtype)) base[op_key::kWtype] = op.wtype;
    if (op.has(OpEvent::kRows)) base[op_key::kRows] = op.rows;
    if (op.has(OpEvent::kCols)) base[op_key::kCols] = op.cols;
    if (op.has(OpEvent::kTokens)) base[op_key::kTokens] = op.tokens;
    if (op.has(OpEvent::kWeightBytes)) base[op_key::kWeightBytes] = op.weight_bytes;
    if (op.has(OpEvent::kKvBytes)) base[op_key::kKvBytes] = op.kv_bytes;
    if (op.has(OpEvent::kAttentionFlops)) base[op_key::kAttentionFlops] = op.attention_flops;
    const std::string_view phase = phase_name(op.phase);
    for (const WorkerSample& w : op.workers) {
      const int64_t t0 = w.t0_ns, t1 = w.t1_ns;
      ++worker_cpus[w.w][w.cpu];
      json args = base;
      args[op_key::kCpu] = w.cpu;
      args[op_key::kCpuEnd] = w.cpu_end;
      if (w.chunks) args[op_key::kChunks] = *w.chunks;
      if (w.freq_mhz) args[op_key::kFreqMhz] = *w.freq_mhz;
      if (w.runq_ns) args[op_key::kRunqNs] = *w.runq_ns;
      if (w.oncpu_ns) args[op_key::kOncpuNs] = *w.oncpu_ns;
      for (const Counter& c : w.counters) {
        // Counts stay integers in the trace; fractions (mux) stay fractions.
        args[c.name] = c.integral ? json(static_cast<int64_t>(c.value)) : json(c.value);
      }
      writer.emit({{"ph", "X"},
                   {"name", op.name},
                   {"cat", phase},
                   {"pid", kPid},
                   {"tid", w.w + 1},
                   {"ts", us(t0)},
                   {"dur", us(t1 > t0 ? t1 - t0 : 0)},
                   {"args", args}});
      ++summary.slices;
      if (!opts.counters) continue;
      if (w.freq_mhz) counter(fmt::format("freq w{}", w.w), "MHz", t0, *w.freq_mhz);
      if (w.runq_ns && t1 > t0) {
        // Share of the chunk spent waiting for a CPU, held for the chunk, then back to 0.
        const double pct = 100.0 * static_cast<double>(*w.runq_ns) / static_cast<double>(t1 - t0);
        counter(fmt::format("runq w{}", w.w), "%", t0, pct);
        counter(fmt::format("runq w{}", w.w), "%", t1, 0.0);
      }
    }
  }

  void step(const StepEvent& s) {
    ++summary.steps;
    const int64_t t0 = s.t0_ns, t1 = s.t1_ns;
    json args = {{step_key::kStep, s.step}, {step_key::kNPast, s.n_past}};
    auto put = [&](std::string_view key, const auto& value) {
      if (value) args[key] = *value;
    };
    put(step_key::kNTokens, s.n_tokens);
    put(step_key::kToken, s.token);
    // The recorder writes a piece with every sampled token (possibly "").
    if (s.token || !s.piece.empty()) args[step_key::kPiece] = s.piece;
    put(step_key::kStepMs, s.step_ms);
    put(step_key::kTokS, s.tok_s);
    put(step_key::kProcessCpuUsage, s.process_cpu_usage);
    put(step_key::kHostCpuUsage, s.host_cpu_usage);
    put(step_key::kEnergyJ, s.energy_j);
    put(step_key::kPowerW, s.power_w);
    if (!s.freq.empty()) {
      json freq = json::array();
      for (const StepFreq& f : s.freq) {
        freq.push_back(
            {{step_key::kWorker, f.w}, {step_key::kCpu, f.cpu}, {step_key::kMhz, f.mhz}});
      }
      args[step_key::kFreq] = std::move(freq);
    }
    if (s.runq_ns || s.oncpu_ns || s.nvcsw || s.nivcsw || !s.sched_workers.empty()) {
      json sched = json::object();
      auto put_sched = [&](std::string_view key, const std::optional<int64_t>& value) {
        if (value) sched[key] = *value;
      };
      put_sched(step_key::kRunqNs, s.runq_ns);
      put_sched(step_key::kOncpuNs, s.oncpu_ns);
      put_sched(step_key::kNvcsw, s.nvcsw);
      put_sched(step_key::kNivcsw, s.nivcsw);
      json workers = json::array();
      for (const StepSchedWorker& w : s.sched_workers) {
        workers.push_back({{step_key::kWorker, w.w},
                           {step_key::kTid, w.tid},
                           {step_key::kRunqNs, w.runq_ns},
                           {step_key::kOncpuNs, w.oncpu_ns},
                           {step_key::kNvcsw, w.nvcsw},
                           {step_key::kNivcsw, w.nivcsw}});
      }
      sched[step_key::kSchedWorkers] = std::move(workers);
      args[step_key::kSched] = std::move(sched);
    }
    writer.emit({{"ph", "X"},
                 {"name", fmt::format("{} {}", phase_name(s.phase), s.step)},
                 {"cat", "step"},
                 {"pid", kPid},
                 {"tid", kStepsTid},
                 {"ts", us(t0)},
                 {"dur", us(t1 > t0 ? t1 - t0 : 0)},
                 {"args", args}});
    if (!opts.counters) return;
    struct StepCounter {
      const std::optional<double>& value;
      const char* track;
      const char* unit;
    };
    const StepCounter step_counters[] = {{s.tok_s, "decode", "tok/s"},
                                         {s.process_cpu_usage, "process", "CPUs busy"},
                                         {s.host_cpu_usage, "host", "CPUs busy"},
                                         {s.power_w, "power", "W"}};
    for (const StepCounter& c : step_counters) {
      if (c.value) counter(c.track, c.unit, t1, *c.value);
    }
  }

  void metadata(const json& header) {
    namespace hk = eventlog::header_key;
    const json model = header.value(hk::kModel, json::object());
    const std::string title =
        fmt::format("pacer {} {} ({})", header.value(hk::kCommand, "run"),
                    model.is_object() ? model.value(eventlog::model_key::kPath, "") : "",
                    header.value(hk::kTimeUtc, ""));
    writer.emit({{"ph", "M"},
                 {"name", "process_name"},
                 {"pid", kPid},
                 {"tid", 0},
                 {"args", {{"name", title}}}});
    writer.emit({{"ph", "M"},
                 {"name", "thread_name"},
                 {"pid", kPid},
                 {"tid", kStepsTid},
                 {"args", {{"name", "steps"}}}});
    writer.emit({{"ph", "M"},
                 {"name", "thread_sort_index"},
                 {"pid", kPid},
                 {"tid", kStepsTid},
                 {"args", {{"sort_index", -1}}}});
    for (const auto& [w, cpus] : worker_cpus) {
      int best = -1;
      int64_t best_n = -1;
      for (const auto& [cpu, n] : cpus) {
        if (n > best_n) best = cpu, best_n = n;
      }
      std::string name =
          best >= 0 ? fmt::format("worker {} (cpu {})", w, best) : fmt::format("worker {}", w);
      if (cpus.size() > 1) name += fmt::format(", {} cpus seen", cpus.size());
      writer.emit({{"ph", "M"},
                   {"name", "thread_name"},
                   {"pid", kPid},
                   {"tid", w + 1},
                   {"args", {{"name", name}}}});
      writer.emit({{"ph", "M"},
                   {"name", "thread_sort_index"},
                   {"pid", kPid},
                   {"tid", w + 1},
                   {"args", {{"sort_index", w}}}});
    }
    summary.workers = static_cast<int>(worker_cpus.size());
  }
};

// The trace as a visitor of the one log reader: the reader validates the header and the lines
// (its errors and warnings are the trace's), the visitor writes events as records arrive. Nothing
// is written before the header is accepted.
class TraceVisitor final : public LogVisitor {
 public:
  TraceVisitor(std::ostream& out, const std::string& log_name, const ChromeTraceOptions& opts)
      : out_(out), log_name_(log_name), opts_(opts) {}

  void on_header(const Header& h) override {
    header_ = h.raw;
    writer_.emplace(out_, summary_);
    converter_.emplace(Converter{opts_, summary_, *writer_, {}});
  }
  void on_op(const OpEvent& op) override { converter_->op(op); }
  void on_step(const StepEvent& s) override { converter_->step(s); }
  // footer: only its presence matters (ReadSummary::complete); bench rows and unknown types are
  // not part of the timeline.

  ChromeTraceSummary finish(const ReadSummary& read) {
    summary_.lines = read.lines;
    summary_.complete = read.complete();
    summary_.warnings = read.warnings();
    converter_->metadata(header_);
    json other = {{"source", log_name_},
                  {"pacer_version", header_.value("pacer_version", "")},
                  {"git_sha", header_.value("git_sha", "")},
                  {"complete", summary_.complete}};
    for (const char* k : {"model", "host", "frequency", "counters"}) {
      if (header_.contains(k)) other[k] = header_[k];
    }
    writer_->finish(other);
    return std::move(summary_);
  }

 private:
  std::ostream& out_;
  const std::string& log_name_;
  const ChromeTraceOptions& opts_;
  ChromeTraceSummary summary_;
  json header_;
  std::optional<TraceWriter> writer_;
  std::optional<Converter> converter_;
};

}  // namespace

ChromeTraceSummary convert_to_chrome_trace(std::istream& log, std::ostream& out,
                                           const std::string& log_name,
                                           const ChromeTraceOptions& opts) {
  TraceVisitor trace(out, log_name, opts);
  const ReadSummary read = LogReader::read_stream(log, trace, log_name);
  return trace.finish(read);
}

ChromeTraceSummary convert_file_to_chrome_trace(const std::string& log_path,
                                                const std::string& trace_path,
                                                const ChromeTraceOptions& opts) {
  // Written whole or not at all: a bad log found halfway leaves no half trace behind.
  OutputFile out(trace_path);
  TraceVisitor trace(out.stream(), log_path, opts);
  const ReadSummary read = LogReader(log_path).read(trace);
  ChromeTraceSummary s = trace.finish(read);
  out.commit();
  return s;
}

}  // namespace pacer::analysis
