// Usage errors: one line on stderr with the `pacer:` prefix, exit code 2 (README: exit codes), and
// a suggestion for a mistyped command.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cli_test_util.h"

namespace pacer {
namespace {

using cli_test::CommandResult;
using cli_test::run_command;

void expect_usage_error(const std::string& args, const std::string& needle) {
  const CommandResult r = run_command(std::string(PACER_BINARY) + " " + args);
  EXPECT_EQ(r.rc, 2) << args << ": " << r.err;
  EXPECT_EQ(r.err.rfind("pacer: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(UsageCli, UnknownCommandSuggestsTheClosestOne) {
  expect_usage_error("runn -m x.gguf", "unknown command 'runn'; did you mean 'run'?");
  expect_usage_error("perplexty", "did you mean 'perplexity'?");
  expect_usage_error("frobnicate", "unknown command 'frobnicate' (commands: gguf,");
}

TEST(UsageCli, BadOptionsExitTwoAndNameTheCommand) {
  expect_usage_error("", "no command given");
  expect_usage_error("run -m", "--model");
  expect_usage_error("run -m x.gguf -p hi -n abc", "see 'pacer run --help'");
  expect_usage_error("gguf", "see 'pacer gguf --help'");
  expect_usage_error("run -m x.gguf -p hi --no-such-flag", "--no-such-flag");
}

TEST(UsageCli, NonsenseValuesAreRefusedWithTheFlagAndRange) {
  // Checked before any model is opened: the file need not exist.
  expect_usage_error("run -m x.gguf -p hi -n -5",
                     "--n-predict: value -5 out of range: -1 (until EOS)");
  expect_usage_error("run -m x.gguf -p hi -c 0", "--ctx: value 0 out of range");
  expect_usage_error("run -m x.gguf -p hi -c -3", "--ctx: value -3 out of range");
  expect_usage_error("run -m x.gguf -p hi -b 0", "--batch");
  expect_usage_error("run -m x.gguf -p hi --top-p 5", "--top-p: value 5 out of range: 0..1");
  expect_usage_error("run -m x.gguf -p hi -b 0", "--batch: value 0 out of range: >= 1");
  for (const char* flag : {"--temp", "--top-p", "--min-p", "--repeat-penalty"}) {
    expect_usage_error(std::string("run -m x.gguf -p hi ") + flag + " nan",
                       std::string(flag) + ": value nan is not a finite number");
  }
  expect_usage_error("run -m x.gguf -p hi --repeat-penalty 0", "--repeat-penalty: value 0 out");
  expect_usage_error("run -m x.gguf -p hi -t 100000", "--threads: value 100000 out of range");
  expect_usage_error("bench -m x.gguf -t 1,100000", "-t: '1,100000': 100000 out of range");
  expect_usage_error("run -m x.gguf -p hi --kv-type q4_0", "--kv-type: must be f16, f32 or q8_0");
  expect_usage_error("run -m x.gguf -p hi --pin bogus", "--pin");
  expect_usage_error("run -m x.gguf -p ''", "needs a prompt");
  expect_usage_error("gguf synth --arch bogus --type f16 -o /tmp/x.gguf", "--arch");
  expect_usage_error("gguf synth --arch tiny --type bogus -o /tmp/x.gguf", "--type: 'bogus'");
  expect_usage_error("perplexity -m x.gguf -f t.txt -o /nonexistent-dir/x.json",
                     "the folder '/nonexistent-dir' does not exist");
  expect_usage_error("history --db h.db --since garbage", "'garbage' is not a date");
  expect_usage_error("run -m x.gguf -p hi -t 0", "--threads: value 0 out of range");
  expect_usage_error("perplexity -m x.gguf -f t.txt -c 2", "--ctx-size: Value 2 not in range");
  expect_usage_error("perplexity -m x.gguf -f t.txt --chunks 0", "--chunks: value 0 out of range");
}

TEST(UsageCli, HelpAndVersionExitZero) {
  EXPECT_EQ(run_command(std::string(PACER_BINARY) + " --help").rc, 0);
  EXPECT_EQ(run_command(std::string(PACER_BINARY) + " run --help").rc, 0);
  const CommandResult v = run_command(std::string(PACER_BINARY) + " --version");
  EXPECT_EQ(v.rc, 0);
  EXPECT_NE(v.out.find("0.1.0"), std::string::npos);
}

}  // namespace
}  // namespace pacer
