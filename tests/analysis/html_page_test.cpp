// The shared HTML page module (analysis/html_page.h): its escaping, tick and plot helpers, and
// that the three pages (run report, comparison, history) all use its one shell: the same head and
// CSS block, and the same escaping of a hostile name in each (headless Chromium finds no element
// made from it).
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "analysis/compare.h"
#include "analysis/compare_render.h"
#include "analysis/compare_synth.h"
#include "analysis/history_render.h"
#include "analysis/html_page.h"
#include "headless_chromium.h"
#include "history_test_util.h"
#include "html_page_test.h"

namespace pacer::analysis {

namespace {

using chromium::count;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr const char* kHostile = kHostileHtml;
constexpr const char* kHostileEscaped = "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;";

TEST(HtmlPage, EscapesTextAndAttributeContexts) {
  EXPECT_EQ(html::esc(R"(a&b <i> "q" 'a')"), "a&amp;b &lt;i&gt; &quot;q&quot; &#39;a&#39;");
  EXPECT_EQ(html::esc(kHostile), kHostileEscaped);
  EXPECT_EQ(html::esc(""), "");
  EXPECT_EQ(html::esc("plain ünïcode"), "plain ünïcode");
}

TEST(HtmlPage, NiceTicksAreRoundAndCoverTheRange) {
  EXPECT_THAT(html::nice_ticks(0, 10, 5), ElementsAre(0, 2, 4, 6, 8, 10));
  EXPECT_THAT(html::nice_ticks(0.13, 0.61, 5), ElementsAre(0.2, 0.3, 0.4, 0.5, 0.6));
  EXPECT_THAT(html::nice_ticks(2650, 3110, 5), ElementsAre(2700, 2800, 2900, 3000, 3100));
  EXPECT_THAT(html::nice_ticks(5, 5, 5), ElementsAre(5));  // empty range: the one value
  EXPECT_EQ(html::tick_label(0.30000000000000004, 0.1), "0.3");
  EXPECT_EQ(html::tick_label(2700, 100), "2700");
  EXPECT_EQ(html::tick_label(-1e-12, 0.01), "0.00");  // no "-0.00"
}

TEST(HtmlPage, ScaleMapsDataOntoPixels) {
  const html::Scale s{0, 10, 100, 200};
  EXPECT_DOUBLE_EQ(s(0), 100);
  EXPECT_DOUBLE_EQ(s(5), 150);
  EXPECT_DOUBLE_EQ(s(10), 200);
  const html::Scale up{0, 4, 300, 100};  // a y scale: grows upwards
  EXPECT_DOUBLE_EQ(up(1), 250);
  EXPECT_DOUBLE_EQ((html::Scale{3, 3, 0, 10})(3), 5);  // empty data range: the middle
}

TEST(HtmlPage, SvgHasLabelledAxesAndCountableMarks) {
  html::Svg svg({400, 200, 50, 10, 10, 40}, "plot", "p1", "a \"test\" plot");
  const html::Scale sx = svg.x_scale(0, 3), sy = svg.y_scale(0, 10);
  svg.x_axis(sx, "x label <i>");
  svg.y_axis(sy, "y label");
  const std::vector<double> x{0, 1, 2, 3}, y{1, 2, NAN, 4};
  svg.line(x, y, sx, sy, "#123456", "", "series & co");
  svg.dot(sx(1), sy(2), 3, "#123456", "dot");
  svg.bar(sx(2), sy(4), 10, sy(0) - sy(4), "#123456", "bar");
  const std::string s = svg.str();
  EXPECT_THAT(s, StartsWith("<svg class=\"plot\" id=\"p1\" "));
  EXPECT_THAT(s, HasSubstr("aria-label=\"a &quot;test&quot; plot\""));
  EXPECT_THAT(s, HasSubstr(">x label &lt;i&gt;</text>"));
  EXPECT_THAT(s, HasSubstr(">y label</text>"));
  // The line is lifted at the NaN: two runs, "M 0,1 L 1,2" and "M 3,4".
  EXPECT_THAT(s, HasSubstr("d=\"M50.0,145.0 L163.3,130.0 M390.0,100.0\""));
  EXPECT_EQ(count(s, "class=\"mark\""), 3u);  // line, dot, bar; axes are not marks
  EXPECT_THAT(s, HasSubstr("<title>series &amp; co</title>"));
  // The y ticks 0, 2, ... 10 with grid lines, the x ticks 0 .. 3 (the ends aligned inward).
  EXPECT_EQ(count(s, "class=\"grid\""), 6u);
  EXPECT_THAT(s, HasSubstr("text-anchor=\"start\">0.0</text>"));
  EXPECT_THAT(s, HasSubstr("text-anchor=\"end\">3.0</text>"));
  EXPECT_THAT(s, HasSubstr("text-anchor=\"end\">10</text>"));
}

TEST(HtmlPage, LegendEscapesAndDrawsSwatches) {
  const std::string l =
      html::legend({{"#111111", "solid <a>"}, {"#222222", "dashed", true}, {"", "no swatch"}});
  EXPECT_THAT(l, HasSubstr("<i style=\"background:#111111\"></i>solid &lt;a&gt;"));
  EXPECT_THAT(l, HasSubstr("<i class=\"dash\" style=\"border-color:#222222\"></i>dashed"));
  EXPECT_THAT(l, HasSubstr("<span>no swatch</span>"));
}

// The three pages, each with kHostile in a name it shows: the log's name and an op name (report),
// a run's label, path and an op name (comparison), a host and a model name (history).
std::string hostile_comparison() {
  synth::RunSpec other;
  other.seed = 5;
  Comparison c = compare_runs(load_run_text(synth::event_log({}), "a.jsonl"),
                              load_run_text(synth::event_log(other), "b.jsonl"));
  c.label[0] = kHostile;
  c.path[1] = kHostile;
  if (!c.attribution.ops.empty()) c.attribution.ops[0].op = kHostile;
  return render_html(c);
}

std::string hostile_history() {
  StoredRun a;
  a.id = 1;
  a.record = history_test::make_record("2026-11-20T10:00:00Z", {100, 101, 99});
  a.record.host = kHostile;
  a.record.model_name = kHostile;
  StoredRun b = a;
  b.id = 2;
  b.record.time_utc = "2026-11-21T10:00:00Z";
  return render_history_html({a, b});
}

TEST(HtmlPage, TheThreePagesShareOneShell) {
  const std::vector<std::string> pages{hostile_report(), hostile_comparison(), hostile_history()};
  const std::string css = "<style>" + std::string(html::page_css()) + "</style>";
  for (const std::string& page : pages) {
    EXPECT_THAT(page, StartsWith("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                                 "\n<meta name=\"viewport\""));
    EXPECT_EQ(count(page, css), 1u);       // the one shared CSS block, as is
    EXPECT_EQ(count(page, "<style"), 1u);  // and no other
    EXPECT_EQ(count(page, "<svg class="), count(page, "xmlns=\"http://www.w3.org/2000/svg\""));
    EXPECT_GT(count(page, "class=\"axis-label\""), 0u);  // the shared axis helper drew the axes
    EXPECT_THAT(page, HasSubstr("</body></html>\n"));
    // The hostile name is escaped everywhere it shows.
    EXPECT_THAT(page, HasSubstr(kHostileEscaped));
    EXPECT_THAT(page, Not(HasSubstr("<img")));
    EXPECT_THAT(page, Not(HasSubstr("</script><")));
  }
  // The report names its op in the op plot and tables, the comparison its op in the attribution.
  EXPECT_GE(count(pages[0], kHostileEscaped), 3u);
  EXPECT_GE(count(pages[1], kHostileEscaped), 3u);
  EXPECT_GE(count(pages[2], kHostileEscaped), 3u);
}

TEST(HtmlPage, HostileNamesMakeNoElementInChromium) {
  if (!chromium::installed()) GTEST_SKIP() << chromium::kPath << " is not installed";
  for (const std::string& page : {hostile_report(), hostile_comparison(), hostile_history()}) {
    chromium::TempDir dir;
    const std::string dom = chromium::dump_dom(page, dir);
    ASSERT_FALSE(dom.empty()) << "chromium produced no DOM";
    EXPECT_THAT(dom, Not(HasSubstr("<img")));
    EXPECT_THAT(dom, HasSubstr(kHostileEscaped));  // shown as text
    EXPECT_THAT(dom, Not(HasSubstr("data-js-errors=\"")));
  }
}

TEST(HtmlPage, TheErrorHookRecordsAScriptError) {
  // A page with scripts (the comparison's sortable tables) is only checked for script errors if an
  // error would show: break a script and look.
  if (!chromium::installed()) GTEST_SKIP() << chromium::kPath << " is not installed";
  std::string page = html::page_begin("hook", true);
  page += "<p>x</p><script>undefined_function_of_the_test();</script>" + html::page_end();
  chromium::TempDir dir;
  const std::string dom = chromium::dump_dom(page, dir);
  EXPECT_THAT(dom, HasSubstr("data-js-errors=\""));
  EXPECT_THAT(dom, HasSubstr("undefined_function_of_the_test"));
  // And a page without scripts has no hook.
  EXPECT_THAT(html::page_begin("plain"), Not(HasSubstr("<script")));
}

}  // namespace
}  // namespace pacer::analysis
