#include "analysis/chrome_trace.h"
#include "analysis/output_file.h"

#include <fstream>
#include <istream>
#include <map>
#include <ostream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "eventlog/schema.h"

namespace pacer::analysis {
namespace {

using json = nlohmann::json;

constexpr int kPid = 1;
constexpr int kStepsTid = 0;  // worker w is tid w + 1

// Chrome trace timestamps are microseconds; the log's are CLOCK_MONOTONIC ns. Absolute values
// keep every event positive; three decimals keep ns resolution.
double us(int64_t ns) {
  return static_cast<double>(ns) / 1000.0;
}

int64_t get_i64(const json& j, const char* key, int64_t fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int64_t>() : fallback;
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

  void op(const json& op) {
    ++summary.ops;
    const auto workers = op.find("workers");
    if (workers == op.end() || !workers->is_array()) return;
    json base = {{"step", op.value("step", json())},
                 {"layer", op.value("layer", -1)},
                 {"kind", op.value("kind", "")}};
    for (const char* k : {"wtype", "rows", "cols", "tokens", "weight_bytes"}) {
      if (op.contains(k)) base[k] = op[k];
    }
    const std::string name = op.value("name", "op");
    const std::string phase = op.value("phase", "");
    for (const json& w : *workers) {
      if (!w.is_object()) continue;
      const int wid = static_cast<int>(get_i64(w, "w", 0));
      const int64_t t0 = get_i64(w, "t0_ns", get_i64(op, "t0_ns", 0));
      const int64_t t1 = get_i64(w, "t1_ns", t0);
      const int cpu = static_cast<int>(get_i64(w, "cpu", -1));
      ++worker_cpus[wid][cpu];
      json args = base;
      for (const char* k : {"cpu", "cpu_end", "chunks", "freq_mhz", "runq_ns", "oncpu_ns"}) {
        if (w.contains(k)) args[k] = w[k];
      }
      if (w.contains("counters") && w["counters"].is_object()) {
        for (const auto& [k, v] : w["counters"].items()) args[k] = v;
      }
      writer.emit({{"ph", "X"},
                   {"name", name},
                   {"cat", phase},
                   {"pid", kPid},
                   {"tid", wid + 1},
                   {"ts", us(t0)},
                   {"dur", us(t1 > t0 ? t1 - t0 : 0)},
                   {"args", args}});
      ++summary.slices;
      if (!opts.counters) continue;
      if (w.contains("freq_mhz") && w["freq_mhz"].is_number()) {
        counter(fmt::format("freq w{}", wid), "MHz", t0, w["freq_mhz"].get<double>());
      }
      if (w.contains("runq_ns") && w["runq_ns"].is_number() && t1 > t0) {
        // Share of the chunk spent waiting for a CPU, held for the chunk, then back to 0.
        const double pct = 100.0 * w["runq_ns"].get<double>() / static_cast<double>(t1 - t0);
        counter(fmt::format("runq w{}", wid), "%", t0, pct);
        counter(fmt::format("runq w{}", wid), "%", t1, 0.0);
      }
    }
  }

  void step(const json& s) {
    ++summary.steps;
    const int64_t t0 = get_i64(s, "t0_ns", 0), t1 = get_i64(s, "t1_ns", t0);
    const std::string phase = s.value("phase", "step");
    json args = json::object();
    for (const char* k :
         {"step", "n_past", "n_tokens", "token", "piece", "step_ms", "tok_s", "process_cpu_usage",
          "host_cpu_usage", "energy_j", "power_w", "freq", "sched"}) {
      if (s.contains(k)) args[k] = s[k];
    }
    writer.emit({{"ph", "X"},
                 {"name", fmt::format("{} {}", phase, get_i64(s, "step", 0))},
                 {"cat", "step"},
                 {"pid", kPid},
                 {"tid", kStepsTid},
                 {"ts", us(t0)},
                 {"dur", us(t1 > t0 ? t1 - t0 : 0)},
                 {"args", args}});
    if (!opts.counters) return;
    struct StepCounter {
      const char* key;
      const char* track;
      const char* unit;
    };
    const StepCounter step_counters[] = {{"tok_s", "decode", "tok/s"},
                                         {"process_cpu_usage", "process", "CPUs busy"},
                                         {"host_cpu_usage", "host", "CPUs busy"},
                                         {"power_w", "power", "W"}};
    for (const StepCounter& c : step_counters) {
      if (s.contains(c.key) && s[c.key].is_number()) {
        counter(c.track, c.unit, t1, s[c.key].get<double>());
      }
    }
  }

  void metadata(const json& header) {
    const json model = header.value("model", json::object());
    const std::string title =
        fmt::format("pacer {} {} ({})", header.value("command", "run"),
                    model.is_object() ? model.value("path", "") : "", header.value("time_utc", ""));
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

}  // namespace

ChromeTraceSummary convert_to_chrome_trace(std::istream& log, std::ostream& out,
                                           const std::string& log_name,
                                           const ChromeTraceOptions& opts) {
  ChromeTraceSummary summary;
  std::string line;
  json header;
  // The header must come first: without it nothing below can be trusted.
  while (header.is_null() && std::getline(log, line)) {
    ++summary.lines;
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || j.value("type", "") != "header") {
      throw std::runtime_error(
          fmt::format("{}:{}: not a pacer event log (the first record must be a header)", log_name,
                      summary.lines));
    }
    const int64_t schema = get_i64(j, "schema", 0);
    if (schema > eventlog::kSchemaVersion) {
      throw std::runtime_error(
          fmt::format("{}:{}: event log schema {} is newer than this pacer reads (schema {})",
                      log_name, summary.lines, schema, eventlog::kSchemaVersion));
    }
    header = std::move(j);
  }
  if (header.is_null()) throw std::runtime_error(fmt::format("{}: empty event log", log_name));

  TraceWriter writer(out, summary);
  Converter conv{opts, summary, writer, {}};
  json footer;
  while (std::getline(log, line)) {
    ++summary.lines;
    if (line.empty()) continue;
    const bool unterminated = log.eof();  // getline hit EOF before a '\n'
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      summary.warnings.push_back(
          unterminated ? fmt::format("{}:{}: truncated last line skipped (killed run?)", log_name,
                                     summary.lines)
                       : fmt::format("{}:{}: malformed line skipped", log_name, summary.lines));
      continue;
    }
    const std::string type = j.value("type", "");
    if (type == "op") {
      conv.op(j);
    } else if (type == "step") {
      conv.step(j);
    } else if (type == "footer") {
      footer = std::move(j);
      summary.complete = true;
    }  // other types (bench, future additions) are not part of the timeline
  }
  if (!summary.complete) {
    summary.warnings.push_back(fmt::format("{}: no footer: the run did not finish", log_name));
  }
  conv.metadata(header);
  json other = {{"source", log_name},
                {"pacer_version", header.value("pacer_version", "")},
                {"git_sha", header.value("git_sha", "")},
                {"complete", summary.complete}};
  if (header.contains("model")) other["model"] = header["model"];
  if (header.contains("host")) other["host"] = header["host"];
  if (header.contains("frequency")) other["frequency"] = header["frequency"];
  if (header.contains("counters")) other["counters"] = header["counters"];
  writer.finish(other);
  return summary;
}

ChromeTraceSummary convert_file_to_chrome_trace(const std::string& log_path,
                                                const std::string& trace_path,
                                                const ChromeTraceOptions& opts) {
  std::ifstream in(log_path);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open event log", log_path));
  // Written whole or not at all: a bad log found halfway leaves no half trace behind.
  OutputFile out(trace_path);
  ChromeTraceSummary s = convert_to_chrome_trace(in, out.stream(), log_path, opts);
  out.commit();
  return s;
}

}  // namespace pacer::analysis
