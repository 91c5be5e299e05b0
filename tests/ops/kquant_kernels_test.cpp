// Every K-quant dot kernel of every supported Isa against the scalar `_ref` on the SAME inputs:
// weights from the quantizer, uniformly random blocks (every scale/min bit pattern), and the
// worst case for the integer bounds (all quants and scales at their maximum against activations
// at +-127). Also: dot_rows equals dot bit for bit, and the reference itself equals the exact
// (double) dot of the dequantized weights with the Q8_K values up to float rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "ops/isa.h"
#include "ops/kernel_set.h"
#include "ops/matmul.h"
#include "ops/q4_k.h"
#include "ops/q6_k.h"
#include "ops/type_traits.h"
#include "tests/ops/kquant_test_util.h"
#include "tests/ops/matmul_test_util.h"

namespace pacer::ops {
namespace {

using testing::kUnitRoundoff;

// SIMD and reference differ only in float order: the per-super-block integer sums are exact in
// both (int32, bounds in q4_k.h / q6_k.h); the SIMD kernels convert each of 8 or 16 int32 lanes
// to float and FMA them with the same fl(d_w * d_x) the reference applies to the whole sum. With
// T such float terms per row, each order's error is a random walk of at most T steps of
// u * |partial sum|, so |simd - ref| stays within a few sqrt(T) u sum|term| on random data.
constexpr double kSumOrderSigmas = 4.0;
// Worst-case data (every term of one sign) can make the rounding errors add up coherently:
// there the rigorous bound 2 (T + 8) u sum|term| applies instead.
double rigorous_tolerance(int64_t terms, double abs_sum) {
  return 2.0 * static_cast<double>(terms + 8) * kUnitRoundoff * abs_sum;
}
double sum_order_tolerance(int64_t terms, double abs_sum) {
  return kSumOrderSigmas * std::sqrt(static_cast<double>(terms) + 1.0) * kUnitRoundoff * abs_sum;
}
// Float terms per row: per super-block up to 16 lanes for the q part and 16 for the offset
// part (Q4_K mins), each converted once and accumulated once.
int64_t float_terms(int64_t n) {
  return 4 * 16 * (n / kQK_K);
}

// sum_i |w_i| |x_i| over one row, w split into its two integer parts so that cancellation
// between the scale and min (or -32 offset) terms is accounted for: Q4_K |d sc q| + |dmin m|,
// Q6_K |d sc q| + |32 d sc|.
double abs_term_sum(WeightType t, const std::byte* row, int64_t n, const std::vector<double>& xs) {
  double sum = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    if (t == WeightType::Q4_K) {
      BlockQ4_K blk;
      std::memcpy(&blk, row + b * sizeof blk, sizeof blk);
      for (int e = 0; e < kQK_K; ++e) {
        int sc, m;
        testing::q4_K_scale_min(blk, e / 32, &sc, &m);
        const double w =
            fp16_to_fp32(blk.d) * sc * testing::q4_K_quant(blk, e) + fp16_to_fp32(blk.dmin) * m;
        sum += w * std::fabs(xs[b * kQK_K + e]);
      }
    } else {
      BlockQ6_K blk;
      std::memcpy(&blk, row + b * sizeof blk, sizeof blk);
      for (int e = 0; e < kQK_K; ++e) {
        const double w = std::fabs(fp16_to_fp32(blk.d) * blk.scales[e / 16]) *
                         (testing::q6_K_quant(blk, e) + 32);
        sum += w * std::fabs(xs[b * kQK_K + e]);
      }
    }
  }
  return sum;
}

enum class Data { Quantized, RandomBlocks, Extreme };

// `rows` weight rows of type t, n columns, made per `data`; plus a matching Q8_K activation row.
struct Inputs {
  std::vector<std::byte> w, act;
  int64_t stride;
};

Inputs make_inputs(WeightType t, Data data, int64_t rows, int64_t n, uint32_t seed) {
  Inputs in;
  in.stride = row_bytes(t, n);
  in.w.resize(static_cast<size_t>(rows * in.stride));
  std::vector<float> x = testing::normal_floats(static_cast<size_t>(n), seed + 1000);
  for (int64_t r = 0; r < rows; ++r) {
    std::byte* dst = in.w.data() + r * in.stride;
    if (data == Data::Quantized) {
      const std::vector<float> src =
          testing::normal_floats(static_cast<size_t>(n), seed + r, 0.05f);
      quantize_row(t, src.data(), dst, n);
    } else if (data == Data::RandomBlocks) {
      const std::vector<std::byte> row = t == WeightType::Q4_K
                                             ? testing::random_q4_K_row(n, seed + r)
                                             : testing::random_q6_K_row(n, seed + r);
      std::memcpy(dst, row.data(), row.size());
    } else {
      // Every quant and scale at its largest magnitude: Q4_K q = 15, sc = m = 63 (all bits set);
      // Q6_K q = 63, sc = -128 (odd rows) or 127. Activations all +127 or all -127 per block.
      std::memset(dst, 0xFF, static_cast<size_t>(in.stride));
      for (int64_t b = 0; b < n / kQK_K; ++b) {
        if (t == WeightType::Q4_K) {
          auto* blk = reinterpret_cast<BlockQ4_K*>(dst) + b;
          blk->d = blk->dmin = fp32_to_fp16(0.001f);
        } else {
          auto* blk = reinterpret_cast<BlockQ6_K*>(dst) + b;
          std::memset(blk->scales, r % 2 ? 0x80 : 0x7F, sizeof blk->scales);
          blk->d = fp32_to_fp16(0.001f);
        }
      }
    }
  }
  if (data == Data::Extreme) {
    for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = (i / kQK_K) % 2 ? -1.0f : 1.0f;
  }
  in.act = testing::pack_q8_K(x);
  return in;
}

struct Shape {
  int64_t rows, cols;
};

// Row counts: 1, the 2- and 4-row tiles with and without tails; row lengths: one and two
// super-blocks and real ones (TinyLlama 2048/5632, Llama-3-8B 4096/14336).
const Shape kShapes[] = {{1, 256}, {3, 512}, {5, 2048}, {4, 4096}, {7, 5632}, {2, 14336}, {9, 256}};

using KernelParam = std::tuple<Isa, WeightType, Data, Shape>;
class KQuantKernel : public ::testing::TestWithParam<KernelParam> {};

TEST_P(KQuantKernel, SimdMatchesReferenceAndRowsMatchSingleDot) {
  const auto [isa, type, data, shape] = GetParam();
  const Inputs in = make_inputs(type, data, shape.rows, shape.cols, 77);
  const std::vector<double> xs = testing::q8_K_values(in.act);
  const DotFn ref = type_traits(type).dot[static_cast<size_t>(Isa::Scalar)];
  const DotFn dot = KernelSet::for_isa(isa).matmul(type).dot;
  const DotRowsFn dot_rows = KernelSet::for_isa(isa).matmul(type).dot_rows;
  std::vector<float> rows_out(static_cast<size_t>(shape.rows), NAN);
  if (dot_rows != nullptr) {
    dot_rows(shape.cols, in.w.data(), in.stride, shape.rows, in.act.data(), rows_out.data());
  }
  for (int64_t r = 0; r < shape.rows; ++r) {
    const std::byte* row = in.w.data() + r * in.stride;
    const double abs_sum = abs_term_sum(type, row, shape.cols, xs);
    const int64_t terms = float_terms(shape.cols);
    const double tol = data == Data::Extreme ? rigorous_tolerance(terms, abs_sum)
                                             : sum_order_tolerance(terms, abs_sum);
    const float want = ref(shape.cols, row, in.act.data());
    const float got = dot(shape.cols, row, in.act.data());
    EXPECT_NEAR(got, want, tol) << "dot, row " << r;
    if (dot_rows != nullptr) {
      // Each row of a tile runs the same operations in the same order as a single-row dot.
      EXPECT_EQ(rows_out[static_cast<size_t>(r)], got) << "dot_rows, row " << r;
    }
  }
}

std::vector<KernelParam> kernel_params() {
  std::vector<KernelParam> out;
  for (Isa isa : supported_isas()) {
    for (WeightType t : {WeightType::Q4_K, WeightType::Q6_K}) {
      for (Data d : {Data::Quantized, Data::RandomBlocks, Data::Extreme}) {
        for (const Shape& s : kShapes) out.emplace_back(isa, t, d, s);
      }
    }
  }
  return out;
}

std::string kernel_name(const ::testing::TestParamInfo<KernelParam>& info) {
  const auto& [isa, type, data, shape] = info.param;
  const char* names[] = {"quantized", "random", "extreme"};
  return std::string(isa_name(isa)) + "_" + names[static_cast<int>(data)] + "_" +
         testing::shape_name(type, shape.rows, shape.cols);
}

INSTANTIATE_TEST_SUITE_P(IsaTypeDataShape, KQuantKernel, ::testing::ValuesIn(kernel_params()),
                         kernel_name);

// The type table holds one AVX-512 variant per machine (VNNI where the CPU has it), so the
// parameterised test above never runs the other one: both are checked here directly. They run
// the same integer sums and the same float operations, so they must agree bit for bit.
TEST(KQuantKernelVariants, Avx512WithAndWithoutVnniMatchReference) {
  if (!isa_supported(Isa::Avx512)) GTEST_SKIP() << "no AVX-512 on this machine";
  const bool vnni = detect_cpu_features().avx512_vnni;
  struct Variants {
    WeightType type;
    DotFn plain, with_vnni;
    DotRowsFn plain_rows, with_vnni_rows;
  };
  const Variants variants[] = {{WeightType::Q4_K, dot_q4_K_q8_K_avx512, dot_q4_K_q8_K_avx512vnni,
                                dot_rows_q4_K_q8_K_avx512, dot_rows_q4_K_q8_K_avx512vnni},
                               {WeightType::Q6_K, dot_q6_K_q8_K_avx512, dot_q6_K_q8_K_avx512vnni,
                                dot_rows_q6_K_q8_K_avx512, dot_rows_q6_K_q8_K_avx512vnni}};
  for (const Variants& v : variants) {
    for (Data data : {Data::Quantized, Data::RandomBlocks, Data::Extreme}) {
      const int64_t rows = 9, n = 2048;
      const Inputs in = make_inputs(v.type, data, rows, n, 91);
      const std::vector<double> xs = testing::q8_K_values(in.act);
      std::vector<float> plain_rows(rows), vnni_rows(rows);
      v.plain_rows(n, in.w.data(), in.stride, rows, in.act.data(), plain_rows.data());
      if (vnni) v.with_vnni_rows(n, in.w.data(), in.stride, rows, in.act.data(), vnni_rows.data());
      for (int64_t r = 0; r < rows; ++r) {
        const std::byte* row = in.w.data() + r * in.stride;
        const double tol = rigorous_tolerance(float_terms(n), abs_term_sum(v.type, row, n, xs));
        const float plain = v.plain(n, row, in.act.data());
        EXPECT_NEAR(plain, type_traits(v.type).dot[0](n, row, in.act.data()), tol)
            << type_name(v.type) << " row " << r;
        EXPECT_EQ(plain_rows[static_cast<size_t>(r)], plain) << type_name(v.type) << " row " << r;
        if (vnni) {
          EXPECT_EQ(v.with_vnni(n, row, in.act.data()), plain) << type_name(v.type) << " row " << r;
          EXPECT_EQ(vnni_rows[static_cast<size_t>(r)], plain) << type_name(v.type) << " row " << r;
        }
      }
    }
  }
}

// The reference kernel against the exact dot of dequantize_row's weights with the Q8_K values.
// dequantize_row rounds each weight once at most (Q4_K: d*sc*q and dmin*m are exact in float,
// their difference is rounded; Q6_K: d*sc is exact, times (q-32) rounded), so |w_deq - w| <=
// u |w|; the reference's own float evaluation adds at most rigorous_tolerance.
TEST(KQuantReference, EqualsExactDotOfDequantizedWeightsUpToRounding) {
  for (WeightType t : {WeightType::Q4_K, WeightType::Q6_K}) {
    for (Data data : {Data::Quantized, Data::RandomBlocks, Data::Extreme}) {
      const int64_t n = 2048;
      const Inputs in = make_inputs(t, data, 3, n, 5);
      const std::vector<double> xs = testing::q8_K_values(in.act);
      for (int64_t r = 0; r < 3; ++r) {
        const std::byte* row = in.w.data() + r * in.stride;
        std::vector<float> w(static_cast<size_t>(n));
        dequantize_row(t, row, w.data(), n);
        double exact = 0, abs_wx = 0;
        for (int64_t i = 0; i < n; ++i) {
          exact += double(w[i]) * xs[i];
          abs_wx += std::fabs(double(w[i]) * xs[i]);
        }
        const double abs_sum = abs_term_sum(t, row, n, xs);
        const double tol = kUnitRoundoff * abs_wx + rigorous_tolerance(n / kQK_K * 2, abs_sum);
        EXPECT_NEAR(type_traits(t).dot[0](n, row, in.act.data()), exact, tol)
            << type_name(t) << " data " << static_cast<int>(data) << " row " << r;
      }
    }
  }
}

}  // namespace
}  // namespace pacer::ops
