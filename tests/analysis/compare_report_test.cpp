// Compatibility checks and the three renderers of `pacer compare` (Markdown, JSON, HTML; the HTML
// page is loaded in headless Chromium when it is installed: the plots must draw, no JS errors).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/compare.h"
#include "analysis/compare_render.h"
#include "analysis/compare_synth.h"

namespace pacer::analysis {
namespace {

using ::testing::HasSubstr;

RunCycles load(const synth::RunSpec& spec, const std::string& name) {
  return load_run_text(synth::event_log(spec), name);
}

synth::RunSpec slow_spec() {
  synth::RunSpec s;
  s.seed = 9;
  s.effects.push_back({.ops = {"ffn_gate_up"}, .freq_scale = 0.6});
  return s;
}

const Comparison& freq_comparison() {
  static const Comparison c =
      compare_runs(load({}, "normal.jsonl"), load(slow_spec(), "slow.jsonl"));
  return c;
}

TEST(CompareCompat, DifferentModelsAreRefusedUnlessForced) {
  synth::RunSpec other;
  other.type = "q4_0";
  other.n_layers = 6;
  const RunCycles a = load({}, "a.jsonl"), b = load(other, "b.jsonl");
  try {
    compare_runs(a, b);
    FAIL() << "expected CompareError";
  } catch (const CompareError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("weight type differs: 'q8_0' vs 'q4_0'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("n_layers"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--force"), std::string::npos) << msg;
  }
  const Comparison c = compare_runs(a, b, {.force = true});
  EXPECT_TRUE(c.forced);
  EXPECT_EQ(c.compat.errors.size(), 2u);
}

TEST(CompareCompat, EnvironmentDifferencesAreWarnings) {
  synth::RunSpec other;
  other.cpus = {2, 3};
  other.pin = "scatter";
  other.cpu_model = "Another CPU";
  other.hardware_counters = false;
  const Compatibility c = check_compatibility(load({}, "a").header, load(other, "b").header);
  EXPECT_TRUE(c.errors.empty());
  auto has = [&](const char* s) {
    for (const auto& w : c.warnings)
      if (w.find(s) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("pinning differs: 'compact' vs 'scatter'"));
  EXPECT_TRUE(has("worker CPUs differs"));
  EXPECT_TRUE(has("CPU model differs"));
  EXPECT_TRUE(has("counter mode differs: 'hardware' vs 'software'"));
  EXPECT_TRUE(has("frequency source differs"));
  EXPECT_FALSE(has("threads"));
}

// Two guests that both call themselves "AMD EPYC" (a Zen 1 and a Zen 4) differ by signature; a
// log without one (written before the key) is no difference.
TEST(CompareCompat, ADifferentCpuSignatureIsAWarning) {
  Header a = load({}, "a").header, b = a;
  EXPECT_TRUE(a.host.cpu_signature.empty());
  auto warned = [](const Compatibility& c) {
    for (const auto& w : c.warnings)
      if (w.find("CPU signature (family/model/stepping) differs") != std::string::npos) return true;
    return false;
  };
  a.host.cpu_signature = "family 23 model 1 stepping 2";
  EXPECT_FALSE(warned(check_compatibility(a, b)));
  b.host.cpu_signature = "family 25 model 17 stepping 1";
  EXPECT_TRUE(warned(check_compatibility(a, b)));
  b.host.cpu_signature = a.host.cpu_signature;
  EXPECT_FALSE(warned(check_compatibility(a, b)));
}

TEST(CompareCompat, ADifferentNumaPolicyIsAConfigurationChange) {
  const Header a = load({}, "a").header;
  Header b = a;
  b.run.numa = "distribute";
  EXPECT_EQ(a.run.numa, "none");  // synthetic logs predate --numa: read as none
  const Compatibility c = check_compatibility(a, b);
  ASSERT_EQ(c.work_changes.size(), 1u);
  EXPECT_NE(c.work_changes[0].find("NUMA policy"), std::string::npos) << c.work_changes[0];
  EXPECT_NE(c.work_changes[0].find("'none' vs 'distribute'"), std::string::npos);
  EXPECT_TRUE(check_compatibility(a, a).work_changes.empty());
}

TEST(CompareCompat, KernelAndExecutorSettingsAreConfigurationChanges) {
  Header a = load({}, "a").header;
  EXPECT_FALSE(a.run.work_stealing.has_value());  // synthetic logs predate these keys
  a.run.work_stealing = true;
  a.run.idle_prefetch = true;
  a.run.gemv_streams = 4;
  Header b = a;
  b.run.idle_prefetch = false;
  b.run.gemv_streams = 2;
  const Compatibility c = check_compatibility(a, b);
  ASSERT_EQ(c.work_changes.size(), 2u);
  EXPECT_NE(c.work_changes[0].find("PACER_IDLE_PREFETCH"), std::string::npos) << c.work_changes[0];
  EXPECT_NE(c.work_changes[0].find("'true' vs 'false'"), std::string::npos) << c.work_changes[0];
  EXPECT_NE(c.work_changes[1].find("PACER_GEMV_STREAMS"), std::string::npos) << c.work_changes[1];
  EXPECT_NE(c.work_changes[1].find("'4' vs '2'"), std::string::npos) << c.work_changes[1];
  // A log older than a key (absent) against one that has it: not a difference.
  b = a;
  b.run.work_stealing.reset();
  b.run.gemv_streams.reset();
  EXPECT_TRUE(check_compatibility(a, b).work_changes.empty());
  // The unpacking kernels' prefetch (Q4_0, K-quants) is a setting of its own (AMD Zen 5 runs it
  // on while the plain streams' is off).
  a.run.gemv_prefetch = b.run.gemv_prefetch = false;
  a.run.gemv_prefetch_unpacking = true;
  b = a;
  b.run.gemv_prefetch_unpacking = false;
  const Compatibility u = check_compatibility(a, b);
  ASSERT_EQ(u.work_changes.size(), 1u);
  EXPECT_NE(u.work_changes[0].find("Q4_0/K-quant GEMV software prefetch"), std::string::npos)
      << u.work_changes[0];
  // The 16-row GEMVs' plans (run.x16_gemv): a Zen 5 run against a Zen 4 one.
  b = a;
  a.run.x16_gemv = "q4_0 1 stream, prefetch, page touch 8192 B";
  b.run.x16_gemv = "q4_0 2 streams";
  const Compatibility x = check_compatibility(a, b);
  ASSERT_EQ(x.work_changes.size(), 1u);
  EXPECT_NE(x.work_changes[0].find("PACER_PAGE_TOUCH"), std::string::npos) << x.work_changes[0];
  EXPECT_NE(
      x.work_changes[0].find("'q4_0 1 stream, prefetch, page touch 8192 B' vs 'q4_0 2 streams'"),
      std::string::npos)
      << x.work_changes[0];
}

TEST(CompareDevices, DescribesCpuRanges) {
  EXPECT_EQ(describe_devices({2, 3}), "CPUs 2-3");
  EXPECT_EQ(describe_devices({5}), "CPU 5");
  EXPECT_EQ(describe_devices({0, 2, 5, 6, 7}), "CPUs 0,2,5-7");
  EXPECT_EQ(describe_devices({kHostDevice}), "host");
}

TEST(CompareRender, MarkdownHasTheReferenceSectionsAndMore) {
  CompareRenderOptions ro;
  ro.table_rows = 5;
  const std::string md = render_markdown(freq_comparison(), ro);
  for (const char* s : {"**Verdict:** Decode",
                        "## 1. High-Level Performance Summary",
                        "| Total Decode Steps",
                        "| Avg Step Time (us)",
                        "## 2. Decode Step Duration Distribution Comparison",
                        "| p50 |",
                        "| p90 |",
                        "| p99 |",
                        "| Time Rank |",
                        "## 3. Where the Time Went: Additive Attribution",
                        "**measured Δ (mean step)**",
                        "## 4. In-depth Core Metric Comparison",
                        "### Overview",
                        "### Key Findings",
                        "**Recommendation:**",
                        "### Detailed comparison table",
                        "| Function Name | Metric Name | Device | Suspicion Score |",
                        "Z-Score(log_μ)",
                        "U-test p(μ)",
                        "## 5. Runs and Comparability",
                        "## 6. Legend",
                        "**Suspicion Score**",
                        "⚑"})
    EXPECT_NE(md.find(s), std::string::npos) << s;
  // Exactly table_rows rows in the detailed table, then the elision line.
  const size_t table = md.find("| Function Name |");
  const size_t end = md.find("\n\n", table);
  const std::string body = md.substr(table, end - table);
  size_t lines = 0;
  for (char ch : body) lines += ch == '\n';
  EXPECT_EQ(lines, 2u + 5u);  // header, separator, 5 rows (+ the elision line has no '\n' here)
  EXPECT_NE(body.find("rows elided"), std::string::npos);
}

TEST(CompareRender, JsonCarriesEveryNumber) {
  const Comparison& c = freq_comparison();
  const auto j = nlohmann::json::parse(render_json(c));
  EXPECT_EQ(j["type"], "pacer_compare");
  EXPECT_EQ(j["main_cause"], "frequency");
  EXPECT_EQ(j["verdict"], c.verdict);
  EXPECT_EQ(j["rows"].size(), c.rows.size());
  double sum = 0;
  for (const auto& [k, v] : j["attribution"]["parts_ns"].items()) sum += v.get<double>();
  EXPECT_NEAR(sum, j["attribution"]["delta_ns"].get<double>(), 1e-6);
  EXPECT_EQ(j["runs"][0]["step_ms"].size(), c.step_ms[0].size());
  EXPECT_EQ(j["rows"][0]["metric"], "cpu_frequency");
}

TEST(CompareRender, JsonWritesNotComputableAsNull) {
  synth::RunSpec one;
  one.steps = 1;  // one cycle per run: no t-test
  const Comparison c = compare_runs(load(one, "a"), load(one, "b"));
  const auto j = nlohmann::json::parse(render_json(c));
  EXPECT_TRUE(j["step_test"]["welch_p"].is_null());
  EXPECT_TRUE(j["rows"][0]["p_beta"].is_null());
}

std::string run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

TEST(CompareRender, HtmlIsSelfContainedAndDrawsInChromium) {
  const std::string html = render_html(freq_comparison());
  size_t plots = 0;
  for (size_t at = 0; (at = html.find("<svg class=\"plot\"", at)) != std::string::npos; ++at)
    ++plots;
  EXPECT_EQ(plots, 3u);
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  EXPECT_EQ(html.find("href=\"http"), std::string::npos);
  EXPECT_NE(html.find("<path class=\"mark\""), std::string::npos);  // the lines
  EXPECT_NE(html.find("<rect class=\"mark\""), std::string::npos);  // the attribution bars

  const char* chromium = "/usr/bin/chromium";
  if (access(chromium, X_OK) != 0) GTEST_SKIP() << "chromium not installed: DOM check skipped";
  const auto dir =
      std::filesystem::temp_directory_path() / ("pacer_compare_html_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto page = dir / "report.html";
  std::ofstream(page) << html;
  const std::string dom = run_capture(
      "timeout 60 " + std::string(chromium) +
      " --headless --no-sandbox --disable-gpu --enable-logging=stderr --v=0 --user-data-dir=" +
      (dir / "profile").string() + " --dump-dom file://" + page.string() + " 2>" +
      (dir / "stderr.txt").string());
  std::ifstream err_in(dir / "stderr.txt");
  const std::string err((std::istreambuf_iterator<char>(err_in)), std::istreambuf_iterator<char>());
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(dom.empty()) << "chromium produced no DOM; stderr:\n" << err;
  EXPECT_NE(dom.find("data-ready=\"1\""), std::string::npos);
  EXPECT_NE(dom.find("data-plots-drawn=\"3\""), std::string::npos);
  EXPECT_EQ(dom.find("data-js-errors=\""), std::string::npos) << "a script error was recorded";
  EXPECT_EQ(err.find(":CONSOLE"), std::string::npos) << err;
}

}  // namespace
}  // namespace pacer::analysis

namespace pacer::analysis {
namespace {

// Threads 2 -> 3 (one more worker CPU) and a run of other length: the verdict's first words name
// the configuration as the leading candidate, before any attribution.
TEST(CompareCompat, ConfigurationDifferencesLeadTheVerdict) {
  synth::RunSpec three;
  three.cpus = {0, 1, 2};
  three.steps = 40;
  three.seed = 3;
  const Comparison c = compare_runs(load({}, "two.jsonl"), load(three, "three.jsonl"));
  ASSERT_FALSE(c.compat.work_changes.empty());
  EXPECT_EQ(c.verdict.rfind("The runs were configured differently (", 0), 0u) << c.verdict;
  EXPECT_NE(c.verdict.find("worker CPUs differs"), std::string::npos) << c.verdict;
  EXPECT_NE(c.verdict.find("decode steps differ: 24 vs 40"), std::string::npos) << c.verdict;
  // Same configuration: no such sentence.
  EXPECT_EQ(freq_comparison().verdict.find("configured differently"), std::string::npos);
}

}  // namespace
}  // namespace pacer::analysis

namespace pacer::analysis {
namespace {

// Adds `"cgroup":{"throttled_ns":N}` to every decode step line of a synthetic log.
std::string with_throttling(std::string log, int64_t ns) {
  std::string out;
  size_t at = 0;
  while (at < log.size()) {
    size_t nl = log.find('\n', at);
    if (nl == std::string::npos) nl = log.size();
    std::string line = log.substr(at, nl - at);
    if (line.find("\"type\":\"step\"") != std::string::npos &&
        line.find("\"phase\":\"decode\"") != std::string::npos) {
      line = "{\"cgroup\":{\"nr_periods\":3,\"nr_throttled\":3,\"throttled_ns\":" +
             std::to_string(ns) + "}," + line.substr(1);
    }
    out += line + "\n";
    at = nl + 1;
  }
  return out;
}

// Run-queue growth with the cgroup's throttled time to match is named CPU quota throttling, with
// the quota advice; the same growth without throttling stays run-queue contention.
// The log's header with the kernels' ceiling a bench writes on its recorded rep.
std::string with_kernel_ceiling(const std::string& log, double tok_s) {
  const size_t nl = log.find('\n');
  nlohmann::json header = nlohmann::json::parse(log.substr(0, nl));
  header["kernel_ceiling_tok_s"] = tok_s;
  return header.dump() + log.substr(nl);
}

// Where both headers carry the kernels' ceiling from cache, a finding says which side moved: the
// clock-drop run (slower) against kernels that fell by half (the arithmetic) or held (< 3 %);
// a run no slower quotes the two figures without a reading; no finding without both.
TEST(CompareWords, TheKernelCeilingSaysWhetherTheArithmeticMoved) {
  const std::string normal = synth::event_log({}), slow = synth::event_log(slow_spec());
  const auto finding = [](const Comparison& c) {
    for (const std::string& f : c.findings)
      if (f.find("**Kernels from cache.**") != std::string::npos) return f;
    return std::string();
  };
  const Comparison fell = compare_runs(load_run_text(with_kernel_ceiling(normal, 100), "n.jsonl"),
                                       load_run_text(with_kernel_ceiling(slow, 50), "s.jsonl"));
  ASSERT_GT(fell.delta_pct(), 0);
  EXPECT_THAT(finding(fell), HasSubstr("kernels from L2 100.0 -> 50.0 tok/s (-50.0%): the "
                                       "matmuls' arithmetic slowed with it"));
  const Comparison held = compare_runs(load_run_text(with_kernel_ceiling(normal, 100), "n.jsonl"),
                                       load_run_text(with_kernel_ceiling(slow, 99.5), "s.jsonl"));
  EXPECT_THAT(finding(held), HasSubstr("100.0 -> 99.5 tok/s (-0.5%): the matmuls' arithmetic "
                                       "held, so the loss is outside it"));
  // The slow run as the baseline: the other run is faster, so no reading, just the figures.
  const Comparison faster =
      compare_runs(load_run_text(with_kernel_ceiling(slow, 50), "s.jsonl"),
                   load_run_text(with_kernel_ceiling(normal, 100), "n.jsonl"));
  ASSERT_LT(faster.delta_pct(), 0);
  EXPECT_THAT(finding(faster), HasSubstr("kernels from L2 50.0 -> 100.0 tok/s (+100.0%)."));
  EXPECT_EQ(finding(compare_runs(load_run_text(normal, "n.jsonl"),
                                 load_run_text(with_kernel_ceiling(slow, 50), "s.jsonl"))),
            "");
  // The JSON and Markdown renderings carry it with the other findings.
  EXPECT_THAT(render_markdown(fell), HasSubstr("**Kernels from cache.**"));
}

TEST(CompareCauses, QuotaThrottlingIsNamedNotRunQueue) {
  synth::RunSpec waiting;
  waiting.seed = 5;
  waiting.runq_base_ns = 40000;
  const RunCycles normal = load_run_text(with_throttling(synth::event_log({}), 0), "n.jsonl");
  const RunCycles quota =
      load_run_text(with_throttling(synth::event_log(waiting), 40'000'000), "q.jsonl");
  const Comparison q = compare_runs(normal, quota);
  EXPECT_TRUE(q.quota_throttling);
  EXPECT_NE(q.verdict.find("CPU quota throttling (cgroup)"), std::string::npos) << q.verdict;
  EXPECT_NE(q.recommendation.find("CPU quota"), std::string::npos) << q.recommendation;
  const Comparison r = compare_runs(load({}, "n2.jsonl"), load(waiting, "r.jsonl"));
  EXPECT_FALSE(r.quota_throttling);
  EXPECT_EQ(r.verdict.find("quota"), std::string::npos) << r.verdict;
}

}  // namespace
}  // namespace pacer::analysis

namespace pacer::analysis {
namespace {

// Adds `"steal_ms":X` to every decode step line of a synthetic log.
std::string with_steal(std::string log, double ms) {
  std::string out;
  size_t at = 0;
  while (at < log.size()) {
    size_t nl = log.find('\n', at);
    if (nl == std::string::npos) nl = log.size();
    std::string line = log.substr(at, nl - at);
    if (line.find("\"type\":\"step\"") != std::string::npos &&
        line.find("\"phase\":\"decode\"") != std::string::npos) {
      line = "{\"steal_ms\":" + std::to_string(ms) + "," + line.substr(1);
    }
    out += line + "\n";
    at = nl + 1;
  }
  return out;
}

// A slowdown whose growth the VM's steal time covers is named VM steal with its own advice; the
// same slowdown without steal in the logs is not.
// Adds per-CPU steal to every decode step line: `ms` on each listed CPU.
std::string with_steal_cpus(const std::string& log, double total_ms, const std::vector<int>& cpus,
                            double ms) {
  std::vector<std::string> entries;
  for (int cpu : cpus) entries.push_back(fmt::format("{{\"cpu\":{},\"ms\":{}}}", cpu, ms));
  const std::string fields =
      fmt::format("{{\"steal_ms\":{},\"steal_cpus\":[{}],", total_ms, fmt::join(entries, ","));
  std::string out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    const bool decode_step = line.find("\"type\":\"step\"") != std::string::npos &&
                             line.find("\"phase\":\"decode\"") != std::string::npos;
    out.append(decode_step ? fields : std::string("{"));
    out.append(line, 1, std::string::npos);
    out.push_back('\n');
  }
  return out;
}

// Steal on a CPU the workers did not use (CPU 7; the workers are on CPUs 0-1) cost them nothing:
// with per-CPU steal in both logs it is not named, though the all-CPU figure is as large as in
// the test below. On the workers' CPUs it is, and the verdict says where it was measured.
TEST(CompareCauses, VmStealCountsOnlyTheWorkersCpus) {
  const std::string slow = synth::event_log(slow_spec());
  const RunCycles normal = load_run_text(with_steal_cpus(synth::event_log({}), 0, {}, 0), "n");
  const Comparison elsewhere =
      compare_runs(normal, load_run_text(with_steal_cpus(slow, 50.0, {7}, 50.0), "e"));
  ASSERT_TRUE(elsewhere.significant);
  EXPECT_EQ(elsewhere.steal_scope, "the workers' CPUs");
  EXPECT_FALSE(elsewhere.vm_steal) << elsewhere.verdict;
  const Comparison on_workers =
      compare_runs(normal, load_run_text(with_steal_cpus(slow, 50.0, {0, 1}, 25.0), "w"));
  EXPECT_TRUE(on_workers.vm_steal);
  EXPECT_NE(on_workers.verdict.find("(/proc/stat steal, the workers' CPUs)"), std::string::npos)
      << on_workers.verdict;
}

TEST(CompareCauses, VmStealIsNamedWhenItCoversTheSlowdown) {
  const RunCycles normal = load_run_text(with_steal(synth::event_log({}), 0.0), "n.jsonl");
  const std::string slow = synth::event_log(slow_spec());
  const RunCycles stolen = load_run_text(with_steal(slow, 50.0), "s.jsonl");
  const Comparison c = compare_runs(normal, stolen);
  ASSERT_TRUE(c.significant);
  EXPECT_TRUE(c.vm_steal);
  EXPECT_NE(c.verdict.find("VM steal: the hypervisor took 0.000 -> 50.000 ms/step"),
            std::string::npos)
      << c.verdict;
  EXPECT_NE(c.recommendation.find("lost CPU time to its host"), std::string::npos);
  const Comparison plain = compare_runs(load({}, "n2.jsonl"), load_run_text(slow, "p.jsonl"));
  EXPECT_FALSE(plain.vm_steal);
  EXPECT_EQ(plain.verdict.find("VM steal"), std::string::npos);
}

// A memory-bound clock drop: every op's clock -30% while its cycles per instruction fall 20% (the
// cores wait on memory, not on the clock), so step time grows only ~14%. The frequency part
// (L ln(1/0.7) = 0.357 L) is larger than the change; the IPC part (L ln 0.8 = -0.223 L) offsets it
// and must be named in the verdict, with a warning that the parts of opposite sign exceed the net.
TEST(CompareCauses, MemoryBoundClockDropNamesTheOffsettingPart) {
  synth::RunSpec slow;
  slow.seed = 5;
  slow.effects.push_back({.freq_scale = 0.7, .cpi_scale = 0.8});
  const Comparison c = compare_runs(load({}, "n.jsonl"), load(slow, "s.jsonl"));
  ASSERT_TRUE(c.significant);
  ASSERT_EQ(c.main_cause, Part::Frequency);
  EXPECT_NEAR(c.attribution.part(Part::Ipc) / c.attribution.part(Part::Frequency),
              -std::log(0.8) / std::log(0.7), 0.05);
  EXPECT_NE(c.verdict.find("IPC gain (fewer cycles at the lower clock, typical of memory-bound "
                           "ops"),
            std::string::npos)
      << c.verdict;
  EXPECT_NE(c.verdict.find("Parts of opposite sign"), std::string::npos) << c.verdict;
  // A plain clock drop (no offsetting part) says neither.
  const Comparison plain = compare_runs(load({}, "n.jsonl"), load(slow_spec(), "p.jsonl"));
  EXPECT_EQ(plain.verdict.find("Parts of opposite sign"), std::string::npos) << plain.verdict;
  EXPECT_EQ(plain.verdict.find("fewer cycles at the lower clock"), std::string::npos);
}

// Memory-bandwidth contention without a PMU: only the matmuls (the ops with weight_bytes) take 40%
// more cycles per instruction at the same clock; the other ops keep their time. The CPU-work part
// is then named memory bandwidth contention with the streaming rate, and the advice is about a
// co-runner streaming memory, not "rerun where the PMU is exposed".
TEST(CompareCauses, MemoryBandwidthContentionIsNamed) {
  const std::vector<std::string> matmuls = {"attn_qkv", "attn_out", "ffn_gate_up", "ffn_down",
                                            "output"};
  synth::RunSpec normal;
  normal.hardware_counters = false;
  synth::RunSpec slow = normal;
  slow.seed = 3;
  slow.effects.push_back({.ops = matmuls, .cpi_scale = 1.4});
  const Comparison c = compare_runs(load(normal, "n.jsonl"), load(slow, "s.jsonl"));
  ASSERT_TRUE(c.significant);
  EXPECT_TRUE(c.membw_contention);
  // The matmuls' rate falls by about 1/1.4 (their time is almost all on-CPU time).
  EXPECT_NEAR(c.stream_gbs[1] / c.stream_gbs[0], 1 / 1.4, 0.05);
  EXPECT_NE(c.verdict.find("memory bandwidth contention (the weight-streaming ops read"),
            std::string::npos)
      << c.verdict;
  EXPECT_NE(c.recommendation.find("competed for memory bandwidth"), std::string::npos);
  EXPECT_EQ(c.recommendation.find("PMU is exposed"), std::string::npos);

  // With hardware counters the same stall is an IPC part: named the same way.
  synth::RunSpec pmu_normal, pmu_slow;
  pmu_slow.seed = 3;
  pmu_slow.effects = slow.effects;
  const Comparison p = compare_runs(load(pmu_normal, "n.jsonl"), load(pmu_slow, "s.jsonl"));
  EXPECT_TRUE(p.membw_contention);
  EXPECT_NE(p.verdict.find("memory bandwidth contention"), std::string::npos) << p.verdict;

  // Not when every op slows alike (a CPU-wide IPC loss), nor on a clock drop.
  synth::RunSpec all_ops = normal;
  all_ops.seed = 3;
  all_ops.effects.push_back({.cpi_scale = 1.4});
  const Comparison w = compare_runs(load(normal, "n.jsonl"), load(all_ops, "w.jsonl"));
  ASSERT_TRUE(w.significant);
  EXPECT_FALSE(w.membw_contention) << w.verdict;
  EXPECT_FALSE(freq_comparison().membw_contention);
  // Nor when one matmul alone loses IPC: that op's own problem, not contention for DRAM.
  synth::RunSpec one_op = normal;
  one_op.seed = 3;
  one_op.effects.push_back({.ops = {"ffn_down"}, .cpi_scale = 1.6});
  const Comparison o = compare_runs(load(normal, "n.jsonl"), load(one_op, "o.jsonl"));
  ASSERT_TRUE(o.significant);
  EXPECT_FALSE(o.membw_contention) << o.verdict;
}

// Every op loses 30% of its clock; two big matmuls carry 95% of the frequency part. The drop is
// CPU-wide, not "in big_a, big_b"; and clocks are quoted against the run's own highest step clock,
// not the TSC rate (turbo read 142% of "nominal").
TEST(CompareWords, ClockDropOnEveryOpIsCpuWide) {
  synth::RunSpec normal;
  normal.ops = {
      {.name = "big_a", .kind = "matmul", .instructions = 1e6, .cpi = 0.8},
      {.name = "big_b", .kind = "matmul", .instructions = 1e6, .cpi = 0.8},
      {.name = "norm", .kind = "norm", .instructions = 2e4, .cpi = 0.6},
      {.name = "rope", .kind = "elementwise", .instructions = 2e4, .cpi = 0.7},
      {.name = "attention", .kind = "attention", .instructions = 3e4, .cpi = 0.9},
  };
  normal.freq_mhz = 4260;  // turbo above a 3000 MHz TSC
  synth::RunSpec slow = normal;
  slow.seed = 4;
  slow.effects.push_back({.freq_scale = 0.7});
  const Comparison c = compare_runs(load(normal, "n.jsonl"), load(slow, "s.jsonl"));
  ASSERT_EQ(c.main_cause, Part::Frequency);
  EXPECT_EQ(c.verdict.find(" in big_a"), std::string::npos) << c.verdict;
  const Flag* f = nullptr;
  for (const Flag& x : c.flags)
    if (x.kind == FlagKind::FrequencyDrop) f = &x;
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->text.find("nominal"), std::string::npos) << f->text;
  EXPECT_NE(f->text.find("100% -> 70% of the normal run's pre-run clock (4260 MHz)"),
            std::string::npos)
      << f->text;
  EXPECT_EQ(f->text.find("142%"), std::string::npos) << f->text;
}

// The same build and configuration doing more cycles on every op, at the same clock (no PMU):
// the code did the same work, so the verdict names interference from other work on the host,
// never the code. A different build (another git sha) with the same symptom is "more CPU work".
// One of two workers at 60% of the clock: every parallel op waits for it. Its slice is 1/0.6 of
// the other's, so the excess over the two-worker mean is half the difference: per instance of an
// op of I instructions split evenly, (I/2 x CPI) (1/1.8 GHz - 1/3.0 GHz) / 2. The verdict names the
// imbalance; the normal run has almost none.
TEST(CompareCauses, OneSlowWorkerIsNamedLoadImbalance) {
  synth::RunSpec normal;
  synth::RunSpec slow = normal;
  slow.seed = 4;
  slow.effects.push_back({.cpus = {1}, .freq_scale = 0.6});
  const Comparison c = compare_runs(load(normal, "n.jsonl"), load(slow, "s.jsonl"));
  ASSERT_TRUE(c.significant);
  double expected = 0;
  for (const synth::OpSpec& op : synth::default_ops()) {
    if (!op.parallel) continue;
    const double per_instance = op.instructions / 2 * op.cpi * (1 / 1.8 - 1 / 3.0) / 2;
    expected += per_instance * (op.per_layer ? normal.n_layers : 1);
  }
  const Attribution& a = c.attribution;
  EXPECT_LT(std::fabs(a.span_excess_ns[0]), 0.05 * expected);
  EXPECT_NEAR(a.span_excess_ns[1], expected, 0.05 * expected);
  EXPECT_NE(c.verdict.find("Load imbalance"), std::string::npos) << c.verdict;
  const std::string md = render_markdown(c, {});
  EXPECT_NE(md.find("load imbalance (the waited-for worker's slice"), std::string::npos);
  const auto j = nlohmann::json::parse(render_json(c, {}));
  EXPECT_NEAR(j["attribution"]["span_excess_ns"][1].get<double>(), expected, 0.05 * expected);

  // A slowdown on every worker alike is not imbalance.
  synth::RunSpec even = normal;
  even.seed = 5;
  even.effects.push_back({.freq_scale = 0.6});
  const Comparison e = compare_runs(load(normal, "n.jsonl"), load(even, "e.jsonl"));
  ASSERT_TRUE(e.significant);
  EXPECT_EQ(e.verdict.find("Load imbalance"), std::string::npos) << e.verdict;
}

TEST(CompareCauses, SameBuildMoreCyclesEverywhereIsInterference) {
  synth::RunSpec normal;
  normal.hardware_counters = false;
  synth::RunSpec slow = normal;
  slow.seed = 6;
  slow.effects.push_back({.cpi_scale = 1.3});
  const std::string slow_log = synth::event_log(slow);
  const Comparison c = compare_runs(load(normal, "n.jsonl"), load_run_text(slow_log, "s.jsonl"));
  ASSERT_TRUE(c.significant);
  EXPECT_TRUE(c.same_build_and_config);
  EXPECT_TRUE(c.interference);
  EXPECT_EQ(leading_cause(c), "interference");
  EXPECT_NE(c.verdict.find("interference from other work on the host"), std::string::npos)
      << c.verdict;
  EXPECT_NE(c.recommendation.find("quiet host"), std::string::npos) << c.recommendation;

  std::string other_build = slow_log;
  const std::string sha = "\"git_sha\":\"synthetic\"";
  ASSERT_NE(other_build.find(sha), std::string::npos);
  other_build.replace(other_build.find(sha), sha.size(), "\"git_sha\":\"0123abcd\"");
  const Comparison b = compare_runs(load(normal, "n.jsonl"), load_run_text(other_build, "b.jsonl"));
  EXPECT_FALSE(b.interference);
  EXPECT_EQ(leading_cause(b), "cpu work") << b.verdict;
}

// A slowdown made by a few long steps: 6 of 24 steps paused in ffn_down (blocked 3 ms on both
// workers, about 3x a step). The median step stays put, so the verdict says few steps made it;
// the same time added to every step moves the median and is not said to be a few steps'.
TEST(CompareWords, AFewPausedStepsAreToldApartFromEveryStepSlower) {
  synth::RunSpec normal;
  synth::RunSpec paused = normal;
  paused.seed = 4;
  paused.effects.push_back(
      {.ops = {"ffn_down"}, .blocked_ns = 3e6, .steps = {3, 7, 11, 15, 19, 23}});
  const Comparison c = compare_runs(load(normal, "n.jsonl"), load(paused, "p.jsonl"));
  ASSERT_TRUE(c.significant) << c.verdict;
  EXPECT_NEAR(c.cycles[1].p50, c.cycles[0].p50, 0.05 * c.cycles[0].p50);
  // ffn_down runs once per layer: 4 layers x 3 ms = 12 ms more in each of 6 of 24 steps.
  EXPECT_NE(c.verdict.find("A few steps made the change: the median step moved only"),
            std::string::npos)
      << c.verdict;
  EXPECT_NE(c.verdict.find("the abnormal run's 6 of 24 steps over 1.5x its median add 3.0"),
            std::string::npos)
      << c.verdict;
  // Faster: the normal run had the pauses; the sentence names it.
  const Comparison f = compare_runs(load(paused, "p.jsonl"), load(normal, "n.jsonl"));
  ASSERT_TRUE(f.significant) << f.verdict;
  EXPECT_NE(f.verdict.find("the normal run's 6 of 24 steps"), std::string::npos) << f.verdict;

  synth::RunSpec every = normal;
  every.seed = 4;
  every.effects.push_back({.ops = {"ffn_down"}, .blocked_ns = 0.75e6});
  const Comparison e = compare_runs(load(normal, "n.jsonl"), load(every, "e.jsonl"));
  ASSERT_TRUE(e.significant) << e.verdict;
  EXPECT_EQ(e.verdict.find("A few steps made the change"), std::string::npos) << e.verdict;
}

}  // namespace
}  // namespace pacer::analysis
