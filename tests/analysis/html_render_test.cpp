// The HTML report renders in headless Chromium with no script errors and draws its plots, and it
// is self-contained (no external scripts, styles or fonts).
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "analysis/report.h"
#include "event_log_testlog.h"

namespace pacer::analysis {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kChromium = "/usr/bin/chromium";

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("pacer_html_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// Runs headless Chromium on `html` and returns the DOM after its scripts ran.
std::string dump_dom(const std::string& html, const TempDir& dir) {
  const fs::path page = dir.path() / "report.html";
  const fs::path dom = dir.path() / "dom.html";
  {
    std::ofstream f(page, std::ios::binary);
    f << html;
  }
  const std::string cmd =
      std::string("timeout 120 ") + kChromium +
      " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
      " --disable-background-networking --disable-component-update --disable-sync"
      " --user-data-dir=" +
      (dir.path() / "profile").string() + " --dump-dom file://" + page.string() + " > " +
      dom.string() + " 2>/dev/null";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  std::ifstream f(dom, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The <svg> element inside the container with this id, or "" when there is none.
std::string plot_svg(const std::string& dom, const std::string& id) {
  const size_t at = dom.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const size_t end_div = dom.find("</div>", at);
  const size_t svg = dom.find("<svg", at);
  if (svg == std::string::npos || svg > end_div) return "";
  return dom.substr(svg, dom.find("</svg>", svg) - svg);
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

Report synthetic_report(int n_decode) {
  testlog::SyntheticRun run;
  run.n_layers = 3;
  run.n_decode = n_decode;
  run.jitter = 0.2;
  run.throttle = 0.6;
  run.bandwidth_gbs = 50;
  std::ostringstream s;
  testlog::write_synthetic(s, run);
  return build_report_from_text(s.str(), "synthetic </script> run.jsonl");
}

TEST(HtmlReport, IsSelfContained) {
  const std::string html = render_html(synthetic_report(10));
  EXPECT_THAT(html, Not(HasSubstr("<link")));
  EXPECT_THAT(html, Not(HasSubstr("@import")));
  EXPECT_THAT(html, Not(HasSubstr("url(")));
  // The only URL is the SVG namespace name, which is never fetched.
  std::regex url(R"(https?://[^"' )]+)");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), url); it != std::sregex_iterator();
       ++it)
    EXPECT_EQ(it->str(), "http://www.w3.org/2000/svg");
  // Every <script> is inline.
  EXPECT_EQ(count(html, "<script src"), 0u);
  // The log name contains "</script>": it must be escaped in the embedded data.
  EXPECT_EQ(count(html, "</script>"), 3u);  // error hook, data, plots
}

TEST(HtmlReport, DrawsEveryPlotInHeadlessChromium) {
  if (!fs::exists(kChromium)) GTEST_SKIP() << kChromium << " is not installed";
  TempDir dir;
  const Report r = synthetic_report(40);
  const std::string dom = dump_dom(render_html(r), dir);
  ASSERT_FALSE(dom.empty()) << "chromium produced no DOM";
  EXPECT_THAT(dom, HasSubstr("<title>plots-ok:4</title>"));
  EXPECT_THAT(dom, Not(HasSubstr("id=\"js-error\"")));
  EXPECT_THAT(dom, HasSubstr("data-plots=\"4\""));

  // Timeline: the decode latency line and the frequency line (paths), a dot per prefill step.
  const std::string timeline = plot_svg(dom, "plot-timeline");
  ASSERT_FALSE(timeline.empty());
  EXPECT_EQ(count(timeline, "<path class=\"mark\""), 2u);
  EXPECT_EQ(count(timeline, "<circle class=\"mark\""), 1u);
  // The decode line has one vertex per decode step ("M" then 39 x "L").
  const size_t d = timeline.find(" d=\"M");
  ASSERT_NE(d, std::string::npos);
  EXPECT_EQ(count(timeline.substr(d, timeline.find('"', d + 4) - d), "L"), 39u);

  // Op bars: one per phase :: op row, at most 20.
  const std::string ops = plot_svg(dom, "plot-ops");
  EXPECT_EQ(count(ops, "<rect class=\"mark\""), std::min<size_t>(20, r.by_phase_op.size()));

  // Histogram: its bars hold all 40 decode steps (bins: ceil(sqrt(40)) = 7).
  const std::string hist = plot_svg(dom, "plot-hist");
  EXPECT_EQ(count(hist, "<rect class=\"mark\""), 7u);

  // Phase bar: one segment per non-empty phase (prefill, decode, sampling).
  EXPECT_EQ(count(plot_svg(dom, "plot-phases"), "<rect class=\"mark\""), 3u);

  // The tables rendered too.
  EXPECT_THAT(dom, HasSubstr("id=\"bottleneck\""));
  EXPECT_THAT(dom, HasSubstr("decode :: block_2_total"));
}

TEST(HtmlReport, EmptyRunDrawsNothingAndRaisesNoError) {
  if (!fs::exists(kChromium)) GTEST_SKIP() << kChromium << " is not installed";
  TempDir dir;
  const Report r = build_report_from_text(testlog::header_line(), "empty.jsonl");
  const std::string dom = dump_dom(render_html(r), dir);
  ASSERT_FALSE(dom.empty());
  EXPECT_THAT(dom, HasSubstr("<title>plots-ok:0</title>"));
  EXPECT_THAT(dom, Not(HasSubstr("id=\"js-error\"")));
  EXPECT_THAT(dom, HasSubstr("no step records in this log"));
  EXPECT_THAT(dom, HasSubstr("Incomplete run"));
}

TEST(HtmlReport, AScriptErrorIsCaughtByTheErrorHook) {
  // The check above is only meaningful if an error would show: break the data and look.
  if (!fs::exists(kChromium)) GTEST_SKIP() << kChromium << " is not installed";
  TempDir dir;
  std::string html = render_html(synthetic_report(5));
  const size_t at = html.find("id=\"report-data\">");
  ASSERT_NE(at, std::string::npos);
  html.insert(at + 17, "{broken");
  const std::string dom = dump_dom(html, dir);
  EXPECT_THAT(dom, HasSubstr("<title>plots-error:"));
  EXPECT_THAT(dom, HasSubstr("id=\"js-error\""));
}

}  // namespace
}  // namespace pacer::analysis
