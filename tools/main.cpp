// pacer: the command line. Parses arguments, calls the libraries, and is the one place where
// errors are caught and printed (one line, exit code 1).
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "pacer/version.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"pacer: a CPU inference runtime for Llama-family models that measures itself"};
  app.set_version_flag("--version", std::string(pacer::kVersion) + " (" + pacer::kGitSha + ")");
  app.require_subcommand(1);
  pacer::tools::add_gguf_command(app);
  pacer::tools::add_tokenize_command(app);
  pacer::tools::add_run_command(app);
  pacer::tools::add_topo_command(app);
  pacer::tools::add_report_command(app);
  pacer::tools::add_compare_command(app);
  pacer::tools::add_trace_command(app);
  pacer::tools::add_bench_command(app);
  pacer::tools::add_perplexity_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "pacer: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
