#pragma once
// pacer event log (docs/event-log.md) -> Chrome trace event format, JSON object form, which
// Perfetto's UI (ui.perfetto.dev) and chrome://tracing open.
//
// One process per run, one track per executor worker ("worker 1 (cpu 1)") carrying an "X" slice
// for each op chunk, a "steps" track with one slice per prefill batch / decoded token, and counter
// tracks ("C" events, shown as "<name> <unit>"): per-worker frequency ("freq w0 MHz") and
// run-queue share of each chunk ("runq w0 %"), and per step "decode tok/s", "process CPUs busy",
// "host CPUs busy" and "power W" where the log has them. The log is read by the one event-log
// reader: a truncated last line (a killed run) and malformed lines are skipped and reported.
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace pacer::analysis {

struct ChromeTraceOptions {
  bool counters = true;  // counter tracks (frequency, run queue, tok/s, CPU usage, power)
};

struct ChromeTraceSummary {
  int64_t lines = 0;
  int64_t ops = 0;
  int64_t steps = 0;
  int64_t slices = 0;  // "X" events for op chunks
  int64_t events = 0;  // everything written to traceEvents
  int workers = 0;
  bool complete = false;              // the log has a footer
  std::vector<std::string> warnings;  // ReadSummary::warnings() of the log
};

// Reads `log` through the event-log reader (analysis/event_log.h): its errors (LogError, naming
// `log_name` and the line: no header, a newer schema, ...) are thrown before anything is written,
// and its warnings (malformed lines, a truncated last line, no footer) come back in the summary.
ChromeTraceSummary convert_to_chrome_trace(std::istream& log, std::ostream& out,
                                           const std::string& log_name,
                                           const ChromeTraceOptions& opts = {});

// File to file, written whole or not at all; throws LogError when the log cannot be read and
// std::runtime_error naming the path when the trace cannot be written.
ChromeTraceSummary convert_file_to_chrome_trace(const std::string& log_path,
                                                const std::string& trace_path,
                                                const ChromeTraceOptions& opts = {});

}  // namespace pacer::analysis
