// `pacer history`: the runs of a results database (analysis/history_db.h) as a table, an HTML
// trend page or OpenMetrics; `--merge A B -o FLEET` folds per-host files into one; `--log RUN`
// writes a stored event log back out for `pacer compare` / `pacer report`.
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analysis/history_db.h"
#include "analysis/history_render.h"
#include "analysis/output_file.h"
#include "tools/commands.h"

namespace pacer::tools {
namespace {

struct HistoryArgs {
  std::string db;
  analysis::RunFilter filter;
  int threads = 0;  // 0: any
  std::string format;
  std::string output;
  std::vector<std::string> merge;
  std::string log_run;
  std::string ops_run;
};

analysis::HistoryFormat infer_format(const HistoryArgs& a) {
  return analysis::parse_history_format(format_for_output(a.format, a.output,
                                                          {{".html", "html"},
                                                           {".htm", "html"},
                                                           {".json", "json"},
                                                           {".csv", "csv"},
                                                           {".md", "md"},
                                                           {".prom", "openmetrics"},
                                                           {".om", "openmetrics"}},
                                                          "text"));
}

void emit(const std::string& output, const std::string& text) {
  if (output.empty() || output == "-") {
    analysis::write_stdout(text);
    return;
  }
  analysis::write_file_atomically(output, text);
  fmt::print(stderr, "pacer history: wrote {} ({} bytes)\n", output, text.size());
}

void run_merge(const HistoryArgs& a) {
  if (a.output.empty() || a.output == "-") {
    throw std::invalid_argument("history --merge: name the merged database with -o FILE");
  }
  analysis::HistoryDb out =
      analysis::HistoryDb::open(a.output, analysis::HistoryDb::Mode::ReadWrite);
  for (const std::string& in : a.merge) {
    const analysis::MergeResult m = out.merge_from(in);
    fmt::print("{}: {} run{} added, {} already present\n", in, m.added, m.added == 1 ? "" : "s",
               m.skipped);
  }
  fmt::print("{}: {} runs\n", a.output, out.runs().size());
}

// The run whose UUID starts with `prefix`; an error unless exactly one does.
analysis::StoredRun unique_run(const analysis::HistoryDb& db, const std::string& prefix) {
  std::vector<analysis::StoredRun> hits;
  for (analysis::StoredRun& r : db.runs())
    if (r.record.run_uuid.rfind(prefix, 0) == 0) hits.push_back(std::move(r));
  if (hits.size() != 1) {
    throw std::runtime_error(fmt::format("{}: {} runs match '{}' (give more of the run UUID)",
                                         db.path().string(), hits.size(), prefix));
  }
  return std::move(hits.front());
}

void run_history(HistoryArgs a) {
  if (!a.merge.empty()) {
    run_merge(a);
    return;
  }
  if (a.db.empty()) {
    throw std::invalid_argument("history: no database: give --db FILE or set PACER_DB");
  }
  const analysis::HistoryDb db =
      analysis::HistoryDb::open(a.db, analysis::HistoryDb::Mode::ReadOnly);
  if (!a.log_run.empty()) {
    const analysis::StoredRun run = unique_run(db, a.log_run);
    const std::optional<std::string> log = db.event_log(run.id);
    if (!log) {
      throw std::runtime_error(
          fmt::format("{}: run {} has no stored event log", a.db, run.record.run_uuid));
    }
    emit(a.output, *log);
    return;
  }
  if (!a.ops_run.empty()) {
    const analysis::StoredRun run = unique_run(db, a.ops_run);
    emit(a.output, analysis::render_op_summary(run, db.op_summary(run.id), infer_format(a)));
    return;
  }
  if (a.threads > 0) a.filter.threads = a.threads;
  emit(a.output, analysis::render_history(db.runs(a.filter), infer_format(a)));
}

}  // namespace

CLI::Validator history_date() {
  return CLI::Validator(
      [](std::string& in) -> std::string { return analysis::history_date_error(in); }, "DATE");
}

void add_history_command(CLI::App& app) {
  auto args = std::make_shared<HistoryArgs>();
  auto* cmd = app.add_subcommand(
      "history",
      "The runs of a results database (`pacer bench --db`): table, HTML trend plots or "
      "OpenMetrics; --merge folds per-host databases into one");
  cmd->add_option("--db", args->db, "results database (default: $PACER_DB)")->envname("PACER_DB");
  cmd->add_option("--host", args->filter.host, "only this host (name or id)");
  cmd->add_option("--model", args->filter.model, "only this model (name, path, file name or hash)");
  cmd->add_option("--test", args->filter.test, "only this test (pp512, tg64, ...)");
  cmd->add_option("--threads", args->threads, "only this thread count")->check(at_least(1));
  cmd->add_option("--since", args->filter.since, "only runs at or after DATE (2026-11-24[THH:MM])")
      ->check(history_date());
  cmd->add_option("--until", args->filter.until, "only runs before DATE")->check(history_date());
  cmd->add_option("--format", args->format,
                  "text | md | csv | json | html | openmetrics (default: from -o's extension, "
                  "else text)")
      ->check(CLI::IsMember(
          {"text", "txt", "md", "markdown", "csv", "json", "html", "openmetrics", "prom"}));
  cmd->add_option("-o,--output", args->output,
                  "write here instead of stdout (with --merge: the merged database)");
  cmd->add_option("--merge", args->merge,
                  "merge these databases into -o FILE (runs deduplicated by run UUID)")
      ->expected(1, -1);
  cmd->add_option("--log", args->log_run,
                  "write the stored event log of run UUID (or a unique prefix) to -o or stdout");
  cmd->add_option("--ops", args->ops_run,
                  "the per-op summary of run UUID (or a unique prefix): text, md, csv or json");
  cmd->callback([args] {
    // With --merge, -o is the database merged into (HistoryDb::merge_from refuses a database
    // merged into itself); otherwise a report or a stored log written over the database it reads
    // would destroy it.
    if (args->merge.empty()) check_output_path("--output", args->output, {{"--db", args->db}});
    run_history(*args);
  });
}

}  // namespace pacer::tools
