// The writer's serializers against the reader: a typed StepRecord or RunHeader written as a line
// (runtime::step_json / header_json) and read back by analysis::LogReader gives the same values,
// so the two sides agree on every key and unit through the schema (eventlog/schema.h).
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "analysis/event_log.h"
#include "eventlog/schema.h"
#include "runtime/event_log.h"

namespace pacer {
namespace {

using nlohmann::json;

struct Collect : analysis::LogVisitor {
  std::vector<analysis::Header> headers;
  std::vector<analysis::StepEvent> steps;
  std::vector<analysis::Footer> footers;
  void on_footer(const analysis::Footer& f) override { footers.push_back(f); }
  void on_header(const analysis::Header& h) override { headers.push_back(h); }
  void on_step(const analysis::StepEvent& e) override { steps.push_back(e); }
};

analysis::StepEvent round_trip(const runtime::StepRecord& r) {
  const std::string log = R"({"type":"header","schema":1})"
                          "\n" +
                          step_json(r).dump() + "\n";
  Collect c;
  const analysis::ReadSummary s = analysis::LogReader::read_text(log, c);
  EXPECT_EQ(s.malformed_count, 0) << (s.warnings().empty() ? "" : s.warnings().front());
  EXPECT_EQ(c.steps.size(), 1u);
  return c.steps.empty() ? analysis::StepEvent{} : c.steps[0];
}

TEST(StepRecordRoundTrip, DecodeStepWithEveryProbeReadsBackTheSameValues) {
  runtime::StepRecord r;
  r.step = 7;
  r.phase = runtime::Phase::Decode;
  r.n_past = 19;
  r.token = 1234;
  r.piece = " d\"é\n";
  r.t0_ns = 5'000'000'000;
  r.t1_ns = 5'012'500'000;  // 12.5 ms
  r.tok_s = 80.25;
  r.freq = {{0, 2, 2990.0}, {1, 3, 2811.5}};
  r.sched = {{0, 100, 1500, 12'000'000, 1, 2}, {1, 101, 2500, 11'000'000, 0, 3}};
  r.process_cpu_usage = 1.875;
  r.host_cpu_usage = 2.0;
  r.steal_ms = 10.0;
  r.energy_j = 0.5;
  r.power_w = 40.0;
  r.cgroup = runtime::StepRecord::Cgroup{3, 1, 250'000};
  r.throttle = runtime::StepRecord::Throttle{2, 1};
  r.ops = 42;

  const analysis::StepEvent e = round_trip(r);
  EXPECT_EQ(e.step, 7);
  EXPECT_EQ(e.phase, analysis::Phase::Decode);
  EXPECT_EQ(e.n_past, 19);
  EXPECT_EQ(e.token, 1234);
  EXPECT_FALSE(e.n_tokens.has_value());
  EXPECT_EQ(e.piece, " d\"é\n");
  EXPECT_EQ(e.t0_ns, 5'000'000'000);
  EXPECT_EQ(e.t1_ns, 5'012'500'000);
  EXPECT_EQ(e.step_ms, 12.5);
  EXPECT_EQ(e.tok_s, 80.25);
  ASSERT_EQ(e.freq.size(), 2u);
  EXPECT_EQ(e.freq[1].w, 1);
  EXPECT_EQ(e.freq[1].cpu, 3);
  EXPECT_EQ(e.freq[1].mhz, 2811.5);
  // Sums over the workers, and each worker as written.
  EXPECT_EQ(e.runq_ns, 4000);
  EXPECT_EQ(e.oncpu_ns, 23'000'000);
  EXPECT_EQ(e.nvcsw, 1);
  EXPECT_EQ(e.nivcsw, 5);
  ASSERT_EQ(e.sched_workers.size(), 2u);
  EXPECT_EQ(e.sched_workers[1].w, 1);
  EXPECT_EQ(e.sched_workers[1].tid, 101);
  EXPECT_EQ(e.sched_workers[1].runq_ns, 2500);
  EXPECT_EQ(e.sched_workers[1].oncpu_ns, 11'000'000);
  EXPECT_EQ(e.sched_workers[1].nivcsw, 3);
  EXPECT_EQ(e.process_cpu_usage, 1.875);
  EXPECT_EQ(e.host_cpu_usage, 2.0);
  EXPECT_EQ(e.steal_ms, 10.0);
  EXPECT_EQ(e.energy_j, 0.5);
  EXPECT_EQ(e.power_w, 40.0);
  EXPECT_EQ(e.cgroup_throttled_ns, 250'000);
}

TEST(StepRecordRoundTrip, PrefillStepHasItsBatchAndNoOptionalProbes) {
  runtime::StepRecord r;
  r.phase = runtime::Phase::Prefill;
  r.n_tokens = 8;
  r.token = 5;  // ignored: a batch step has no single token
  r.t0_ns = 100;
  r.t1_ns = 2100;
  const analysis::StepEvent e = round_trip(r);
  EXPECT_EQ(e.phase, analysis::Phase::Prefill);
  EXPECT_EQ(e.n_tokens, 8);
  EXPECT_EQ(e.tokens(), 8);
  EXPECT_FALSE(e.token.has_value());
  EXPECT_EQ(e.step_ms, 0.002);
  EXPECT_FALSE(e.tok_s.has_value());
  EXPECT_TRUE(e.freq.empty());
  EXPECT_FALSE(e.runq_ns.has_value());
  EXPECT_TRUE(e.sched_workers.empty());
  EXPECT_FALSE(e.process_cpu_usage.has_value());
  EXPECT_FALSE(e.steal_ms.has_value());
  EXPECT_FALSE(e.energy_j.has_value());
  EXPECT_FALSE(e.cgroup_throttled_ns.has_value());
}

TEST(StepRecordRoundTrip, UsageIsRoundedToAThousandthOfACpuAndUnmeasuredFrequencyIsNull) {
  runtime::StepRecord r;
  r.t1_ns = 1;
  r.process_cpu_usage = 1.23456;
  r.host_cpu_usage = 0.0004;
  r.freq = {{0, 0, 2990.04}};
  const json line = step_json(r);
  EXPECT_EQ(line["process_cpu_usage"].get<double>(), 1.235);
  EXPECT_EQ(line["host_cpu_usage"].get<double>(), 0.0);
  EXPECT_EQ(line["freq"][0]["mhz"].get<double>(), 2990.0);  // to 0.1 MHz
  r.freq = {{0, 0, NAN}};
  EXPECT_TRUE(step_json(r)["freq"][0]["mhz"].is_null());
  EXPECT_EQ(round_trip(r).freq.size(), 0u);  // the reader drops workers without a frequency
}

TEST(RunHeaderRoundTrip, RecorderFactsAndCallerFieldsReadBackTheSameValues) {
  const json caller = {{"command", "run"},
                       {"model", {{"path", "m.gguf"}, {"arch", "llama"}}},
                       {"run", {{"threads", 2}, {"cpus", {0, 1}}}},
                       {"host", {{"topology", {{"cores", 2}}}}},
                       {"load_ms", 12.5}};
  runtime::RunHeader r;
  r.caller_fields = &caller;
  r.time_utc = "2026-11-24T09:00:00Z";
  r.host.hostname = "h";
  r.host.cpu_model = "Test CPU";
  r.host.governor = "performance";
  r.host.smt = false;
  r.host.virtualized = true;
  r.host.tsc_mhz = 2100.0004;  // written to 0.001 MHz
  r.host.allowed_cpus = {0, 1};
  r.counters.mode = "software";
  r.counters.live = {"task_clock_ns", "context_switches"};
  r.counters.unavailable = {{"cycles", "no PMU"}};
  r.counters.read = "read()";
  r.frequency.source = "calibrated_loop";
  r.frequency.detail = "imul chain";
  r.frequency.granularity = "per_step";
  r.frequency.nominal_mhz = 2100.0;
  r.thermal.rapl = "powercap intel-rapl";
  r.thermal.throttle_reason = "no thermal_throttle in sysfs";
  r.cgroup_reason = "no cpu controller";
  r.freq_cpus = {0, 1};
  r.freq_before_mhz = std::vector<double>{2995.1, NAN};

  const std::string log = runtime::header_json(r).dump() + "\n";
  Collect c;
  analysis::LogReader::read_text(log, c);
  ASSERT_EQ(c.headers.size(), 1u);
  const analysis::Header& h = c.headers[0];
  EXPECT_EQ(h.schema, eventlog::kSchemaVersion);
  EXPECT_EQ(h.time_utc, "2026-11-24T09:00:00Z");
  EXPECT_EQ(h.command, "run");
  EXPECT_EQ(h.model.path, "m.gguf");
  EXPECT_EQ(h.model.arch, "llama");
  EXPECT_EQ(h.run.threads, 2);
  EXPECT_EQ(h.run.cpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(h.load_ms, 12.5);
  EXPECT_EQ(h.host.hostname, "h");
  EXPECT_EQ(h.host.cpu_model, "Test CPU");
  EXPECT_EQ(h.host.governor, "performance");
  EXPECT_EQ(h.host.smt, false);
  EXPECT_EQ(h.host.virtualized, true);
  EXPECT_EQ(h.host.tsc_mhz, 2100.0);
  EXPECT_EQ(h.host.cores, 2);  // the caller's host keys merge into the recorder's host
  EXPECT_EQ(h.host.allowed_cpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(h.counters.mode, "software");
  EXPECT_EQ(h.counters.live, r.counters.live);
  ASSERT_EQ(h.counters.unavailable.size(), 1u);
  EXPECT_EQ(h.counters.unavailable[0].event, "cycles");
  EXPECT_EQ(h.counters.unavailable[0].reason, "no PMU");
  EXPECT_EQ(h.counters.read, "read()");
  EXPECT_EQ(h.frequency.source, "calibrated_loop");
  EXPECT_EQ(h.frequency.detail, "imul chain");
  EXPECT_EQ(h.frequency.nominal_mhz, 2100.0);
  EXPECT_EQ(h.throttle_counters, "absent");
  EXPECT_EQ(h.rapl, "powercap intel-rapl");
  EXPECT_FALSE(h.bandwidth_gbs.has_value());
  EXPECT_EQ(h.freq_before_mhz, (std::vector<double>{2995.1}));  // the unmeasured CPU is null
  EXPECT_EQ(h.raw["thermal"]["throttle_reason"], "no thermal_throttle in sysfs");
  EXPECT_FALSE(h.raw["thermal"].contains("rapl_reason"));
  EXPECT_EQ(h.raw["cgroup"], (json{{"reason", "no cpu controller"}}));
  EXPECT_EQ(h.raw["freq_cpus"], (json{0, 1}));
}

TEST(FooterRoundTrip, TotalsCallerFieldsAndRecorderCountsReadBackTheSameValues) {
  const json caller = {{"n_generated", 64}, {"stop", "n_predict"}, {"steps", 99}};
  runtime::FooterRecord r;
  r.caller_fields = &caller;
  r.steps = 65;
  r.decode_tok_s = 25.5;
  r.prefill_tok_s = 200.0;
  r.freq_after_mhz = std::vector<double>{2990.0, NAN, 2991.5};
  r.recorder.ops = 1234;
  r.recorder.threads = 2;
  const json line = runtime::footer_json(r);
  EXPECT_EQ(line["recorder"]["ops"], 1234);
  EXPECT_EQ(line["recorder"]["threads"], 2);
  Collect c;
  analysis::LogReader::read_text(R"({"type":"header","schema":1})"
                                 "\n" +
                                     line.dump() + "\n",
                                 c);
  ASSERT_EQ(c.footers.size(), 1u);
  const analysis::Footer& f = c.footers[0];
  EXPECT_EQ(f.steps, 99);  // the caller's value wins over the recorder's count
  EXPECT_EQ(f.n_generated, 64);
  EXPECT_EQ(f.stop, "n_predict");
  EXPECT_EQ(f.decode_tok_s, 25.5);
  EXPECT_EQ(f.prefill_tok_s, 200.0);
  EXPECT_EQ(f.freq_after_mhz, (std::vector<double>{2990.0, 2991.5}));  // null skipped

  // A caller that measured the frequency itself keeps its list.
  const json with_freq = {{"freq_after_mhz", {1000.0}}};
  r.caller_fields = &with_freq;
  EXPECT_EQ(runtime::footer_json(r)["freq_after_mhz"], (json{1000.0}));
}

}  // namespace
}  // namespace pacer
