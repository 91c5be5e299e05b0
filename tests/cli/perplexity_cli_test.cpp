// `pacer perplexity` end to end: llama-perplexity's output lines, a base written then read back,
// JSON output, and one-line errors for the inputs a user gets wrong.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace pacer {
namespace {

using cli_test::CommandResult;
using cli_test::run_command;

class PerplexityCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() / ("pacer_ppl_cli_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    for (const char* t : {"f32", "q8_0"}) {
      const CommandResult r =
          run_command(std::string(PACER_BINARY) + " gguf synth --arch tiny --type " + t + " -o " +
                      (dir_ / (std::string(t) + ".gguf")).string());
      ASSERT_EQ(r.rc, 0) << r.err;
    }
    // About 3000 tokens of English-like text for the tiny vocabulary.
    std::ofstream text(dir_ / "text.txt");
    for (int i = 0; i < 200; ++i) {
      text << "The quick brown fox jumps over the lazy dog while the small cat sleeps in the "
              "warm sun. ";
    }
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  static std::string pacer(const std::string& args) {
    return std::string(PACER_BINARY) + " perplexity " + args;
  }
  static std::string p(const std::string& name) { return (dir_ / name).string(); }
  static std::filesystem::path dir_;
};
std::filesystem::path PerplexityCli::dir_;

TEST_F(PerplexityCli, PrintsChunkLinesAndTheFinalEstimate) {
  const CommandResult r =
      run_command(pacer("-m " + p("f32.gguf") + " -f " + p("text.txt") + " -c 64 --chunks 3"));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(
      std::regex_search(r.out, std::regex(R"(^\[1\][0-9]+\.[0-9]{4},\[2\][0-9.]+,\[3\][0-9.]+,)")))
      << r.out;
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex(R"(Final estimate: PPL = [0-9]+\.[0-9]{4} \+/- [0-9]+\.[0-9]{5})")))
      << r.out;
}

TEST_F(PerplexityCli, BaseRoundTripAndJson) {
  const std::string base = p("base.kld");
  CommandResult r = run_command(pacer("-m " + p("f32.gguf") + " -f " + p("text.txt") +
                                      " -c 64 --chunks 4 --kl-divergence-base " + base));
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_TRUE(std::filesystem::exists(base));
  // llama.cpp's spelling: the base named by --kl-divergence-base, --kl-divergence as a flag.
  r = run_command(
      pacer("-m " + p("q8_0.gguf") + " --kl-divergence-base " + base + " --kl-divergence"));
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* line : {"====== KL divergence statistics ======", "Mean    KLD:", "99.9%   KLD:",
                           "RMS Δp    :", "Same top p:", "Mean PPL(Q)/PPL(base)"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  }
  r = run_command(pacer("-m " + p("q8_0.gguf") + " --kl-divergence " + base + " --format json"));
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["chunks"], 4);
  EXPECT_EQ(j["scored"], 4 * 31);
  const double kld = j["kl_divergence"]["kld"]["mean"];
  EXPECT_GT(kld, 0.0);   // Q8_0 differs from F32
  EXPECT_LT(kld, 0.01);  // but only a little
  EXPECT_GT(j["kl_divergence"]["same_top"]["value"].get<double>(), 0.5);
  // -o is a path, as in report/compare/trace: the figures go to the file (JSON by extension).
  const std::string out = p("ppl.json");
  r = run_command(pacer("-m " + p("q8_0.gguf") + " --kl-divergence " + base + " -o " + out));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(cli_test::slurp(out))["scored"], 4 * 31);
  EXPECT_NE(r.out.find("Mean    KLD:"), std::string::npos);  // text still on stdout
  // The old `-o json` is a usage error that says what to type instead.
  r = run_command(pacer("-m " + p("q8_0.gguf") + " --kl-divergence " + base + " -o json"));
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--format json"), std::string::npos) << r.err;
}

TEST_F(PerplexityCli, EventsOutGivesAPrefillProfileThatReportReads) {
  const std::string log = p("ppl.jsonl");
  CommandResult r = run_command(pacer("-m " + p("q8_0.gguf") + " -f " + p("text.txt") +
                                      " -c 64 --chunks 2 -b 32 --events-out " + log));
  ASSERT_EQ(r.rc, 0) << r.err;
  // 2 chunks of 64 tokens in batches of 32: 4 prefill steps, each scoring its batch.
  int steps = 0, scores = 0;
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.value("type", "") == "step") {
      ++steps;
      EXPECT_EQ(j.value("phase", ""), "prefill");
      EXPECT_EQ(j.value("n_tokens", 0), 32);
    }
    if (j.value("type", "") == "op" && j.value("name", "") == "score") ++scores;
  }
  EXPECT_EQ(steps, 4);
  EXPECT_EQ(scores, 4);
  r = run_command(std::string(PACER_BINARY) + " report " + log);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("command=perplexity"), std::string::npos) << r.out.substr(0, 600);
}

TEST_F(PerplexityCli, BadInputsGetOneLineAndExitOne) {
  auto one_line_error = [](const CommandResult& r, const std::string& needle) {
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  };
  {
    std::ofstream(p("short.txt")) << "just a few words";
    one_line_error(run_command(pacer("-m " + p("f32.gguf") + " -f " + p("short.txt"))),
                   "needs at least 1024 (2 chunks)");
  }
  one_line_error(run_command(pacer("-m " + p("f32.gguf") + " -f " + dir_.string())),
                 "is a directory");
  // A truncated base, a base of another context, a file that is no base.
  const std::string base = p("b64.kld");
  ASSERT_EQ(run_command(pacer("-m " + p("f32.gguf") + " -f " + p("text.txt") +
                              " -c 64 --chunks 2 --kl-divergence-base " + base))
                .rc,
            0);
  const auto size = std::filesystem::file_size(base);
  std::filesystem::copy_file(base, p("cut.kld"));
  std::filesystem::resize_file(p("cut.kld"), size - 100);
  one_line_error(run_command(pacer("-m " + p("q8_0.gguf") + " --kl-divergence " + p("cut.kld"))),
                 "truncated in chunk 2 of 2");
  one_line_error(run_command(pacer("-m " + p("q8_0.gguf") + " -c 128 --kl-divergence " + base)),
                 "computed with -c 64");
  one_line_error(run_command(pacer("-m " + p("q8_0.gguf") + " --kl-divergence " + p("text.txt"))),
                 "not a KL-divergence base file");
}

}  // namespace
}  // namespace pacer
