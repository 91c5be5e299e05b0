// pacer compare NORMAL ABNORMAL: why was the abnormal run slower? (analysis/compare.h)
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "analysis/compare.h"
#include "analysis/compare_input.h"
#include "analysis/compare_render.h"
#include "analysis/output_file.h"
#include "tools/commands.h"

namespace pacer::tools {
namespace {

struct CompareArgs {
  std::string normal, abnormal, format, output;
  bool force = false;
  int skip_steps = 0;
  size_t rows = 40;
};

std::string infer_format(const CompareArgs& a) {
  return format_for_output(a.format, a.output,
                           {{".html", "html"}, {".htm", "html"}, {".json", "json"}}, "md");
}

void run_compare(const CompareArgs& a) {
  analysis::LoadOptions load{.skip_steps = a.skip_steps};
  const analysis::RunCycles normal = analysis::load_run(a.normal, load);
  const analysis::RunCycles abnormal = analysis::load_run(a.abnormal, load);
  analysis::CompareOptions opts;
  opts.force = a.force;
  analysis::Comparison c = analysis::compare_runs(normal, abnormal, opts);
  for (const std::string& w : c.compat.warnings)
    fmt::print(stderr, "pacer compare: warning: {}\n", w);
  if (c.forced)
    for (const std::string& e : c.compat.errors)
      fmt::print(stderr, "pacer compare: warning: forced despite: {}\n", e);
  for (int i = 0; i < 2; ++i)
    for (const std::string& n : c.notes[i]) fmt::print(stderr, "pacer compare: note: {}\n", n);

  analysis::CompareRenderOptions ro;
  ro.table_rows = a.rows;
  ro.compare = opts;
  const std::string format = infer_format(a);
  std::string text;
  if (format == "md") {
    text = analysis::render_markdown(c, ro);
  } else if (format == "json") {
    text = analysis::render_json(c, ro);
  } else {
    text = analysis::render_html(c, ro);
  }
  if (a.output.empty() || a.output == "-") {
    analysis::write_stdout(text);
    return;
  }
  analysis::write_file_atomically(a.output, text);
  // The verdict on stderr too, so `-o report.html` still says the answer.
  fmt::print(stderr, "{}\npacer compare: wrote {}\n", c.verdict, a.output);
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  auto* cmd = app.add_subcommand(
      "compare",
      "Why was ABNORMAL slower than NORMAL? Compares two event logs decode step by decode step: "
      "suspicion-ranked (op, metric, device) table, additive attribution to "
      "frequency / IPC / instructions / run queue / blocked time, and a verdict");
  cmd->add_option("normal", args->normal, "event log of the normal (baseline) run")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("abnormal", args->abnormal, "event log of the abnormal (slow) run")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--format", args->format,
                  "md (default), json or html; default from -o's extension")
      ->check(CLI::IsMember({"md", "json", "html"}));
  cmd->add_option("-o,--output", args->output, "write the report here instead of stdout");
  cmd->add_flag("--force", args->force, "compare logs of different models, types or shapes");
  cmd->add_option("--skip-steps", args->skip_steps, "drop this many leading decode steps (warm-up)")
      ->check(at_least(0));
  cmd->add_option("--rows", args->rows, "rows of the detailed table (0 = all)")
      ->capture_default_str();
  cmd->callback([args] {
    check_output_path("--output", args->output,
                      {{"normal log", args->normal}, {"abnormal log", args->abnormal}});
    run_compare(*args);
  });
}

}  // namespace pacer::tools
