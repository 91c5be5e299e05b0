#pragma once
// Each subcommand lives in its own tools/cmd_<name>.cpp: it declares its options on the CLI11 app
// and calls into the libraries. Errors are exceptions; main() catches them once.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>

#include "runtime/executor.h"
#include "runtime/session.h"

namespace pacer::tools {

// Thrown by a command that has already said everything and wants main() to exit with `code`
// (e.g. 130 after Ctrl-C stopped a bench whose finished rows were printed).
struct ExitRequest {
  int code;
};

// Option checks shared by the commands: a bad value is a usage error naming the flag and the
// allowed range (CLI11 prefixes the flag).
// An integer >= lo, or -1 meaning "automatic" (threads, context).
inline CLI::Validator at_least_or_auto(long long lo, std::string minus_one = "automatic") {
  return CLI::Validator(
      [lo, minus_one](std::string& in) -> std::string {
        long long v = 0;
        if (!CLI::detail::lexical_cast(in, v)) return "'" + in + "' is not an integer";
        if (v == -1 || v >= lo) return {};
        return "value " + in + " out of range: -1 (" + minus_one + ") or >= " + std::to_string(lo);
      },
      "-1|>=" + std::to_string(lo));
}

// The output format: `format` when the user gave --format, else the one the output path's
// extension names (`by_extension`: {".html", "html"}, ...), else `fallback`. One rule for every
// command that writes a report to `-o FILE` (bench alone keeps llama-bench's `-o FORMAT`).
inline std::string format_for_output(
    const std::string& format, const std::string& path,
    std::initializer_list<std::pair<const char*, const char*>> by_extension,
    const std::string& fallback) {
  if (!format.empty()) return format;
  for (const auto& [ext, name] : by_extension) {
    const std::string e(ext);
    if (path.size() > e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0)
      return name;
  }
  return fallback;
}

// Warns (one line each, stderr) about more threads than allowed CPUs and a context above the
// model's training length.
void warn_configuration(const runtime::Executor& ex, int64_t ctx, int64_t n_ctx_train);

// --numa (docs/numa.md) on run, perplexity and bench: none | distribute | isolate | interleave,
// plus llama-bench's numactl (= none: placement left to the CPU set the process was given) where
// `numactl` is true. A bad value is a usage error naming the flag.
CLI::Option* add_numa_option(CLI::App* cmd, std::string* value, bool numactl);
// The policy of a --numa value ("numactl" reads as none).
runtime::NumaPolicy numa_policy_of(const std::string& value);
// Plans --numa on this machine into the session options (pin list, thread count, policy): a
// usage error when --pin names a policy too; TopologyError when the threads do not fit.
void apply_numa(runtime::SessionOptions& so, const std::string& numa, const std::string& pin);

// llama-bench's multi-letter single-dash flags (-pg, -ub, -ctk, -ctv) as the long options
// `pacer bench` registers (CLI11 allows one letter after a single dash); other tokens unchanged.
std::string llama_bench_flag(const std::string& token);

void add_gguf_command(CLI::App& app);        // gguf synth | quantize | inspect
void add_tokenize_command(CLI::App& app);    // tokenize
void add_run_command(CLI::App& app);         // run
void add_topo_command(CLI::App& app);        // topo
void add_report_command(CLI::App& app);      // report
void add_compare_command(CLI::App& app);     // compare
void add_trace_command(CLI::App& app);       // trace
void add_bench_command(CLI::App& app);       // bench
void add_perplexity_command(CLI::App& app);  // perplexity
void add_scenario_command(CLI::App& app);    // scenario
void add_history_command(CLI::App& app);     // history
void add_regress_command(CLI::App& app);     // regress

}  // namespace pacer::tools
