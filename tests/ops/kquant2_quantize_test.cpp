// quantize_row for Q5_K, Q3_K, Q2_K and IQ4_XS: pacer's own quantizers (not byte-identical to
// ggml's, which the formats do not require). What they must guarantee, on several kinds of data:
//
// 1. Nearest level: every element decodes to the level of its sub-block's final grid that is
//    nearest to it (up to float rounding of the division that picks it).
// 2. A provable rms bound per sub-block, from the construction (kquant_fit.h): the search keeps
//    one grid with a known worst-case error as a candidate, so the chosen grid's rms is at most
//    that; coding its scale (and min) against the super-block factors moves each level by at
//    most (code error) x (level magnitude); re-rounding to the final grid can only do better.
//    With lo = min(0, min x), hi = max x, amax = max |x| of the sub-block and d, dmin read back:
//      Q5_K (32 elements, q in [0, 31], 6-bit codes):  (hi - lo) / 62 + dmin / 2 + 31 d / 2
//      Q2_K (16 elements, q in [0, 3],  4-bit codes):  (hi - lo) / 6  + dmin / 2 + 3 d / 2
//        (the min-max grid: every element within half a step; codes within half a unit)
//      Q3_K (16 elements, q in [-4, 3], scale code in [-32, 31]):  amax / 4 + 4.5 |d|
//        (largest |x| on level -4: every element within one step amax/4; the code is within
//        |d|/2, or ~1.02 |d| for the one scale clamped from +32 to 31 since d is fp16-rounded;
//        times |q| <= 4)
//      IQ4_XS (32 elements, levels kIq4Levels, scale code in [-32, 31]):  14 amax/127 + 130 |d|
//        (largest |x| on level -127: the widest gap between levels is 24 steps and the clamped
//        end 127 - 113 = 14, step amax/127; code error <= ~1.02 |d| times |level| <= 127)
//    Each holds while d stays in fp16's normal range (as for ggml's quantizers).
// 3. ggml's own limits on its test data (tests/test-quantize-fns.cpp: 0.002, 3-bit 0.004, 2-bit
//    0.0075). On Gaussian weights, more bits give less error: Q2_K > Q3_K > Q4_K > Q5_K > Q6_K,
//    Q5_K at most 0.6x Q4_K (one more bit halves the step), and IQ4_XS (non-uniform levels, 4.25
//    bits) better than Q4_0 (uniform, 4.5 bits).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "ops/matmul.h"
#include "tests/ops/kquant2_test_util.h"
#include "tests/ops/matmul_test_util.h"

namespace pacer::ops {
namespace {

using testing::kUnitRoundoff;

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

// Elements per sub-block (one scale) and the levels of the element's final grid.
int sub_elems(WeightType t) {
  return t == WeightType::Q5_K || t == WeightType::IQ4_XS ? 32 : 16;
}
std::vector<double> grid_levels(WeightType t, const testing::Decoded& v) {
  std::vector<double> out;
  if (t == WeightType::Q5_K) {
    for (int q = 0; q < 32; ++q) out.push_back(v.d * v.scale * q - v.dmin * v.min);
  } else if (t == WeightType::Q2_K) {
    for (int q = 0; q < 4; ++q) out.push_back(v.d * v.scale * q - v.dmin * v.min);
  } else if (t == WeightType::Q3_K) {
    for (int q = -4; q < 4; ++q) out.push_back(v.d * v.scale * q);
  } else {
    for (int l : testing::kIq4Levels) out.push_back(v.d * v.scale * l);
  }
  return out;
}

// The rms bound of the file comment for one sub-block.
double rms_bound(WeightType t, const testing::Decoded& v, double lo, double hi, double amax) {
  const double d = std::fabs(v.d), slack = kFloatSlackUlps * kUnitRoundoff * amax;
  switch (t) {
    case WeightType::Q5_K:
      return (hi - lo) / 62 + v.dmin / 2 + 15.5 * d + slack;
    case WeightType::Q2_K:
      return (hi - lo) / 6 + v.dmin / 2 + 1.5 * d + slack;
    case WeightType::Q3_K:
      return amax / 4 + 4.5 * d + slack;
    default:
      return 14 * amax / 127 + 130 * d + slack;
  }
}

using RoundTripParam = std::tuple<WeightType, size_t>;
class KQuant2RoundTrip : public ::testing::TestWithParam<RoundTripParam> {};

TEST_P(KQuant2RoundTrip, NearestLevelAndDerivedRmsBound) {
  const auto [t, set] = GetParam();
  const DataSet ds = data_sets()[set];
  const RoundTrip r = round_trip(t, ds.x);
  const int64_t bb = type_info(t).block_bytes;
  const int se = sub_elems(t);
  for (size_t b = 0; b < r.x.size() / kQK_K; ++b) {
    const std::byte* blk = r.q.data() + b * bb;
    for (int j = 0; j < kQK_K / se; ++j) {
      const size_t begin = b * kQK_K + se * j, end = begin + se;
      const testing::Decoded v0 = testing::decode(t, blk, se * j);
      const std::vector<double> levels = grid_levels(t, v0);
      double lo = 0, hi = r.x[begin], amax = 0, level_max = 0;
      for (double l : levels) level_max = std::max(level_max, std::fabs(l));
      for (size_t i = begin; i < end; ++i) {
        lo = std::min(lo, double(r.x[i]));
        hi = std::max(hi, double(r.x[i]));
        amax = std::max(amax, std::fabs(double(r.x[i])));
        double nearest = INFINITY;
        for (double l : levels) nearest = std::min(nearest, std::fabs(l - r.x[i]));
        const double slack = kFloatSlackUlps * kUnitRoundoff * (std::fabs(r.x[i]) + 2 * level_max);
        ASSERT_LE(std::fabs(double(r.back[i]) - r.x[i]), nearest + slack)
            << ds.name << " element " << i << " is not on its nearest level";
      }
      EXPECT_LE(rms_of(r, begin, end), rms_bound(t, v0, lo, hi, amax))
          << ds.name << " block " << b << " sub-block " << j;
    }
  }
}

std::vector<RoundTripParam> round_trip_params() {
  std::vector<RoundTripParam> out;
  for (WeightType t : testing::kquant2_types()) {
    for (size_t s = 0; s < data_sets().size(); ++s) out.emplace_back(t, s);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(TypeDataSet, KQuant2RoundTrip, ::testing::ValuesIn(round_trip_params()),
                         [](const auto& info) {
                           return std::string(type_name(std::get<0>(info.param))) + "_" +
                                  data_sets()[std::get<1>(info.param)].name;
                         });

TEST(KQuant2Quantize, ZerosStayZero) {
  for (WeightType t : testing::kquant2_types()) {
    const RoundTrip r = round_trip(t, std::vector<float>(2 * kQK_K, 0.0f));
    for (float v : r.back) ASSERT_EQ(v, 0.0f) << type_name(t);
  }
}

// ggml tests/test-quantize-fns.cpp: the RMSE-over-n of a quantize/dequantize round trip of its
// cosine test data must stay below these (MAX_QUANTIZATION_TOTAL_ERROR and its 2- and 3-bit
// variants).
constexpr double kGgmlMaxTotalError = 0.002, kGgmlMaxTotalError3Bits = 0.004,
                 kGgmlMaxTotalError2Bits = 0.0075;

TEST(KQuant2Quantize, GgmlTotalErrorLimitOnItsTestData) {
  const size_t n = 32 * 128;  // ggml's test size and data: 0.1 + 2 cos(i + offset)
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = 0.1f + 2.0f * std::cos(static_cast<float>(i));
  for (WeightType t : testing::kquant2_types()) {
    const RoundTrip r = round_trip(t, x);
    double sum = 0;  // ggml's array_rmse: sqrt(sum of squared differences) / n
    for (size_t i = 0; i < n; ++i) sum += (double(r.back[i]) - x[i]) * (double(r.back[i]) - x[i]);
    const double limit = t == WeightType::Q2_K   ? kGgmlMaxTotalError2Bits
                         : t == WeightType::Q3_K ? kGgmlMaxTotalError3Bits
                                                 : kGgmlMaxTotalError;
    EXPECT_LT(std::sqrt(sum) / n, limit) << type_name(t);
  }
}

bool has_type(WeightType t) {
  const std::vector<WeightType> ts = testing::kquant2_types();
  return std::find(ts.begin(), ts.end(), t) != ts.end();
}

TEST(KQuant2Quantize, MoreBitsGiveLessErrorOnGaussianWeights) {
  const std::vector<float> x = testing::normal_floats(64 * kQK_K, 7, 0.05f);
  const auto rms = [&](WeightType t) { return rms_of(round_trip(t, x), 0, x.size()); };
  const double q6 = rms(WeightType::Q6_K), q4 = rms(WeightType::Q4_K);
  const double q5 = rms(WeightType::Q5_K);
  EXPECT_LT(q6, q5);
  EXPECT_LT(q5, 0.6 * q4);
  if (has_type(WeightType::Q3_K)) {
    EXPECT_LT(q4, rms(WeightType::Q3_K));
  }
  if (has_type(WeightType::Q2_K)) {
    EXPECT_LT(has_type(WeightType::Q3_K) ? rms(WeightType::Q3_K) : q4, rms(WeightType::Q2_K));
  }
  if (has_type(WeightType::IQ4_XS)) {
    EXPECT_LT(rms(WeightType::IQ4_XS), rms(WeightType::Q4_0));
  }
}

}  // namespace
}  // namespace pacer::ops
