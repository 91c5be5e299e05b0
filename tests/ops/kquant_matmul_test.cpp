// matmul() end to end for Q4_K / Q6_K weights: accuracy against the fp32 product with a derived
// bound, GEMM vs repeated GEMV and fused vs separate outputs bit for bit, independence from the
// worker count, and rejection of row lengths that are not whole super-blocks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "ops/isa.h"
#include "ops/kernel_set.h"
#include "ops/matmul.h"
#include "ops/parallel.h"
#include "tests/ops/kquant_test_util.h"
#include "tests/ops/matmul_test_util.h"

namespace pacer::ops {
namespace {

using ::testing::HasSubstr;
using testing::kUnitRoundoff;

std::vector<float> run_matmul(const WeightMatrix& w, const std::vector<float>& x, int64_t tokens,
                              const Parallel& par, Isa isa) {
  std::vector<float> y(static_cast<size_t>(tokens * w.rows), NAN);
  PackedActivations scratch;
  matmul(w, x, tokens, y, scratch, par, KernelSet::for_isa(isa));
  return y;
}

// Bound on |y_r - sum_j w_j x_j| (w = dequantize_row's weights, x the fp32 activations):
// * Activations: each super-block b of x is stored as d_b q with d_b = amax_b / 127 and
//   q = round(fl(x * fl(1/d_b))); as for act-Q8, |x - d_b q| <= d_b (1/2 + 254 u).
// * Weights: the kernels use the exact d*sc*q - dmin*m (Q4_K) / d*sc*(q-32) (Q6_K), which
//   dequantize_row's float value matches within u |w| (see kquant_kernels_test.cpp).
// * Float evaluation: the exact int32 sums of each super-block become at most 64 float terms
//   (lanes of the scale part and of the offset part, summed separately), accumulated with
//   rounding: <= 2 (T + 8) u sum|term|. The scale part of w_j is at most |w_j| + |offset_j| in
//   magnitude, so sum|term| <= sum_j (|w_j| + 2 |offset_j|) |xq_j|, with offset_j = dmin * m_j
//   (Q4_K) or 32 d sc_g (Q6_K) read from the block.
double derived_bound(WeightType t, const std::byte* row, const std::vector<float>& w,
                     const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  double act_err = 0, weight_err = 0, abs_terms = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    float amax = 0;
    for (int64_t j = kQK_K * b; j < kQK_K * (b + 1); ++j) amax = std::max(amax, std::fabs(x[j]));
    const double step = (amax / 127.0f) * (0.5 + 254 * kUnitRoundoff);
    for (int64_t j = kQK_K * b; j < kQK_K * (b + 1); ++j) {
      const double w_abs = std::fabs(w[j]), xq_abs = std::fabs(x[j]) + step;
      double offset_abs;  // magnitude of the part of w_j that the kernels sum separately
      if (t == WeightType::Q4_K) {
        BlockQ4_K blk;
        std::memcpy(&blk, row + b * sizeof blk, sizeof blk);
        int sc, m;
        testing::q4_K_scale_min(blk, static_cast<int>(j % kQK_K) / 32, &sc, &m);
        offset_abs = fp16_to_fp32(blk.dmin) * m;
      } else {
        BlockQ6_K blk;
        std::memcpy(&blk, row + b * sizeof blk, sizeof blk);
        offset_abs = 32 * std::fabs(fp16_to_fp32(blk.d) * blk.scales[(j % kQK_K) / 16]);
      }
      act_err += step * w_abs;
      weight_err += kUnitRoundoff * w_abs * xq_abs;
      abs_terms += (w_abs + 2 * offset_abs) * xq_abs;
    }
  }
  const int64_t terms = 64 * (n / kQK_K);
  return act_err + weight_err + 2.0 * static_cast<double>(terms + 8) * kUnitRoundoff * abs_terms;
}

struct Shape {
  int64_t rows, cols;
};
using ApiParam = std::tuple<Isa, WeightType, Shape>;
class KQuantMatmulAccuracy : public ::testing::TestWithParam<ApiParam> {};

TEST_P(KQuantMatmulAccuracy, WithinDerivedBoundOfFp32Product) {
  const auto [isa, type, shape] = GetParam();
  const testing::OwnedMatrix w = testing::make_matrix(type, shape.rows, shape.cols, 31);
  const std::vector<float> x = testing::normal_floats(static_cast<size_t>(shape.cols), 32);
  const std::vector<float> y = run_matmul(w.view, x, 1, SerialParallel(1), isa);
  for (int64_t r = 0; r < shape.rows; ++r) {
    const std::vector<float> wr(w.dequantized.begin() + r * shape.cols,
                                w.dequantized.begin() + (r + 1) * shape.cols);
    double exact = 0;
    for (int64_t j = 0; j < shape.cols; ++j) exact += double(wr[j]) * x[j];
    EXPECT_NEAR(y[r], exact, derived_bound(type, w.view.row(r), wr, x)) << "row " << r;
  }
}

const Shape kAccuracyShapes[] = {{1, 256}, {5, 2048}, {3, 4096}, {2, 14336}, {13, 512}};

std::vector<ApiParam> accuracy_params() {
  std::vector<ApiParam> out;
  for (Isa isa : supported_isas()) {
    for (WeightType t : {WeightType::Q4_K, WeightType::Q6_K}) {
      for (const Shape& s : kAccuracyShapes) out.emplace_back(isa, t, s);
    }
  }
  return out;
}

std::string accuracy_name(const ::testing::TestParamInfo<ApiParam>& info) {
  const auto& [isa, type, shape] = info.param;
  return std::string(isa_name(isa)) + "_" + testing::shape_name(type, shape.rows, shape.cols);
}

INSTANTIATE_TEST_SUITE_P(IsaTypeShape, KQuantMatmulAccuracy, ::testing::ValuesIn(accuracy_params()),
                         accuracy_name);

using IsaType = std::tuple<Isa, WeightType>;
class KQuantMatmul : public ::testing::TestWithParam<IsaType> {};

// Token counts that exercise the GEMMs' 4-token groups and their remainders (Q4_K has one).
TEST_P(KQuantMatmul, GemmEqualsRepeatedGemvBitForBit) {
  const auto [isa, type] = GetParam();
  const int64_t rows = 37, cols = 1024;
  const testing::OwnedMatrix w = testing::make_matrix(type, rows, cols, 33);
  for (int64_t tokens : {2, 4, 5, 9, 13}) {
    const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * cols), 34);
    const std::vector<float> gemm = run_matmul(w.view, x, tokens, SerialParallel(1), isa);
    for (int64_t t = 0; t < tokens; ++t) {
      const std::vector<float> xt(x.begin() + t * cols, x.begin() + (t + 1) * cols);
      const std::vector<float> gemv = run_matmul(w.view, xt, 1, SerialParallel(1), isa);
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(gemm[t * rows + r], gemv[r]) << tokens << " tokens: token " << t << " row " << r;
      }
    }
  }
}

TEST_P(KQuantMatmul, ResultsIndependentOfWorkerCount) {
  const auto [isa, type] = GetParam();
  const int64_t rows = 83, cols = 2048;
  const testing::OwnedMatrix w = testing::make_matrix(type, rows, cols, 35);
  for (int64_t tokens : {1, 3}) {
    const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * cols), 36);
    const std::vector<float> one = run_matmul(w.view, x, tokens, SerialParallel(1), isa);
    EXPECT_EQ(one, run_matmul(w.view, x, tokens, SerialParallel(3), isa)) << tokens;
    EXPECT_EQ(one, run_matmul(w.view, x, tokens, TbbParallel(2), isa)) << tokens;
  }
}

TEST_P(KQuantMatmul, FusedMixedTypesEqualSeparateCallsBitForBit) {
  // A Q4_K_M-like layer: Q and K in Q4_K, V in Q6_K (same Q8_K packing), and an F16 output that
  // needs a second packing of the same input.
  const auto [isa, type] = GetParam();
  const WeightType other = type == WeightType::Q4_K ? WeightType::Q6_K : WeightType::Q4_K;
  const int64_t cols = 512, tokens = 3;
  const testing::OwnedMatrix q = testing::make_matrix(type, 40, cols, 37);
  const testing::OwnedMatrix k = testing::make_matrix(other, 21, cols, 38);
  const testing::OwnedMatrix v = testing::make_matrix(WeightType::F16, 19, cols, 39);
  const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * cols), 40);
  std::vector<float> yq(40 * tokens), yk(21 * tokens), yv(19 * tokens);
  const MatmulOutput outs[] = {{q.view, yq}, {k.view, yk}, {v.view, yv}};
  PackedActivations scratch;
  matmul(outs, x, tokens, scratch, SerialParallel(3), KernelSet::for_isa(isa));
  EXPECT_EQ(yq, run_matmul(q.view, x, tokens, SerialParallel(1), isa));
  EXPECT_EQ(yk, run_matmul(k.view, x, tokens, SerialParallel(1), isa));
  EXPECT_EQ(yv, run_matmul(v.view, x, tokens, SerialParallel(1), isa));
}

std::vector<IsaType> isa_type_params() {
  std::vector<IsaType> out;
  for (Isa isa : supported_isas()) {
    for (WeightType t : {WeightType::Q4_K, WeightType::Q6_K}) out.emplace_back(isa, t);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(IsaType, KQuantMatmul, ::testing::ValuesIn(isa_type_params()),
                         [](const auto& info) {
                           return std::string(isa_name(std::get<0>(info.param))) + "_" +
                                  std::string(type_name(std::get<1>(info.param)));
                         });

TEST(KQuantMatmulErrors, ColsNotMultipleOf256AreRejectedNamingTheShape) {
  std::vector<std::byte> data(210 * 8);
  std::vector<float> x(288), y(4);
  PackedActivations scratch;
  for (WeightType t : {WeightType::Q4_K, WeightType::Q6_K}) {
    const WeightMatrix w{t, data.data(), 4, 288};  // a multiple of 32, not of 256
    try {
      check_matrix(w);
      FAIL() << "no exception for " << type_name(t);
    } catch (const MatmulError& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string(type_name(t))));
      EXPECT_THAT(e.what(), HasSubstr("cols=288"));
      EXPECT_THAT(e.what(), HasSubstr("256"));
    }
    EXPECT_THROW(matmul(w, x, 1, y, scratch, SerialParallel(1), KernelSet::for_isa(detect_isa())),
                 MatmulError);
    EXPECT_THROW(scratch.pack(t, x, 288, 1, KernelSet::for_isa(detect_isa())), MatmulError);
  }
}

TEST(KQuantMatmulErrors, Q8_KIsNotAWeightType) {
  std::vector<std::byte> data(292 * 2);
  std::vector<float> x(256), y(2);
  PackedActivations scratch;
  const WeightMatrix w{WeightType::Q8_K, data.data(), 2, 256};
  EXPECT_THROW(matmul(w, x, 1, y, scratch, SerialParallel(1), KernelSet::for_isa(detect_isa())),
               MatmulError);
}

}  // namespace
}  // namespace pacer::ops
