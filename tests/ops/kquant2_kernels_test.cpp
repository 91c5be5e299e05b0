// Every dot kernel of Q5_K, Q3_K, Q2_K and IQ4_XS, on every Isa this CPU runs, against the
// scalar `_ref` on the SAME inputs: weights from the quantizer, uniformly random blocks (every
// scale / min / quant bit pattern), and the extremes of the integer bounds (every quant and scale
// at its largest magnitude against activations at +-127). dot_rows must equal dot bit for bit,
// the plain AVX-512 and the VNNI variants must agree bit for bit, and the reference must equal
// the exact dot of the (independently decoded) weights with the Q8_K values up to float rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "ops/isa.h"
#include "ops/kernel_set.h"
#include "ops/matmul.h"
#include "ops/q5_k.h"
#include "ops/type_traits.h"
#include "tests/ops/kquant2_test_util.h"
#include "tests/ops/kquant_test_util.h"
#include "tests/ops/matmul_test_util.h"

namespace pacer::ops {
namespace {

using testing::kUnitRoundoff;

// SIMD and reference differ only in float order: the per-super-block integer sums are exact in
// both (int32; bounds in each type's header), and each kernel converts at most 16 int32 lanes of
// the scale part and 16 of the offset part per super-block to float, FMA-ing them with the same
// fl(d_w * d_x) / fl(dmin_w * d_x) the reference applies to the whole sums. With T such terms
// per row each order's error is a random walk of at most T steps of u |partial sum|, so on random
// data |simd - ref| stays within kSumOrderSigmas sqrt(T) u sum|term|.
constexpr double kSumOrderSigmas = 4.0;
// Extreme data (every term of one sign) can make the rounding errors add up coherently: there
// the rigorous bound 2 (T + 8) u sum|term| applies.
double rigorous_tolerance(int64_t terms, double abs_sum) {
  return 2.0 * static_cast<double>(terms + 8) * kUnitRoundoff * abs_sum;
}
double sum_order_tolerance(int64_t terms, double abs_sum) {
  return kSumOrderSigmas * std::sqrt(static_cast<double>(terms) + 1.0) * kUnitRoundoff * abs_sum;
}
int64_t float_terms(int64_t n) {
  return 2 * 16 * (n / kQK_K);
}

enum class Data { Quantized, RandomBlocks, Extreme };

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
      const std::vector<std::byte> row = testing::random_kquant2_row(t, n, seed + r);
      std::memcpy(dst, row.data(), row.size());
    } else {
      // All bits set (even rows: the largest q, scale and min of Q5_K / Q2_K, q = 3 with scale
      // 31 for Q3_K, level 113 with scale 31 for IQ4_XS) or all clear (odd rows: Q3_K's q = -4
      // and IQ4_XS's level -127, both with scale -32), factors 0.001.
      std::memset(dst, r % 2 ? 0x00 : 0xFF, static_cast<size_t>(in.stride));
      int d_at, dmin_at;
      testing::factor_offsets(t, &d_at, &dmin_at);
      const fp16_t f = fp32_to_fp16(0.001f);
      for (int64_t b = 0; b < n / kQK_K; ++b) {
        const int64_t bb = type_info(t).block_bytes;
        std::memcpy(dst + b * bb + d_at, &f, sizeof f);
        if (dmin_at >= 0) std::memcpy(dst + b * bb + dmin_at, &f, sizeof f);
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

// Row counts: 1, the 2- and 4-row tiles with and without tails, and enough rows (>= 16) for the
// stream order of gemv_streams.h; row lengths: one and two super-blocks and real ones (TinyLlama
// 2048 / 5632, Llama-3-8B 4096 / 14336).
const Shape kShapes[] = {{1, 256},  {3, 512},  {5, 2048}, {17, 2048}, {4, 4096},
                         {7, 5632}, {2, 5632}, {9, 256},  {2, 14336}};

using KernelParam = std::tuple<Isa, WeightType, Data, Shape>;
class KQuant2Kernel : public ::testing::TestWithParam<KernelParam> {};

TEST_P(KQuant2Kernel, SimdMatchesReferenceAndRowsMatchSingleDot) {
  const auto [isa, type, data, shape] = GetParam();
  const Inputs in = make_inputs(type, data, shape.rows, shape.cols, 77);
  const std::vector<double> xs = testing::q8_K_values(in.act);
  const DotFn ref = type_traits(type).dot[static_cast<size_t>(Isa::Scalar)];
  const DotFn dot = KernelSet::for_isa(isa).matmul(type).dot;
  const DotRowsFn dot_rows = KernelSet::for_isa(isa).matmul(type).dot_rows;
  if (isa != Isa::Scalar) {
    ASSERT_NE(dot_rows, nullptr) << "every SIMD tier has dot_rows";
  }
  std::vector<float> rows_out(static_cast<size_t>(shape.rows), NAN);
  if (dot_rows != nullptr) {
    dot_rows(shape.cols, in.w.data(), in.stride, shape.rows, in.act.data(), rows_out.data());
  }
  for (int64_t r = 0; r < shape.rows; ++r) {
    const std::byte* row = in.w.data() + r * in.stride;
    const double abs_sum = testing::abs_part_sum(type, row, shape.cols, xs);
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
    for (WeightType t : testing::kquant2_types()) {
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

INSTANTIATE_TEST_SUITE_P(IsaTypeDataShape, KQuant2Kernel, ::testing::ValuesIn(kernel_params()),
                         kernel_name);

// The type table holds one AVX-512 variant per machine (VNNI where the CPU has it), so the test
// above runs only one: both are checked here directly. Same integer sums, same float operations:
// they must agree bit for bit, and the plain one (no VNNI instruction) must match the reference.
TEST(KQuant2KernelVariants, Q5_KAvx512WithAndWithoutVnniAgree) {
  if (!isa_supported(Isa::Avx512)) GTEST_SKIP() << "no AVX-512 on this machine";
  const bool vnni = detect_cpu_features().avx512_vnni;
  for (Data data : {Data::Quantized, Data::RandomBlocks, Data::Extreme}) {
    for (int64_t n : {2048, 5632}) {
      const int64_t rows = 9;
      const Inputs in = make_inputs(WeightType::Q5_K, data, rows, n, 91);
      const std::vector<double> xs = testing::q8_K_values(in.act);
      std::vector<float> plain_rows(rows), vnni_rows(rows);
      dot_rows_q5_K_q8_K_avx512(n, in.w.data(), in.stride, rows, in.act.data(), plain_rows.data());
      if (vnni) {
        dot_rows_q5_K_q8_K_avx512vnni(n, in.w.data(), in.stride, rows, in.act.data(),
                                      vnni_rows.data());
      }
      for (int64_t r = 0; r < rows; ++r) {
        const std::byte* row = in.w.data() + r * in.stride;
        const double tol =
            rigorous_tolerance(float_terms(n), testing::abs_part_sum(WeightType::Q5_K, row, n, xs));
        const float plain = dot_q5_K_q8_K_avx512(n, row, in.act.data());
        EXPECT_NEAR(plain, dot_q5_K_q8_K_ref(n, row, in.act.data()), tol) << "row " << r;
        EXPECT_EQ(plain_rows[static_cast<size_t>(r)], plain) << "row " << r;
        if (vnni) {
          EXPECT_EQ(dot_q5_K_q8_K_avx512vnni(n, row, in.act.data()), plain) << "row " << r;
          EXPECT_EQ(vnni_rows[static_cast<size_t>(r)], plain) << "row " << r;
        }
      }
    }
  }
}

// The reference kernel against the exact dot of the test's own decoding of the weights with the
// Q8_K values: the reference's integer sums are exact, so only its float evaluation (2 products
// and 2 additions per super-block) and the rounding of the int32 sums to float differ.
TEST(KQuant2Reference, EqualsExactDotOfIndependentlyDecodedWeights) {
  for (WeightType t : testing::kquant2_types()) {
    for (Data data : {Data::Quantized, Data::RandomBlocks, Data::Extreme}) {
      const int64_t n = 2048, rows = 3;
      const Inputs in = make_inputs(t, data, rows, n, 5);
      const std::vector<double> xs = testing::q8_K_values(in.act);
      const int64_t bb = type_info(t).block_bytes;
      for (int64_t r = 0; r < rows; ++r) {
        const std::byte* row = in.w.data() + r * in.stride;
        double exact = 0;
        for (int64_t i = 0; i < n; ++i) {
          exact += testing::decode(t, row + i / kQK_K * bb, static_cast<int>(i % kQK_K)).value *
                   xs[static_cast<size_t>(i)];
        }
        const double tol = rigorous_tolerance(n / kQK_K * 2, testing::abs_part_sum(t, row, n, xs));
        EXPECT_NEAR(type_traits(t).dot[0](n, row, in.act.data()), exact, tol)
            << type_name(t) << " data " << static_cast<int>(data) << " row " << r;
      }
    }
  }
}

}  // namespace
}  // namespace pacer::ops
