// pacer bench's runner: repetition statistics, row set-up, roofline arithmetic and renderers, on a
// tiny synthetic model (the speed figures themselves belong to `pacer bench`, not to tests).
#include "runtime/bench.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "eventlog/roofline.h"
#include "loader/synth.h"
#include "runtime/model.h"

namespace pacer::runtime {
namespace {

std::filesystem::path tiny_model() {
  const auto dir = std::filesystem::temp_directory_path() / "pacer-bench-test";
  std::filesystem::create_directories(dir);
  const auto path = dir / "tiny-q8_0.gguf";
  if (!std::filesystem::exists(path)) {
    loader::SynthSpec spec = loader::synth_preset("tiny");
    spec.type = ops::WeightType::Q8_0;
    spec.seed = 7;
    loader::write_synthetic_model(spec, path);
  }
  return path;
}

TEST(BenchStats, SummarizeRatesMatchesHandComputedValues) {
  BenchRow row;
  row.tok_s = {10.0, 12.0, 14.0};
  summarize_rates(row);
  // mean 12, sample variance ((4 + 0 + 4) / 2) = 4, sd 2, cv 1/6.
  EXPECT_DOUBLE_EQ(row.mean, 12.0);
  EXPECT_DOUBLE_EQ(row.sd, 2.0);
  EXPECT_NEAR(row.cv, 1.0 / 6.0, 1e-12);

  BenchRow one;
  one.tok_s = {5.0};
  summarize_rates(one);
  EXPECT_DOUBLE_EQ(one.mean, 5.0);
  EXPECT_DOUBLE_EQ(one.sd, 0.0);
  EXPECT_EQ(one.tok_s_p50, 0.0);  // no per-token times

  // The median token: 10 ms (odd count; the one 50 ms token does not move it) -> 100 t/s.
  BenchRow tokens;
  tokens.tok_s = {50.0};
  tokens.token_s = {0.02, 0.01, 0.05, 0.01, 0.01};
  summarize_rates(tokens);
  EXPECT_DOUBLE_EQ(tokens.tok_s_p50, 100.0);
  // Even count: the mean of the middle two, (20 + 30) / 2 ms -> 40 t/s.
  tokens.token_s = {0.01, 0.03, 0.04, 0.02};
  summarize_rates(tokens);
  EXPECT_DOUBLE_EQ(tokens.tok_s_p50, 40.0);
}

TEST(BenchStats, AMeanFarBelowTheMedianTokenIsFlagged) {
  // Two reps of 5 tokens: 5 in 50 ms (100 t/s) and 5 in 83.3 ms (60 t/s, one token of 43.3 ms).
  // The row's mean, (100 + 60) / 2 = 80 t/s, is 20 % below the median token's 100 t/s; the flag
  // says so with the same mean the row prints (not the 75 t/s of all tokens over all time).
  BenchRow row;
  row.tok_s = {100.0, 60.0};
  row.token_s = {0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01 + 1.0 / 30, 0.01, 0.01};
  summarize_rates(row);
  ASSERT_DOUBLE_EQ(row.mean, 80.0);
  ASSERT_DOUBLE_EQ(row.tok_s_p50, 100.0);
  row.roofline_p50_pct = 91.0;
  flag_slow_tokens(row);
  ASSERT_EQ(row.flags.size(), 1u);
  EXPECT_EQ(
      row.flags[0].rfind("mean 20% below the median token's 100.00 t/s (91% of the roofline)", 0),
      0u)
      << row.flags[0];
  // One 14 ms token among 10 ms ones: 5 in 54 ms = 92.6 t/s, 7.4 % below -- flagged; one of
  // 11.5 ms: 97.1 t/s, 2.9 % below -- within the noise, not flagged.
  BenchRow slower, close;
  slower.tok_s = {5 / 0.054};
  slower.token_s = {0.01, 0.01, 0.014, 0.01, 0.01};
  close.tok_s = {5 / 0.0515};
  close.token_s = {0.01, 0.01, 0.0115, 0.01, 0.01};
  for (BenchRow* r : {&slower, &close}) {
    summarize_rates(*r);
    flag_slow_tokens(*r);
  }
  EXPECT_EQ(slower.flags.size(), 1u);
  EXPECT_TRUE(close.flags.empty()) << close.flags[0];
  // Weights that fit the LLC: the roofline does not apply, so the flag quotes no % of it.
  BenchRow cached = row;
  cached.flags.clear();
  cached.roofline_applies = false;
  flag_slow_tokens(cached);
  ASSERT_EQ(cached.flags.size(), 1u);
  EXPECT_EQ(cached.flags[0].find("roofline"), std::string::npos) << cached.flags[0];
  EXPECT_EQ(cached.flags[0].rfind("mean 20% below the median token's 100.00 t/s: a few", 0), 0u)
      << cached.flags[0];
  BenchRow untimed;  // no per-token times: nothing to compare
  untimed.mean = 50.0;
  flag_slow_tokens(untimed);
  EXPECT_TRUE(untimed.flags.empty());
}

TEST(BenchStats, TheRooflineFollowsWhereTheWeightsLive) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  const auto judged = [](int64_t weights, int64_t llc, double pct) {
    BenchRow row;
    row.roofline_pct = pct;
    flag_roofline(row, weights, llc);
    return row;
  };
  // 200 MiB of weights under a 300 MiB LLC: cache-resident, no DRAM roofline.
  BenchRow fits = judged(200 * kMiB, 300 * kMiB, 140.0);
  EXPECT_FALSE(fits.roofline_applies);
  ASSERT_EQ(fits.flags.size(), 1u);
  EXPECT_EQ(fits.flags[0],
            "weights (200 MiB) fit the LLC (300 MiB): cache-resident, the DRAM roofline does not "
            "apply");
  // 571 MiB (TinyLlama Q4_0) under the same LLC: streamed, the % stands with a caveat, and one
  // above 100 is named as such rather than blamed on the probe.
  BenchRow within = judged(571 * kMiB, 300 * kMiB, 88.0);
  EXPECT_TRUE(within.roofline_applies);
  ASSERT_EQ(within.flags.size(), 1u);
  EXPECT_EQ(within.flags[0],
            "weights (571 MiB) within 2x the LLC (300 MiB): part of them can stay cached between "
            "tokens, so the roofline % can read high");
  BenchRow within_high = judged(571 * kMiB, 300 * kMiB, 104.4);
  EXPECT_TRUE(within_high.roofline_applies);
  ASSERT_EQ(within_high.flags.size(), 1u);
  EXPECT_NE(within_high.flags[0].find("can read high (here 104%)"), std::string::npos);
  // 2.05 GiB (TinyLlama F16): a plain DRAM stream; only a % above 100 is flagged, as the probe's.
  EXPECT_TRUE(judged(2100 * kMiB, 300 * kMiB, 85.0).flags.empty());
  BenchRow above = judged(2100 * kMiB, 300 * kMiB, 112.0);
  EXPECT_TRUE(above.roofline_applies);
  ASSERT_EQ(above.flags.size(), 1u);
  EXPECT_EQ(
      above.flags[0].rfind("112% of the measured roofline: the bandwidth probe under-read", 0), 0u)
      << above.flags[0];
  // Attention's flops bound that ceiling (below the bandwidth-only one): either probe may have
  // under-read.
  BenchRow flops_bound;
  flops_bound.roofline_pct = 112.0;
  flops_bound.ceiling_tok_s = 40;
  flops_bound.bandwidth_ceiling_tok_s = 50;
  flag_roofline(flops_bound, 2100 * kMiB, 300 * kMiB);
  ASSERT_EQ(flops_bound.flags.size(), 1u);
  EXPECT_EQ(flops_bound.flags[0].rfind("112% of the measured roofline: the bandwidth or FMA probe "
                                       "under-read",
                                       0),
            0u)
      << flops_bound.flags[0];
  // An unknown LLC (0): every row is judged as streamed.
  EXPECT_TRUE(judged(100 * kMiB, 0, 90.0).roofline_applies);
}

TEST(BenchStats, EachRepIsHeldAgainstTheProbesEitherSideOfIt) {
  // 1e9 bytes a token: a ceiling of (a + b) / 2 GB/s is (a + b) / 2 tokens a second.
  BenchRow row;
  row.tok_s = {15, 20, 10};
  row.bandwidth_before_gbs = 10;
  row.bandwidth_between_gbs = {20, 20};
  row.bandwidth_after_gbs = 10;
  pair_reps_with_probes(row, 1'000'000'000);
  ASSERT_EQ(row.rep_roofline_pct.size(), 3u);
  EXPECT_NEAR(row.rep_roofline_pct[0], 100.0, 1e-9);        // 15 of (10 + 20) / 2
  EXPECT_NEAR(row.rep_roofline_pct[1], 100.0, 1e-9);        // 20 of 20
  EXPECT_NEAR(row.rep_roofline_pct[2], 100.0 / 1.5, 1e-9);  // 10 of 15
  EXPECT_NEAR(row.roofline_rep_p50_pct, 100.0, 1e-9);
  // Two reps: the median is the mean of the two.
  row.tok_s = {12, 20};
  row.bandwidth_between_gbs = {20};
  row.bandwidth_after_gbs = 30;
  pair_reps_with_probes(row, 1'000'000'000);
  ASSERT_EQ(row.rep_roofline_pct.size(), 2u);
  EXPECT_NEAR(row.rep_roofline_pct[0], 80.0, 1e-9);  // 12 of 15
  EXPECT_NEAR(row.rep_roofline_pct[1], 80.0, 1e-9);  // 20 of 25
  EXPECT_NEAR(row.roofline_rep_p50_pct, 80.0, 1e-9);
  // A probe missing or not measured: nothing, rather than a rep against the wrong probe.
  row.bandwidth_between_gbs.clear();
  pair_reps_with_probes(row, 1'000'000'000);
  EXPECT_TRUE(row.rep_roofline_pct.empty());
  EXPECT_EQ(row.roofline_rep_p50_pct, 0.0);
  row.bandwidth_between_gbs = {0};
  pair_reps_with_probes(row, 1'000'000'000);
  EXPECT_TRUE(row.rep_roofline_pct.empty());
}

TEST(BenchRoofline, KvBytesPerTokenAreTheKeysEachLayerSees) {
  // Hand-computed: 2 layers, 2 KV heads of 4 dims, F16: a K or V row is 16 bytes. Tokens at
  // positions 3 and 4 see 4 and 5 keys in each layer: (4 + 5) x 2 layers x (K + V) x 16 bytes
  // over 2 tokens = 288.
  loader::ModelConfig c;
  c.n_layers = 2;
  c.n_kv_heads = 2;
  c.head_dim = 4;
  EXPECT_EQ(kv_read_bytes_per_token(c, ops::WeightType::F16, 3, 2), 288);
  EXPECT_EQ(kv_read_bytes_per_token(c, ops::WeightType::F32, 3, 2), 576);
  EXPECT_EQ(kv_read_bytes_per_token(c, ops::WeightType::F16, 3, 0), 0);
  // One token at position 0 sees itself: 1 x 2 x 2 x 16.
  EXPECT_EQ(kv_read_bytes_per_token(c, ops::WeightType::F16, 0, 1), 64);
  // A sliding window of 4 on every layer but each 2nd (gemma3's pattern, here 2): layer 0 sees
  // min(pos + 1, 4) = 4 and 4, layer 1 all 4 and 5: 17 keys x 2 x 16 / 2 = 272.
  c.sliding_window = 4;
  c.sliding_window_pattern = 2;
  EXPECT_EQ(kv_read_bytes_per_token(c, ops::WeightType::F16, 3, 2), 272);
  // Q8_0 rows: 34 bytes per 32 elements (head_dim 32, one KV head): 1 position, 1 layer.
  loader::ModelConfig q;
  q.n_layers = 1;
  q.n_kv_heads = 1;
  q.head_dim = 32;
  EXPECT_EQ(kv_read_bytes_per_token(q, ops::WeightType::Q8_0, 0, 1), 2 * 34);
}

TEST(BenchRoofline, AttentionFlopsPerTokenAreFourHeadDimsPerKeyAndQueryHead) {
  // Hand-computed: 2 layers, 4 query heads over 2 KV heads of 4 dims. Tokens at positions 3 and
  // 4 see 4 and 5 keys in each layer: (4 + 5) x 2 layers = 18 keys, each 4 heads x (4 dims of
  // Q.K + 4 of p.V) x 2 flops = 64 flops: 1152 over 2 tokens = 576.
  loader::ModelConfig c;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 4;
  EXPECT_EQ(attention_flops_per_token(c, ops::WeightType::F16, 3, 2), 576);
  EXPECT_EQ(attention_flops_per_token(c, ops::WeightType::F32, 3, 2), 576);  // flops, not bytes
  EXPECT_EQ(attention_flops_per_token(c, ops::WeightType::F16, 3, 0), 0);
  // A Q8_0 cache's scores are integer dot products: no fp32 flops counted.
  EXPECT_EQ(attention_flops_per_token(c, ops::WeightType::Q8_0, 3, 2), 0);
  // The sliding window of the KV bytes test: 17 keys x 64 / 2 = 544.
  c.sliding_window = 4;
  c.sliding_window_pattern = 2;
  EXPECT_EQ(attention_flops_per_token(c, ops::WeightType::F16, 3, 2), 544);
}

TEST(BenchTable, TheTypeIsTheFilesAsLlamaBenchNamesIt) {
  // A Q4_K_M file: most matmul bytes Q4_K, the file's type "Q4_K - Medium" (llama-bench c392e50
  // on a llama-quantize Q4_K_M file: model_type "llama 1B Q4_K - Medium").
  BenchResult r;
  r.arch = "llama";
  r.type = "q4_K";
  r.file_type = "Q4_K - Medium";
  r.params = 1'100'000'000;
  BenchRow row;
  row.test = "tg32";
  row.threads = 1;
  row.tok_s = {50};
  row.mean = 50;
  r.rows.push_back(row);
  EXPECT_NE(render_bench_markdown_row(r, row).find("| Q4_K - Medium | 1 |"), std::string::npos)
      << render_bench_markdown_row(r, row);
  EXPECT_NE(render_bench_markdown_header(r).find("(llama, Q4_K - Medium, "), std::string::npos)
      << render_bench_markdown_header(r);
  const nlohmann::json j = bench_json(r);
  EXPECT_EQ(j["model"]["type"], "q4_K");
  EXPECT_EQ(j["model"]["file_type"], "Q4_K - Medium");
  // Without the size class (a result built by hand) model_type carries the parameter count;
  // with it, llama-bench's key exactly.
  EXPECT_NE(render_bench_csv(r).find("llama 1.10 B Q4_K - Medium"), std::string::npos)
      << render_bench_csv(r);
  r.size_class = "1B";
  EXPECT_EQ(llama_bench_row(r, row)["model_type"], "llama 1B Q4_K - Medium");
  EXPECT_EQ(render_bench_markdown_row(r, row).rfind("| llama 1B | ", 0), 0u)
      << render_bench_markdown_row(r, row);
  EXPECT_EQ(bench_json(r)["model"]["size_class"], "1B");
  // A result without the file's type shows the main matmul type.
  r.file_type.clear();
  EXPECT_NE(render_bench_markdown_row(r, row).find("| q4_K | 1 |"), std::string::npos);
}

TEST(BenchRoofline, TheCellSaysWhenAttentionFlopsBindAndTheBandwidthOnlyFigure) {
  BenchResult r;
  BenchRow row;
  row.test = "tg64 @ d4096";
  row.tok_s = {30};
  row.mean = 30;
  row.bandwidth_gbs = 30;
  row.ceiling_tok_s = 37.5;  // 80 %
  row.roofline_pct = 80;
  row.bandwidth_ceiling_tok_s = 46.2;  // 65 %
  row.fma_gflops = 88.9;
  row.fma_method = "best of 2 multiply-add loops: avx2 fma x12 accumulators per thread";
  r.rows.push_back(row);
  const std::string line = render_bench_markdown_row(r, row);
  EXPECT_NE(line.find("80% of 37.5 t/s (30.0 GB/s, attention at 89 GFLOP/s; 65% of 46.2 t/s by "
                      "bandwidth alone)"),
            std::string::npos)
      << line;
  EXPECT_NE(render_bench_markdown(r).find("multiply-add rate (the roofline's attention flops): "
                                          "best of 2 multiply-add loops"),
            std::string::npos);
  // Bytes bind (the two ceilings agree): the plain cell.
  row.bandwidth_ceiling_tok_s = 37.5;
  EXPECT_NE(render_bench_markdown_row(r, row).find("80% of 37.5 t/s (30.0 GB/s) |"),
            std::string::npos)
      << render_bench_markdown_row(r, row);
}

TEST(BenchStats, EachRepsCeilingCountsTheAttentionFlops) {
  // 1e9 weight bytes, no KV bytes, 1e9 flops at 10 GFLOP/s (0.1 s): at 10 GB/s on either side a
  // token takes 0.1 + 0.1 s, a rate of 5 is 100 %.
  BenchRow row;
  row.tok_s = {5, 4};
  row.bandwidth_before_gbs = 10;
  row.bandwidth_between_gbs = {10};
  row.bandwidth_after_gbs = 10;
  row.attention_flops_per_token = 1'000'000'000;
  row.fma_gflops = 10;
  pair_reps_with_probes(row, 1'000'000'000);
  ASSERT_EQ(row.rep_roofline_pct.size(), 2u);
  EXPECT_NEAR(row.rep_roofline_pct[0], 100.0, 1e-9);
  EXPECT_NEAR(row.rep_roofline_pct[1], 80.0, 1e-9);
}

TEST(BenchRun, EveryCombinationGivesOneRowWithConsistentFigures) {
  const Model model = Model::load(tiny_model());
  BenchOptions o;
  o.n_prompt = {16};
  o.n_gen = {8, 4};
  o.threads = {1, 2};
  o.reps = 2;
  o.bandwidth_bytes = size_t{64} << 20;
  const BenchResult r = run_bench(model, o);
  ASSERT_EQ(r.rows.size(), 6u);  // (pp16, tg8, tg4) x (1, 2 threads)
  EXPECT_EQ(r.arch, "llama");
  EXPECT_EQ(r.type, "q8_0");
  EXPECT_EQ(r.file_type, "Q8_0");  // general.file_type 7, as llama-bench names it
  EXPECT_EQ(r.matmul_bytes_per_token, model.weights().matmul_bytes);
  EXPECT_NE(r.kernel_ceiling_method.find("slice of its first matrix"), std::string::npos)
      << r.kernel_ceiling_method;
  for (const BenchRow& row : r.rows) {
    SCOPED_TRACE(row.test);
    ASSERT_EQ(row.tok_s.size(), 2u);
    for (double v : row.tok_s) EXPECT_GT(v, 0.0);
    EXPECT_NEAR(row.mean, (row.tok_s[0] + row.tok_s[1]) / 2, 1e-9 * row.mean);
    EXPECT_GT(row.freq_mean_mhz, 100.0);
    EXPECT_LE(row.freq_min_mhz, row.freq_mean_mhz);
    EXPECT_GE(row.freq_max_mhz, row.freq_mean_mhz);
    if (row.n_gen > 0) {
      ASSERT_GT(row.bandwidth_gbs, 0.0);
      // The roofline is the search's best loop measured again around the row's timed reps.
      ASSERT_GT(row.bandwidth_before_gbs, 0.0);
      ASSERT_GT(row.bandwidth_after_gbs, 0.0);
      EXPECT_DOUBLE_EQ(row.bandwidth_gbs, (row.bandwidth_before_gbs + row.bandwidth_after_gbs) / 2);
      EXPECT_NE(row.bandwidth_method.find("just before and just after"), std::string::npos)
          << row.bandwidth_method;
      // The ceiling counts the KV-cache bytes the timed tokens' attention reads (positions 1..n
      // after the BOS decode) next to the weights.
      EXPECT_EQ(row.kv_bytes_per_token,
                kv_read_bytes_per_token(model.config(), o.kv_type, 1, row.n_gen));
      EXPECT_GT(row.kv_bytes_per_token, 0);
      EXPECT_NEAR(row.bandwidth_ceiling_tok_s,
                  row.bandwidth_gbs * 1e9 /
                      static_cast<double>(r.matmul_bytes_per_token + row.kv_bytes_per_token),
                  1e-6 * row.bandwidth_ceiling_tok_s);
      // ... and the fp32 flops of its attention against the placement's measured FMA rate.
      EXPECT_EQ(row.attention_flops_per_token,
                attention_flops_per_token(model.config(), o.kv_type, 1, row.n_gen));
      EXPECT_GT(row.attention_flops_per_token, 0);
      EXPECT_GT(row.fma_gflops, 0.0);
      EXPECT_NE(row.fma_method.find("multiply-add loops"), std::string::npos) << row.fma_method;
      EXPECT_NEAR(row.ceiling_tok_s,
                  eventlog::decode_ceiling_tok_s(row.bandwidth_gbs, r.matmul_bytes_per_token,
                                                 row.kv_bytes_per_token,
                                                 row.attention_flops_per_token, row.fma_gflops),
                  1e-9 * row.ceiling_tok_s);
      EXPECT_LE(row.ceiling_tok_s, row.bandwidth_ceiling_tok_s);
      EXPECT_NEAR(row.roofline_pct, 100 * row.mean / row.ceiling_tok_s, 1e-9);
      // The kernels' ceiling from cache, measured on the row's own threads once per placement:
      // the tg rows of one thread count share it, and the result names each distinct one.
      ASSERT_GT(row.kernel_ceiling_tok_s, 0.0);
      EXPECT_NEAR(row.kernel_pct, 100 * row.mean / row.kernel_ceiling_tok_s, 1e-9);
      EXPECT_NE(row.kernel_ceiling_method.find(fmt::format("on the row's {} thread{} (pin {})",
                                                           row.threads, row.threads > 1 ? "s" : "",
                                                           row.pin)),
                std::string::npos)
          << row.kernel_ceiling_method;
      EXPECT_NE(r.kernel_ceiling_method.find(row.kernel_ceiling_method), std::string::npos);
      for (const BenchRow& other : r.rows) {
        if (other.n_gen > 0 && other.threads == row.threads && other.cpus == row.cpus) {
          EXPECT_EQ(other.kernel_ceiling_tok_s, row.kernel_ceiling_tok_s);
          EXPECT_EQ(other.kernel_ceiling_method, row.kernel_ceiling_method);
        }
      }
      // The cache the LLC rule used: measured from 4 MiB up against the row's DRAM figure.
      EXPECT_NE(row.llc_method.find("re-read working sets at 1.25x the DRAM bandwidth"),
                std::string::npos)
          << row.llc_method;
      EXPECT_NE(row.llc_method.find("the topology reports"), std::string::npos) << row.llc_method;
      EXPECT_GE(row.llc_bytes, 0);
      // Every decoded token of both reps timed, and each rep's tokens add up to its rate.
      ASSERT_EQ(row.token_s.size(), static_cast<size_t>(2 * row.n_gen));
      for (size_t rep = 0; rep < 2; ++rep) {
        double sum = 0;
        for (int64_t i = 0; i < row.n_gen; ++i) sum += row.token_s[rep * row.n_gen + i];
        EXPECT_NEAR(static_cast<double>(row.n_gen) / sum, row.tok_s[rep], 0.01 * row.tok_s[rep]);
      }
      const auto [fastest, slowest] = std::minmax_element(row.token_s.begin(), row.token_s.end());
      EXPECT_LE(row.tok_s_p50, 1.0 / *fastest);
      EXPECT_GE(row.tok_s_p50, 1.0 / *slowest);
      EXPECT_NEAR(row.roofline_p50_pct, 100 * row.tok_s_p50 / row.ceiling_tok_s, 1e-9);
      // A probe between the two timed reps, so each rep has its own ceiling: the mean of the
      // probes on either side of it.
      ASSERT_EQ(row.bandwidth_between_gbs.size(), 1u);
      EXPECT_GT(row.bandwidth_between_gbs[0], 0.0);
      ASSERT_EQ(row.rep_roofline_pct.size(), 2u);
      const auto ceiling_at = [&](double gbs) {
        return eventlog::decode_ceiling_tok_s(gbs, r.matmul_bytes_per_token, row.kv_bytes_per_token,
                                              row.attention_flops_per_token, row.fma_gflops);
      };
      EXPECT_NEAR(row.rep_roofline_pct[0],
                  100 * row.tok_s[0] /
                      ceiling_at((row.bandwidth_before_gbs + row.bandwidth_between_gbs[0]) / 2),
                  1e-9);
      EXPECT_NEAR(row.rep_roofline_pct[1],
                  100 * row.tok_s[1] /
                      ceiling_at((row.bandwidth_between_gbs[0] + row.bandwidth_after_gbs) / 2),
                  1e-9);
      const nlohmann::json j = llama_bench_row(r, row);
      EXPECT_EQ(j["pacer_roofline_rep_pct"].size(), 2u);
      EXPECT_EQ(j["pacer_bandwidth_between_gbs"].size(), 1u);
      EXPECT_EQ(j["pacer_ceiling_tok_s"].get<double>(), row.ceiling_tok_s);
      EXPECT_EQ(j["pacer_bandwidth_ceiling_tok_s"].get<double>(), row.bandwidth_ceiling_tok_s);
      EXPECT_EQ(j["pacer_attention_flops_per_token"].get<int64_t>(), row.attention_flops_per_token);
      EXPECT_EQ(j["pacer_fma_gflops"].get<double>(), row.fma_gflops);
      EXPECT_EQ(j["pacer_fma_method"].get<std::string>(), row.fma_method);
      // The bench record (event log, -o json) carries them too.
      const auto at = static_cast<size_t>(&row - r.rows.data());
      const nlohmann::json rec = bench_json(r)["rows"][at];
      EXPECT_EQ(rec["roofline_rep_pct"].get<std::vector<double>>(), row.rep_roofline_pct);
      EXPECT_EQ(rec["bandwidth_between_gbs"].get<std::vector<double>>(), row.bandwidth_between_gbs);
      EXPECT_EQ(rec["roofline_rep_p50_pct"].get<double>(), row.roofline_rep_p50_pct);
      EXPECT_EQ(rec["kv_bytes_per_token"].get<int64_t>(), row.kv_bytes_per_token);
      EXPECT_EQ(rec["attention_flops_per_token"].get<int64_t>(), row.attention_flops_per_token);
      EXPECT_EQ(rec["fma_gflops"].get<double>(), row.fma_gflops);
      EXPECT_EQ(rec["bandwidth_ceiling_tok_s"].get<double>(), row.bandwidth_ceiling_tok_s);
    } else {
      EXPECT_EQ(row.ceiling_tok_s, 0.0);
      EXPECT_EQ(row.bandwidth_before_gbs, 0.0);  // prefill rows have no roofline
      EXPECT_TRUE(row.token_s.empty());
      EXPECT_EQ(row.tok_s_p50, 0.0);
    }
  }
  EXPECT_EQ(r.rows[0].test, "pp16");
  EXPECT_EQ(r.rows[1].test, "tg8");
  EXPECT_EQ(r.rows[0].threads, 1);
  EXPECT_EQ(r.rows[3].threads, 2);
  // One thread has no idle worker to prefetch; two do unless the environment turned it off.
  const char* idle_env = std::getenv("PACER_IDLE_PREFETCH");
  const bool idle_on = idle_env == nullptr || std::string(idle_env) != "0";
  EXPECT_FALSE(r.rows[0].idle_prefetch);
  EXPECT_EQ(r.rows[3].idle_prefetch, idle_on);

  // Renderers: one markdown table line and one CSV line per row; JSONL parses as bench events.
  const std::string md = render_bench_markdown(r);
  EXPECT_NE(md.find("| tg8 |"), std::string::npos);
  // The Q8_0 weights' layout is said: repacked where the interleaved kernels run.
  EXPECT_EQ(r.repacked_matrices, model.repacked_matrices());
  EXPECT_EQ(md.find("matmul matrices repacked") != std::string::npos, r.repacked_matrices > 0);
  EXPECT_EQ(bench_json(r)["model"]["repacked_matrices"], r.repacked_matrices);
  // Every 16-row GEMV's plan, in the JSON and (with repacked weights) in the footer.
  const auto choices = ops::KernelSet::for_isa(ops::detect_isa()).x16_gemv_choices();
  ASSERT_EQ(r.x16_gemv.size(), choices.size());
  const nlohmann::json bj = bench_json(r);
  for (const ops::X16GemvChoice& c : choices) {
    const nlohmann::json& j = bj.at("x16_gemv").at(std::string(ops::type_name(c.type)));
    EXPECT_EQ(j["streams"], c.streams);
    EXPECT_EQ(j["prefetch"], c.prefetch);
    EXPECT_EQ(j["page_touch"], c.page_touch);
    EXPECT_EQ(j.value("run_bytes", int64_t{0}), c.run_bytes);
    EXPECT_EQ(j.value("kernel", std::string()), c.avx2_kernel ? "avx2" : "");
  }
  EXPECT_EQ(md.find("16-row GEMVs: q4_0") != std::string::npos, r.repacked_matrices > 0);
  // The GEMVs that prefetch twice as far in 1-thread rows (KernelSet::for_workers(1)).
  std::vector<ops::WeightType> far;
  for (const ops::X16GemvChoice& c :
       ops::KernelSet::for_isa(ops::detect_isa()).for_workers(1).x16_gemv_choices()) {
    if (c.prefetch_far) far.push_back(c.type);
  }
  EXPECT_EQ(r.x16_prefetch_far_one_worker, far);
  EXPECT_EQ(
      md.find("in 1-thread rows q4_0 prefetch and touch pages twice as far") != std::string::npos,
      r.repacked_matrices > 0 && !far.empty());
  // The footer groups the types that share a plan, in choice order.
  BenchResult plans;
  plans.repacked_matrices = 1;
  plans.x16_gemv = {{ops::WeightType::Q4_0, 1, true, 8192},
                    {ops::WeightType::Q4_K, 2, true, 0},
                    {ops::WeightType::Q5_K, 2, false, 0, false, 2304, true},
                    {ops::WeightType::Q6_K, 1, true, 8192},
                    {ops::WeightType::F16, 4, false, 100},
                    {ops::WeightType::Q8_0, 2, false, 0, false, 4352}};
  EXPECT_NE(render_bench_markdown_footer(plans).find(
                "16-row GEMVs: q4_0 q6_K: 1 stream, prefetch, page touch 8 KiB ahead; q4_K: 2 "
                "streams, prefetch; q5_K: 2 streams, runs of 2304 B, the AVX2 kernel; f16: 4 "
                "streams, page touch 100 B ahead; q8_0: 2 streams, runs of 4352 B (the tables"),
            std::string::npos)
      << render_bench_markdown_footer(plans);
  EXPECT_EQ(md.find("idle prefetch: on") != std::string::npos, idle_on);
  EXPECT_NE(md.find("cache (what the roofline's LLC rule uses): "), std::string::npos);
  EXPECT_EQ(bench_json(r)["rows"][1]["llc_method"], r.rows[1].llc_method);
  EXPECT_EQ(bench_json(r)["rows"][1]["llc_bytes"], r.rows[1].llc_bytes);
  EXPECT_EQ(llama_bench_row(r, r.rows[3])["pacer_idle_prefetch"], idle_on);
  // The csv/json/jsonl/sql rows carry the same roofline inputs as the footer.
  EXPECT_EQ(llama_bench_row(r, r.rows[1])["pacer_llc_bytes"], r.rows[1].llc_bytes);
  EXPECT_EQ(llama_bench_row(r, r.rows[1])["pacer_llc_method"], r.rows[1].llc_method);
  EXPECT_EQ(llama_bench_row(r, r.rows[1])["pacer_bandwidth_method"], r.rows[1].bandwidth_method);
  const std::string csv = render_bench_csv(r);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 7);
  EXPECT_NE(csv.find(",pacer_llc_bytes,pacer_llc_method,"), std::string::npos);
  std::istringstream jl(render_bench_jsonl(r));
  std::string line;
  int n = 0;
  while (std::getline(jl, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["type"], "bench");
    EXPECT_DOUBLE_EQ(j["tok_s_mean"].get<double>(), r.rows[static_cast<size_t>(n)].mean);
    ++n;
  }
  EXPECT_EQ(n, 6);
}

TEST(BenchRun, NoisyRowsAreFlaggedWithTheReason) {
  const Model model = Model::load(tiny_model());
  BenchOptions o;
  o.n_prompt = {0};
  o.n_gen = {4};
  o.threads = {1};
  o.reps = 3;
  o.roofline = false;
  o.cv_flag = 0.0;  // any spread at all is "too noisy": the flag must appear with its reason
  const BenchResult r = run_bench(model, o);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].kernel_ceiling_tok_s, 0.0);  // no roofline: no ceiling measured either
  EXPECT_TRUE(r.kernel_ceiling_method.empty());
  ASSERT_GT(r.rows[0].cv, 0.0);
  const auto& flags = r.rows[0].flags;
  EXPECT_TRUE(std::any_of(flags.begin(), flags.end(), [](const std::string& f) {
    return f.rfind("cv ", 0) == 0;
  })) << ::testing::PrintToString(flags);
}

// One tg4 row at 1 thread, `reps` timed reps, with a small (8 MiB) bandwidth probe.
BenchOptions one_tg4_row(int reps) {
  BenchOptions o;
  o.n_prompt = {0};
  o.n_gen = {4};
  o.threads = {1};
  o.reps = reps;
  o.bandwidth_bytes = 8u << 20;
  return o;
}

TEST(BenchRun, ABandwidthThatMovedAcrossARowIsFlagged) {
  const Model model = Model::load(tiny_model());
  BenchOptions o = one_tg4_row(2);
  auto drift_flags = [](const BenchRow& row) {
    std::string out;
    for (const auto& f : row.flags) {
      if (f.find("across the row") != std::string::npos) out += f + "\n";
    }
    return out;
  };
  o.bandwidth_drift_flag = -1;  // any before/after pair counts as moved: the flag and its figures
  BenchResult r = run_bench(model, o);
  ASSERT_EQ(r.rows.size(), 1u);
  const BenchRow& moved = r.rows[0];
  const std::string flag = drift_flags(moved);
  EXPECT_NE(flag.find(fmt::format("{:.1f} -> {:.1f} GB/s", moved.bandwidth_before_gbs,
                                  moved.bandwidth_after_gbs)),
            std::string::npos)
      << flag;
  // With two reps, the flag also gives each rep's % against the probes either side of it.
  ASSERT_EQ(moved.rep_roofline_pct.size(), 2u);
  EXPECT_NE(flag.find(fmt::format("each rep against the probes just before and after it: {:.0f}% "
                                  "(median of {:.0f}%, {:.0f}%)",
                                  moved.roofline_rep_p50_pct, moved.rep_roofline_pct[0],
                                  moved.rep_roofline_pct[1])),
            std::string::npos)
      << flag;
  o.bandwidth_drift_flag = 1e9;  // nothing counts as moved
  r = run_bench(model, o);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(drift_flags(r.rows[0]), "");
}

TEST(BenchRun, CacheResidentModelsAndSingleRepsAreFlaggedNotOk) {
  // The tiny model's weights (~0.5 MB) fit any last-level cache: its decode can beat the DRAM
  // read bandwidth, which must read as "roofline does not apply", never as a healthy 129%.
  const Model model = Model::load(tiny_model());
  const BenchResult r = run_bench(model, one_tg4_row(1));
  ASSERT_EQ(r.rows.size(), 1u);
  const BenchRow& row = r.rows[0];
  EXPECT_GT(row.bandwidth_gbs, 0.0);
  EXPECT_NE(row.bandwidth_method.find("best of"), std::string::npos) << row.bandwidth_method;
  std::string flags;
  for (const auto& f : row.flags) flags += f + "\n";
  if (Topology::detect().caches.empty()) GTEST_SKIP() << "no cache sizes known here";
  EXPECT_FALSE(row.roofline_applies);
  EXPECT_NE(flags.find("the DRAM roofline does not apply"), std::string::npos) << flags;
  EXPECT_NE(flags.find("1 rep: no CV"), std::string::npos) << flags;
  EXPECT_NE(render_bench_markdown(r).find("n/a ("), std::string::npos);
}

TEST(BenchRun, DepthRunsEachTestAfterThatManyTokens) {
  const Model model = Model::load(tiny_model());
  BenchOptions o;
  o.n_prompt = {8};
  o.n_gen = {4};
  o.n_depth = {0, 100};
  o.threads = {1};
  o.reps = 2;
  o.roofline = false;
  const auto dir = std::filesystem::temp_directory_path() / "pacer-bench-depth";
  std::filesystem::remove_all(dir);
  o.events_dir = dir.string();
  const BenchResult r = run_bench(model, o);
  ASSERT_EQ(r.rows.size(), 4u);
  EXPECT_EQ(r.rows[2].test, "pp8 @ d100");
  EXPECT_EQ(r.rows[3].test, "tg4 @ d100");
  EXPECT_EQ(r.rows[3].n_depth, 100);
  // The recorded tg rep at depth 100 decodes positions 100..104: its log's decode steps say so.
  // Each decode step's attention ops say what they read of the F16 cache: the K and V rows of
  // every position up to the new token's, in each layer.
  const loader::ModelConfig& c = model.config();
  const int64_t kv_row = c.n_kv_heads * c.head_dim * 2;
  std::ifstream log(r.rows[3].events_path);
  std::string line;
  int64_t max_past = 0, decode_steps = 0;
  std::map<int64_t, int64_t> kv_bytes;  // step -> sum of its attention ops' kv_bytes
  std::map<int64_t, int64_t> flops;     // step -> sum of their attention_flops
  while (std::getline(log, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.value("type", "") == "op" && j.value("name", "") == "attention" &&
        j.value("phase", "") == "decode") {
      kv_bytes[j["step"].get<int64_t>()] += j.value("kv_bytes", int64_t{0});
      flops[j["step"].get<int64_t>()] += j.value("attention_flops", int64_t{0});
    }
    if (j.value("type", "") == "step" && j.value("phase", "") == "decode") {
      const int64_t n_past = j.value("n_past", int64_t{0});
      max_past = std::max(max_past, n_past);
      ++decode_steps;
      EXPECT_EQ(kv_bytes[j["step"].get<int64_t>()], c.n_layers * n_past * 2 * kv_row)
          << "step " << j["step"] << " at n_past " << n_past;
      // ... and their fp32 flops: per key and query head, head_dim of Q.K and of p.V, 2 each.
      EXPECT_EQ(flops[j["step"].get<int64_t>()], c.n_layers * n_past * 4 * c.n_heads * c.head_dim)
          << "step " << j["step"] << " at n_past " << n_past;
    }
  }
  EXPECT_EQ(decode_steps, 4);
  EXPECT_EQ(max_past, 100 + 4);
  // The recorded pp rep at depth 100 is a whole log too: header, the depth's prefill and the
  // timed one (108 tokens in all), footer.
  std::ifstream pp_log(r.rows[2].events_path);
  std::vector<nlohmann::json> records;
  while (std::getline(pp_log, line)) records.push_back(nlohmann::json::parse(line));
  ASSERT_FALSE(records.empty()) << r.rows[2].events_path << " is empty";
  EXPECT_EQ(records.front()["type"], "header");
  EXPECT_EQ(records.front()["bench_test"], "pp8 @ d100");
  EXPECT_EQ(records.back()["type"], "footer");
  int64_t prefill_tokens = 0;
  for (const auto& j : records) {
    if (j.value("type", "") == "step" && j.value("phase", "") == "prefill") {
      prefill_tokens += j.value("n_tokens", int64_t{0});
    }
  }
  EXPECT_EQ(prefill_tokens, 100 + 8);
  std::filesystem::remove_all(dir);
  o.n_depth = {-1};
  EXPECT_THROW(run_bench(model, o), std::invalid_argument);
}

TEST(BenchRun, RecordsOneMoreRepOfEachRowAsACompleteLog) {
  const Model model = Model::load(tiny_model());
  const auto dir = std::filesystem::temp_directory_path() / "pacer-bench-events";
  std::filesystem::remove_all(dir);
  BenchOptions o;
  o.n_prompt = {5};
  o.n_gen = {6};
  o.threads = {1};
  o.reps = 2;
  o.roofline = false;
  o.events_dir = dir.string();
  const BenchResult r = run_bench(model, o);
  ASSERT_EQ(r.rows.size(), 2u);  // pp5, then tg6
  for (const BenchRow& row : r.rows) {
    ASSERT_TRUE(std::filesystem::exists(row.events_path)) << row.events_path;
    std::ifstream in(row.events_path);
    std::string line, first, last;
    int decode_steps = 0, prefill_tokens = 0;
    while (std::getline(in, line)) {
      if (first.empty()) first = line;
      last = line;
      auto j = nlohmann::json::parse(line);
      if (j["type"] == "step" && j["phase"] == "decode") ++decode_steps;
      if (j["type"] == "step" && j["phase"] == "prefill")
        prefill_tokens += j["n_tokens"].get<int>();
    }
    ASSERT_FALSE(first.empty()) << row.events_path << " is empty";
    EXPECT_EQ(nlohmann::json::parse(first)["type"], "header");
    EXPECT_EQ(nlohmann::json::parse(first)["command"], "bench");
    EXPECT_EQ(nlohmann::json::parse(first)["bench_test"], row.test);
    EXPECT_EQ(nlohmann::json::parse(last)["type"], "footer");
    if (row.test == "pp5") {
      EXPECT_EQ(prefill_tokens, 5);  // the random prompt, not a tokenized text
      EXPECT_EQ(decode_steps, 0);
    } else {
      EXPECT_EQ(decode_steps, 6);
    }
    // The recorded rep comes on top of the 2 timed ones and is not a sample: both samples ran
    // the unrecorded path, which times each of its 6 decode tokens.
    EXPECT_EQ(row.tok_s.size(), 2u) << row.test;
    if (row.test == "tg6") {
      EXPECT_EQ(row.token_s.size(), 12u);
    }
  }
}

// A recorded tg row's header carries what its roofline was measured with: the bandwidth just
// before the row and the placement's multiply-add rate, so the report's decode roofline is the
// row's (eventlog/roofline.h).
TEST(BenchRun, ARecordedRowsHeaderCarriesItsBandwidthAndFmaRate) {
  const Model model = Model::load(tiny_model());
  const auto dir = std::filesystem::temp_directory_path() / "pacer-bench-events-roofline";
  std::filesystem::remove_all(dir);
  BenchOptions o;
  o.n_prompt = {0};
  o.n_gen = {3};
  o.threads = {1};
  o.reps = 1;
  o.bandwidth_bytes = size_t{16} << 20;
  o.events_dir = dir.string();
  const BenchResult r = run_bench(model, o);
  ASSERT_EQ(r.rows.size(), 1u);
  const BenchRow& row = r.rows[0];
  std::ifstream in(row.events_path);
  std::string first;
  ASSERT_TRUE(std::getline(in, first)) << row.events_path;
  const auto h = nlohmann::json::parse(first);
  EXPECT_EQ(h["bandwidth_gbs"].get<double>(), row.bandwidth_before_gbs);
  ASSERT_GT(row.fma_gflops, 0.0);
  EXPECT_EQ(h["fma_gflops"].get<double>(), row.fma_gflops);
  EXPECT_EQ(h["fma_method"].get<std::string>(), row.fma_method);
}

TEST(BenchRun, RecordingOverheadAlternatesOffAndOnRuns) {
  const Model model = Model::load(tiny_model());
  const auto log = std::filesystem::temp_directory_path() / "pacer-bench-overhead.jsonl";
  std::filesystem::remove(log);
  BenchOptions o;
  o.n_prompt = {0};
  o.n_gen = {0, 5};  // the 0 is skipped
  o.threads = {1};
  o.warmup = false;
  const std::vector<OverheadRow> rows = measure_recording_overhead(model, o, 3, log.string());
  ASSERT_EQ(rows.size(), 1u);
  const OverheadRow& r = rows[0];
  EXPECT_EQ(r.test, "tg5");
  EXPECT_EQ(r.threads, 1);
  ASSERT_EQ(r.off.size(), 3u);
  ASSERT_EQ(r.on.size(), 3u);
  std::vector<double> on = r.on, off = r.off;
  std::sort(on.begin(), on.end());
  std::sort(off.begin(), off.end());
  EXPECT_EQ(r.on_median, on[1]);
  EXPECT_EQ(r.off_median, off[1]);
  EXPECT_DOUBLE_EQ(r.ratio, on[1] / off[1]);
  ASSERT_EQ(r.pair_ratios.size(), 3u);
  std::vector<double> pairs = {r.on[0] / r.off[0], r.on[1] / r.off[1], r.on[2] / r.off[2]};
  std::sort(pairs.begin(), pairs.end());
  EXPECT_DOUBLE_EQ(r.pair_ratio_median, pairs[1]);
  // The recorded runs really recorded: the log holds the last one, complete, with 5 decode steps.
  std::ifstream in(log);
  std::string line, first, last;
  int decode_steps = 0;
  while (std::getline(in, line)) {
    if (first.empty()) first = line;
    last = line;
    const auto j = nlohmann::json::parse(line);
    if (j["type"] == "step" && j["phase"] == "decode") ++decode_steps;
  }
  std::filesystem::remove(log);
  EXPECT_EQ(nlohmann::json::parse(first)["overhead_run"], true);
  EXPECT_EQ(nlohmann::json::parse(last)["type"], "footer");
  EXPECT_EQ(decode_steps, 5);
  const std::string md = render_overhead_markdown(rows);
  EXPECT_NE(md.find("| tg5 | 1 | none | 3+3 |"), std::string::npos) << md;
  EXPECT_THROW(measure_recording_overhead(model, o, 0, log.string()), std::invalid_argument);
}

TEST(BenchRun, RejectsAnEmptyTestList) {
  const Model model = Model::load(tiny_model());
  BenchOptions o;
  o.n_prompt = {0};
  o.n_gen = {0};
  EXPECT_THROW(run_bench(model, o), std::invalid_argument);
}

}  // namespace
}  // namespace pacer::runtime
