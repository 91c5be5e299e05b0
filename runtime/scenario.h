#pragma once
// `pacer scenario`: a normal and an abnormal decode run of the same model on this machine, the
// abnormal one with a cause injected for real (runtime/interference.h), so that anyone can check
// what `pacer compare` says about a cause they know.
//
//   ScenarioOptions o{.kind = ScenarioKind::RunQueue, .pacer_exe = "/usr/bin/pacer",
//                     .model = "m.gguf", .dir = "out"};
//   ScenarioRuns r = run_scenario(o);   // out/normal.jsonl, out/abnormal.jsonl
//
// Each run is a child `pacer run` process (greedy, --ignore-eos, pinned compact), so the two runs
// do the same work and a quota or an environment variable applies to the run alone.
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pacer::runtime {

enum class ScenarioKind {
  Equal,            // the same run twice: the control
  RunQueue,         // a busy loop on each worker CPU
  Quota,            // the abnormal run in a cgroup with a CPU quota of a quarter CPU per thread
  MemoryBandwidth,  // memory-copying threads on the CPUs the workers do not use
  Threads,          // one thread more (or fewer, when no CPU is free)
  Isa,              // PACER_ISA one tier lower (avx512 -> avx2 -> scalar)
};

// "equal" | "runq" | "quota" | "membw" | "threads" | "isa".
std::optional<ScenarioKind> parse_scenario_kind(std::string_view name);
std::string_view scenario_name(ScenarioKind kind) noexcept;
std::vector<std::string_view> scenario_names();
// What the scenario injects, in words.
std::string_view scenario_description(ScenarioKind kind) noexcept;
// The analysis::leading_cause keys that count as naming the injected cause first. For Equal: no
// difference, or host-side interference (never the code or the configuration).
std::vector<std::string> scenario_expected_causes(ScenarioKind kind);

struct ScenarioOptions {
  ScenarioKind kind = ScenarioKind::Equal;
  std::string pacer_exe;      // the pacer binary that runs `pacer run`
  std::string model;          // GGUF model file
  std::filesystem::path dir;  // normal.jsonl, abnormal.jsonl and the runs' output go here
  int threads = -1;           // -1: one per allowed core (membw: leaves one CPU free)
  int n_predict = 48;
  std::string prompt = "The quick brown fox jumps over the lazy dog";
  std::function<void(const std::string&)> progress;  // one line per stage (may be empty)
};

struct ScenarioRuns {
  std::filesystem::path normal_log, abnormal_log;
  int threads = 0;               // the normal run's threads
  std::vector<int> worker_cpus;  // the normal run's worker CPUs
  std::string injected;          // what the abnormal run had, in words
};

// Runs both. Throws std::runtime_error with the reason when the scenario cannot run here (a quota
// without root, membw without a free CPU, isa on a CPU without a lower tier) or a run fails.
ScenarioRuns run_scenario(const ScenarioOptions& opts);

}  // namespace pacer::runtime
