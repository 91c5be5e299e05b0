// The HTML report renders in headless Chromium with its plots drawn (server-side SVG, no
// scripts), and it is self-contained (no external scripts, styles or fonts).
#include <array>
#include <regex>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "analysis/report.h"
#include "event_log_testlog.h"
#include "headless_chromium.h"

namespace pacer::analysis {
namespace {

using chromium::count;
using chromium::dump_dom;
using chromium::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

// The <svg> element inside the container with this id, or "" when there is none.
std::string plot_svg(const std::string& dom, const std::string& id) {
  const size_t at = dom.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const size_t end_div = dom.find("</div>", at);
  const size_t svg = dom.find("<svg", at);
  if (svg == std::string::npos || svg > end_div) return "";
  return dom.substr(svg, dom.find("</svg>", svg) - svg);
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
  // No scripts at all: the plots are SVG drawn here, so no script error can lose them.
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  // The log name contains "</script>": it is escaped wherever it shows.
  EXPECT_THAT(html, Not(HasSubstr("</script>")));
  EXPECT_THAT(html, HasSubstr("<title>pacer report: synthetic &lt;/script&gt; run.jsonl</title>"));
  // Every plot is in the page as written, with its marks.
  EXPECT_EQ(count(html, "<svg class=\"plot\""), 4u);
}

TEST(HtmlReport, DrawsEveryPlotInHeadlessChromium) {
  if (!chromium::installed()) GTEST_SKIP() << chromium::kPath << " is not installed";
  TempDir dir;
  const Report r = synthetic_report(40);
  const std::string dom = dump_dom(render_html(r), dir);
  ASSERT_FALSE(dom.empty()) << "chromium produced no DOM";
  EXPECT_THAT(dom, HasSubstr("<title>pacer report: synthetic &lt;/script&gt; run.jsonl</title>"));
  // Every plot is drawn, with labelled axes.
  for (const char* id : {"plot-timeline", "plot-ops", "plot-hist", "plot-phases"})
    EXPECT_GT(count(plot_svg(dom, id), "class=\"mark\""), 0u) << id;

  // Timeline: the decode latency line and the frequency line (paths), a dot per prefill step.
  const std::string timeline = plot_svg(dom, "plot-timeline");
  ASSERT_FALSE(timeline.empty());
  EXPECT_EQ(count(timeline, "<path class=\"mark\""), 2u);
  EXPECT_EQ(count(timeline, "<circle class=\"mark\""), 1u);
  // The decode line has one vertex per decode step ("M" then 39 x "L").
  const size_t d = timeline.find(" d=\"M");
  ASSERT_NE(d, std::string::npos);
  EXPECT_EQ(count(timeline.substr(d, timeline.find('"', d + 4) - d), "L"), 39u);
  EXPECT_THAT(timeline, HasSubstr(">step latency (ms)</text>"));
  EXPECT_THAT(timeline, HasSubstr(">effective frequency (MHz)</text>"));
  EXPECT_THAT(timeline, HasSubstr(">step (in run order)</text>"));

  // Op bars: one per phase :: op row, at most 20.
  const std::string ops = plot_svg(dom, "plot-ops");
  EXPECT_EQ(count(ops, "<rect class=\"mark\""), std::min<size_t>(20, r.by_phase_op.size()));
  EXPECT_THAT(ops, HasSubstr(">total time (ms)</text>"));

  // Histogram: its bars hold all 40 decode steps (bins: ceil(sqrt(40)) = 7).
  const std::string hist = plot_svg(dom, "plot-hist");
  EXPECT_EQ(count(hist, "<rect class=\"mark\""), 7u);
  EXPECT_THAT(hist, HasSubstr(">decode step latency (ms)</text>"));
  EXPECT_THAT(hist, HasSubstr(">decode steps</text>"));

  // Phase bar: one segment per non-empty phase (prefill, decode, sampling).
  EXPECT_EQ(count(plot_svg(dom, "plot-phases"), "<rect class=\"mark\""), 3u);

  // The tables rendered too.
  EXPECT_THAT(dom, HasSubstr("id=\"bottleneck\""));
  EXPECT_THAT(dom, HasSubstr("decode :: block_2_total"));
}

TEST(HtmlReport, EmptyRunDrawsNothingAndSaysWhy) {
  if (!chromium::installed()) GTEST_SKIP() << chromium::kPath << " is not installed";
  TempDir dir;
  const Report r = build_report_from_text(testlog::header_line(), "empty.jsonl");
  const std::string dom = dump_dom(render_html(r), dir);
  ASSERT_FALSE(dom.empty());
  EXPECT_THAT(dom, HasSubstr("<title>pacer report: empty.jsonl</title>"));
  EXPECT_EQ(count(dom, "class=\"mark\""), 0u);
  EXPECT_THAT(dom, HasSubstr("no step records in this log"));
  EXPECT_THAT(dom, HasSubstr("no op records in this log"));
  EXPECT_THAT(dom, HasSubstr("no decode steps in this log"));
  EXPECT_THAT(dom, HasSubstr("Incomplete run"));
}

}  // namespace
}  // namespace pacer::analysis
