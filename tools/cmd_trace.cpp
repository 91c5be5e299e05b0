// pacer trace EVENTS [-o trace.json]: the event log as a Chrome/Perfetto trace.
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "analysis/chrome_trace.h"
#include "tools/commands.h"

namespace pacer::tools {
namespace {

// events.jsonl -> events.trace.json
std::string default_output(const std::string& events) {
  std::string base = events;
  for (const char* ext : {".jsonl", ".json"}) {
    const std::string e = ext;
    if (base.size() > e.size() && base.compare(base.size() - e.size(), e.size(), e) == 0) {
      base.resize(base.size() - e.size());
      break;
    }
  }
  return base + ".trace.json";
}

}  // namespace

void add_trace_command(CLI::App& app) {
  struct Options {
    std::string events, output;
    bool no_counters = false;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "trace", "Convert an event log to a Chrome/Perfetto trace (open at ui.perfetto.dev)");
  cmd->add_option("EVENTS", opts->events, "event log written by pacer run --events-out")
      ->required();
  cmd->add_option("-o,--output", opts->output, "trace file to write (default: EVENTS.trace.json)");
  cmd->add_flag("--no-counters", opts->no_counters,
                "only slices: no frequency / run-queue / tok/s counter tracks");
  cmd->callback([opts] {
    const std::string out = opts->output.empty() ? default_output(opts->events) : opts->output;
    check_output_path("--output", out, {{"event log", opts->events}});
    analysis::ChromeTraceOptions o;
    o.counters = !opts->no_counters;
    const analysis::ChromeTraceSummary s =
        analysis::convert_file_to_chrome_trace(opts->events, out, o);
    for (const std::string& w : s.warnings) fmt::print(stderr, "pacer: warning: {}\n", w);
    fmt::print("{}: {} ops on {} worker tracks, {} steps, {} trace events{}\n", out, s.ops,
               s.workers, s.steps, s.events, s.complete ? "" : " (incomplete run)");
  });
}

}  // namespace pacer::tools
