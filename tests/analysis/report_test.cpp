// The single-run report against a small hand-built log whose every number is worked out below.
#include "analysis/report.h"

#include <algorithm>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/histogram.h"
#include "event_log_testlog.h"

namespace pacer::analysis {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kUs = 1000.0;  // ns per us

// The hand log. Times in us (x1000 in the log):
//   tokenize op          [0, 2]
//   prefill step 0       [10, 60], n_tokens 4: embed 1, attn_qkv 10, ffn_down 20, output 10,
//                        sample 4 (phase sample) -> 45 us of ops, 5 us gap
//   decode steps 1..4    [100k, 100k + 50] (step 4: + 90): embed 1, attn_qkv 10, ffn_down 20
//                        (step 4: 40), output 10, sample 4 -> gaps 5, 5, 5, 25
//   detokenize op        [500, 503]
// Workers: one per op at 3000 MHz, except attn_qkv (2 workers: 10 us at 3000 MHz, 5 us at
// 2000 MHz), ffn_down (instructions 30000, cycles 20000; step 4 migrates CPU 0 -> 1) and output
// (runq 2 us of its 10 us).
// Weight bytes: attn_qkv 50000, ffn_down 100000, output 100000. Header bandwidth 10 GB/s.
class HandLog {
 public:
  std::string text;

  // attention_kv: when > 0, each decode step also runs an `attention` op of 2 us after its
  // sample op that read attention_kv x n_past bytes of KV cache (n_past 4..7); with
  // attention_flops > 0 it also did that many x n_past fp32 flops, and fma_gflops > 0 is the
  // header's measured multiply-add rate.
  explicit HandLog(int64_t attention_kv = 0, int64_t attention_flops = 0, double fma_gflops = 0) {
    json h = {{"type", "header"},
              {"schema", 1},
              {"command", "run"},
              {"model",
               {{"arch", "llama"},
                {"type", "q8_0"},
                {"n_layers", 1},
                {"matmul_bytes_per_token", 250000},
                {"params", 1000000}}},
              {"run", {{"threads", 2}, {"pin", "compact"}, {"isa", "avx512"}}},
              {"host", {{"cpu_model", "Hand CPU"}}},
              {"frequency", {{"source", "aperf_mperf"}, {"nominal_mhz", 3000.0}}},
              {"freq_before_mhz", {3000.0, 3000.0}},
              {"bandwidth_gbs", 10.0},
              {"load_ms", 7.5}};
    if (fma_gflops > 0) h["fma_gflops"] = fma_gflops;
    line(h);
    op("tokenize", "tokenize", -1, "other", 0, 0, 2, 0, 1);
    step_ops(0, "prefill", 10, 20, 4);
    line({{"type", "step"},
          {"step", 0},
          {"phase", "prefill"},
          {"n_past", 0},
          {"n_tokens", 4},
          {"t0_ns", 10 * 1000},
          {"t1_ns", 60 * 1000}});
    for (int s = 1; s <= 4; ++s) {
      const int64_t t0 = 100 * s;
      step_ops(s, "decode", t0, s == 4 ? 40 : 20, 1);
      if (attention_kv > 0) {
        const int64_t a0 = t0 + (s == 4 ? 65 : 45);
        json att = {{"type", "op"},
                    {"step", s},
                    {"phase", "decode"},
                    {"name", "attention"},
                    {"layer", 0},
                    {"kind", "attention"},
                    {"kv_bytes", attention_kv * (3 + s)},
                    {"t0_ns", a0 * 1000},
                    {"t1_ns", (a0 + 2) * 1000},
                    {"workers",
                     {{{"w", 0},
                       {"cpu", 0},
                       {"cpu_end", 0},
                       {"t0_ns", a0 * 1000},
                       {"t1_ns", (a0 + 2) * 1000}}}}};
        if (attention_flops > 0) att["attention_flops"] = attention_flops * (3 + s);
        line(att);
      }
      line({{"type", "step"},
            {"step", s},
            {"phase", "decode"},
            {"n_past", 3 + s},
            {"token", 100 + s},
            {"piece", "x"},
            {"t0_ns", t0 * 1000},
            {"t1_ns", (t0 + (s == 4 ? 90 : 50)) * 1000}});
    }
    op("detokenize", "detokenize", -1, "other", 0, 500, 503, 0, 1);
  }

  void footer() {
    line({{"type", "footer"},
          {"steps", 5},
          {"n_prompt", 4},
          {"n_generated", 4},
          {"peak_rss_kb", 2048},
          {"stop", "n_predict"}});
  }

 private:
  void line(const json& j) { text += j.dump() + "\n"; }

  // Ops of one step from t0 (us): embed 1, attn_qkv 10, ffn_down ffn_us, output 10, sample 4.
  void step_ops(int step, const char* phase, int64_t t0, int64_t ffn_us, int64_t tokens) {
    int64_t t = t0;
    op(phase, "embed", -1, "embed", step, t, t + 1, 0, tokens);
    t += 1;
    op(phase, "attn_qkv", 0, "matmul", step, t, t + 10, 50000, tokens);
    t += 10;
    op(phase, "ffn_down", 0, "matmul", step, t, t + ffn_us, 100000, tokens);
    t += ffn_us;
    op(phase, "output", -1, "matmul", step, t, t + 10, 100000, 1);
    t += 10;
    op("sample", "sample", -1, "sample", step, t, t + 4, 0, 1);
  }

  void op(const char* phase, const char* name, int layer, const char* kind, int step, int64_t t0,
          int64_t t1, int64_t weight_bytes, int64_t tokens) {
    json w0 = {{"w", 0},
               {"cpu", 0},
               {"cpu_end", 0},
               {"t0_ns", t0 * 1000},
               {"t1_ns", t1 * 1000},
               {"freq_mhz", 3000.0}};
    json workers = json::array();
    const std::string n = name;
    if (n == "ffn_down") {
      w0["counters"] = {{"instructions", 30000}, {"cycles", 20000}};
      if (step == 4) w0["cpu_end"] = 1;
    }
    if (n == "output") w0["runq_ns"] = 2000;
    workers.push_back(w0);
    if (n == "attn_qkv")
      workers.push_back({{"w", 1},
                         {"cpu", 1},
                         {"cpu_end", 1},
                         {"t0_ns", t0 * 1000},
                         {"t1_ns", (t0 + 5) * 1000},
                         {"freq_mhz", 2000.0}});
    json j = {{"type", "op"},       {"step", step},       {"phase", phase},
              {"name", name},       {"layer", layer},     {"kind", kind},
              {"t0_ns", t0 * 1000}, {"t1_ns", t1 * 1000}, {"workers", workers}};
    if (weight_bytes > 0) {
      j["wtype"] = "q8_0";
      j["rows"] = n == "attn_qkv" ? 96 : (n == "ffn_down" ? 64 : 512);
      j["cols"] = 64;
      j["tokens"] = tokens;
      j["weight_bytes"] = weight_bytes;
    }
    line(j);
  }
};

Report hand_report(bool footer = true, BottleneckThresholds th = {}) {
  HandLog log;
  if (footer) log.footer();
  return build_report_from_text(log.text, "hand.jsonl", th);
}

const OpRow& find(const std::vector<OpRow>& rows, Phase p, const std::string& name, int layer) {
  for (const OpRow& r : rows)
    if (r.phase == p && r.name == name && r.layer == layer) return r;
  throw std::runtime_error("row not found: " + name);
}

// With the header's bracket cost (2 us), each op row says what share of its time the recorder's
// own reads can be: ops x 2 us / op time. Without it (every other test's log) there is no figure;
// a negative cost is a bad log, named by its field.
TEST(Report, RecordingShareIsOpsTimesTheBracketCostOverOpTime) {
  EXPECT_FALSE(find(hand_report().by_phase_op, Phase::Decode, "ffn_down", -1).cpu.recording_share);

  HandLog log;
  log.footer();
  const std::string plain = log.text;
  const std::string header_end = "\"type\":\"header\"";
  std::string text = plain;
  text.replace(text.find(header_end), header_end.size(),
               header_end + ",\"counters\":{\"mode\":\"software\",\"bracket_ns\":2000}");
  const Report r = build_report_from_text(text, "hand.jsonl", {});
  const OpRow& ffn = find(r.by_phase_op, Phase::Decode, "ffn_down", -1);
  ASSERT_TRUE(ffn.cpu.recording_share);
  EXPECT_NEAR(*ffn.cpu.recording_share, 4 * 2.0 / 100.0, 1e-12);  // 4 ops, 20+20+20+40 us
  const OpRow& qkv = find(r.by_phase_op, Phase::Decode, "attn_qkv", -1);
  EXPECT_NEAR(*qkv.cpu.recording_share, 4 * 2.0 / 40.0, 1e-12);
  const OpRow& embed = find(r.by_phase_op, Phase::Decode, "embed", -1);
  EXPECT_NEAR(*embed.cpu.recording_share, 1.0, 1e-12);  // 1 us ops: capped at all of it
  EXPECT_EQ(r.header.counters.bracket_ns, 2000.0);
  // Worker 1 ran only the attn_qkv halves: 5 slices of 5 us -> 5 x 2 / 25.
  ASSERT_EQ(r.workers.size(), 2u);
  ASSERT_TRUE(r.workers[1].cpu.recording_share);
  EXPECT_NEAR(*r.workers[1].cpu.recording_share, 5 * 2.0 / 25.0, 1e-12);
  const std::string shown = render_text(r);
  EXPECT_THAT(shown, HasSubstr("bracket=2.0 us per op"));
  // attn_qkv's by-parent row ends with its rec cell.
  const size_t row = shown.find("decode :: attn_qkv");
  ASSERT_NE(row, std::string::npos);
  const std::string line = shown.substr(row, shown.find('\n', row) - row);
  EXPECT_THAT(line, ::testing::EndsWith(" 20.0%")) << line;

  std::string bad = plain;
  bad.replace(bad.find(header_end), header_end.size(),
              header_end + ",\"counters\":{\"bracket_ns\":-5}");
  try {
    build_report_from_text(bad, "bad.jsonl", {});
    FAIL() << "a negative bracket cost must be rejected";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("bad.jsonl"));
    EXPECT_THAT(e.what(), HasSubstr("counters.bracket_ns"));
  }
}

TEST(Report, PerOpStatisticsAreExactAndPercentilesWithinTheBound) {
  const Report r = hand_report();
  const OpRow& ffn = find(r.by_layer_op, Phase::Decode, "ffn_down", 0);
  EXPECT_EQ(ffn.dist.count, 4);
  EXPECT_EQ(ffn.dist.total_ns, 100 * kUs);  // 20 + 20 + 20 + 40
  EXPECT_EQ(ffn.dist.min_ns, 20 * kUs);
  EXPECT_EQ(ffn.dist.max_ns, 40 * kUs);
  EXPECT_DOUBLE_EQ(ffn.dist.mean_ns(), 25 * kUs);
  const double eps = LogHistogram::kRelativeError;
  EXPECT_NEAR(ffn.dist.p50_ns, 20 * kUs, 20 * kUs * eps);  // rank 2 of 4
  EXPECT_NEAR(ffn.dist.p95_ns, 40 * kUs, 40 * kUs * eps);  // rank 4
  EXPECT_NEAR(ffn.dist.p99_ns, 40 * kUs, 40 * kUs * eps);
  // Decode op time per step: 1 + 10 + 20 + 10 = 41 us (x3) and 61 us -> 184 us.
  EXPECT_NEAR(ffn.share, 100.0 / 184.0, 1e-12);
  const OpRow& decode = find(r.by_phase, Phase::Decode, "", -1);
  EXPECT_EQ(decode.dist.total_ns, 184 * kUs);
  EXPECT_EQ(decode.dist.count, 16);
  // Op aggregate across phases: ffn_down in prefill (20) and decode (100).
  const OpRow& agg = find(r.by_op, Phase::Other, "ffn_down", -1);
  EXPECT_EQ(agg.dist.count, 5);
  EXPECT_EQ(agg.dist.total_ns, 120 * kUs);
  // By-parent rows are sorted by total time: decode first.
  EXPECT_EQ(r.by_phase.front().phase, Phase::Decode);
}

TEST(Report, CpuColumnsFollowTheWorkerSamples) {
  const Report r = hand_report();
  const OpRow& qkv = find(r.by_phase_op, Phase::Decode, "attn_qkv", -1);
  // Worker-time-weighted: (3000 * 10 + 2000 * 5) / 15.
  ASSERT_TRUE(qkv.cpu.freq_mean_mhz);
  EXPECT_NEAR(*qkv.cpu.freq_mean_mhz, 40000.0 / 15.0, 1e-9);
  EXPECT_EQ(qkv.cpu.freq_min_mhz, 2000.0);
  EXPECT_FALSE(qkv.cpu.ipc);           // no instruction/cycle counters on this op
  EXPECT_FALSE(qkv.cpu.offcpu_share);  // no runq data on this op
  ASSERT_TRUE(qkv.cpu.gbs);
  EXPECT_NEAR(*qkv.cpu.gbs, 4 * 50000.0 / (4 * 10 * kUs), 1e-12);  // 5 GB/s
  EXPECT_NEAR(*qkv.cpu.roofline_pct, 50.0, 1e-9);

  // Imbalance: worker 1 is done after 5 of the op's 10 us and waits 5 us; worker 0 never does.
  ASSERT_TRUE(qkv.cpu.imbalance_share);
  EXPECT_NEAR(*qkv.cpu.imbalance_share, 5.0 / (2 * 10.0), 1e-12);
  EXPECT_EQ(qkv.cpu.imbalance_ns, 4 * 5 * kUs);
  // The phase row counts only its ops run by two or more workers.
  const OpRow& decode = find(r.by_phase, Phase::Decode, "", -1);
  ASSERT_TRUE(decode.cpu.imbalance_share);
  EXPECT_NEAR(*decode.cpu.imbalance_share, 0.25, 1e-12);

  const OpRow& ffn = find(r.by_phase_op, Phase::Decode, "ffn_down", -1);
  EXPECT_FALSE(ffn.cpu.imbalance_share);  // one worker: nothing to wait for
  EXPECT_NEAR(*ffn.cpu.ipc, 1.5, 1e-12);
  EXPECT_EQ(ffn.cpu.migrations, 1);
  EXPECT_NEAR(*ffn.cpu.gbs, 4 * 100000.0 / (100 * kUs), 1e-12);  // 4 GB/s

  const OpRow& out = find(r.by_phase_op, Phase::Decode, "output", -1);
  EXPECT_NEAR(*out.cpu.offcpu_share, 0.2, 1e-12);
  EXPECT_NEAR(*out.cpu.roofline_pct, 100.0, 1e-9);  // 100000 B / 10 us = 10 GB/s

  // Worker 1 only ran the attn_qkv halves: 5 chunks of 5 us at 2000 MHz.
  ASSERT_EQ(r.workers.size(), 2u);
  EXPECT_EQ(r.workers[1].chunks, 5);
  EXPECT_EQ(r.workers[1].busy_ns, 25 * kUs);
  EXPECT_EQ(r.workers[1].cpu.freq_mean_mhz, 2000.0);
  EXPECT_EQ(r.workers[0].cpus, (std::vector<int>{0, 1}));  // the migration
}

TEST(Report, PhaseBreakdownThroughputAndTtft) {
  const Report r = hand_report();
  ASSERT_EQ(r.phases.size(), 5u);
  // tokenize 2; prefill 50 - 4 (sample inside); decode 3 * 50 + 90 - 4 * 4; sampling 5 * 4;
  // detokenize 3 -> 295 us.
  const int64_t expected[] = {2, 46, 224, 20, 3};
  const char* names[] = {"tokenization", "prefill", "decode", "sampling", "detokenization"};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(r.phases[i].name, names[i]);
    EXPECT_EQ(r.phases[i].total_ns, expected[i] * kUs) << names[i];
    EXPECT_NEAR(r.phases[i].share, expected[i] / 295.0, 1e-12) << names[i];
  }
  EXPECT_EQ(r.phases[2].count, 4);
  const Throughput& t = r.throughput;
  EXPECT_NEAR(*t.prefill_tok_s, 4 / 50e-6, 1e-6);  // 4 tokens in a 50 us step
  EXPECT_NEAR(*t.decode_tok_s, 4 / 240e-6, 1e-6);  // 4 tokens in 240 us of decode steps
  EXPECT_EQ(t.prefill_tokens, 4);
  EXPECT_EQ(t.decode_tokens, 4);
  EXPECT_EQ(t.ttft_source, "steps");      // the footer has no ttft_ms
  EXPECT_NEAR(*t.ttft_ms, 0.060, 1e-12);  // run start 0 -> end of the prefill step at 60 us
  EXPECT_EQ(t.load_ms, 7.5);
  EXPECT_EQ(t.peak_rss_kb, 2048);
  EXPECT_NEAR(*t.decode_roofline_tok_s, 10e9 / 250000, 1e-6);  // 40000 tok/s
  EXPECT_EQ(r.decode_steps.count, 4);
  EXPECT_EQ(r.decode_steps.max_ns, 90 * kUs);
  // Step rows: the last decode step has 65 us of ops in 90 us.
  ASSERT_EQ(r.steps.size(), 5u);
  EXPECT_EQ(r.steps[4].op_ns, 65 * kUs);
  EXPECT_EQ(r.steps[4].gap_ns(), 25 * kUs);
  EXPECT_EQ(r.steps[4].start_ns, 400 * kUs);
}

// Attention ops carry the KV-cache bytes they read: the op's GB/s counts them, and the decode
// roofline is the bandwidth over the matmul bytes plus the mean KV bytes of a decode step, as
// `pacer bench` computes a tg row's. A negative kv_bytes is a bad log, named by its field.
TEST(Report, DecodeRooflineAndAttentionGbsCountTheKvCacheBytes) {
  HandLog log(1000);  // 4000, 5000, 6000, 7000 bytes in the 4 decode steps
  log.footer();
  const Report r = build_report_from_text(log.text, "kv.jsonl", {});
  EXPECT_NEAR(r.throughput.decode_kv_bytes_per_token, 5500.0, 1e-9);
  ASSERT_TRUE(r.throughput.decode_roofline_tok_s);
  EXPECT_NEAR(*r.throughput.decode_roofline_tok_s, 10e9 / (250000 + 5500), 1e-6);
  const OpRow& att = find(r.by_phase_op, Phase::Decode, "attention", -1);
  EXPECT_EQ(att.cpu.kv_bytes, 22000);
  EXPECT_EQ(att.cpu.weight_bytes, 0);
  ASSERT_TRUE(att.cpu.gbs);
  EXPECT_NEAR(*att.cpu.gbs, 22000.0 / 8000.0, 1e-12);  // 22000 B in 4 x 2 us
  EXPECT_NEAR(*att.cpu.roofline_pct, 27.5, 1e-9);      // of 10 GB/s
  EXPECT_THAT(render_text(r), HasSubstr("(matmul + 5.5 kB of KV cache) bytes per token"));
  EXPECT_THAT(render_json(r), HasSubstr("\"decode_kv_bytes_per_token\": 5500.0"));
  // A log cut before its step lines still gives the KV bytes per decode step (4 steps' ops).
  std::istringstream in(log.text);
  std::string line, no_steps;
  while (std::getline(in, line)) {
    if (line.find("\"type\":\"step\"") == std::string::npos) no_steps += line + "\n";
  }
  EXPECT_NEAR(
      build_report_from_text(no_steps, "cut.jsonl", {}).throughput.decode_kv_bytes_per_token,
      5500.0, 1e-9);
  // Without the key (logs before it), the roofline counts the weights only.
  EXPECT_NEAR(*hand_report().throughput.decode_roofline_tok_s, 10e9 / 250000, 1e-6);

  // A negative kv_bytes makes its line malformed: skipped, and the warning names the file, the
  // line, the byte offset and the field.
  std::string bad = log.text;
  const std::string key = "\"kv_bytes\":4000";
  bad.replace(bad.find(key), key.size(), "\"kv_bytes\":-4000");
  const Report rb = build_report_from_text(bad, "bad.jsonl", {});
  EXPECT_EQ(find(rb.by_phase_op, Phase::Decode, "attention", -1).cpu.kv_bytes, 18000);
  std::string warnings;
  for (const std::string& w : rb.read.warnings()) warnings += w + "\n";
  EXPECT_THAT(warnings, HasSubstr("bad.jsonl:"));
  EXPECT_THAT(warnings, HasSubstr("byte offset"));
  EXPECT_THAT(warnings, HasSubstr("negative kv_bytes"));
}

// Attention ops over a float cache also carry their fp32 flops, and a bench's recorded log the
// measured multiply-add rate: the decode roofline then takes attention at the slower of its
// bytes at the bandwidth and its flops at that rate, as `pacer bench` holds a tg row
// (eventlog/roofline.h), and says so next to the bandwidth-only figure.
TEST(Report, DecodeRooflineTakesAttentionAtTheSlowerOfItsBytesAndItsFlops) {
  // 4000..7000 KV bytes (5500 a step) and 4e5..7e5 flops (5.5e5 a step) at 1 GFLOP/s: 550 us of
  // flops against 0.55 us of bytes at 10 GB/s; the matmuls' 250000 bytes take 25 us.
  HandLog log(1000, 100000, 1.0);
  log.footer();
  const Report r = build_report_from_text(log.text, "flops.jsonl", {});
  EXPECT_NEAR(r.throughput.decode_attention_flops_per_token, 550000.0, 1e-9);
  ASSERT_TRUE(r.throughput.fma_gflops);
  EXPECT_EQ(*r.throughput.fma_gflops, 1.0);
  ASSERT_TRUE(r.throughput.decode_roofline_tok_s);
  EXPECT_NEAR(*r.throughput.decode_roofline_tok_s, 1 / (25e-6 + 550e-6), 1e-6);
  ASSERT_TRUE(r.throughput.decode_bandwidth_roofline_tok_s);
  EXPECT_NEAR(*r.throughput.decode_bandwidth_roofline_tok_s, 10e9 / (250000 + 5500), 1e-6);
  EXPECT_THAT(render_text(r), HasSubstr("attention's 0.00 GFLOP per token at the measured 1 "
                                        "GFLOP/s: it is bound by its flops"));
  EXPECT_THAT(render_json(r), HasSubstr("\"decode_attention_flops_per_token\": 550000.0"));
  // At 1000 GFLOP/s the bytes bind: the ceiling is the bandwidth's, no second figure.
  HandLog fast(1000, 100000, 1000.0);
  fast.footer();
  const Report f = build_report_from_text(fast.text, "fast.jsonl", {});
  EXPECT_NEAR(*f.throughput.decode_roofline_tok_s, 10e9 / (250000 + 5500), 1e-6);
  EXPECT_FALSE(f.throughput.decode_bandwidth_roofline_tok_s);
  // No rate in the header (a log not written by pacer bench): bandwidth alone.
  HandLog no_rate(1000, 100000, 0);
  no_rate.footer();
  EXPECT_NEAR(
      *build_report_from_text(no_rate.text, "nr.jsonl", {}).throughput.decode_roofline_tok_s,
      10e9 / (250000 + 5500), 1e-6);
  // A negative attention_flops is a bad line, named by its field.
  std::string bad = log.text;
  const std::string key = "\"attention_flops\":400000";
  ASSERT_NE(bad.find(key), std::string::npos);
  bad.replace(bad.find(key), key.size(), "\"attention_flops\":-400000");
  std::string warnings;
  for (const std::string& w : build_report_from_text(bad, "badf.jsonl", {}).read.warnings())
    warnings += w + "\n";
  EXPECT_THAT(warnings, HasSubstr("negative attention_flops"));
}

// An op faster than the header's bandwidth is explained once, with the largest, not left as a
// bare % roof over 100. The hand log's output matmul streams 100000 B in 10 us = 10 GB/s, in
// prefill and in decode.
TEST(Report, OpsAboveTheHeadersBandwidthAreNoted) {
  HandLog log;
  log.footer();
  auto notes_of = [](const Report& r) {
    std::string all;
    for (const std::string& n : r.bottleneck.notes) all += n + "\n";
    return all;
  };
  // At exactly the header's 10 GB/s (100 %) nothing is said.
  EXPECT_THAT(notes_of(build_report_from_text(log.text, "at.jsonl", {})),
              Not(HasSubstr("streamed faster")));
  std::string low = log.text;
  const std::string key = "\"bandwidth_gbs\":10.0";
  ASSERT_NE(low.find(key), std::string::npos);
  low.replace(low.find(key), key.size(), "\"bandwidth_gbs\":8.0");
  const Report r = build_report_from_text(low, "low.jsonl", {});
  const OpRow& out = find(r.by_phase_op, Phase::Decode, "output", -1);
  ASSERT_TRUE(out.cpu.roofline_pct);
  EXPECT_NEAR(*out.cpu.roofline_pct, 125.0, 1e-9);
  const std::string notes = notes_of(r);
  EXPECT_THAT(notes, HasSubstr("2 ops streamed faster than the header's 8.0 GB/s"));
  EXPECT_THAT(notes, HasSubstr(":: output at 10.0 GB/s, 125% of it"));
  EXPECT_THAT(render_text(r), HasSubstr("% roof overstates those ops"));
}

// A log with no decode steps (a pp row of `pacer bench`) says so, not "- tok/s over 0 tokens".
TEST(Report, APhaseWithoutStepsSaysSo) {
  HandLog log;
  log.footer();
  std::istringstream in(log.text);
  std::string line, prefill_only;
  while (std::getline(in, line)) {
    if (line.find("\"phase\":\"decode\"") == std::string::npos) prefill_only += line + "\n";
  }
  const std::string shown = render_text(build_report_from_text(prefill_only, "pp.jsonl", {}));
  const size_t at = shown.find("  decode: ");
  ASSERT_NE(at, std::string::npos) << shown;
  EXPECT_THAT(shown.substr(at, shown.find('\n', at) - at),
              ::testing::EndsWith("none: the log has no steps of this phase"));
  EXPECT_THAT(shown, ::testing::Not(HasSubstr("decode roofline")));  // no decode to bound
  EXPECT_THAT(shown, ::testing::Not(HasSubstr("over 0 tokens")));
  EXPECT_THAT(shown, HasSubstr("tok/s over 4 tokens"));  // the prefill step's 4 tokens
}

TEST(Report, ComponentsBlocksAndShapes) {
  const Report r = hand_report();
  // Decode in-step op time: 4 steps x (embed 1 + qkv 10 + output 10 + sample 4) + ffn 100 = 200.
  auto comp = [&](Component c) -> const ComponentRow& {
    for (const ComponentRow& row : r.components)
      if (row.phase == Phase::Decode && row.component == c) return row;
    throw std::runtime_error("component not found");
  };
  EXPECT_EQ(comp(Component::Ffn).per_step.total_ns, 100 * kUs);
  EXPECT_NEAR(comp(Component::Ffn).share, 0.5, 1e-12);
  EXPECT_EQ(comp(Component::Attention).per_step.total_ns, 40 * kUs);
  EXPECT_EQ(comp(Component::Attention).events, 4);
  EXPECT_EQ(comp(Component::OutputProjection).per_step.total_ns, 40 * kUs);
  EXPECT_EQ(comp(Component::Embedding).per_step.total_ns, 4 * kUs);
  EXPECT_EQ(comp(Component::Sampling).per_step.total_ns, 16 * kUs);
  EXPECT_EQ(comp(Component::Ffn).per_step.max_ns, 40 * kUs);
  EXPECT_EQ(r.components.front().component, Component::Ffn);  // decode first, largest first

  // block_0 per decode step: qkv 10 + ffn 20 (40 in step 4).
  const BlockRow* b0 = nullptr;
  for (const BlockRow& b : r.blocks)
    if (b.phase == Phase::Decode && b.layer == 0) b0 = &b;
  ASSERT_NE(b0, nullptr);
  EXPECT_EQ(b0->per_step.count, 4);
  EXPECT_EQ(b0->per_step.total_ns, 140 * kUs);
  EXPECT_EQ(b0->per_step.max_ns, 50 * kUs);

  // Shapes: (op, type, rows x cols, tokens). output runs with tokens=1 in all 5 steps.
  auto shape = [&](const std::string& name, int64_t tokens) -> const ShapeRow& {
    for (const ShapeRow& s : r.shapes)
      if (s.name == name && s.tokens == tokens) return s;
    throw std::runtime_error("shape not found");
  };
  EXPECT_EQ(r.shapes.size(), 5u);
  const ShapeRow& out = shape("output", 1);
  EXPECT_EQ(out.dist.count, 5);
  EXPECT_EQ(out.rows, 512);
  EXPECT_EQ(out.cols, 64);
  EXPECT_EQ(out.wtype, "q8_0");
  EXPECT_NEAR(*out.cpu.gbs, 10.0, 1e-12);
  EXPECT_EQ(shape("ffn_down", 4).dist.count, 1);
  EXPECT_EQ(shape("ffn_down", 1).dist.total_ns, 100 * kUs);
  EXPECT_EQ(r.shapes.front().name, "ffn_down");  // sorted by total: 100 us
}

TEST(Report, EventTypeSummaryCountsAndTimesRecords) {
  const Report r = hand_report();
  ASSERT_GE(r.event_types.size(), 4u);
  EXPECT_EQ(r.event_types[1].type, "op");
  EXPECT_EQ(r.event_types[1].count, 27);  // 2 + 5 steps x 5
  ASSERT_TRUE(r.event_types[1].dist);
  EXPECT_EQ(r.event_types[2].type, "step");
  EXPECT_EQ(r.event_types[2].dist->total_ns, 290 * kUs);  // 50 + 240
  EXPECT_TRUE(r.read.complete());
}

// The header's kernel ceiling (the matmul kernels alone, weights in L2) decides what the roofline
// alone cannot: the hand log's decode streams at 56% of its roofline (compute-bound by the
// threshold).
TEST(Report, TheKernelCeilingSaysWhetherArithmeticOrMemoryBoundsDecode) {
  BottleneckThresholds th;  // no loss passes: the verdict is the nature of decode
  th.offcpu_share = th.overhead_share = th.imbalance_share = 0.9;
  const auto with_ceiling = [&](std::optional<double> kernel, BottleneckThresholds t) {
    HandLog log;
    log.footer();
    std::string text = log.text;
    if (kernel) {
      const std::string header_end = "\"type\":\"header\"";
      text.replace(text.find(header_end), header_end.size(),
                   header_end + fmt::format(",\"kernel_ceiling_tok_s\":{}", *kernel));
    }
    return build_report_from_text(text, "hand.jsonl", t);
  };
  const auto decode_finding = [](const Report& r) -> const Finding& {
    for (const Finding& f : r.bottleneck.findings)
      if (f.subject == "decode") return f;
    throw std::runtime_error("no decode finding");
  };
  const Report plain = with_ceiling(std::nullopt, th);
  ASSERT_TRUE(plain.throughput.decode_tok_s);
  ASSERT_TRUE(plain.throughput.decode_roofline_tok_s);
  const double tok_s = *plain.throughput.decode_tok_s,
               roof = *plain.throughput.decode_roofline_tok_s;
  ASSERT_LT(tok_s, 0.6 * roof);
  EXPECT_EQ(plain.bottleneck.verdict, BottleneckKind::ComputeBound);
  EXPECT_FALSE(plain.header.kernel_ceiling_tok_s);

  // Kernels that run decode's matmuls at tok_s / 0.8 from cache, below the DRAM roofline: 80% of
  // them, compute-bound with the figure and without the caveat.
  const Report bound = with_ceiling(tok_s / 0.8, th);
  ASSERT_TRUE(bound.header.kernel_ceiling_tok_s);
  EXPECT_EQ(bound.bottleneck.verdict, BottleneckKind::ComputeBound);
  EXPECT_THAT(decode_finding(bound).evidence, HasSubstr("decode runs at 80% of that"));
  EXPECT_THAT(decode_finding(bound).evidence, HasSubstr("their arithmetic on this CPU"));

  // Kernels twice as fast as the roofline: the rest is waiting on memory below its bandwidth.
  const Report latency = with_ceiling(2 * roof, th);
  EXPECT_EQ(latency.bottleneck.verdict, BottleneckKind::MemoryBound);
  EXPECT_THAT(decode_finding(latency).evidence, HasSubstr("waiting on memory below its bandwidth"));

  // A run counted memory-bound by the threshold (50% here) keeps it beside fast kernels, and
  // turns compute-bound beside kernels slower than the roofline.
  BottleneckThresholds low = th;
  low.memory_bound_roofline_pct = 50;
  EXPECT_EQ(with_ceiling(std::nullopt, low).bottleneck.verdict, BottleneckKind::MemoryBound);
  const Report kept = with_ceiling(2 * roof, low);
  EXPECT_EQ(kept.bottleneck.verdict, BottleneckKind::MemoryBound);
  EXPECT_THAT(decode_finding(kept).evidence, HasSubstr("above the"));
  EXPECT_THAT(decode_finding(kept).evidence, ::testing::Not(HasSubstr("waiting on memory")));
  EXPECT_EQ(with_ceiling(tok_s / 0.9, low).bottleneck.verdict, BottleneckKind::ComputeBound);
}

TEST(Report, BottleneckRanksLossesByTheTimeTheyCost) {
  const Report r = hand_report();
  const Bottleneck& b = r.bottleneck;
  EXPECT_EQ(b.dominant_phase, "decode");
  EXPECT_NEAR(b.dominant_phase_share, 224.0 / 295.0, 1e-12);
  EXPECT_EQ(b.dominant_op, "ffn_down");
  // Off-CPU: runq 20% of measured worker time (> 10%) costs 0.2 x 224 = 44.8 us; overhead:
  // 40 us of gaps in 240 us of steps (16.7% > 15%) costs 40 us. Frequency is ~99% of 3000.
  EXPECT_EQ(b.verdict, BottleneckKind::OffCpu);
  ASSERT_GE(b.findings.size(), 3u);
  EXPECT_EQ(b.findings[0].kind, BottleneckKind::OffCpu);
  EXPECT_THAT(b.findings[0].evidence, HasSubstr("20.0%"));
  EXPECT_EQ(b.findings[1].kind, BottleneckKind::OverheadBound);
  EXPECT_THAT(b.findings[1].evidence, HasSubstr("16.7%"));
  EXPECT_FALSE(b.findings[0].suggestions.empty());
  // Imbalance: 25% of the 2-worker ops' worker time waiting (> 10%) costs 4 x 5 us / 2 workers.
  ASSERT_GE(b.findings.size(), 4u);
  EXPECT_EQ(b.findings[2].kind, BottleneckKind::LoadImbalanced);
  EXPECT_THAT(b.findings[2].evidence, HasSubstr("25.0% of their time done and waiting"));
  EXPECT_THAT(b.findings[2].evidence, HasSubstr("~0.01 ms of op time lost"));
  EXPECT_EQ(bottleneck_name(b.findings[2].kind), "load-imbalanced");
  // The nature of decode: 1,000,000 B / 180 us = 5.56 GB/s = 56% of 10 GB/s -> compute-bound.
  EXPECT_EQ(b.findings[3].kind, BottleneckKind::ComputeBound);
  EXPECT_THAT(b.findings[3].evidence, HasSubstr("56%"));

  // Raise the thresholds: no loss passes, the verdict is the nature of the work.
  BottleneckThresholds th;
  th.offcpu_share = 0.5;
  th.overhead_share = 0.5;
  th.imbalance_share = 0.2;  // still below the 25%: imbalance is the only loss
  EXPECT_EQ(hand_report(true, th).bottleneck.verdict, BottleneckKind::LoadImbalanced);
  th.imbalance_share = 0.5;
  EXPECT_EQ(hand_report(true, th).bottleneck.verdict, BottleneckKind::ComputeBound);
  th.memory_bound_roofline_pct = 50;
  EXPECT_EQ(hand_report(true, th).bottleneck.verdict, BottleneckKind::MemoryBound);
}

// A `pacer bench` tg row at depth spends most of its log filling the KV cache: the verdict is
// still decode's, and a note says why. Prefill ops of the synthetic log take twice a decode op,
// so with one decode step the prefill dominates.
TEST(Report, BenchTgRowClassifiesDecodeNotTheDepthFill) {
  testlog::SyntheticRun run;
  run.n_decode = 1;
  run.bandwidth_gbs = 20;
  std::ostringstream s;
  testlog::write_synthetic(s, run);
  const Report plain = build_report_from_text(s.str(), "run.jsonl");
  EXPECT_EQ(plain.bottleneck.dominant_phase, "prefill");
  std::string bench = s.str();
  const std::string command = "\"command\":\"run\"";
  ASSERT_NE(bench.find(command), std::string::npos);
  bench.replace(bench.find(command), command.size(),
                "\"bench_test\":\"tg1 @ d4\",\"command\":\"bench\"");
  const Report r = build_report_from_text(bench, "bench.jsonl");
  EXPECT_EQ(r.bottleneck.dominant_phase, "decode");
  ASSERT_FALSE(r.bottleneck.findings.empty());
  EXPECT_EQ(r.bottleneck.findings[0].subject.rfind("decode", 0), 0u)
      << r.bottleneck.findings[0].subject;
  std::string notes;
  for (const std::string& n : r.bottleneck.notes) notes += n + "\n";
  EXPECT_THAT(notes, HasSubstr("a `pacer bench` tg1 @ d4 row: its prefill ("));
  // A pp row keeps the largest phase.
  std::string pp = s.str();
  pp.replace(pp.find(command), command.size(), "\"bench_test\":\"pp4\",\"command\":\"bench\"");
  EXPECT_EQ(build_report_from_text(pp, "pp.jsonl").bottleneck.dominant_phase, "prefill");
}

// The bottleneck section of a synthetic run's report.
Bottleneck synthetic_bottleneck(const testlog::SyntheticRun& run,
                                const BottleneckThresholds& th = {}) {
  std::ostringstream s;
  testlog::write_synthetic(s, run);
  return build_report_from_text(s.str(), "synthetic.jsonl", th).bottleneck;
}

TEST(Report, BottleneckOnSyntheticRuns) {
  const auto verdict = [](const testlog::SyntheticRun& run) { return synthetic_bottleneck(run); };
  testlog::SyntheticRun run;  // header: freq_before 2900, nominal 2100
  run.n_decode = 8;
  run.bandwidth_gbs = 20;  // the toy matmuls stream ~70-280 GB/s: far above 60% of 20
  EXPECT_EQ(verdict(run).verdict, BottleneckKind::MemoryBound);
  run.bandwidth_gbs = 100000;
  EXPECT_EQ(verdict(run).verdict, BottleneckKind::ComputeBound);
  run.freq_mhz = 1450;  // half of the 2900 MHz seen before the run
  const Bottleneck b = verdict(run);
  EXPECT_EQ(b.verdict, BottleneckKind::FrequencyLimited);
  EXPECT_THAT(b.findings[0].evidence, HasSubstr("50%"));
  run.freq_mhz = 2900;
  // A throttling episode: the middle fifth of decode at 60% clock. The run-wide mean stays above
  // 85% of the reference, the slow steps do not.
  run.n_decode = 40;
  run.throttle = 0.6;
  const Bottleneck episode = verdict(run);
  EXPECT_EQ(episode.verdict, BottleneckKind::FrequencyLimited);
  EXPECT_THAT(episode.findings[0].evidence, HasSubstr("8 of 40 decode steps ran below 85%"));
  EXPECT_THAT(episode.findings[0].evidence, HasSubstr("at 1740 MHz"));
  run.throttle = 1.0;
  run.n_decode = 8;
  run.gap_ns = 1000;  // as long as an op: about half of every step is gaps
  EXPECT_EQ(verdict(run).verdict, BottleneckKind::OverheadBound);
  run.gap_ns = 100;
  run.bandwidth_gbs = 0;  // no roofline, no IPC-free verdict: IPC 2.0 says compute-bound
  const Bottleneck nb = verdict(run);
  EXPECT_EQ(nb.verdict, BottleneckKind::ComputeBound);
  EXPECT_THAT(nb.notes[0], HasSubstr("bandwidth_gbs"));
  run.hw_counters = false;
  EXPECT_EQ(verdict(run).verdict, BottleneckKind::Undetermined);
}

// Decode steps far slower than the median at a normal clock. Every decode step of the
// synthetic run takes 2.4228 ms (op_ns 100 us: 2 layers x (970 us of ops + 12 gaps of 0.1 us) +
// embed, output_norm, output and sample with their gaps); a step is "disturbed" above 1.5x that.
TEST(Report, DisturbedStepsAreCountedAndTheirCauseIsPlaced) {
  const auto bottleneck = [](const testlog::SyntheticRun& run) {
    return synthetic_bottleneck(run);
  };
  auto finding = [](const Bottleneck& b, BottleneckKind kind) -> const Finding* {
    for (const Finding& f : b.findings)
      if (f.kind == kind) return &f;
    return nullptr;
  };
  testlog::SyntheticRun run;
  run.n_decode = 20;
  run.op_ns = 100'000;
  run.bandwidth_gbs = 20;  // the toy matmuls stream ~1 GB/s: compute-bound, no loss
  EXPECT_EQ(bottleneck(run).verdict, BottleneckKind::ComputeBound);

  // A pause as long as a step in layer 0's ffn_gate_up of 3 steps: each takes 4.8456 ms, 3 x
  // 2.4228 = 7.27 ms above the median, of 20 x 2.4228 + 7.2684 - 20 x 0.05 (sampling) = 54.7244
  // ms of decode = 13.3%.
  run.disturbed_steps = {5, 12, 17};
  run.pause_ns = 2'422'800;
  const Bottleneck paused = bottleneck(run);
  EXPECT_EQ(paused.verdict, BottleneckKind::Disturbed);
  EXPECT_EQ(bottleneck_name(paused.verdict), "disturbed");
  ASSERT_FALSE(paused.findings.empty());
  const std::string& ev = paused.findings[0].evidence;
  EXPECT_THAT(ev, HasSubstr("3 of 20 decode steps took over 1.5x the median of the 15 steps "
                            "around them at a normal clock (the run's median step: 2.42 ms): "
                            "4.85 ms each on average, 7.27 ms lost (13.3% of decode)"));
  // 1e9 / 2,422,800 ns; the bound is 20 GB/s / 4,000,000 B per token.
  EXPECT_THAT(
      ev,
      HasSubstr("the median step alone runs 412.7 tok/s = 8% of the 5000.0 tok/s decode roofline"));
  EXPECT_THAT(ev, HasSubstr("run-queue wait 0.00 ms, VM steal not recorded"));
  EXPECT_THAT(ev, HasSubstr("in 3 of them one op held most of the extra time (ffn_gate_up took "
                            "2.72 ms against its median"));
  ASSERT_FALSE(paused.findings[0].suggestions.empty());
  EXPECT_THAT(paused.findings[0].suggestions[0], HasSubstr("on a VM this is the host"));
  // The nature of the work follows the loss.
  EXPECT_NE(finding(paused, BottleneckKind::ComputeBound), nullptr);

  // The same pause reported as VM steal: the scheduler's figures cover it.
  run.pause_steal = true;
  const Bottleneck stolen = bottleneck(run);
  EXPECT_EQ(stolen.verdict, BottleneckKind::Disturbed);
  EXPECT_THAT(
      stolen.findings[0].evidence,
      HasSubstr("cover most of it in those steps: run-queue wait 0.00 ms, VM steal 7.27 ms"));
  EXPECT_THAT(stolen.findings[0].suggestions[0], HasSubstr("off-CPU and steal"));

  // Every op of the 3 steps twice as long at the same clock: spread, not a pause.
  run.pause_steal = false;
  run.pause_ns = 0;
  run.spread = 2.0;
  const Bottleneck spread = bottleneck(run);
  EXPECT_EQ(spread.verdict, BottleneckKind::Disturbed);
  EXPECT_THAT(spread.findings[0].evidence, HasSubstr("3 of 20 decode steps"));
  EXPECT_THAT(spread.findings[0].evidence, HasSubstr("spread over the steps' ops"));
  EXPECT_THAT(spread.findings[0].evidence, Not(HasSubstr("one op held")));

  // One such step is noise, not a finding; nor are 3 steps only 1.4x the median.
  run.disturbed_steps = {12};
  EXPECT_EQ(finding(bottleneck(run), BottleneckKind::Disturbed), nullptr);
  run.disturbed_steps = {5, 12, 17};
  run.spread = 1.4;
  EXPECT_EQ(finding(bottleneck(run), BottleneckKind::Disturbed), nullptr);
  // Steps that grow with the context are not disturbed: the last of 40 steps takes ~4.5x the
  // first and ~1.65x the run's median step, but its neighbours grow with it.
  {
    testlog::SyntheticRun grow = run;
    grow.n_decode = 40;
    grow.disturbed_steps.clear();
    grow.spread = 1.0;
    grow.growth = 0.1;
    EXPECT_EQ(finding(bottleneck(grow), BottleneckKind::Disturbed), nullptr);
    grow.disturbed_steps = {30, 34, 38};  // paused for 8 ms: ~1.7-1.8x the steps around them
    grow.pause_ns = 8'000'000;
    EXPECT_NE(finding(bottleneck(grow), BottleneckKind::Disturbed), nullptr);
  }
  // Below the share threshold: 3 x 0.6 x 2.4228 ms = 8.0% of decode > 5%, but not > 10%.
  run.spread = 1.6;
  EXPECT_NE(finding(bottleneck(run), BottleneckKind::Disturbed), nullptr);
  BottleneckThresholds th;
  th.disturbed_share = 0.10;
  EXPECT_EQ(finding(synthetic_bottleneck(run, th), BottleneckKind::Disturbed), nullptr);
}

// A recorded op's time holds the dispatch, the join and the recorder's brackets around its
// workers' slices; the kernels' nature is judged by the slices. Each of 8 decode steps: one
// matmul of 1,000,000 bytes, op [0, 200] us, worker slices [10, 160] and [10, 150] us: op rate
// 1e6 B / 200 us = 5 GB/s = 50% of 10 GB/s (compute-bound by itself), slices 1e6 B / 150 us =
// 6.67 GB/s = 67% (memory-bound).
TEST(Report, KernelsAreJudgedByTheirWorkerSlices) {
  std::string text = testlog::header_line(1, 10.0);
  for (int s = 1; s <= 8; ++s) {
    const int64_t t0 = s * 1'000'000;  // ns
    auto worker = [&](int w, int64_t from_us, int64_t to_us) {
      return json{{"w", w},
                  {"cpu", w},
                  {"cpu_end", w},
                  {"t0_ns", t0 + from_us * 1000},
                  {"t1_ns", t0 + to_us * 1000},
                  {"freq_mhz", 2900.0}};
    };
    text += json{{"type", "op"},
                 {"step", s},
                 {"phase", "decode"},
                 {"name", "ffn_down"},
                 {"layer", 0},
                 {"kind", "matmul"},
                 {"wtype", "q8_0"},
                 {"rows", 1000},
                 {"cols", 941},
                 {"tokens", 1},
                 {"weight_bytes", 1'000'000},
                 {"t0_ns", t0},
                 {"t1_ns", t0 + 200'000},
                 {"workers", {worker(0, 10, 160), worker(1, 10, 150)}}}
                .dump() +
            "\n";
    text += json{{"type", "step"},   {"step", s},    {"phase", "decode"}, {"n_past", 3 + s},
                 {"token", 100 + s}, {"piece", "x"}, {"t0_ns", t0},       {"t1_ns", t0 + 210'000}}
                .dump() +
            "\n";
  }
  const Report r = build_report_from_text(text, "slices.jsonl");
  const OpRow* decode = nullptr;
  for (const OpRow& row : r.by_phase)
    if (row.phase == Phase::Decode) decode = &row;
  ASSERT_NE(decode, nullptr);
  EXPECT_NEAR(*decode->cpu.gbs, 5.0, 1e-9);
  EXPECT_NEAR(*decode->cpu.roofline_pct, 50.0, 1e-9);
  EXPECT_NEAR(*decode->cpu.slice_gbs, 1e6 / 150e3, 1e-9);
  EXPECT_NEAR(*decode->cpu.slice_roofline_pct, 100 * 1e6 / 150e3 / 10, 1e-9);
  // The 40 us of each op outside its slices are the overhead rule's (50 of 210 us a step, with
  // the 10 us gap: 23.8% > 15%), which leads; the nature of the work follows it.
  EXPECT_EQ(r.bottleneck.verdict, BottleneckKind::OverheadBound);
  const auto nature = std::find_if(
      r.bottleneck.findings.begin(), r.bottleneck.findings.end(), [](const Finding& f) {
        return f.subject == "decode" && f.kind != BottleneckKind::OverheadBound;
      });
  ASSERT_NE(nature, r.bottleneck.findings.end());
  EXPECT_EQ(nature->kind, BottleneckKind::MemoryBound);
  EXPECT_THAT(nature->evidence,
              HasSubstr("at 5.0 GB/s = 50% of the measured 10.0 GB/s roofline (their worker "
                        "slices alone: 6.7 GB/s = 67%)"));
  // The op tables show it beside % roof; the JSON report carries both.
  EXPECT_THAT(render_text(r), HasSubstr("% roof % slice"));
  const json j = json::parse(render_json(r));
  EXPECT_NEAR(j["by_phase"][0]["cpu"]["slice_gbs"].get<double>(), 1e6 / 150e3, 1e-9);
}

// Compute-bound advice leaves out what the run already did, and says when no IPC backs it.
TEST(Report, ComputeBoundAdviceFitsTheRun) {
  testlog::SyntheticRun run;  // header: 2 threads on 2 cores, isa avx512 (no vnni key)
  run.n_decode = 8;
  run.bandwidth_gbs = 100000;
  run.hw_counters = false;
  std::ostringstream s;
  testlog::write_synthetic(s, run);
  const Bottleneck b = build_report_from_text(s.str(), "c.jsonl").bottleneck;
  ASSERT_EQ(b.verdict, BottleneckKind::ComputeBound);
  const Finding& f = b.findings[0];
  EXPECT_THAT(f.evidence, HasSubstr("judged from the roofline alone (no IPC"));
  std::string all;
  for (const std::string& x : f.suggestions) all += x + "\n";
  EXPECT_THAT(all, HasSubstr("check the kernel path: the run used isa=avx512;"));
  EXPECT_THAT(all, Not(HasSubstr("use more cores")));  // threads = cores
  // With VNNI on record the kernel path is the fastest there is; on 8 cores 2 threads can grow.
  std::string text = s.str();
  const std::string isa = "\"isa\":\"avx512\"";
  ASSERT_NE(text.find(isa), std::string::npos);
  text.replace(text.find(isa), isa.size(), isa + ",\"vnni\":true");
  const std::string cores = "\"cores\":2";
  ASSERT_NE(text.find(cores), std::string::npos);
  text.replace(text.find(cores), cores.size(), "\"cores\":8");
  const Bottleneck v = build_report_from_text(text, "v.jsonl").bottleneck;
  all.clear();
  for (const std::string& x : v.findings[0].suggestions) all += x + "\n";
  EXPECT_THAT(all, Not(HasSubstr("check the kernel path")));
  EXPECT_THAT(all, HasSubstr("use more cores (threads=2 of 8 cores)"));
}

TEST(Report, IncompleteRunIsReportedWithWhatItHas) {
  const Report r = hand_report(/*footer=*/false);
  EXPECT_FALSE(r.read.complete());
  EXPECT_FALSE(r.footer);
  EXPECT_EQ(r.throughput.decode_tokens, 4);
  const std::string text = render_text(r);
  EXPECT_THAT(text, HasSubstr("INCOMPLETE RUN"));
  EXPECT_THAT(text, HasSubstr("incomplete run"));  // the reader's warning, in the events section

  // A log cut inside a step: its ops count, the step is flagged as cut off.
  HandLog log;
  const size_t cut = log.text.rfind("\"name\":\"output\"");  // decode step 4's output op
  ASSERT_NE(cut, std::string::npos);
  const Report partial = build_report_from_text(log.text.substr(0, cut), "cut.jsonl");
  EXPECT_TRUE(partial.read.truncated_last_line);
  EXPECT_EQ(partial.steps.size(), 4u);
  EXPECT_EQ(partial.incomplete_steps, 1);
}

}  // namespace
}  // namespace pacer::analysis
