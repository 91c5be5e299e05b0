// pacer history's renderers: OpenMetrics that the Prometheus text parsers accept (one latest
// sample per series, no timestamps, # EOF), CSV and JSON with every run, and an HTML page that
// headless Chromium renders with a trend plot per (host, model, type, test), axes labelled.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/history_render.h"
#include "history_test_util.h"

namespace pacer::analysis {
namespace {

namespace fs = std::filesystem;
using history_test::make_record;
using history_test::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kChromium = "/usr/bin/chromium";

// Two hosts, two tests; host-a's tg64 has three runs (the latest at 90 tok/s).
std::vector<StoredRun> sample_runs() {
  std::vector<StoredRun> runs;
  auto add = [&](const std::string& time, const std::string& host, const std::string& test,
                 std::vector<double> rates, double mhz) {
    StoredRun s;
    s.id = static_cast<int64_t>(runs.size() + 1);
    s.record = make_record(time, rates);
    s.record.host = host;
    s.record.test = test;
    s.record.freq_mean_mhz = mhz;
    s.record.run_uuid = fmt::format("00000000-0000-4000-8000-{:012}", s.id);
    runs.push_back(s);
  };
  add("2026-11-20T10:00:00Z", "host-a", "tg64", {100, 102, 98}, 3000);
  add("2026-11-21T10:00:00Z", "host-a", "tg64", {101, 99, 100}, 3010);
  add("2026-11-22T10:00:00Z", "host-a", "tg64", {90, 91, 89}, 2700);
  add("2026-11-21T11:00:00Z", "host-b \"quoted\"", "tg64", {95, 96, 94}, 2900);
  add("2026-11-21T12:00:00Z", "host-a", "pp512", {400, 410, 390}, 3000);
  runs[4].record.flags = {"cv 7% > 5%: noisy"};
  runs[2].record.kernel_ceiling_tok_s = 112.5;  // a tg row that measured its kernels' ceiling
  return runs;
}

TEST(HistoryRender, OpenMetricsHasOneLatestSamplePerSeriesAndEndsInEof) {
  const std::string text = render_history_openmetrics(sample_runs());
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back(), "# EOF");
  EXPECT_EQ(text.back(), '\n');

  // Text exposition grammar: metric name, labels with escaped values, a number, no timestamp.
  const std::regex sample(
      R"re(([a-zA-Z_:][a-zA-Z0-9_:]*)\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")(,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*\} (-?[0-9.eE+-]+))re");
  const std::regex meta(R"re(# (TYPE|HELP|UNIT) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.+))re");
  std::set<std::string> typed;
  std::map<std::string, int> samples;  // family -> count
  std::set<std::string> series;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    std::smatch m;
    if (std::regex_match(lines[i], m, meta)) {
      if (m[1] == "TYPE") {
        EXPECT_EQ(m[3], "gauge") << lines[i];
        EXPECT_TRUE(typed.insert(m[2]).second) << "family typed twice: " << lines[i];
      } else {
        EXPECT_TRUE(typed.count(m[2])) << "metadata before TYPE: " << lines[i];
      }
      if (m[1] == "UNIT") {
        const std::string name = m[2], unit = m[3];
        EXPECT_TRUE(name.size() > unit.size() && name.ends_with("_" + unit)) << lines[i];
      }
      continue;
    }
    ASSERT_TRUE(std::regex_match(lines[i], m, sample)) << "not a sample line: " << lines[i];
    EXPECT_TRUE(typed.count(m[1])) << "sample before its TYPE: " << lines[i];
    ++samples[m[1]];
    EXPECT_TRUE(series.insert(lines[i].substr(0, lines[i].rfind(' '))).second)
        << "duplicate series: " << lines[i];
  }
  // Three series: host-a tg64, host-b tg64, host-a pp512.
  EXPECT_EQ(samples["pacer_bench_tokens_per_second"], 3);
  EXPECT_EQ(samples["pacer_bench_run_labels"], 3);
  // host-a tg64's latest run (90 tok/s, 2700 MHz), not its mean over time.
  EXPECT_THAT(
      text,
      HasSubstr(
          R"(pacer_bench_tokens_per_second{host="host-a",model="tiny",type="q8_0",test="tg64",threads="2",pin="compact"} 90)"));
  EXPECT_THAT(
      text,
      HasSubstr(
          R"(pacer_bench_cpu_frequency_hertz{host="host-a",model="tiny",type="q8_0",test="tg64",threads="2",pin="compact"} 2700000000)"));
  // Label values escaped.
  EXPECT_THAT(text, HasSubstr(R"(host="host-b \"quoted\"")"));
  // 2026-11-22T10:00:00Z, seconds since the epoch.
  EXPECT_THAT(
      text,
      HasSubstr(
          R"(pacer_bench_run_timestamp_seconds{host="host-a",model="tiny",type="q8_0",test="tg64",threads="2",pin="compact"} 1795341600)"));
  EXPECT_THAT(
      text,
      HasSubstr(
          R"(pacer_bench_flags{host="host-a",model="tiny",type="q8_0",test="pp512",threads="2",pin="compact"} 1)"));
  EXPECT_EQ(render_history_openmetrics({}), "# EOF\n");
}

TEST(HistoryRender, CsvAndJsonCarryEveryRun) {
  const auto runs = sample_runs();
  const nlohmann::json j = nlohmann::json::parse(render_history_json(runs));
  ASSERT_EQ(j.size(), runs.size());
  EXPECT_EQ(j[2]["tok_s"], nlohmann::json({90, 91, 89}));
  EXPECT_EQ(j[4]["flags"][0], "cv 7% > 5%: noisy");
  EXPECT_EQ(j[3]["host"], "host-b \"quoted\"");

  const std::string csv = render_history_csv(runs);
  std::istringstream in(csv);
  std::string header, line;
  std::getline(in, header);
  const auto columns = std::count(header.begin(), header.end(), ',') + 1;
  EXPECT_EQ(columns, 38);
  EXPECT_THAT(header, HasSubstr(",cpu_model,cpu_signature,kernel,"));
  EXPECT_THAT(header, HasSubstr(",roofline_pct,kernel_ceiling_tok_s,flags,"));
  EXPECT_THAT(csv, HasSubstr(",112.5,"));
  EXPECT_EQ(j[2]["kernel_ceiling_tok_s"], 112.5);
  EXPECT_EQ(j[0]["kernel_ceiling_tok_s"], 0);
  // The latest tg64 run of host-a measured one: its OpenMetrics sample; no other series has one.
  const std::string om = render_history_openmetrics(runs);
  EXPECT_THAT(om, HasSubstr("# TYPE pacer_bench_kernel_ceiling_tokens_per_second gauge"));
  size_t samples = 0;
  for (size_t p = om.find("\npacer_bench_kernel_ceiling_tokens_per_second{");
       p != std::string::npos;
       p = om.find("\npacer_bench_kernel_ceiling_tokens_per_second{", p + 1))
    ++samples;
  EXPECT_EQ(samples, 1u);
  const size_t at = om.find("\npacer_bench_kernel_ceiling_tokens_per_second{");
  ASSERT_NE(at, std::string::npos);
  EXPECT_THAT(om.substr(at, om.find('\n', at + 1) - at), HasSubstr("host=\"host-a\""));
  EXPECT_THAT(om.substr(at, om.find('\n', at + 1) - at), HasSubstr("} 112.5"));
  int rows = 0;
  while (std::getline(in, line)) ++rows;
  EXPECT_EQ(rows, 5);
  EXPECT_THAT(csv, HasSubstr(",\"host-b \"\"quoted\"\"\","));
  EXPECT_THAT(csv, HasSubstr(",90;91;89,"));

  const std::string text = render_history_text(runs);
  EXPECT_THAT(text, HasSubstr("5 runs; * = flagged (1)"));
  EXPECT_THAT(text, HasSubstr("pp512*"));
  EXPECT_THAT(render_history_markdown(runs), HasSubstr("| 2026-11-22T10:00:00Z | host-a |"));
  EXPECT_EQ(parse_history_format("prom"), HistoryFormat::OpenMetrics);
  EXPECT_THROW(parse_history_format("xml"), std::invalid_argument);
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// A host whose CPU changed under one brand string (Zen 4 -> Zen 1 guests, both "AMD EPYC"): the
// text and Markdown tables say where; a row without a signature (schema 1) or on another host is
// no change.
TEST(HistoryRender, TextNamesWhereAHostsCpuChanged) {
  std::vector<StoredRun> runs = sample_runs();
  for (StoredRun& s : runs) s.record.cpu_model = "AMD EPYC";
  runs[0].record.cpu_signature = "family 25 model 17 stepping 1";
  runs[1].record.cpu_signature = "";  // unsigned: matches either side
  runs[2].record.cpu_signature = "family 23 model 1 stepping 2";
  runs[3].record.cpu_signature = "family 23 model 49 stepping 0";  // host-b's own
  runs[4].record.cpu_signature = "family 23 model 1 stepping 2";   // pp512, after runs[2]
  // Oldest first, as the database lists them.
  std::stable_sort(runs.begin(), runs.end(), [](const StoredRun& a, const StoredRun& b) {
    return a.record.time_utc < b.record.time_utc;
  });
  const std::string text = render_history_text(runs);
  // host-a: runs[0] (Zen 4), runs[1] (none), runs[4] 2026-11-21T12 (Zen 1): one change, there.
  EXPECT_THAT(text, HasSubstr("CPU changed on host-a at 2026-11-21T12:00:00Z (run 00000000): AMD "
                              "EPYC [family 25 model 17 stepping 1] -> AMD EPYC [family 23 model "
                              "1 stepping 2]\n"));
  EXPECT_EQ(count(text, "CPU changed"), 1u);
  EXPECT_THAT(render_history_markdown(runs), HasSubstr("\n- CPU changed on host-a at "));
  EXPECT_THAT(render_history_text(sample_runs()), Not(HasSubstr("CPU changed")));
}

// The markup between an element's start `open` and the next `close` after it.
std::vector<std::string> elements(const std::string& dom, const std::string& open,
                                  const std::string& close) {
  std::vector<std::string> out;
  for (size_t p = dom.find(open); p != std::string::npos; p = dom.find(open, p + 1)) {
    const size_t end = dom.find(close, p);
    out.push_back(dom.substr(p, end - p));
  }
  return out;
}

TEST(HistoryRender, HtmlIsSelfContained) {
  const std::string html = render_history_html(sample_runs());
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("<link")));
  EXPECT_THAT(html, Not(HasSubstr("url(")));
  std::regex url(R"(https?://[^"' )]+)");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), url); it != std::sregex_iterator();
       ++it)
    EXPECT_EQ(it->str(), "http://www.w3.org/2000/svg");
  EXPECT_THAT(html, HasSubstr("host-b &quot;quoted&quot;"));
}

TEST(HistoryRender, HtmlTrendPlotsRenderInHeadlessChromium) {
  if (!fs::exists(kChromium)) GTEST_SKIP() << kChromium << " is not installed";
  TempDir dir;
  const fs::path page = dir.path() / "history.html";
  std::ofstream(page, std::ios::binary) << render_history_html(sample_runs());
  const std::string flags =
      " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
      " --disable-background-networking --disable-component-update --disable-sync"
      " --hide-scrollbars --user-data-dir=" +
      (dir.path() / "profile").string();
  const fs::path dom_file = dir.path() / "dom.html";
  const std::string cmd = std::string("timeout 120 ") + kChromium + flags + " --dump-dom file://" +
                          page.string() + " > " + dom_file.string() + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string dom = history_test::slurp(dom_file);
  ASSERT_FALSE(dom.empty()) << "chromium produced no DOM";

  // One figure per (host, model, type, test): host-a pp512, host-a tg64, host-b tg64.
  const auto figures = elements(dom, "<figure class=\"trend\"", "</figure>");
  ASSERT_EQ(figures.size(), 3u);
  size_t points = 0;
  for (const std::string& fig : figures) {
    const auto rate = elements(fig, "<svg class=\"plot-rate\"", "</svg>");
    const auto clock = elements(fig, "<svg class=\"plot-clock\"", "</svg>");
    ASSERT_EQ(rate.size(), 1u);
    ASSERT_EQ(clock.size(), 1u);
    for (const std::string* svg : {&rate[0], &clock[0]}) {
      EXPECT_THAT(*svg, HasSubstr(">time (UTC)</text>"));
      EXPECT_EQ(count(*svg, "<path class=\"mark\""), 1u);  // one series per figure here
      EXPECT_GE(count(*svg, "text-anchor=\"end\""), 2u);   // y tick labels
    }
    EXPECT_THAT(rate[0], HasSubstr(">tok/s</text>"));
    EXPECT_THAT(clock[0], HasSubstr(">mean clock (MHz)</text>"));
    EXPECT_EQ(count(rate[0], "<circle class=\"mark\""), count(clock[0], "<circle class=\"mark\""));
    points += count(rate[0], "<circle class=\"mark\"");
  }
  EXPECT_EQ(points, 5u);  // a point per run
  // host-a tg64 (the figure with three runs): its line has three vertices.
  const auto busiest = std::find_if(figures.begin(), figures.end(), [](const std::string& f) {
    return f.find("host-a") != std::string::npos && f.find("tg64") != std::string::npos;
  });
  ASSERT_NE(busiest, figures.end());
  EXPECT_EQ(count(*busiest, "<circle class=\"mark\""), 6u);  // 3 runs x 2 panels

  // And it paints: a screenshot of the page is written.
  const fs::path png = dir.path() / "shot.png";
  const std::string shot = std::string("timeout 120 ") + kChromium + flags +
                           " --window-size=1280,1600 --screenshot=" + png.string() + " file://" +
                           page.string() + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(shot.c_str()), 0) << shot;
  ASSERT_TRUE(fs::exists(png));
  const std::string bytes = history_test::slurp(png);
  ASSERT_GT(bytes.size(), 8u);
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  EXPECT_GT(bytes.size(), 10'000u);  // not a blank page: plots, text and a table
}

}  // namespace
}  // namespace pacer::analysis
