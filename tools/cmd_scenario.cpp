// pacer scenario NAME -o DIR: a normal and an abnormal run with a cause injected for real
// (runtime/scenario.h), then `pacer compare`; says whether the verdict named the cause first.
// --trials K repeats it and prints the share of trials that did (the docs' trial table).
// --synthetic CAUSE writes the two logs from the synthetic-log generator instead of running.
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "analysis/compare.h"
#include "analysis/compare_input.h"
#include "analysis/compare_render.h"
#include "analysis/compare_synth.h"
#include "analysis/output_file.h"
#include "loader/synth.h"
#include "runtime/scenario.h"
#include "tools/commands.h"

namespace pacer::tools {
namespace {

namespace fs = std::filesystem;

struct ScenarioArgs {
  std::string name, model, out, synthetic;
  int threads = -1, n_predict = 48, trials = 1;
  double pass_share = 0.95;
};

struct SyntheticCause {
  const char* name;
  analysis::synth::Effect effect;
  const char* expected;  // analysis::leading_cause key
};
const std::vector<SyntheticCause>& synthetic_causes() {
  static const std::vector<SyntheticCause> kCauses = {
      {"frequency", {.freq_scale = 0.7}, "frequency"},
      {"ipc", {.ops = {"ffn_down"}, .cpi_scale = 1.6}, "ipc"},
      {"instructions", {.ops = {"ffn_down"}, .instr_scale = 1.6}, "instructions"},
      {"runq", {.runq_ns = 20000}, "run queue"},
      {"blocked", {.blocked_ns = 20000}, "blocked"},
  };
  return kCauses;
}

struct TrialOutcome {
  std::string cause, verdict;
  bool named = false;
};

TrialOutcome compare_and_write(const fs::path& normal, const fs::path& abnormal,
                               const fs::path& dir, const std::vector<std::string>& expected) {
  const analysis::Comparison c = analysis::compare_runs(analysis::load_run(normal.string()),
                                                        analysis::load_run(abnormal.string()));
  analysis::CompareRenderOptions ro;
  analysis::write_file_atomically(dir / "compare.md", analysis::render_markdown(c, ro));
  analysis::write_file_atomically(dir / "compare.json", analysis::render_json(c, ro));
  TrialOutcome t;
  t.cause = analysis::leading_cause(c);
  t.verdict = c.verdict;
  t.named = std::find(expected.begin(), expected.end(), t.cause) != expected.end();
  return t;
}

void run_synthetic(const ScenarioArgs& a) {
  const SyntheticCause* cause = nullptr;
  for (const SyntheticCause& c : synthetic_causes())
    if (a.synthetic == c.name) cause = &c;
  const fs::path dir(a.out);
  fs::create_directories(dir);
  analysis::synth::RunSpec normal;
  analysis::synth::RunSpec abnormal = normal;
  abnormal.seed = normal.seed + 100;
  abnormal.effects.push_back(cause->effect);
  analysis::synth::write_event_log((dir / "normal.jsonl").string(), normal);
  analysis::synth::write_event_log((dir / "abnormal.jsonl").string(), abnormal);
  const TrialOutcome t =
      compare_and_write(dir / "normal.jsonl", dir / "abnormal.jsonl", dir, {cause->expected});
  fmt::print("synthetic {}: {}\nleading cause: {} ({})\nreports: {} {}\n", cause->name, t.verdict,
             t.cause, t.named ? "the injected cause" : "NOT the injected cause",
             (dir / "compare.md").string(), (dir / "compare.json").string());
  if (!t.named) throw ExitRequest{1};
}

void run_scenarios(const ScenarioArgs& a) {
  const auto kind = runtime::parse_scenario_kind(a.name);
  const fs::path dir(a.out);
  fs::create_directories(dir);
  std::string model = a.model;
  if (model.empty()) {
    // A model several times any LLC, so decode streams weights from DRAM as it does for real
    // models (and the membw scenario has bandwidth to contend for); reused across invocations.
    const fs::path path = dir / "model.gguf";
    if (!fs::exists(path)) {
      fmt::print(stderr, "pacer scenario: writing the model {} (qwen2.5-0.5b shape, q4_0)\n",
                 path.string());
      loader::SynthSpec spec = loader::synth_preset("qwen2.5-0.5b");
      spec.type = ops::WeightType::Q4_0;
      loader::write_synthetic_model(spec, path);
    }
    model = path.string();
  }
  const std::vector<std::string> expected = runtime::scenario_expected_causes(*kind);
  runtime::ScenarioOptions opts;
  opts.kind = *kind;
  opts.pacer_exe = fs::read_symlink("/proc/self/exe").string();
  opts.model = model;
  opts.threads = a.threads;
  opts.n_predict = a.n_predict;
  opts.progress = [](const std::string& s) { fmt::print(stderr, "pacer scenario: {}\n", s); };
  int named = 0;
  nlohmann::json trials = nlohmann::json::array();
  std::string injected;
  for (int k = 0; k < a.trials; ++k) {
    opts.dir = a.trials == 1 ? dir : dir / fmt::format("trial-{:02d}", k + 1);
    const runtime::ScenarioRuns runs = runtime::run_scenario(opts);
    injected = runs.injected;
    const TrialOutcome t =
        compare_and_write(runs.normal_log, runs.abnormal_log, opts.dir, expected);
    named += t.named;
    trials.push_back({{"trial", k + 1},
                      {"dir", opts.dir.string()},
                      {"leading_cause", t.cause},
                      {"named", t.named},
                      {"verdict", t.verdict}});
    fmt::print("{} trial {}/{}: {} -> {}: {}\n", a.name, k + 1, a.trials,
               t.named ? "named" : "NOT named", t.cause, t.verdict);
    std::fflush(stdout);
  }
  const double share = static_cast<double>(named) / a.trials;
  const nlohmann::json summary = {
      {"scenario", a.name}, {"injected", injected}, {"expected", expected}, {"trials", a.trials},
      {"named", named},     {"share", share},       {"runs", trials}};
  analysis::write_file_atomically(dir / "scenario.json", summary.dump(1) + "\n");
  fmt::print("| {} | {} | {} | {} of {} | {:.0f}% |\n", a.name, injected,
             fmt::join(expected, " / "), named, a.trials, share * 100);
  if (share < (a.trials == 1 ? 1.0 : a.pass_share)) throw ExitRequest{1};
}

}  // namespace

void add_scenario_command(CLI::App& app) {
  auto args = std::make_shared<ScenarioArgs>();
  auto* cmd = app.add_subcommand(
      "scenario",
      "Inject a cause for real and check `pacer compare` names it: a normal and an abnormal run "
      "of a model on this machine, then the comparison (DIR/compare.md, compare.json); exit 0 "
      "when the verdict names the injected cause first");
  std::vector<std::string> names;
  for (std::string_view n : runtime::scenario_names()) names.emplace_back(n);
  std::string help = "what to inject:";
  for (std::string_view n : runtime::scenario_names())
    help += fmt::format(" {} ({});", n,
                        runtime::scenario_description(*runtime::parse_scenario_kind(n)));
  cmd->add_option("name", args->name, help)->check(CLI::IsMember(names));
  std::vector<std::string> synthetic;
  for (const SyntheticCause& c : synthetic_causes()) synthetic.emplace_back(c.name);
  cmd->add_option("--synthetic", args->synthetic,
                  "write the two logs with the synthetic-log generator and this injected cause "
                  "instead of running (no model needed)")
      ->check(CLI::IsMember(synthetic))
      ->excludes(cmd->get_option("name"));
  cmd->add_option("-m,--model", args->model,
                  "GGUF model (default: DIR/model.gguf, written once: a qwen2.5-0.5b-shape Q4_0)")
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--out", args->out, "folder for the logs and reports")->required();
  cmd->add_option("-t,--threads", args->threads,
                  "worker threads (default: one per allowed core; membw leaves one CPU free)")
      ->check(thread_count());
  cmd->add_option("-n,--n-predict", args->n_predict, "decode steps per run")
      ->check(CLI::Range(8, 100000))
      ->capture_default_str();
  cmd->add_option("--trials", args->trials,
                  "repeat the scenario (DIR/trial-NN each) and print the share of trials whose "
                  "verdict named the cause first; exit 1 below --pass-share")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--pass-share", args->pass_share, "share of trials that must name the cause")
      ->check(number_in(0, 1))
      ->capture_default_str();
  cmd->callback([args] {
    if (args->synthetic.empty() && args->name.empty())
      throw CLI::ValidationError("name", "a scenario name or --synthetic CAUSE is required");
    if (!args->synthetic.empty()) {
      run_synthetic(*args);
    } else {
      run_scenarios(*args);
    }
  });
}

}  // namespace pacer::tools
