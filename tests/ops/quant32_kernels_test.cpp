// Q4_1 / Q5_0 / Q5_1 / IQ4_NL kernels: every SIMD dot and dot_rows (each Isa this CPU runs, and
// the AVX-512 kernels with and without VNNI called directly) against the scalar `_ref` on the
// SAME packed inputs, over real Llama/Qwen row lengths and odd row counts; then matmul() against
// the fp64 product of the dequantized matrix with a derived bound, prefill (the AVX-512 GEMMs,
// elsewhere the token loop) against single-token GEMVs bit for bit, worker-count independence, and
// fusing with Q4_0 outputs, which share the act-Q8 packing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "ops/fp16.h"
#include "ops/iq4_nl.h"
#include "ops/isa.h"
#include "ops/kernel_set.h"
#include "ops/matmul.h"
#include "ops/parallel.h"
#include "ops/q4_0.h"
#include "ops/q4_1.h"
#include "ops/q5_0.h"
#include "ops/q5_1.h"
#include "ops/q8_0.h"
#include "ops/type_traits.h"
#include "tests/ops/matmul_test_util.h"

namespace pacer::ops {
namespace {

using testing::kUnitRoundoff;

const WeightType kTypes[] = {WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1,
                             WeightType::IQ4_NL};

bool has_offset(WeightType t) {
  return t == WeightType::Q4_1 || t == WeightType::Q5_1;
}

// Only the order of the float additions (and FMA's single rounding, and where the offset term's
// product is rounded) differs between a SIMD kernel and its reference: integer block dots are
// exact in both. For T float terms each order's rounding error is a random walk of T steps of
// at most ~2u |partial sum|, so |simd - ref| stays within a few sqrt(T) u sum|term| (the worst
// case, 2T u sum|term|, is never approached by random data). T = 2 terms per block for the
// offset types (scale part and offset part), 1 otherwise.
constexpr double kSumOrderSigmas = 4.0;

// sum over the row of |float terms| the kernels add: |d_w q_w| |xq| (= |w - m| |xq|) plus
// |m| |xq| for the offset types, |w| |xq| otherwise; xq = d_x q_x, the quantized activations.
double abs_terms(WeightType t, const std::byte* row, const float* w, const ActQ8Row& a, int64_t n) {
  const int64_t bb = type_info(t).block_bytes;
  double sum = 0;
  for (int64_t b = 0; b < n / 32; ++b) {
    double m = 0;
    if (has_offset(t)) {
      fp16_t h;
      std::memcpy(&h, row + b * bb + 2, sizeof h);  // m follows d in both blocks
      m = fp16_to_fp32(h);
    }
    for (int64_t j = 32 * b; j < 32 * b + 32; ++j) {
      const double xq = std::fabs(double(a.d[b]) * a.q[j]);
      sum += (std::fabs(w[j] - m) + std::fabs(m)) * xq;
    }
  }
  return sum;
}

double sum_order_tolerance(WeightType t, int64_t n, double abs_sum) {
  const int64_t terms = (has_offset(t) ? 2 : 1) * n / 32;
  return kSumOrderSigmas * std::sqrt(static_cast<double>(terms) + 1.0) * kUnitRoundoff * abs_sum;
}

struct Shape {
  int64_t rows, cols;
};

// Row counts: 1, odd, not a multiple of the 4- and 8-row tiles, one more than a tile, and enough
// for the far-apart row streams (>= 32 rows); row lengths: one block, two, Qwen2.5-0.5B's 896
// and 4864, TinyLlama's 2048 and 5632, Llama-3-8B's FFN 14336.
const Shape kShapes[] = {{1, 32},   {3, 64},   {5, 896},   {9, 896},  {4, 2048}, {13, 2048},
                         {7, 4864}, {6, 5632}, {2, 14336}, {37, 896}, {33, 5632}};

struct Kernel {
  std::string name;
  DotFn dot;           // may be null (direct dot_rows-only entries)
  DotRowsFn dot_rows;  // may be null
};

// The kernels to hold to the reference for (isa, type): the traits table's, plus on AVX-512
// both the plain and the VNNI variant directly (the table only reaches one per CPU).
std::vector<Kernel> kernels_for(Isa isa, WeightType t) {
  std::vector<Kernel> out = {
      {"table", KernelSet::for_isa(isa).matmul(t).dot, KernelSet::for_isa(isa).matmul(t).dot_rows}};
  if (isa != Isa::Avx512) return out;
  switch (t) {
    case WeightType::Q4_1:
      out.push_back({"avx512", dot_q4_1_q8_0_avx512, dot_rows_q4_1_q8_0_avx512});
      out.push_back({"avx512vnni", dot_q4_1_q8_0_avx512vnni, dot_rows_q4_1_q8_0_avx512vnni});
      break;
    case WeightType::Q5_0:
      out.push_back({"avx512", dot_q5_0_q8_0_avx512, dot_rows_q5_0_q8_0_avx512});
      out.push_back({"avx512vnni", dot_q5_0_q8_0_avx512vnni, dot_rows_q5_0_q8_0_avx512vnni});
      break;
    case WeightType::Q5_1:
      out.push_back({"avx512", dot_q5_1_q8_0_avx512, dot_rows_q5_1_q8_0_avx512});
      out.push_back({"avx512vnni", dot_q5_1_q8_0_avx512vnni, dot_rows_q5_1_q8_0_avx512vnni});
      break;
    case WeightType::IQ4_NL:
      out.push_back({"avx512", dot_iq4_nl_q8_0_avx512, dot_rows_iq4_nl_q8_0_avx512});
      out.push_back({"avx512vnni", dot_iq4_nl_q8_0_avx512vnni, dot_rows_iq4_nl_q8_0_avx512vnni});
      break;
    default:
      break;
  }
  if (!detect_cpu_features().avx512_vnni) out.pop_back();  // cannot run VNNI here
  return out;
}

using KernelParam = std::tuple<Isa, WeightType, Shape>;
class Quant32Kernel : public ::testing::TestWithParam<KernelParam> {};

TEST_P(Quant32Kernel, SimdMatchesReferenceOnSameInputs) {
  const auto [isa, type, shape] = GetParam();
  const testing::OwnedMatrix w = testing::make_matrix(type, shape.rows, shape.cols, 42);
  const std::vector<float> x = testing::normal_floats(static_cast<size_t>(shape.cols), 43);
  PackedActivations act;
  act.pack(type, x, shape.cols, 1,
           KernelSet::for_isa(Isa::Scalar));  // the reference packing, shared by all
  const ActQ8Row a = act_q8_row(act.token(0), shape.cols);
  const int64_t stride = row_bytes(type, shape.cols);
  const DotFn ref = type_traits(type).dot[static_cast<size_t>(Isa::Scalar)];
  for (const Kernel& k : kernels_for(isa, type)) {
    std::vector<float> rows_out(static_cast<size_t>(shape.rows), NAN);
    if (k.dot_rows != nullptr) {
      k.dot_rows(shape.cols, w.view.data, stride, shape.rows, act.token(0), rows_out.data());
    }
    for (int64_t r = 0; r < shape.rows; ++r) {
      const double tol = sum_order_tolerance(
          type, shape.cols,
          abs_terms(type, w.view.row(r), w.dequantized.data() + r * shape.cols, a, shape.cols));
      const float want = ref(shape.cols, w.view.row(r), act.token(0));
      EXPECT_NEAR(k.dot(shape.cols, w.view.row(r), act.token(0)), want, tol)
          << k.name << " dot, row " << r;
      if (k.dot_rows != nullptr) {
        EXPECT_NEAR(rows_out[r], want, tol) << k.name << " dot_rows, row " << r;
      }
    }
  }
}

std::vector<KernelParam> kernel_params() {
  std::vector<KernelParam> out;
  for (Isa isa : supported_isas()) {
    if (isa == Isa::Scalar) continue;  // the scalar entry is the reference itself
    for (WeightType t : kTypes) {
      for (const Shape& s : kShapes) out.emplace_back(isa, t, s);
    }
  }
  return out;
}

std::string param_name(const ::testing::TestParamInfo<KernelParam>& info) {
  const auto& [isa, type, shape] = info.param;
  return std::string(isa_name(isa)) + "_" + testing::shape_name(type, shape.rows, shape.cols);
}

INSTANTIATE_TEST_SUITE_P(IsaTypeShape, Quant32Kernel, ::testing::ValuesIn(kernel_params()),
                         param_name);

// The extremes of every integer path: all quants at their largest (nibble 15, fifth bit set,
// IQ4_NL's -127) against activations of +-127, where a saturating maddubs or a wrong bias
// would show as a gross error. Compared with the reference, which sums in int32.
TEST(Quant32KernelExtremes, SaturationBoundsHold) {
  const int64_t n = 2048, rows = 9;
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) x[j] = (j % 3 == 0) ? -1.0f : 1.0f;  // quantizes to +-127
  for (WeightType t : kTypes) {
    std::vector<float> wf(static_cast<size_t>(rows * n));
    for (int64_t i = 0; i < rows * n; ++i) {
      // Row-dependent extremes: all at the top level, all at the bottom, or alternating.
      const int64_t r = i / n;
      wf[i] = r % 3 == 0 ? 1.0f : r % 3 == 1 ? -1.0f : ((i % 2) ? 1.0f : -1.0f);
      if (r % 3 == 0 && i % 32 == 0) wf[i] = -0.001f;  // keep a nonzero range for Q4_1 / Q5_1
    }
    const int64_t stride = row_bytes(t, n);
    std::vector<std::byte> wq(static_cast<size_t>(rows * stride));
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(t, wf.data() + r * n, wq.data() + r * stride, n);
    PackedActivations act;
    act.pack(t, x, n, 1, KernelSet::for_isa(Isa::Scalar));
    const ActQ8Row a = act_q8_row(act.token(0), n);
    std::vector<float> deq(static_cast<size_t>(rows * n));
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(t, wq.data() + r * stride, deq.data() + r * n, n);
    }
    const DotFn ref = type_traits(t).dot[static_cast<size_t>(Isa::Scalar)];
    for (Isa isa : supported_isas()) {
      for (const Kernel& k : kernels_for(isa, t)) {
        std::vector<float> out(static_cast<size_t>(rows), NAN);
        if (k.dot_rows != nullptr) {
          k.dot_rows(n, wq.data(), stride, rows, act.token(0), out.data());
        } else {
          for (int64_t r = 0; r < rows; ++r)
            out[r] = k.dot(n, wq.data() + r * stride, act.token(0));
        }
        for (int64_t r = 0; r < rows; ++r) {
          const double tol = sum_order_tolerance(
              t, n, abs_terms(t, wq.data() + r * stride, deq.data() + r * n, a, n));
          EXPECT_NEAR(out[r], ref(n, wq.data() + r * stride, act.token(0)), tol)
              << type_name(t) << " " << isa_name(isa) << " " << k.name << " row " << r;
        }
      }
    }
  }
}

// matmul() against the fp64 product of the dequantized matrix, |y - sum_j w_j x_j| <=
// * activations: block b of x is stored as d_b q with |x - d_b q| <= d_b (1/2 + 254u)
//   (act-Q8's rule), contributing sum_b d_b (1/2 + 254u) sum|w_j|;
// * weights: the kernels use the exact d q + m (or d (q - 16), d level); dequantize_row's float
//   is within u |w| of it;
// * float evaluation: the exact per-block integer dots become T float terms (T = blocks, x2 for
//   the offset types), each rounded at most twice and summed in some order:
//   <= 2 (T + 8) u sum|term| with sum|term| as in abs_terms (8 covers the lane trees).
double derived_bound(WeightType t, const testing::OwnedMatrix& w, int64_t r,
                     const std::vector<float>& x, const ActQ8Row& a) {
  const int64_t n = w.view.cols;
  const float* wr = w.dequantized.data() + r * n;
  double act_err = 0, weight_err = 0;
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0;
    for (int64_t j = 32 * b; j < 32 * b + 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const double step = (amax / 127.0f) * (0.5 + 254 * kUnitRoundoff);
    for (int64_t j = 32 * b; j < 32 * b + 32; ++j) {
      act_err += step * std::fabs(wr[j]);
      weight_err += kUnitRoundoff * std::fabs(wr[j]) * std::fabs(double(a.d[b]) * a.q[j]);
    }
  }
  const int64_t terms = (has_offset(t) ? 2 : 1) * n / 32;
  return act_err + weight_err +
         2.0 * static_cast<double>(terms + 8) * kUnitRoundoff *
             abs_terms(t, w.view.row(r), wr, a, n);
}

std::vector<float> run_matmul(const WeightMatrix& w, const std::vector<float>& x, int64_t tokens,
                              const Parallel& par, Isa isa) {
  std::vector<float> y(static_cast<size_t>(tokens * w.rows), NAN);
  PackedActivations scratch;
  matmul(w, x, tokens, y, scratch, par, KernelSet::for_isa(isa));
  return y;
}

using IsaType = std::tuple<Isa, WeightType>;
class Quant32Matmul : public ::testing::TestWithParam<IsaType> {};

TEST_P(Quant32Matmul, WithinDerivedBoundOfFp64Product) {
  const auto [isa, type] = GetParam();
  for (const Shape& s : {Shape{1, 32}, Shape{5, 896}, Shape{37, 2048}, Shape{3, 5632}}) {
    const testing::OwnedMatrix w = testing::make_matrix(type, s.rows, s.cols, 5);
    const std::vector<float> x = testing::normal_floats(static_cast<size_t>(s.cols), 6);
    PackedActivations act;
    act.pack(type, x, s.cols, 1, KernelSet::for_isa(isa));
    const ActQ8Row a = act_q8_row(act.token(0), s.cols);
    const std::vector<float> y = run_matmul(w.view, x, 1, SerialParallel(1), isa);
    for (int64_t r = 0; r < s.rows; ++r) {
      double exact = 0;
      for (int64_t j = 0; j < s.cols; ++j) exact += double(w.dequantized[r * s.cols + j]) * x[j];
      EXPECT_NEAR(y[r], exact, derived_bound(type, w, r, x, a))
          << s.rows << "x" << s.cols << " row " << r;
    }
  }
}

// ggml tests/test-quantize-fns.cpp: |quantized dot - fp32 dot| / n on its cosine data (weights
// 0.1 + 2 cos(i), activations 0.1 + 2 cos(i + 1), n = 4096) must stay below this.
constexpr float kGgmlMaxDotProductError = 0.02f;

TEST_P(Quant32Matmul, GgmlDotProductErrorLimit) {
  const auto [isa, type] = GetParam();
  const int64_t n = 32 * 128;
  std::vector<float> wf(n), x(n);
  for (int64_t i = 0; i < n; ++i) {
    wf[i] = 0.1f + 2.0f * std::cos(static_cast<float>(i));
    x[i] = 0.1f + 2.0f * std::cos(static_cast<float>(i) + 1.0f);
  }
  std::vector<std::byte> wq(static_cast<size_t>(row_bytes(type, n)));
  quantize_row(type, wf.data(), wq.data(), n);
  double exact = 0;
  for (int64_t i = 0; i < n; ++i) exact += double(wf[i]) * x[i];
  const float y = run_matmul(WeightMatrix{type, wq.data(), 1, n}, x, 1, SerialParallel(1), isa)[0];
  EXPECT_LT(std::fabs(y - exact) / n, kGgmlMaxDotProductError);
}

// Prefill against single-token GEMVs, bit for bit: on AVX-512 the quad GEMM and on AVX2 the
// 2-row x 4-token tiles put every (row, token) pair through the same operations as the GEMV,
// only sharing each unpacked weight block between tokens (7 tokens: a group of 4, then 3 more);
// the scalar tier runs the same dot once per token.
TEST_P(Quant32Matmul, PrefillEqualsRepeatedGemvBitForBit) {
  const auto [isa, type] = GetParam();
  const int64_t rows = 37, cols = 67 * 32;
  const testing::OwnedMatrix w = testing::make_matrix(type, rows, cols, 8);
  const int64_t tokens = 7;
  const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * cols), 9);
  const std::vector<float> gemm = run_matmul(w.view, x, tokens, SerialParallel(1), isa);
  for (int64_t t = 0; t < tokens; ++t) {
    const std::vector<float> xt(x.begin() + t * cols, x.begin() + (t + 1) * cols);
    const std::vector<float> gemv = run_matmul(w.view, xt, 1, SerialParallel(1), isa);
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(gemm[t * rows + r], gemv[r]) << "token " << t << " row " << r;
    }
  }
}

TEST_P(Quant32Matmul, ResultsIndependentOfWorkerCount) {
  const auto [isa, type] = GetParam();
  const int64_t rows = 83, cols = 2048;
  const testing::OwnedMatrix w = testing::make_matrix(type, rows, cols, 14);
  for (int64_t tokens : {1, 3}) {
    const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * cols), 15);
    const std::vector<float> one = run_matmul(w.view, x, tokens, SerialParallel(1), isa);
    EXPECT_EQ(one, run_matmul(w.view, x, tokens, SerialParallel(3), isa)) << tokens;
    EXPECT_EQ(one, run_matmul(w.view, x, tokens, TbbParallel(2), isa)) << tokens;
  }
}

// A llama.cpp K-quant mix puts Q5_0 next to other types in one fused call; with Q4_0 the act-Q8
// packing is shared, with F16 a second packing is made. Either way each output equals its own
// separate call bit for bit.
TEST_P(Quant32Matmul, FusedWithOtherTypesEqualsSeparateCalls) {
  const auto [isa, type] = GetParam();
  const int64_t cols = 896, tokens = 2;
  const testing::OwnedMatrix q = testing::make_matrix(WeightType::Q4_0, 24, cols, 10);
  const testing::OwnedMatrix k = testing::make_matrix(type, 21, cols, 11);
  const testing::OwnedMatrix v = testing::make_matrix(WeightType::F16, 19, cols, 12);
  const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * cols), 13);
  std::vector<float> yq(24 * tokens), yk(21 * tokens), yv(19 * tokens);
  const MatmulOutput outs[] = {{k.view, yk}, {q.view, yq}, {v.view, yv}};
  PackedActivations scratch;
  matmul(outs, x, tokens, scratch, SerialParallel(3), KernelSet::for_isa(isa));
  EXPECT_EQ(yq, run_matmul(q.view, x, tokens, SerialParallel(1), isa));
  EXPECT_EQ(yk, run_matmul(k.view, x, tokens, SerialParallel(1), isa));
  EXPECT_EQ(yv, run_matmul(v.view, x, tokens, SerialParallel(1), isa));
}

// A GEMM called directly against the dot_rows it must equal: every token of a `tokens`-token call
// over `rows` rows, bit for bit (the matrix and activations seeded from `seed`).
struct GemmVariant {
  const char* name;
  WeightType type;
  GemmFn gemm;
  DotRowsFn dot_rows;
};
void expect_gemm_equals_dot_rows(const GemmVariant& v, int64_t rows, int64_t cols, int64_t tokens,
                                 uint32_t seed) {
  const testing::OwnedMatrix w = testing::make_matrix(v.type, rows, cols, seed);
  const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * cols), seed + 1);
  PackedActivations act;
  act.pack(v.type, x, cols, tokens, KernelSet::for_isa(Isa::Scalar));
  const int64_t stride = row_bytes(v.type, cols);
  std::vector<float> y(static_cast<size_t>(tokens * rows), NAN), one(rows);
  v.gemm(cols, w.view.data, stride, rows, act.token(0), act.token(1) - act.token(0), tokens,
         y.data(), rows);
  for (int64_t t = 0; t < tokens; ++t) {
    v.dot_rows(cols, w.view.data, stride, rows, act.token(t), one.data());
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(y[t * rows + r], one[r])
          << v.name << ", " << tokens << " tokens: token " << t << " row " << r;
    }
  }
}

// Both AVX-512 GEMM variants called directly (the table reaches one per CPU): every token of a
// 9-token GEMM (two groups of 4 and a single one) over 13 rows (a tile of 8, a quad and a
// partial quad) equals dot_rows of the same variant on that token, bit for bit.
TEST(Quant32Gemm, Avx512VariantsEqualTheirDotRowsBitForBit) {
  if (!isa_supported(Isa::Avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  const bool vnni = detect_cpu_features().avx512_vnni;
  struct Variant {
    const char* name;
    WeightType type;
    GemmFn gemm;
    DotRowsFn dot_rows;
    bool needs_vnni;
  };
  const Variant variants[] = {
      {"q4_1", WeightType::Q4_1, gemm_q4_1_q8_0_avx512, dot_rows_q4_1_q8_0_avx512, false},
      {"q4_1 vnni", WeightType::Q4_1, gemm_q4_1_q8_0_avx512vnni, dot_rows_q4_1_q8_0_avx512vnni,
       true},
      {"q5_0", WeightType::Q5_0, gemm_q5_0_q8_0_avx512, dot_rows_q5_0_q8_0_avx512, false},
      {"q5_0 vnni", WeightType::Q5_0, gemm_q5_0_q8_0_avx512vnni, dot_rows_q5_0_q8_0_avx512vnni,
       true},
      {"q5_1", WeightType::Q5_1, gemm_q5_1_q8_0_avx512, dot_rows_q5_1_q8_0_avx512, false},
      {"q5_1 vnni", WeightType::Q5_1, gemm_q5_1_q8_0_avx512vnni, dot_rows_q5_1_q8_0_avx512vnni,
       true},
      {"iq4_nl", WeightType::IQ4_NL, gemm_iq4_nl_q8_0_avx512, dot_rows_iq4_nl_q8_0_avx512, false},
      {"iq4_nl vnni", WeightType::IQ4_NL, gemm_iq4_nl_q8_0_avx512vnni,
       dot_rows_iq4_nl_q8_0_avx512vnni, true},
  };
  for (const Variant& v : variants) {
    if (v.needs_vnni && !vnni) continue;
    expect_gemm_equals_dot_rows({v.name, v.type, v.gemm, v.dot_rows}, 13, 896, 9, 31);
  }
}

// The AVX2 GEMMs called directly, all six act-Q8 types: 13 rows (6 pairs and a single row) by
// 1, 2, 3, 4 and 9 tokens (two groups of 4 and a single one), each (row, token) equal to the
// AVX2 dot_rows of that token bit for bit, over 67 blocks (4 full scale strips and a partial).
TEST(Quant32Gemm, Avx2EqualsItsDotRowsBitForBit) {
  if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  const GemmVariant variants[] = {
      {"q8_0", WeightType::Q8_0, gemm_q8_0_q8_0_avx2, dot_rows_q8_0_q8_0_avx2},
      {"q4_0", WeightType::Q4_0, gemm_q4_0_q8_0_avx2, dot_rows_q4_0_q8_0_avx2},
      {"q4_1", WeightType::Q4_1, gemm_q4_1_q8_0_avx2, dot_rows_q4_1_q8_0_avx2},
      {"q5_0", WeightType::Q5_0, gemm_q5_0_q8_0_avx2, dot_rows_q5_0_q8_0_avx2},
      {"q5_1", WeightType::Q5_1, gemm_q5_1_q8_0_avx2, dot_rows_q5_1_q8_0_avx2},
      {"iq4_nl", WeightType::IQ4_NL, gemm_iq4_nl_q8_0_avx2, dot_rows_iq4_nl_q8_0_avx2},
  };
  for (const GemmVariant& v : variants) {
    for (int64_t tokens : {1, 2, 3, 4, 9}) expect_gemm_equals_dot_rows(v, 13, 67 * 32, tokens, 41);
  }
}

std::vector<IsaType> isa_type_params() {
  std::vector<IsaType> out;
  for (Isa isa : supported_isas()) {
    for (WeightType t : kTypes) out.emplace_back(isa, t);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(IsaType, Quant32Matmul, ::testing::ValuesIn(isa_type_params()),
                         [](const auto& info) {
                           return std::string(isa_name(std::get<0>(info.param))) + "_" +
                                  std::string(type_name(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace pacer::ops
