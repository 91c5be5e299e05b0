// ops::matmul end to end for Q5_K, Q3_K, Q2_K and IQ4_XS weights: accuracy against the fp32
// product of the dequantized matrix within a derived bound, on every Isa this CPU runs;
// independence from the worker count; prefill (several tokens: Q5_K through its GEMM, the others
// dot_rows per token) and fused mixed-type outputs equal to single calls bit for bit; row lengths
// that are not whole super-blocks rejected.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "ops/isa.h"
#include "ops/kernel_set.h"
#include "ops/matmul.h"
#include "ops/parallel.h"
#include "tests/ops/kquant2_test_util.h"
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
//   q = round(fl(x * fl(1/d_b))), so |x - d_b q| <= d_b (1/2 + 254 u).
// * Weights: the kernels use the exact integer form of w (kquant2_test_util.h's two parts),
//   which dequantize_row's float value matches within u (|scale part| + |offset|).
// * Float evaluation: each super-block's exact int32 sums become at most 32 float terms,
//   accumulated with rounding: <= 2 (T + 8) u sum (|scale part| + |offset|) |xq|.
double derived_bound(WeightType t, const std::byte* row, const std::vector<float>& w,
                     const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size()), bb = type_info(t).block_bytes;
  double act_err = 0, weight_err = 0, abs_terms = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    float amax = 0;
    for (int64_t j = kQK_K * b; j < kQK_K * (b + 1); ++j) amax = std::max(amax, std::fabs(x[j]));
    const double step = (amax / 127.0f) * (0.5 + 254 * kUnitRoundoff);
    for (int64_t j = kQK_K * b; j < kQK_K * (b + 1); ++j) {
      const testing::Decoded v = testing::decode(t, row + b * bb, static_cast<int>(j % kQK_K));
      const double parts = std::fabs(v.scale_part) + std::fabs(v.offset);
      const double xq_abs = std::fabs(x[j]) + step;
      act_err += step * std::fabs(w[j]);
      weight_err += kUnitRoundoff * parts * xq_abs;
      abs_terms += parts * xq_abs;
    }
  }
  const int64_t terms = 32 * (n / kQK_K);
  return act_err + weight_err + 2.0 * static_cast<double>(terms + 8) * kUnitRoundoff * abs_terms;
}

struct Shape {
  int64_t rows, cols;
};
using ApiParam = std::tuple<Isa, WeightType, Shape>;
class KQuant2MatmulAccuracy : public ::testing::TestWithParam<ApiParam> {};

TEST_P(KQuant2MatmulAccuracy, WithinDerivedBoundOfFp32Product) {
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

const Shape kAccuracyShapes[] = {{1, 256}, {5, 2048}, {19, 2048}, {3, 5632}, {13, 512}};

std::vector<ApiParam> accuracy_params() {
  std::vector<ApiParam> out;
  for (Isa isa : supported_isas()) {
    for (WeightType t : testing::kquant2_types()) {
      for (const Shape& s : kAccuracyShapes) out.emplace_back(isa, t, s);
    }
  }
  return out;
}

std::string accuracy_name(const ::testing::TestParamInfo<ApiParam>& info) {
  const auto& [isa, type, shape] = info.param;
  return std::string(isa_name(isa)) + "_" + testing::shape_name(type, shape.rows, shape.cols);
}

INSTANTIATE_TEST_SUITE_P(IsaTypeShape, KQuant2MatmulAccuracy,
                         ::testing::ValuesIn(accuracy_params()), accuracy_name);

using IsaType = std::tuple<Isa, WeightType>;
class KQuant2Matmul : public ::testing::TestWithParam<IsaType> {};

TEST_P(KQuant2Matmul, PrefillEqualsRepeatedGemvBitForBit) {
  const auto [isa, type] = GetParam();
  const int64_t rows = 37, cols = 1024, tokens = 5;
  const testing::OwnedMatrix w = testing::make_matrix(type, rows, cols, 33);
  const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * cols), 34);
  const std::vector<float> all = run_matmul(w.view, x, tokens, SerialParallel(1), isa);
  for (int64_t t = 0; t < tokens; ++t) {
    const std::vector<float> xt(x.begin() + t * cols, x.begin() + (t + 1) * cols);
    const std::vector<float> one = run_matmul(w.view, xt, 1, SerialParallel(1), isa);
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(all[t * rows + r], one[r]) << "token " << t << " row " << r;
    }
  }
}

TEST_P(KQuant2Matmul, ResultsIndependentOfWorkerCount) {
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

TEST_P(KQuant2Matmul, FusedMixedTypesEqualSeparateCallsBitForBit) {
  // A K-quant mix as llama-quantize writes it (Q5_K_M: Q5_K with Q6_K; Q3_K_M / Q2_K: Q3_K or Q2_K
  // with Q4_K / Q5_K): every output shares one Q8_K packing of the input; plus an F16 output that
  // needs a second packing.
  const auto [isa, type] = GetParam();
  const int64_t cols = 512, tokens = 3;
  const testing::OwnedMatrix a = testing::make_matrix(type, 40, cols, 37);
  const testing::OwnedMatrix b = testing::make_matrix(WeightType::Q6_K, 21, cols, 38);
  const testing::OwnedMatrix c = testing::make_matrix(WeightType::Q4_K, 9, cols, 39);
  const testing::OwnedMatrix f = testing::make_matrix(WeightType::F16, 19, cols, 40);
  const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * cols), 41);
  std::vector<float> ya(40 * tokens), yb(21 * tokens), yc(9 * tokens), yf(19 * tokens);
  const MatmulOutput outs[] = {{a.view, ya}, {b.view, yb}, {c.view, yc}, {f.view, yf}};
  PackedActivations scratch;
  matmul(outs, x, tokens, scratch, SerialParallel(3), KernelSet::for_isa(isa));
  EXPECT_EQ(ya, run_matmul(a.view, x, tokens, SerialParallel(1), isa));
  EXPECT_EQ(yb, run_matmul(b.view, x, tokens, SerialParallel(1), isa));
  EXPECT_EQ(yc, run_matmul(c.view, x, tokens, SerialParallel(1), isa));
  EXPECT_EQ(yf, run_matmul(f.view, x, tokens, SerialParallel(1), isa));
}

std::vector<IsaType> isa_type_params() {
  std::vector<IsaType> out;
  for (Isa isa : supported_isas()) {
    for (WeightType t : testing::kquant2_types()) out.emplace_back(isa, t);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(IsaType, KQuant2Matmul, ::testing::ValuesIn(isa_type_params()),
                         [](const auto& info) {
                           return std::string(isa_name(std::get<0>(info.param))) + "_" +
                                  std::string(type_name(std::get<1>(info.param)));
                         });

TEST(KQuant2MatmulErrors, ColsNotMultipleOf256AreRejectedNamingTheShape) {
  std::vector<std::byte> data(176 * 8);
  std::vector<float> x(288), y(4);
  PackedActivations scratch;
  for (WeightType t : testing::kquant2_types()) {
    const WeightMatrix w{t, data.data(), 4, 288};  // a multiple of 32, not of 256
    try {
      check_matrix(w);
      FAIL() << "no exception for " << type_name(t);
    } catch (const MatmulError& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string(type_name(t))));
      EXPECT_THAT(e.what(), HasSubstr("cols=288"));
    }
    EXPECT_THROW(matmul(w, x, 1, y, scratch, SerialParallel(1), KernelSet::for_isa(detect_isa())),
                 MatmulError);
  }
}

}  // namespace
}  // namespace pacer::ops
