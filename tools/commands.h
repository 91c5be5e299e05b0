#pragma once
// Each subcommand lives in its own tools/cmd_<name>.cpp: it declares its options on the CLI11 app
// and calls into the libraries. Errors are exceptions; main() catches them once.
#include <CLI/CLI.hpp>

namespace pacer::tools {

void add_gguf_command(CLI::App& app);      // gguf synth | quantize | inspect
void add_tokenize_command(CLI::App& app);  // tokenize
void add_run_command(CLI::App& app);       // run
void add_topo_command(CLI::App& app);      // topo
void add_report_command(CLI::App& app);    // report
void add_compare_command(CLI::App& app);   // compare
void add_trace_command(CLI::App& app);     // trace
void add_bench_command(CLI::App& app);     // bench
void add_perplexity_command(CLI::App& app);  // perplexity

}  // namespace pacer::tools
