#pragma once
// Shared by the end-to-end CLI tests: run a shell command line and capture its exit code, stdout
// and stderr; read a file whole.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace pacer::cli_test {

struct CommandResult {
  int rc = -1;  // exit status, -1 when the command did not exit normally
  std::string out, err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs `cmd` through the shell with stdout and stderr redirected to files in the temp directory
// (unique per process and call), then reads them back and removes them.
inline CommandResult run_command(const std::string& cmd) {
  static std::atomic<int> calls{0};
  const std::filesystem::path base =
      std::filesystem::temp_directory_path() /
      ("pacer_cli_" + std::to_string(getpid()) + "_" + std::to_string(calls.fetch_add(1)));
  const std::string out = base.string() + ".out", err = base.string() + ".err";
  const int status = std::system((cmd + " >" + out + " 2>" + err).c_str());
  CommandResult r;
  r.rc = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

// Writes a tiny synthetic Q8_0 model (`pacer gguf synth --arch tiny`) to a temp path unique to
// this process and `tag`; returns the path, or "" when the command failed.
inline std::string write_tiny_model(const std::string& tag) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("pacer-" + tag + "-" + std::to_string(getpid()) + ".gguf"))
                               .string();
  const CommandResult r =
      run_command(std::string(PACER_BINARY) + " gguf synth --arch tiny --type q8_0 -o " + path);
  return r.rc == 0 ? path : std::string();
}

}  // namespace pacer::cli_test
