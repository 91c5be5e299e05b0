// Every dot kernel of every supported Isa against the scalar `_ref` on the SAME packed inputs
// (weights quantized once, activations packed once by the reference quantizer), over real
// Llama/Qwen row lengths and row counts that exercise each kernel's row unroll and tails.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "ops/isa.h"
#include "ops/kernel_set.h"
#include "ops/matmul.h"
#include "ops/q4_0.h"
#include "ops/q8_0.h"
#include "ops/type_traits.h"
#include "tests/ops/matmul_test_util.h"

namespace pacer::ops {
namespace {

using testing::kUnitRoundoff;

// Only the order of the float additions (and FMA's single rounding) differs between a SIMD
// kernel and its reference: integer block dots are exact in both, and both apply the same
// fl(d_w * d_x). For a sum of T terms, each order's rounding error is a random walk of T steps
// of at most u * |partial sum|, so |simd - ref| stays within a few sqrt(T) * u * sum|term|
// (the worst case, 2T * u * sum|term|, is never approached by random data). T is the number
// of blocks for the quantized types (one float term per block) and of elements for the others.
constexpr double kSumOrderSigmas = 4.0;

double sum_order_tolerance(int64_t terms, double abs_sum) {
  return kSumOrderSigmas * std::sqrt(static_cast<double>(terms) + 1.0) * kUnitRoundoff * abs_sum;
}

struct Shape {
  int64_t rows, cols;
};

// Row counts: 1, odd, not a multiple of the 4-row unroll, and one more than a full unroll; row
// lengths: one block, two, and the real ones (Qwen2.5-0.5B 896/4864, TinyLlama 2048/5632,
// Llama-3-8B's FFN 14336).
const Shape kShapes[] = {{1, 32},   {3, 64},    {5, 896}, {4, 2048}, {7, 4864},
                         {6, 5632}, {2, 14336}, {9, 896}, {2, 40}};

using KernelParam = std::tuple<Isa, WeightType, Shape>;

class MatmulKernel : public ::testing::TestWithParam<KernelParam> {};

TEST_P(MatmulKernel, SimdMatchesReferenceOnSameInputs) {
  const auto [isa, type, shape] = GetParam();
  const testing::OwnedMatrix w = testing::make_matrix(type, shape.rows, shape.cols, 42);
  const std::vector<float> x = testing::normal_floats(static_cast<size_t>(shape.cols), 43);
  PackedActivations act;
  act.pack(type, x, shape.cols, 1,
           KernelSet::for_isa(Isa::Scalar));  // the reference packing, shared by both sides

  // The exact-valued activations the kernels see: x itself, or d_x * q for act-Q8.
  std::vector<double> xs(x.begin(), x.end());
  const bool quantized = type_traits(type).act_type != WeightType::F32;
  if (quantized) {
    const ActQ8Row row = act_q8_row(act.token(0), shape.cols);
    for (int64_t j = 0; j < shape.cols; ++j) xs[j] = double(row.d[j / 32]) * row.q[j];
  }
  const int64_t terms = quantized ? shape.cols / 32 : shape.cols;

  const DotFn ref = type_traits(type).dot[static_cast<size_t>(Isa::Scalar)];
  const DotFn dot = KernelSet::for_isa(isa).matmul(type).dot;
  const DotRowsFn dot_rows = KernelSet::for_isa(isa).matmul(type).dot_rows;
  std::vector<float> rows_out(static_cast<size_t>(shape.rows), NAN);
  if (dot_rows != nullptr) {
    dot_rows(shape.cols, w.view.data, row_bytes(type, shape.cols), shape.rows, act.token(0),
             rows_out.data());
  }
  for (int64_t r = 0; r < shape.rows; ++r) {
    double abs_sum = 0;
    for (int64_t j = 0; j < shape.cols; ++j) {
      abs_sum += std::fabs(double(w.dequantized[r * shape.cols + j]) * xs[j]);
    }
    const double tol = sum_order_tolerance(terms, abs_sum);
    const float want = ref(shape.cols, w.view.row(r), act.token(0));
    EXPECT_NEAR(dot(shape.cols, w.view.row(r), act.token(0)), want, tol) << "dot, row " << r;
    if (dot_rows != nullptr) {
      EXPECT_NEAR(rows_out[r], want, tol) << "dot_rows, row " << r;
    }
  }
}

std::vector<KernelParam> kernel_params() {
  std::vector<KernelParam> out;
  for (Isa isa : supported_isas()) {
    for (WeightType t : testing::matmul_types()) {
      for (const Shape& s : kShapes) {
        if (s.cols % type_info(t).block_elems == 0) out.emplace_back(isa, t, s);
      }
    }
  }
  return out;
}

std::string param_name(const ::testing::TestParamInfo<KernelParam>& info) {
  const auto& [isa, type, shape] = info.param;
  return std::string(isa_name(isa)) + "_" + testing::shape_name(type, shape.rows, shape.cols);
}

INSTANTIATE_TEST_SUITE_P(IsaTypeShape, MatmulKernel, ::testing::ValuesIn(kernel_params()),
                         param_name);

// The float GEMVs read R far-apart rows per tile, each in bursts (ops/float_rows_simd.h); a row's
// FMAs must stay the same and in the same order as when it is dotted alone, so dot_rows over many
// rows (the stream tiles, bursts cut by the row's end, the masked tail) equals dot() per row.
TEST(FloatGemv, RowsInStreamsAndBurstsEqualTheSingleRowDotBitForBit) {
  int checked = 0;
  for (Isa isa : supported_isas()) {
    const KernelSet kernels = KernelSet::for_isa(isa);
    for (WeightType t : {WeightType::F32, WeightType::F16, WeightType::BF16}) {
      const MatmulKernels& k = kernels.matmul(t);
      if (k.dot_rows == nullptr) continue;  // the scalar tier dots row by row
      for (const Shape s : {Shape{37, 2048}, Shape{18, 4864 + 8}, Shape{21, 40}}) {
        const testing::OwnedMatrix w = testing::make_matrix(t, s.rows, s.cols, 46);
        const std::vector<float> x = testing::normal_floats(static_cast<size_t>(s.cols), 47);
        const auto* act = reinterpret_cast<const std::byte*>(x.data());
        std::vector<float> out(static_cast<size_t>(s.rows), NAN);
        k.dot_rows(s.cols, w.view.data, row_bytes(t, s.cols), s.rows, act, out.data());
        for (int64_t r = 0; r < s.rows; ++r) {
          ASSERT_EQ(out[r], k.dot(s.cols, w.view.row(r), act))
              << isa_name(isa) << " " << testing::shape_name(t, s.rows, s.cols) << " row " << r;
        }
        ++checked;
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "no SIMD tier here (the scalar tier has no dot_rows)";
}

// The AVX2 float prefill GEMMs (3 rows x 4 tokens per tile, then 2 or 1 rows, one token at a time):
// each (row, token) equals dot_rows of that token alone, bit for bit, for row counts and token
// counts that leave every kind of leftover, and a column count with a masked tail.
TEST(FloatGemm, Avx2EqualsItsDotRowsBitForBit) {
  if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  const KernelSet kernels = KernelSet::for_isa(Isa::Avx2);
  for (WeightType t : {WeightType::F32, WeightType::F16, WeightType::BF16}) {
    const MatmulKernels& k = kernels.matmul(t);
    ASSERT_NE(k.gemm, nullptr) << type_name(t);
    // 55 rows: two blocks of 8 row tiles (float_rows_simd.h), then 2 tiles and a row.
    for (const Shape s : {Shape{13, 2048}, Shape{6, 4864 + 8}, Shape{5, 40}, Shape{55, 261}}) {
      const testing::OwnedMatrix w = testing::make_matrix(t, s.rows, s.cols, 48);
      const int64_t stride = row_bytes(t, s.cols);
      for (int64_t tokens : {1, 2, 3, 4, 7, 8, 9}) {
        const std::vector<float> x =
            testing::normal_floats(static_cast<size_t>(tokens * s.cols), 49);
        const auto* act = reinterpret_cast<const std::byte*>(x.data());
        const int64_t act_stride = s.cols * static_cast<int64_t>(sizeof(float));
        std::vector<float> y(static_cast<size_t>(tokens * s.rows), NAN), one(s.rows, NAN);
        k.gemm(s.cols, w.view.data, stride, s.rows, act, act_stride, tokens, y.data(), s.rows);
        for (int64_t tk = 0; tk < tokens; ++tk) {
          k.dot_rows(s.cols, w.view.data, stride, s.rows, act + tk * act_stride, one.data());
          for (int64_t r = 0; r < s.rows; ++r) {
            ASSERT_EQ(y[tk * s.rows + r], one[r])
                << testing::shape_name(t, s.rows, s.cols) << ", " << tokens << " tokens: token "
                << tk << " row " << r;
          }
        }
      }
    }
  }
}

// The AVX-512 kernels without VNNI (Skylake-X/Cascade Lake run them) are only reachable through
// the traits table on such CPUs; on a VNNI machine they are tested here directly, against the
// same reference and tolerance.
struct DirectKernel {
  const char* name;
  WeightType type;
  DotRowsFn dot_rows;
};

class MatmulAvx512NoVnni : public ::testing::TestWithParam<Shape> {};

TEST_P(MatmulAvx512NoVnni, MatchesReference) {
  if (!isa_supported(Isa::Avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  const Shape shape = GetParam();
  for (const DirectKernel& k :
       {DirectKernel{"q8_0", WeightType::Q8_0, dot_rows_q8_0_q8_0_avx512},
        DirectKernel{"q4_0", WeightType::Q4_0, dot_rows_q4_0_q8_0_avx512}}) {
    const testing::OwnedMatrix w = testing::make_matrix(k.type, shape.rows, shape.cols, 44);
    const std::vector<float> x = testing::normal_floats(static_cast<size_t>(shape.cols), 45);
    PackedActivations act;
    act.pack(k.type, x, shape.cols, 1, KernelSet::for_isa(Isa::Scalar));
    const ActQ8Row row = act_q8_row(act.token(0), shape.cols);
    std::vector<float> out(static_cast<size_t>(shape.rows), NAN);
    k.dot_rows(shape.cols, w.view.data, row_bytes(k.type, shape.cols), shape.rows, act.token(0),
               out.data());
    const DotFn ref = type_traits(k.type).dot[static_cast<size_t>(Isa::Scalar)];
    for (int64_t r = 0; r < shape.rows; ++r) {
      double abs_sum = 0;
      for (int64_t j = 0; j < shape.cols; ++j) {
        abs_sum += std::fabs(double(w.dequantized[r * shape.cols + j]) * row.d[j / 32] * row.q[j]);
      }
      EXPECT_NEAR(out[r], ref(shape.cols, w.view.row(r), act.token(0)),
                  sum_order_tolerance(shape.cols / 32, abs_sum))
          << k.name << " row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulAvx512NoVnni,
                         ::testing::Values(Shape{1, 32}, Shape{5, 896}, Shape{13, 2048},
                                           Shape{3, 14336}),
                         [](const auto& info) {
                           return std::to_string(info.param.rows) + "x" +
                                  std::to_string(info.param.cols);
                         });

// The two AVX-512 prefill GEMMs of Q8_0/Q4_0, called directly (the dispatcher picks one per CPU):
// the repacked VNNI GEMM and the AMX-INT8 one, against the scalar reference dot of every (row,
// token) on the same packed activations. Both only reorder the float sum of exact per-block
// integer dots, so each result is within 2 (blocks + 8) u sum_j |w_j x_j| of the reference.
// 67 blocks = two 32-block chunks and a partial one; 37 rows = two 16-row tiles and a partial
// one; 19 tokens = full and partial groups of 8 (VNNI) and 16 (AMX).
TEST(QuantPrefillGemm, VnniAndAmxMatchTheReferenceDot) {
  using GemmKernel = void (*)(int64_t, const std::byte*, int64_t, int64_t, const std::byte*,
                              int64_t, int64_t, float*, int64_t);
  const CpuFeatures cpu = detect_cpu_features();
  if (!cpu.avx512_vnni) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  const int64_t rows = 37, cols = 67 * 32, tokens = 19;
  for (WeightType type : {WeightType::Q8_0, WeightType::Q4_0}) {
    const bool q8 = type == WeightType::Q8_0;
    std::vector<std::pair<std::string, GemmKernel>> kernels = {
        {"vnni", q8 ? gemm_q8_0_q8_0_avx512vnni : gemm_q4_0_q8_0_avx512vnni}};
    if (cpu.amx_int8) kernels.push_back({"amx", q8 ? gemm_q8_0_q8_0_amx : gemm_q4_0_q8_0_amx});
    const testing::OwnedMatrix w = testing::make_matrix(type, rows, cols, 21);
    const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * cols), 22);
    PackedActivations act;
    act.pack(type, x, cols, tokens, KernelSet::for_isa(Isa::Scalar));
    const int64_t act_stride = act.token(1) - act.token(0);
    for (const auto& [name, gemm] : kernels) {
      std::vector<float> y(static_cast<size_t>(tokens * rows), NAN);
      gemm(cols, w.view.data, row_bytes(type, cols), rows, act.token(0), act_stride, tokens,
           y.data(), rows);
      for (int64_t t = 0; t < tokens; ++t) {
        const ActQ8Row a = act_q8_row(act.token(t), cols);
        for (int64_t r = 0; r < rows; ++r) {
          const float ref = q8 ? dot_q8_0_q8_0_ref(cols, w.view.row(r), act.token(t))
                               : dot_q4_0_q8_0_ref(cols, w.view.row(r), act.token(t));
          double abs_sum = 0;
          for (int64_t j = 0; j < cols; ++j) {
            abs_sum += std::fabs(double(w.dequantized[r * cols + j]) * a.d[j / 32] * a.q[j]);
          }
          const double bound = 2.0 * (cols / 32 + 8) * kUnitRoundoff * abs_sum;
          ASSERT_NEAR(y[t * rows + r], ref, bound)
              << name << " " << type_name(type) << " token " << t << " row " << r;
        }
      }
    }
  }
}

}  // namespace
}  // namespace pacer::ops
