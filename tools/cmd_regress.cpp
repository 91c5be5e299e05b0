// `pacer regress`: finds the significant slowdowns in a results database and explains each with
// `pacer compare` on the stored event logs (analysis/regress.h). Exit 1 when one is above
// --fail-above, so it can gate CI.
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "analysis/history_db.h"
#include "analysis/output_file.h"
#include "analysis/regress.h"
#include "tools/commands.h"

namespace pacer::tools {
namespace {

struct RegressArgs {
  std::string db;
  analysis::RegressOptions opts;
  std::string fail_above = "5";
  int threads = 0;
  bool no_explain = false;
  std::string format = "text";
};

// "5" or "5%"; nullopt when it is neither.
std::optional<double> parse_percent(std::string text) {
  if (!text.empty() && text.back() == '%') text.pop_back();
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// Selector and percentage mistakes are usage errors (exit 2), found while parsing.
CLI::Validator selector_check(bool candidate) {
  return CLI::Validator(
      [candidate](std::string& in) { return analysis::selector_error(in, candidate); }, "SEL");
}

void run_regress(RegressArgs a) {
  if (a.db.empty())
    throw std::invalid_argument("regress: no database: give --db FILE or set PACER_DB");
  a.opts.fail_above_pct = parse_percent(a.fail_above).value_or(5.0);
  if (a.threads > 0) a.opts.filter.threads = a.threads;
  a.opts.explain = !a.no_explain;
  const analysis::HistoryDb db =
      analysis::HistoryDb::open(a.db, analysis::HistoryDb::Mode::ReadOnly);
  const analysis::RegressResult r = analysis::find_regressions(db, a.opts);
  analysis::write_stdout(a.format == "json" ? analysis::render_regress_json(r, a.opts)
                                            : analysis::render_regress_text(r, a.opts));
  if (r.fails) throw ExitRequest{1};
}

}  // namespace

void add_regress_command(CLI::App& app) {
  auto args = std::make_shared<RegressArgs>();
  auto* cmd = app.add_subcommand(
      "regress",
      "Significant slowdowns in a results database, largest first, each explained by `pacer "
      "compare` on the stored logs; exit 1 when one exceeds --fail-above");
  cmd->add_option("--db", args->db, "results database (default: $PACER_DB)")->envname("PACER_DB");
  cmd->add_option("--baseline", args->opts.baseline,
                  "runs to compare against, comma-separated terms: rest | fleet | latest | "
                  "since:DATE | until:DATE | commit:SHA | host:NAME | run:UUID")
      ->capture_default_str()
      ->check(selector_check(false));
  cmd->add_option("--candidate", args->opts.candidate,
                  "runs under test, same terms (not rest/fleet)")
      ->capture_default_str()
      ->check(selector_check(true));
  cmd->add_option("--fail-above", args->fail_above,
                  "exit 1 when a significant slowdown exceeds this % (5 or 5%)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& in) -> std::string {
            return parse_percent(in) ? "" : "'" + in + "' is not a percentage >= 0 (5 or 5%)";
          },
          "PCT"));
  cmd->add_option("--alpha", args->opts.alpha, "one-sided significance level")
      ->capture_default_str()
      ->check(number_in(1e-9, 0.5));
  cmd->add_option("--host", args->opts.filter.host, "only this host (name or id)");
  cmd->add_option("--model", args->opts.filter.model, "only this model (name, path or file name)");
  cmd->add_option("--test", args->opts.filter.test, "only this test (tg64, pp512, ...)");
  cmd->add_option("--threads", args->threads, "only this thread count")->check(at_least(1));
  cmd->add_option("--since", args->opts.filter.since, "only runs at or after DATE")
      ->check(history_date());
  cmd->add_flag("--no-explain", args->no_explain, "skip the compare of the stored logs");
  cmd->add_option("--format", args->format, "text | json")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  cmd->callback([args] { run_regress(*args); });
}

}  // namespace pacer::tools
