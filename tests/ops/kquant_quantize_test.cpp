// quantize_row for Q4_K and Q6_K: pacer's own quantizers (not byte-identical to ggml's, which the
// format does not require). What they must guarantee, checked on several kinds of data:
//
// 1. Nearest level: every element decodes to the level of its (sub-)block's final grid that is
//    nearest to it (up to float rounding of the division that picks it).
// 2. A provable RMS bound per sub-block, derived from the quantizer's construction:
//    Q4_K, sub-block j (32 elements), lo = min(0, min x), hi = max x, d and dmin read back from
//    the block:
//        rms_j <= (hi - lo) / 30 + dmin / 2 + 7.5 d
//      The search keeps the min-max grid (step s = (hi-lo)/15 from lo, every element within s/2)
//      as a candidate, so the chosen grid's rms is at most s/2 = (hi-lo)/30. Coding scale and
//      min in 6 bits moves the step by at most d/2 and the offset by at most dmin/2, so each of
//      the 16 levels moves by at most dmin/2 + 15 d/2; re-rounding to the final grid can only
//      do better than keeping the old levels (triangle inequality on the rms).
//    Q6_K, group g (16 elements):
//        rms_g <= max|x| / 32 + 34 |d|
//      The grid with the largest element on level -32 is a candidate (every element within one
//      step |s| = max|x|/32); the int8 code moves the step by at most |d|/2, or ~1.06|d| for the
//      one group clamped from +128 to 127 (d is fp16-rounded), times |level| <= 32.
//    Both hold while d stays in fp16's normal range (as for ggml's quantizers).
// 3. ggml's own limit on its test data (tests/test-quantize-fns.cpp); rms on Gaussian weights
//    within 5% of what ggml's reference quantizers achieve; and the order Q6_K < Q4_K < Q4_0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/matmul.h"
#include "tests/ops/kquant_test_util.h"
#include "tests/ops/matmul_test_util.h"

namespace pacer::ops {
namespace {

using testing::kUnitRoundoff;

// ggml tests/test-quantize-fns.cpp: RMSE-over-n of a quantize/dequantize round trip of its
// cosine test data must stay below this for every 4+ bit type.
constexpr float kGgmlMaxQuantizationTotalError = 0.002f;

// Float slack of the bounds: the quantizer and dequantizer round a handful of times per value.
constexpr double kFloatSlackUlps = 16.0;

struct RoundTrip {
  std::vector<std::byte> q;
  std::vector<float> x, back;
};

RoundTrip round_trip(WeightType t, std::vector<float> x) {
  RoundTrip r;
  const int64_t n = static_cast<int64_t>(x.size());
  r.q.resize(static_cast<size_t>(row_bytes(t, n)));
  quantize_row(t, x.data(), r.q.data(), n);
  r.back.resize(x.size());
  dequantize_row(t, r.q.data(), r.back.data(), n);
  r.x = std::move(x);
  return r;
}

// Named data sets (n = 4 super-blocks each) covering what real weights and edge cases look like.
struct DataSet {
  std::string name;
  std::vector<float> x;
};

std::vector<DataSet> data_sets() {
  constexpr size_t n = 4 * kQK_K;
  std::vector<DataSet> out;
  out.push_back({"gaussian", testing::normal_floats(n, 1, 0.05f)});
  out.push_back({"gaussian_small", testing::normal_floats(n, 2, 0.004f)});
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> pos(n), neg(n), outlier = testing::normal_floats(n, 4, 0.02f);
  for (size_t i = 0; i < n; ++i) pos[i] = u(rng), neg[i] = -u(rng);
  for (size_t i = 0; i < n; i += 97) outlier[i] *= 60.0f;  // a few weights 60x the rest
  out.push_back({"positive", pos});
  out.push_back({"negative", neg});
  out.push_back({"outliers", outlier});
  std::vector<float> piecewise = testing::normal_floats(n, 5, 1.0f);
  for (size_t i = 0; i < 32; ++i) piecewise[i] = -0.3f;    // a constant negative sub-block
  for (size_t i = 32; i < 64; ++i) piecewise[i] = 0.7f;    // a constant positive one
  for (size_t i = 256; i < 512; ++i) piecewise[i] = 0.0f;  // an all-zero super-block
  out.push_back({"piecewise", piecewise});
  std::vector<float> cosine(n);
  for (size_t i = 0; i < n; ++i) cosine[i] = 0.1f + 2.0f * std::cos(static_cast<float>(i));
  out.push_back({"ggml_cosine", cosine});
  return out;
}

double rms_of(const RoundTrip& r, size_t begin, size_t end) {
  double sum = 0;
  for (size_t i = begin; i < end; ++i)
    sum += (double(r.back[i]) - r.x[i]) * (double(r.back[i]) - r.x[i]);
  return std::sqrt(sum / static_cast<double>(end - begin));
}

class KQuantRoundTrip : public ::testing::TestWithParam<size_t> {};

TEST_P(KQuantRoundTrip, Q4_KNearestLevelAndDerivedRmsBound) {
  const DataSet ds = data_sets()[GetParam()];
  const RoundTrip r = round_trip(WeightType::Q4_K, ds.x);
  for (size_t b = 0; b < r.x.size() / kQK_K; ++b) {
    BlockQ4_K blk;
    std::memcpy(&blk, r.q.data() + b * sizeof blk, sizeof blk);
    const double d = fp16_to_fp32(blk.d), dmin = fp16_to_fp32(blk.dmin);
    for (int j = 0; j < 8; ++j) {
      const size_t begin = b * kQK_K + 32 * j, end = begin + 32;
      int sc, m;
      testing::q4_K_scale_min(blk, j, &sc, &m);
      const float step = static_cast<float>(d) * sc, offset = static_cast<float>(dmin) * m;
      double lo = 0, hi = r.x[begin], amax = 0;
      for (size_t i = begin; i < end; ++i) {
        lo = std::min(lo, double(r.x[i]));
        hi = std::max(hi, double(r.x[i]));
        amax = std::max(amax, std::fabs(double(r.x[i])));
        double nearest = INFINITY;
        for (int q = 0; q < 16; ++q)
          nearest = std::min(nearest, std::fabs(step * q - offset - double(r.x[i])));
        const double slack =
            kFloatSlackUlps * kUnitRoundoff * (std::fabs(r.x[i]) + 15 * step + offset);
        ASSERT_LE(std::fabs(double(r.back[i]) - r.x[i]), nearest + slack)
            << ds.name << " element " << i << " is not on its nearest level";
      }
      const double bound =
          (hi - lo) / 30 + dmin / 2 + 7.5 * d + kFloatSlackUlps * kUnitRoundoff * amax;
      EXPECT_LE(rms_of(r, begin, end), bound) << ds.name << " block " << b << " sub-block " << j;
    }
  }
}

TEST_P(KQuantRoundTrip, Q6_KNearestLevelAndDerivedRmsBound) {
  const DataSet ds = data_sets()[GetParam()];
  const RoundTrip r = round_trip(WeightType::Q6_K, ds.x);
  for (size_t b = 0; b < r.x.size() / kQK_K; ++b) {
    BlockQ6_K blk;
    std::memcpy(&blk, r.q.data() + b * sizeof blk, sizeof blk);
    const double d = fp16_to_fp32(blk.d);
    for (int g = 0; g < 16; ++g) {
      const size_t begin = b * kQK_K + 16 * g, end = begin + 16;
      const float step = static_cast<float>(d) * blk.scales[g];
      double amax = 0;
      for (size_t i = begin; i < end; ++i) {
        amax = std::max(amax, std::fabs(double(r.x[i])));
        double nearest = INFINITY;
        for (int l = -32; l < 32; ++l)
          nearest = std::min(nearest, std::fabs(double(step) * l - r.x[i]));
        const double slack =
            kFloatSlackUlps * kUnitRoundoff * (std::fabs(r.x[i]) + 32 * std::fabs(step));
        ASSERT_LE(std::fabs(double(r.back[i]) - r.x[i]), nearest + slack)
            << ds.name << " element " << i << " is not on its nearest level";
      }
      const double bound = amax / 32 + 34 * std::fabs(d) + kFloatSlackUlps * kUnitRoundoff * amax;
      EXPECT_LE(rms_of(r, begin, end), bound) << ds.name << " block " << b << " group " << g;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DataSets, KQuantRoundTrip, ::testing::Range<size_t>(0, data_sets().size()),
                         [](const auto& info) { return data_sets()[info.param].name; });

TEST(KQuantQuantize, ZerosStayZero) {
  for (WeightType t : {WeightType::Q4_K, WeightType::Q6_K}) {
    const RoundTrip r = round_trip(t, std::vector<float>(2 * kQK_K, 0.0f));
    for (float v : r.back) ASSERT_EQ(v, 0.0f) << type_name(t);
  }
}

TEST(KQuantQuantize, GgmlTotalErrorLimitOnItsTestData) {
  const size_t n = 32 * 128;  // ggml's test size and data: 0.1 + 2 cos(i + offset)
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = 0.1f + 2.0f * std::cos(static_cast<float>(i));
  for (WeightType t : {WeightType::Q4_K, WeightType::Q6_K}) {
    const RoundTrip r = round_trip(t, x);
    double sum = 0;  // ggml's array_rmse: sqrt(sum of squared differences) / n
    for (size_t i = 0; i < n; ++i) sum += (double(r.back[i]) - x[i]) * (double(r.back[i]) - x[i]);
    EXPECT_LT(std::sqrt(sum) / n, kGgmlMaxQuantizationTotalError) << type_name(t);
  }
}

// Round-trip rms / sigma on N(0, sigma^2) weights, measured for ggml's reference quantizers
// (quantize_row_q4_K_ref / _q6_K_ref, llama.cpp Feb 2025) on 2^18 such values: 0.0716 and
// 0.0178. Ours must be on par: at most 5% worse.
constexpr double kGgmlQ4_KGaussianRms = 0.0716;
constexpr double kGgmlQ6_KGaussianRms = 0.0178;
constexpr double kGaussianRmsSlack = 1.05;

TEST(KQuantQuantize, GaussianErrorOnParWithGgmlsQuantizers) {
  const float sigma = 0.05f;
  const std::vector<float> x = testing::normal_floats(256 * kQK_K, 8, sigma);
  EXPECT_LT(rms_of(round_trip(WeightType::Q4_K, x), 0, x.size()) / sigma,
            kGgmlQ4_KGaussianRms * kGaussianRmsSlack);
  EXPECT_LT(rms_of(round_trip(WeightType::Q6_K, x), 0, x.size()) / sigma,
            kGgmlQ6_KGaussianRms * kGaussianRmsSlack);
}

TEST(KQuantQuantize, MoreBitsGiveLessErrorOnGaussianWeights) {
  const std::vector<float> x = testing::normal_floats(64 * kQK_K, 7, 0.05f);
  const double q6 = rms_of(round_trip(WeightType::Q6_K, x), 0, x.size());
  const double q4k = rms_of(round_trip(WeightType::Q4_K, x), 0, x.size());
  const double q40 = rms_of(round_trip(WeightType::Q4_0, x), 0, x.size());
  // Q6_K has 2 more bits than Q4_K (4x finer steps); Q4_K's min and finer-grained scales beat
  // Q4_0's symmetric grid at the same 4.5 bits per weight.
  EXPECT_LT(q6 * 3, q4k);
  EXPECT_LT(q4k, q40);
}

}  // namespace
}  // namespace pacer::ops
