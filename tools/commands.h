#pragma once
// Each subcommand lives in its own tools/cmd_<name>.cpp: it declares its options on the CLI11 app
// and calls into the libraries. Errors are exceptions; main() catches them once.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <utility>

#include <fmt/format.h>
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
// An integer >= lo (and <= hi when hi >= lo), or -1 meaning "automatic" (threads, context).
inline CLI::Validator at_least_or_auto(long long lo, std::string minus_one = "automatic",
                                       long long hi = -1) {
  const std::string range =
      hi >= lo ? std::to_string(lo) + ".." + std::to_string(hi) : ">= " + std::to_string(lo);
  return CLI::Validator(
      [lo, hi, minus_one, range](std::string& in) -> std::string {
        long long v = 0;
        if (!CLI::detail::lexical_cast(in, v)) return "'" + in + "' is not an integer";
        if (v == -1 || (v >= lo && (hi < lo || v <= hi))) return {};
        return "value " + in + " out of range: -1 (" + minus_one + ") or " + range;
      },
      "-1|" + range);
}
// An integer >= lo ("value X out of range: >= lo"; CLI11's PositiveNumber printed DBL_MAX whole).
inline CLI::Validator at_least(long long lo) {
  return CLI::Validator(
      [lo](std::string& in) -> std::string {
        long long v = 0;
        if (!CLI::detail::lexical_cast(in, v)) return "'" + in + "' is not an integer";
        return v >= lo ? std::string() : "value " + in + " out of range: >= " + std::to_string(lo);
      },
      ">=" + std::to_string(lo));
}
// A finite number in [lo, hi] (CLI::Range lets NaN through: every comparison with it is false).
// `above_lo`: lo itself is out (a positive penalty).
inline CLI::Validator number_in(double lo, double hi, bool above_lo = false) {
  const std::string range = fmt::format("{}{}..{}", above_lo ? ">" : "", lo, hi);
  return CLI::Validator(
      [lo, hi, above_lo, range](std::string& in) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(in, v)) return "'" + in + "' is not a number";
        if (!std::isfinite(v)) return "value " + in + " is not a finite number (" + range + ")";
        if (v < lo || v > hi || (above_lo && v == lo))
          return "value " + in + " out of range: " + range;
        return {};
      },
      range);
}

// A pin policy (runtime::PinSpec::parse's words and its message for a bad one).
inline CLI::Validator pin_policy() {
  return CLI::Validator(
      [](std::string& in) -> std::string {
        try {
          (void)runtime::PinSpec::parse(in);
        } catch (const std::exception& e) {
          return e.what();
        }
        return {};
      },
      "POLICY");
}

// A DATE of pacer history / regress (analysis::history_date_error).
CLI::Validator history_date();

// A thread count: 1..runtime::kMaxWorkerThreads, or -1 (one per allowed physical core).
inline CLI::Validator thread_count() {
  return at_least_or_auto(1, "one per allowed physical core", runtime::kMaxWorkerThreads);
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

// Checks an output path (given with `out_flag`) before any work: a usage error when it is the same
// file as one of the inputs (flag, path), since writing would destroy that input (a mapped model
// even faults mid-run), or when its folder does not exist (found only at the end of a long run
// otherwise). An empty path (none given) passes.
inline void check_output_path(const std::string& out_flag, const std::string& out,
                              std::initializer_list<std::pair<const char*, std::string>> inputs) {
  if (out.empty() || out == "-") return;
  std::error_code ec;
  for (const auto& [flag, in] : inputs) {
    if (in.empty() || !std::filesystem::equivalent(out, in, ec) || ec) continue;
    throw CLI::ValidationError(out_flag,
                               "'" + out + "' is the input " + flag +
                                   "; writing there would destroy it (give another path)");
  }
  const std::filesystem::path dir = std::filesystem::path(out).parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec)) {
    throw CLI::ValidationError(out_flag,
                               "'" + out + "': the folder '" + dir.string() + "' does not exist");
  }
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
