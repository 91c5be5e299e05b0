// The matmul entry points: accuracy against the fp32 product (bounds derived below), GEMM vs
// repeated GEMV, fused vs separate outputs, independence from the worker count, and shape errors.
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
#include "tests/ops/matmul_test_util.h"

namespace pacer::ops {
namespace {

using ::testing::HasSubstr;
using testing::kUnitRoundoff;

// ggml tests/test-quantize-fns.cpp: |quantized dot - fp32 dot| / n on its cosine data.
constexpr float kGgmlMaxDotProductError = 0.02f;

std::vector<float> run_matmul(const WeightMatrix& w, const std::vector<float>& x, int64_t tokens,
                              const Parallel& par, Isa isa) {
  std::vector<float> y(static_cast<size_t>(tokens * w.rows), NAN);
  PackedActivations scratch;
  matmul(w, x, tokens, y, scratch, par, KernelSet::for_isa(isa));
  return y;
}

struct Shape {
  int64_t rows, cols;
};
using ApiParam = std::tuple<Isa, WeightType, Shape>;

class MatmulAccuracy : public ::testing::TestWithParam<ApiParam> {};

// Bound on |y - sum_j w_j x_j| (w the dequantized weights, x the fp32 activations), derived:
// * Activations (quantized types only): block b of x is stored as d_b * q with d_b = amax_b/127
//   and q = round(fl(x * fl(1/d_b))); fl(x*id) = (x/d_b)(1+e), |e| <= 2u, |x/d_b| <= 127, so
//   |x - d_b q| <= d_b (1/2 + 254u) and the product error is <= sum_b d_b (1/2 + 254u) sum|w_j|.
// * Weights enter exactly (the kernels multiply by the same d_w * q_w dequantize_row returns).
// * Float evaluation: per-block integer dots are exact; each of the T float terms (T = blocks,
//   or elements for F32/F16/BF16) is rounded once or twice and summed in some order, so the
//   error is <= 2 (T + 8) u sum|w_j xq_j| (xq the quantized activations; 8 covers the lane tree).
double derived_bound(const testing::OwnedMatrix& w, int64_t r, const std::vector<float>& x,
                     bool quantized) {
  const int64_t n = w.view.cols;
  double act_err = 0, abs_sum = 0;
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0;
    for (int64_t j = 32 * b; j < 32 * b + 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    // |x_j - xq_j| <= step for quantized activations, 0 for fp32 ones
    const double step = quantized ? (amax / 127.0f) * (0.5 + 254 * kUnitRoundoff) : 0.0;
    for (int64_t j = 32 * b; j < 32 * b + 32; ++j) {
      const double w_abs = std::fabs(w.dequantized[r * n + j]);
      act_err += step * w_abs;
      abs_sum += w_abs * (std::fabs(x[j]) + step);  // >= |w_j xq_j|
    }
  }
  const int64_t terms = quantized ? n / 32 : n;
  return act_err + 2.0 * static_cast<double>(terms + 8) * kUnitRoundoff * abs_sum;
}

// The float part of derived_bound alone: two evaluations of the same exact block dots (or
// products) summed in different orders each lie within it of the exact sum.
double reorder_bound(const testing::OwnedMatrix& w, int64_t r, const std::vector<float>& x,
                     bool quantized) {
  const int64_t n = w.view.cols;
  double abs_sum = 0;
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0;
    for (int64_t j = 32 * b; j < 32 * b + 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const double step = quantized ? (amax / 127.0f) * (0.5 + 254 * kUnitRoundoff) : 0.0;
    for (int64_t j = 32 * b; j < 32 * b + 32; ++j)
      abs_sum += std::fabs(w.dequantized[r * n + j]) * (std::fabs(x[j]) + step);
  }
  const int64_t terms = quantized ? n / 32 : n;
  return 2.0 * static_cast<double>(terms + 8) * kUnitRoundoff * abs_sum;
}

TEST_P(MatmulAccuracy, WithinDerivedBoundOfFp32Product) {
  const auto [isa, type, shape] = GetParam();
  const testing::OwnedMatrix w = testing::make_matrix(type, shape.rows, shape.cols, 5);
  const std::vector<float> x = testing::normal_floats(static_cast<size_t>(shape.cols), 6);
  const std::vector<float> y = run_matmul(w.view, x, 1, SerialParallel(1), isa);
  const bool quantized = type == WeightType::Q8_0 || type == WeightType::Q4_0;
  for (int64_t r = 0; r < shape.rows; ++r) {
    double exact = 0;
    for (int64_t j = 0; j < shape.cols; ++j)
      exact += double(w.dequantized[r * shape.cols + j]) * x[j];
    EXPECT_NEAR(y[r], exact, derived_bound(w, r, x, quantized)) << "row " << r;
  }
}

const Shape kAccuracyShapes[] = {{1, 32}, {5, 896}, {3, 2048}, {2, 14336}, {13, 64}};

std::vector<ApiParam> accuracy_params() {
  std::vector<ApiParam> out;
  for (Isa isa : supported_isas()) {
    for (WeightType t : testing::matmul_types()) {
      for (const Shape& s : kAccuracyShapes) out.emplace_back(isa, t, s);
    }
  }
  return out;
}

std::string param_name(const ::testing::TestParamInfo<ApiParam>& info) {
  const auto& [isa, type, shape] = info.param;
  return std::string(isa_name(isa)) + "_" + testing::shape_name(type, shape.rows, shape.cols);
}

INSTANTIATE_TEST_SUITE_P(IsaTypeShape, MatmulAccuracy, ::testing::ValuesIn(accuracy_params()),
                         param_name);

using IsaType = std::tuple<Isa, WeightType>;
class MatmulIsaType : public ::testing::TestWithParam<IsaType> {};

TEST_P(MatmulIsaType, GgmlDotProductErrorLimit) {
  const auto [isa, type] = GetParam();
  const int64_t n = 32 * 128;  // ggml's test size and data: 0.1 + 2 cos(i + offset)
  std::vector<float> wf(n), x(n);
  for (int64_t i = 0; i < n; ++i) {
    wf[i] = 0.1f + 2.0f * std::cos(static_cast<float>(i));
    x[i] = 0.1f + 2.0f * std::cos(static_cast<float>(i) + 1.0f);
  }
  std::vector<std::byte> wq(static_cast<size_t>(row_bytes(type, n)));
  quantize_row(type, wf.data(), wq.data(), n);
  const WeightMatrix w{type, wq.data(), 1, n};
  double exact = 0;
  for (int64_t i = 0; i < n; ++i) exact += double(wf[i]) * x[i];
  const float y = run_matmul(w, x, 1, SerialParallel(1), isa)[0];
  EXPECT_LT(std::fabs(y - exact) / n, kGgmlMaxDotProductError);
}

// The GEMM (prefill) against the fp32 product of each token and against the GEMV of that token.
// Kernels may sum in a different order than the GEMV (the VNNI GEMM keeps 4 partial sums per row
// across 32-block chunks; the float GEMM puts tokens in the lanes and sums each one in k order),
// so each result is held to the derived bound, and GEMM and GEMV to the float reassociation
// bound (both see the same quantized activations, and every per-block integer dot is exact, so
// only the order of the float sums may differ). 67 blocks = two full 32-block chunks and a
// partial one (float types: 5 more columns, a masked tail); 37 rows = two 16-row tiles, a quad
// and a lone row (float GEMM: 6, 8 or 12-row tiles and a partial one); 7 tokens = a 4-token tile
// and 3 single tokens, 23 = two token vectors, 70 = a block of 64 tokens and one of 6.
TEST_P(MatmulIsaType, GemmMatchesFp32ProductAndRepeatedGemv) {
  const auto [isa, type] = GetParam();
  const bool quantized = type == WeightType::Q8_0 || type == WeightType::Q4_0;
  const int64_t rows = 37, cols = 67 * 32 + (quantized ? 0 : 5);
  const testing::OwnedMatrix w = testing::make_matrix(type, rows, cols, 8);
  for (int64_t tokens : {7, 23, 70}) {
    const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * cols), 9);
    const std::vector<float> gemm = run_matmul(w.view, x, tokens, SerialParallel(1), isa);
    for (int64_t t = 0; t < tokens; ++t) {
      const std::vector<float> xt(x.begin() + t * cols, x.begin() + (t + 1) * cols);
      const std::vector<float> gemv = run_matmul(w.view, xt, 1, SerialParallel(1), isa);
      for (int64_t r = 0; r < rows; ++r) {
        double exact = 0;
        for (int64_t j = 0; j < cols; ++j) exact += double(w.dequantized[r * cols + j]) * xt[j];
        ASSERT_NEAR(gemm[t * rows + r], exact, derived_bound(w, r, xt, quantized))
            << tokens << " tokens: token " << t << " row " << r;
        ASSERT_NEAR(gemm[t * rows + r], gemv[r], 2 * reorder_bound(w, r, xt, quantized))
            << tokens << " tokens: token " << t << " row " << r;
      }
    }
  }
}

TEST_P(MatmulIsaType, FusedOutputsEqualSeparateCallsBitForBit) {
  const auto [isa, type] = GetParam();
  const int64_t cols = 896, tokens = 3;
  // Q, K, V of Qwen2.5-0.5B shrunk in rows; V is F16 to force a second activation packing when
  // the main type is quantized.
  const testing::OwnedMatrix q = testing::make_matrix(type, 56, cols, 10);
  const testing::OwnedMatrix k = testing::make_matrix(type, 21, cols, 11);
  const testing::OwnedMatrix v = testing::make_matrix(WeightType::F16, 19, cols, 12);
  const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * cols), 13);
  std::vector<float> yq(56 * tokens), yk(21 * tokens), yv(19 * tokens);
  const MatmulOutput outs[] = {{q.view, yq}, {k.view, yk}, {v.view, yv}};
  PackedActivations scratch;
  matmul(outs, x, tokens, scratch, SerialParallel(3), KernelSet::for_isa(isa));
  EXPECT_EQ(yq, run_matmul(q.view, x, tokens, SerialParallel(1), isa));
  EXPECT_EQ(yk, run_matmul(k.view, x, tokens, SerialParallel(1), isa));
  EXPECT_EQ(yv, run_matmul(v.view, x, tokens, SerialParallel(1), isa));
}

// A GEMM that regroups its activations (the AVX-512 float and VNNI Q4_0/Q8_0 ones) does it once
// per matmul() call into a copy every worker reads: the same arithmetic as each worker's call
// making its own copy (matmul_rows on activations never prepared), so bit-identical.
TEST_P(MatmulIsaType, SharedActivationCopyMatchesAWorkersOwn) {
  const auto [isa, type] = GetParam();
  const KernelSet ks = KernelSet::for_isa(isa);
  const int64_t rows = 83, cols = 2048;
  const testing::OwnedMatrix w = testing::make_matrix(type, rows, cols, 16);
  const GemmPrepareFn prepare = ks.matmul(type).gemm_prepare;
  for (int64_t tokens : {3, 9, 70}) {
    const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * cols), 17);
    PackedActivations act;
    act.pack(type, x, cols, tokens, ks);
    const std::byte* data = nullptr;
    EXPECT_FALSE(act.prepared(prepare, &data));
    std::vector<float> own(static_cast<size_t>(tokens * rows), NAN);
    matmul_rows(w.view, act, own, 0, rows, ks);
    if (prepare != nullptr) {
      act.prepare(prepare);
      ASSERT_TRUE(act.prepared(prepare, &data));
      std::vector<float> shared(own.size(), NAN);
      matmul_rows(w.view, act, shared, 0, 40, ks);  // two workers' ranges
      matmul_rows(w.view, act, shared, 40, rows, ks);
      EXPECT_EQ(shared, own) << tokens;
      act.pack(type, x, cols, tokens, ks);  // new activations: the copy is stale
      EXPECT_FALSE(act.prepared(prepare, &data));
    }
    EXPECT_EQ(run_matmul(w.view, x, tokens, TbbParallel(2), isa), own) << tokens;
  }
}

TEST_P(MatmulIsaType, ResultsIndependentOfWorkerCount) {
  const auto [isa, type] = GetParam();
  const int64_t rows = 83, cols = 2048;
  const testing::OwnedMatrix w = testing::make_matrix(type, rows, cols, 14);
  for (int64_t tokens : {1, 3, 9}) {
    const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * cols), 15);
    const std::vector<float> one = run_matmul(w.view, x, tokens, SerialParallel(1), isa);
    EXPECT_EQ(one, run_matmul(w.view, x, tokens, SerialParallel(3), isa)) << tokens;
    EXPECT_EQ(one, run_matmul(w.view, x, tokens, TbbParallel(2), isa)) << tokens;
  }
}

// A prompt's activations are packed by the matmul's workers (tokens split between them) from
// PackedActivations::kParallelPackMinTokens tokens on: the same bytes as one thread's packing.
TEST_P(MatmulIsaType, PackingByWorkersEqualsOneThreadsBytes) {
  const auto [isa, type] = GetParam();
  const KernelSet ks = KernelSet::for_isa(isa);
  const int64_t cols = 2048;
  for (int64_t tokens : {PackedActivations::kParallelPackMinTokens - 1,
                         PackedActivations::kParallelPackMinTokens, int64_t{17}, int64_t{70}}) {
    const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * cols), 18);
    PackedActivations one, serial3, tbb2;
    one.pack(type, x, cols, tokens, ks);
    const SerialParallel three(3);
    const TbbParallel two(2);
    serial3.pack(type, x, cols, tokens, ks, &three);
    tbb2.pack(type, x, cols, tokens, ks, &two);
    const int64_t row = tokens > 1 ? one.token(1) - one.token(0) : 0;
    ASSERT_GT(row, 0);
    for (const PackedActivations* p : {&serial3, &tbb2}) {
      ASSERT_EQ(p->tokens(), tokens);
      ASSERT_EQ(p->token(1) - p->token(0), row);
      for (int64_t t = 0; t < tokens; ++t) {
        ASSERT_EQ(std::memcmp(p->token(t), one.token(t), static_cast<size_t>(row)), 0)
            << tokens << " tokens, token " << t;
      }
    }
  }
}

std::vector<IsaType> isa_type_params() {
  std::vector<IsaType> out;
  for (Isa isa : supported_isas()) {
    for (WeightType t : testing::matmul_types()) out.emplace_back(isa, t);
  }
  return out;
}

// The copies the GEMMs read (activations transposed, regrouped by 8 tokens or rounded to bf16
// pairs) are written by the matmul's workers from kParallelPackMinTokens tokens on, a few shares
// each (GemmPrepareFn's part of parts): the same bytes as one thread's copy, row-major and
// interleaved layouts alike.
TEST_P(MatmulIsaType, PreparingByWorkersEqualsOneThreadsBytes) {
  const auto [isa, type] = GetParam();
  const KernelSet ks = KernelSet::for_isa(isa);
  std::vector<GemmPrepareFn> fns;
  if (ks.matmul(type).gemm_prepare != nullptr) fns.push_back(ks.matmul(type).gemm_prepare);
  for (WeightType x16 : {WeightType::Q4_0, WeightType::Q8_0, WeightType::Q4_K, WeightType::Q5_K,
                         WeightType::Q6_K, WeightType::F16, WeightType::BF16}) {
    if (x16 == type && ks.x16(type).gemm_prepare != nullptr) {
      fns.push_back(ks.x16(type).gemm_prepare);
    }
  }
  if (fns.empty()) GTEST_SKIP() << "no GEMM of this type regroups its activations on this Isa";
  const int64_t cols = 2048 + 3 * 32;  // not a multiple of 64 columns
  for (const GemmPrepareFn prepare : fns) {
    for (int64_t tokens :
         {PackedActivations::kParallelPackMinTokens, int64_t{23}, int64_t{64}, int64_t{70}}) {
      const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * cols), 19);
      PackedActivations one, serial3, tbb2;
      const SerialParallel three(3);
      const TbbParallel two(2);
      for (PackedActivations* p : {&one, &serial3, &tbb2}) p->pack(type, x, cols, tokens, ks);
      one.prepare(prepare);
      serial3.prepare(prepare, &three);
      tbb2.prepare(prepare, &two);
      const int64_t bytes =
          prepare(cols, one.token(0), one.token(1) - one.token(0), tokens, nullptr, 0, 1);
      ASSERT_GT(bytes, 0);
      const std::byte* want = nullptr;
      ASSERT_TRUE(one.prepared(prepare, &want));
      for (const PackedActivations* p : {&serial3, &tbb2}) {
        const std::byte* got = nullptr;
        ASSERT_TRUE(p->prepared(prepare, &got));
        ASSERT_EQ(std::memcmp(got, want, static_cast<size_t>(bytes)), 0) << tokens << " tokens";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(IsaType, MatmulIsaType, ::testing::ValuesIn(isa_type_params()),
                         [](const auto& info) {
                           return std::string(isa_name(std::get<0>(info.param))) + "_" +
                                  std::string(type_name(std::get<1>(info.param)));
                         });

TEST(MatmulErrors, ColsNotMultipleOfBlockNamesTheShape) {
  std::vector<std::byte> data(1024);
  const WeightMatrix w{WeightType::Q8_0, data.data(), 4, 48};
  try {
    check_matrix(w);
    FAIL() << "no exception";
  } catch (const MatmulError& e) {
    EXPECT_THAT(e.what(), HasSubstr("q8_0"));
    EXPECT_THAT(e.what(), HasSubstr("cols=48"));
    EXPECT_THAT(e.what(), HasSubstr("rows=4"));
  }
  std::vector<float> x(48), y(4);
  PackedActivations scratch;
  EXPECT_THROW(matmul(w, x, 1, y, scratch, SerialParallel(1), KernelSet::for_isa(detect_isa())),
               MatmulError);
  EXPECT_THROW(scratch.pack(WeightType::Q4_0, x, 48, 1, KernelSet::for_isa(detect_isa())),
               MatmulError);
  EXPECT_NO_THROW(check_matrix(WeightMatrix{WeightType::F32, data.data(), 4, 48}));
}

TEST(MatmulErrors, MissingDataEmptyShapesAndShortBuffers) {
  std::vector<std::byte> data(34 * 8);
  PackedActivations scratch;
  EXPECT_THROW(check_matrix(WeightMatrix{WeightType::Q8_0, nullptr, 4, 64}), MatmulError);
  EXPECT_THROW(check_matrix(WeightMatrix{WeightType::Q8_0, data.data(), 0, 64}), MatmulError);
  const WeightMatrix w{WeightType::Q8_0, data.data(), 4, 64};
  std::vector<float> x(64), y(4), short_y(3), short_x(63);
  EXPECT_THROW(
      matmul(w, x, 1, short_y, scratch, SerialParallel(1), KernelSet::for_isa(detect_isa())),
      MatmulError);
  EXPECT_THROW(
      matmul(w, short_x, 1, y, scratch, SerialParallel(1), KernelSet::for_isa(detect_isa())),
      MatmulError);
  EXPECT_NO_THROW(matmul(w, x, 1, y, scratch, SerialParallel(1), KernelSet::for_isa(detect_isa())));
}

TEST(MatmulErrors, FusedOutputsMustShareCols) {
  std::vector<std::byte> a(34 * 4 * 2), b(34 * 4 * 3);
  std::vector<float> x(96), ya(4), yb(4);
  const MatmulOutput outs[] = {{WeightMatrix{WeightType::Q8_0, a.data(), 4, 64}, ya},
                               {WeightMatrix{WeightType::Q8_0, b.data(), 4, 96}, yb}};
  PackedActivations scratch;
  try {
    matmul(outs, x, 1, scratch, SerialParallel(1), KernelSet::for_isa(detect_isa()));
    FAIL() << "no exception";
  } catch (const MatmulError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cols=96"));
  }
}

TEST(MatmulErrors, ActivationOnlyTypeIsNotAWeight) {
  std::vector<std::byte> data(292 * 2);
  try {
    check_matrix(WeightMatrix{WeightType::Q8_K, data.data(), 2, 256});
    FAIL() << "no exception";
  } catch (const MatmulError& e) {
    EXPECT_THAT(e.what(), HasSubstr("q8_K"));
    EXPECT_THAT(e.what(), HasSubstr("activation-only"));
  }
}

}  // namespace
}  // namespace pacer::ops
