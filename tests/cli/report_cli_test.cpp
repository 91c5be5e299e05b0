// `pacer report` end to end: formats, output file, warnings on stderr, errors as one line.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Result {
  int rc = -1;
  std::string out, err;
};

class ReportCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pacer_report_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream f(p, std::ios::binary);
    f << text;
    return p.string();
  }
  static std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  Result run(const std::string& args) {
    const fs::path out = dir_ / "stdout.txt", err = dir_ / "stderr.txt";
    const std::string cmd = std::string(PACER_BINARY) + " report " + args + " > " + out.string() +
                            " 2> " + err.string();
    const int status = std::system(cmd.c_str());
    Result r;
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  // Header, a prefill step of 2 tokens and 2 decode steps of 2 ops each, then a footer.
  static std::string log(bool with_footer = true, int schema = 1) {
    std::string s =
        R"({"type":"header","schema":)" + std::to_string(schema) +
        R"(,"model":{"arch":"llama","type":"q8_0"},"run":{"threads":1},"bandwidth_gbs":null})"
        "\n";
    auto op = [&](int step, const char* phase, const char* name, long t0, long t1) {
      s += R"({"type":"op","step":)" + std::to_string(step) + R"(,"phase":")" + phase +
           R"(","name":")" + name + R"(","layer":0,"kind":"matmul","t0_ns":)" + std::to_string(t0) +
           R"(,"t1_ns":)" + std::to_string(t1) +
           R"(,"workers":[{"w":0,"cpu":0,"cpu_end":0,"t0_ns":)" + std::to_string(t0) +
           R"(,"t1_ns":)" + std::to_string(t1) +
           R"(,"freq_mhz":2000.0}]})"
           "\n";
    };
    auto step = [&](int n, const char* phase, long t0, long t1, const char* extra) {
      s += R"({"type":"step","step":)" + std::to_string(n) + R"(,"phase":")" + phase +
           R"(","n_past":0,"t0_ns":)" + std::to_string(t0) + R"(,"t1_ns":)" + std::to_string(t1) +
           extra + "}\n";
    };
    op(0, "prefill", "attn_qkv", 1000, 5000);
    step(0, "prefill", 1000, 6000, R"(,"n_tokens":2)");
    op(1, "decode", "attn_qkv", 10000, 12000);
    op(1, "decode", "ffn_down", 12000, 15000);
    step(1, "decode", 10000, 16000, R"(,"token":5)");
    op(2, "decode", "attn_qkv", 20000, 22000);
    op(2, "decode", "ffn_down", 22000, 26000);
    step(2, "decode", 20000, 27000, R"(,"token":6)");
    if (with_footer)
      s += R"({"type":"footer","steps":3,"n_generated":2})"
           "\n";
    return s;
  }

  fs::path dir_;
};

TEST_F(ReportCli, TextIsTheDefaultAndCarriesEverySection) {
  const Result r = run(write("run.jsonl", log()));
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* section :
       {"Run", "Event type summary", "Phase breakdown", "Op statistics", "Per layer",
        "Aggregated by component", "Matmul shapes", "Workers", "Bottleneck analysis", "Legend"})
    EXPECT_THAT(r.out, HasSubstr(std::string("\n") + section + "\n")) << section;
  EXPECT_THAT(r.out, HasSubstr("decode :: ffn_down"));
  EXPECT_EQ(r.err, "");  // a clean, complete log: no warnings
}

TEST_F(ReportCli, JsonHasTheComputedNumbers) {
  const Result r = run(write("run.jsonl", log()) + " --format json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["throughput"]["decode_tokens"], 2);
  // 2 decode tokens in 6 + 7 us of decode steps.
  EXPECT_NEAR(j["throughput"]["decode_tok_s"].get<double>(), 2 / 13e-6, 1e-3);
  EXPECT_NEAR(j["throughput"]["prefill_tok_s"].get<double>(), 2 / 5e-6, 1e-3);
  EXPECT_TRUE(j["complete"].get<bool>());
  EXPECT_EQ(j["by_phase_op"][0]["name"], "ffn_down");  // 7 us, the largest
  EXPECT_EQ(j["by_phase_op"][0]["dist"]["total_ns"], 7000);
}

TEST_F(ReportCli, WritesMarkdownAndHtmlToAFile) {
  const std::string events = write("run.jsonl", log());
  const fs::path md = dir_ / "r.md", html = dir_ / "r.html";
  Result r = run(events + " --format md -o " + md.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(slurp(md), StartsWith("# pacer report"));
  EXPECT_THAT(slurp(md), HasSubstr("| decode :: ffn_down |"));
  r = run(events + " --format html -o " + html.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(slurp(html), StartsWith("<!DOCTYPE html>"));
  EXPECT_THAT(slurp(html), HasSubstr("id=\"plot-timeline\""));
}

// One meaning per flag: the format follows -o's extension as in compare, and -f is an input file
// in every command, never a format.
TEST_F(ReportCli, FormatFollowsTheOutputExtension) {
  const std::string events = write("run.jsonl", log());
  const fs::path html = dir_ / "x.html", json = dir_ / "x.json", md = dir_ / "x.md",
                 txt = dir_ / "x.txt";
  for (const fs::path& f : {html, json, md, txt}) {
    const Result r = run(events + " -o " + f.string());
    ASSERT_EQ(r.rc, 0) << r.err;
  }
  EXPECT_THAT(slurp(html), StartsWith("<!DOCTYPE html>"));
  EXPECT_TRUE(nlohmann::json::accept(slurp(json)));
  EXPECT_THAT(slurp(md), StartsWith("# pacer report"));
  EXPECT_THAT(slurp(txt), Not(StartsWith("# pacer report")));
  // --format still wins over the extension.
  ASSERT_EQ(run(events + " --format md -o " + html.string()).rc, 0);
  EXPECT_THAT(slurp(html), StartsWith("# pacer report"));
  const Result f = run(events + " -f md");
  EXPECT_EQ(f.rc, 2) << f.err;
}

TEST_F(ReportCli, WarningsGoToStderrAndTheReportStillComes) {
  std::string text = log(/*with_footer=*/false);
  text.insert(text.find('\n') + 1, "{\"type\":\"op\",\"step\":\n");  // line 2: malformed
  const Result r = run(write("bad.jsonl", text));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("bad.jsonl:2: skipped malformed line"));
  EXPECT_THAT(r.err, HasSubstr("incomplete run"));
  EXPECT_THAT(r.out, HasSubstr("INCOMPLETE RUN"));
  EXPECT_THAT(r.out, HasSubstr("Bottleneck analysis"));
}

TEST_F(ReportCli, FatalProblemsAreOneLineErrors) {
  Result r = run((dir_ / "missing.jsonl").string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, StartsWith("pacer: error: "));
  EXPECT_THAT(r.err, HasSubstr("cannot open"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);

  r = run(write("new.jsonl", log(true, 2)));
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("schema 2"));
  EXPECT_THAT(r.err, HasSubstr("schema 1"));

  r = run(write("run.jsonl", log()) + " --format pdf");
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(r.out, "");
}

}  // namespace
