// pacer: the command line. Parses arguments, calls the libraries, and is the one place where
// errors are caught and printed (one line on stderr). Exit codes: 0 success, 1 an error while
// running (bad file, failed write, ...), 2 a usage error (unknown command or option, bad value),
// 130 a bench stopped by Ctrl-C (its finished rows printed).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <CLI/CLI.hpp>

#include "pacer/version.h"
#include "tools/commands.h"

namespace {

constexpr int kRunError = 1;
constexpr int kUsageError = 2;

// Levenshtein distance, for "did you mean".
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

int usage_error(const std::string& what) {
  std::fflush(stdout);
  std::fprintf(stderr, "pacer: error: %s\n", what.c_str());
  return kUsageError;
}

}  // namespace

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
  pacer::tools::add_scenario_command(app);
  pacer::tools::add_history_command(app);
  pacer::tools::add_regress_command(app);

  std::vector<std::string> commands;
  for (const CLI::App* sub : app.get_subcommands({})) commands.push_back(sub->get_name());
  // An unknown first word is a mistyped command, not "a subcommand is required".
  if (argc > 1 && argv[1][0] != '-' &&
      std::find(commands.begin(), commands.end(), argv[1]) == commands.end()) {
    std::string best;
    size_t best_d = 3;  // suggest only close matches
    for (const std::string& c : commands) {
      const size_t d = edit_distance(argv[1], c);
      if (d < best_d) best = c, best_d = d;
    }
    return usage_error("unknown command '" + std::string(argv[1]) + "'" +
                       (best.empty() ? "" : "; did you mean '" + best + "'?") +
                       " (commands: " + CLI::detail::join(commands, ", ") + ")");
  }
  // `pacer bench` takes llama-bench's multi-letter single-dash flags too.
  std::vector<std::string> args(argv, argv + argc);
  if (argc > 1 && args[1] == "bench")
    for (size_t i = 2; i < args.size(); ++i) args[i] = pacer::tools::llama_bench_flag(args[i]);
  std::vector<char*> args_c;
  for (std::string& a : args) args_c.push_back(a.data());
  args_c.push_back(nullptr);
  try {
    app.parse(argc, args_c.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string where = "pacer";
    for (const CLI::App* sub = &app; sub != nullptr;) {
      const auto parsed = sub->get_subcommands();
      sub = parsed.empty() ? nullptr : parsed.front();
      if (sub) where += " " + sub->get_name();
    }
    std::string what = e.what();
    if (argc == 1) what = "no command given (commands: " + CLI::detail::join(commands, ", ") + ")";
    return usage_error(what + "; see '" + where + " --help'");
  } catch (const pacer::tools::ExitRequest& e) {
    std::fflush(stdout);
    return e.code;
  } catch (const std::system_error& e) {
    // fmt::print throws when a write to stdout fails mid-run (its buffer flushed into a full
    // disk or a closed pipe): the same error the exit check below gives, with its reason.
    if (std::ferror(stdout)) {
      std::fprintf(stderr, "pacer: error: writing to stdout failed: %s\n",
                   std::strerror(e.code().value() ? e.code().value() : EIO));
      return kRunError;
    }
    std::fflush(stdout);
    std::fprintf(stderr, "pacer: error: %s\n", e.what());
    return kRunError;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "pacer: error: %s\n", e.what());
    return kRunError;
  }
  // Whatever a command printed must have reached stdout: a full disk or a closed pipe is an error
  // with its reason, not a silent truncation.
  errno = 0;
  std::cout.flush();
  if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "pacer: error: writing to stdout failed: %s\n",
                 std::strerror(errno ? errno : EIO));
    return kRunError;
  }
  return 0;
}
