// `pacer report EVENTS [--format text|md|json|html] [-o FILE] [--top N]`: the single-run profile
// report. Warnings about the log (skipped lines, truncation, missing footer) go to stderr; the
// report goes to stdout or FILE.
#include <cstdio>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "analysis/output_file.h"
#include "analysis/report.h"
#include "tools/commands.h"

namespace pacer::tools {

namespace {

struct ReportArgs {
  std::string events;
  std::string format;  // empty: from -o's extension, else text
  std::string output;
  int top = 25;
};

void run_report(const ReportArgs& a) {
  const analysis::Format format = analysis::parse_format(format_for_output(
      a.format, a.output, {{".html", "html"}, {".htm", "html"}, {".json", "json"}, {".md", "md"}},
      "text"));
  const analysis::Report report = analysis::build_report(a.events);
  for (const std::string& w : report.read.warnings()) fmt::print(stderr, "warning: {}\n", w);
  const std::string text = analysis::render(report, format, {.top = a.top});
  if (a.output.empty() || a.output == "-") {
    analysis::write_stdout(text);
    return;
  }
  analysis::write_file_atomically(a.output, text);
  fmt::print(stderr, "wrote {} ({} bytes)\n", a.output, text.size());
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand("report", "single-run profile report of an event log");
  cmd->add_option("EVENTS", args->events, "event log (JSONL) from `pacer run --events-out`")
      ->required();
  cmd->add_option("--format", args->format,
                  "text | md | json | html (default: from -o's extension, else text)")
      ->check(CLI::IsMember({"text", "txt", "md", "markdown", "json", "html"}));
  cmd->add_option("-o,--output", args->output, "write the report to FILE instead of stdout");
  cmd->add_option("--top", args->top,
                  "rows per long table in text/md (0: all; json and html have all rows)")
      ->check(at_least(0));
  cmd->callback([args] {
    check_output_path("--output", args->output, {{"event log", args->events}});
    run_report(*args);
  });
}

}  // namespace pacer::tools
