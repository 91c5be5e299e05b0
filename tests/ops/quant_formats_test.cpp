// quantize_row / dequantize_row: exact bytes on hand-computed blocks (the ggml reference rules),
// round-trip error against fp32 with ggml's named limits and with derived per-element bounds,
// F16 against the CPU's own F16C converter, BF16 rounding, and the errors for bad lengths.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "ops/fp16.h"
#include "ops/isa.h"
#include "ops/matmul.h"
#include "ops/q4_0.h"
#include "ops/q8_0.h"
#include "tests/ops/matmul_test_util.h"

namespace pacer::ops {
namespace {

using ::testing::HasSubstr;
using testing::kUnitRoundoff;

// ggml tests/test-quantize-fns.cpp: RMSE-over-n of a quantize/dequantize round trip of its
// cosine test data must stay below this for every 4+ bit type.
constexpr float kGgmlMaxQuantizationTotalError = 0.002f;

// ggml's test data: 0.1 + 2 cos(i + offset).
std::vector<float> ggml_test_data(float offset, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.1f + 2.0f * std::cos(static_cast<float>(i) + offset);
  return v;
}

// ggml's array_rmse: sqrt(sum of squared differences) / n.
float ggml_array_rmse(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return static_cast<float>(std::sqrt(sum) / static_cast<double>(a.size()));
}

std::vector<std::byte> quantize(WeightType t, const std::vector<float>& x) {
  std::vector<std::byte> out(static_cast<size_t>(row_bytes(t, static_cast<int64_t>(x.size()))));
  quantize_row(t, x.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

std::vector<float> dequantize(WeightType t, const std::vector<std::byte>& q, size_t n) {
  std::vector<float> out(n);
  dequantize_row(t, q.data(), out.data(), static_cast<int64_t>(n));
  return out;
}

uint8_t byte_at(const std::vector<std::byte>& v, size_t i) {
  return static_cast<uint8_t>(v[i]);
}

TEST(QuantQ8_0, HandComputedBlockWithUnitScale) {
  // amax = 127 gives d = 1 exactly (fp16 0x3C00) and id = 1, so q = roundf(x), ties away from 0.
  std::vector<float> x = {127,   -127,        0.5f, -0.5f, 1.49f,  2.5f,
                          -2.5f, 0.49999997f, 3.7f, -3.7f, 126.5f, 0};
  std::vector<int> want = {127, -127, 1, -1, 1, 3, -3, 0, 4, -4, 127, 0};
  for (int j = 12; j < 32; ++j) {
    x.push_back(static_cast<float>(j - 20));
    want.push_back(j - 20);
  }
  const std::vector<std::byte> q = quantize(WeightType::Q8_0, x);
  ASSERT_EQ(q.size(), 34u);
  EXPECT_EQ(byte_at(q, 0), 0x00);
  EXPECT_EQ(byte_at(q, 1), 0x3C);
  for (size_t j = 0; j < 32; ++j) {
    EXPECT_EQ(static_cast<int8_t>(byte_at(q, 2 + j)), want[j]) << "element " << j;
  }
}

TEST(QuantQ8_0, HandComputedScaleRoundsToNearestFp16) {
  // amax = 2.54 -> d = 0.02 -> fp16 (1 + 287/1024) * 2^-6 = 0x251F (286 would be further away);
  // id = 50: 1.0 -> 50, -0.5 -> -25, 0.011 -> 0.55 -> 1, 0.009 -> 0.45 -> 0.
  std::vector<float> x(32, 0.0f);
  x[0] = 2.54f;
  x[1] = 1.0f;
  x[2] = -0.5f;
  x[3] = 0.011f;
  x[4] = 0.009f;
  x[5] = -2.54f;
  const std::vector<std::byte> q = quantize(WeightType::Q8_0, x);
  EXPECT_EQ(byte_at(q, 0) | (byte_at(q, 1) << 8), 0x251F);
  const int want[6] = {127, 50, -25, 1, 0, -127};
  for (size_t j = 0; j < 6; ++j) EXPECT_EQ(static_cast<int8_t>(byte_at(q, 2 + j)), want[j]);
  for (size_t j = 6; j < 32; ++j) EXPECT_EQ(byte_at(q, 2 + j), 0);
}

TEST(QuantQ8_0, ZeroBlockHasZeroScaleAndQuants) {
  const std::vector<std::byte> q = quantize(WeightType::Q8_0, std::vector<float>(64, 0.0f));
  for (size_t i = 0; i < q.size(); ++i) EXPECT_EQ(byte_at(q, i), 0) << "byte " << i;
}

TEST(QuantQ4_0, HandComputedBlockWithNegativeMax) {
  // The first element of largest |x| is -8, so d = -8 / -8 = 1 (fp16 0x3C00), id = 1 and
  // nibble = min(15, trunc(x + 8.5)). Elements 16..31 are -8..7, nibbles 0..15.
  std::vector<float> x = {-8, 7, 7.4f, 0, -0.5f, -0.51f, 0.5f, 8, -7.6f, -7.4f, 0, 1, 2, 3, 4, 5};
  for (int j = 16; j < 32; ++j) x.push_back(static_cast<float>(j - 24));
  const std::vector<std::byte> q = quantize(WeightType::Q4_0, x);
  ASSERT_EQ(q.size(), 18u);
  EXPECT_EQ(byte_at(q, 0), 0x00);
  EXPECT_EQ(byte_at(q, 1), 0x3C);
  // low nibble: element j; high nibble: element j + 16 (= j)
  const uint8_t want[16] = {0x00, 0x1F, 0x2F, 0x38, 0x48, 0x57, 0x69, 0x7F,
                            0x80, 0x91, 0xA8, 0xB9, 0xCA, 0xDB, 0xEC, 0xFD};
  for (size_t j = 0; j < 16; ++j) EXPECT_EQ(byte_at(q, 2 + j), want[j]) << "byte " << j;
}

TEST(QuantQ4_0, HandComputedBlockWithPositiveMax) {
  // max = +8 gives d = -1 (fp16 0xBC00), id = -1: nibble = min(15, trunc(8.5 - x)).
  std::vector<float> x(32, 0.0f);  // 0 -> 8
  x[0] = 8;                        // 0.5 -> 0
  x[1] = -7;                       // 15.5 -> 15
  x[2] = -8;                       // 16.5 -> clamped to 15
  x[3] = 1;                        // 7.5 -> 7
  x[16] = 3.9f;                    // 4.6 -> 4
  const std::vector<std::byte> q = quantize(WeightType::Q4_0, x);
  EXPECT_EQ(byte_at(q, 0), 0x00);
  EXPECT_EQ(byte_at(q, 1), 0xBC);
  EXPECT_EQ(byte_at(q, 2), 0x40);  // elements 0 and 16
  EXPECT_EQ(byte_at(q, 3), 0x8F);
  EXPECT_EQ(byte_at(q, 4), 0x8F);
  EXPECT_EQ(byte_at(q, 5), 0x87);
  for (size_t j = 4; j < 16; ++j) EXPECT_EQ(byte_at(q, 2 + j), 0x88) << "byte " << j;
  const std::vector<float> back = dequantize(WeightType::Q4_0, q, 32);
  EXPECT_EQ(back[0], 8.0f);   // (0 - 8) * -1
  EXPECT_EQ(back[2], -7.0f);  // the clamped element loses one step
  EXPECT_EQ(back[16], 4.0f);
}

TEST(QuantRoundTrip, WithinGgmlTotalErrorLimit) {
  const std::vector<float> x = ggml_test_data(0.0f, 32 * 128);
  for (WeightType t : {WeightType::Q8_0, WeightType::Q4_0, WeightType::F16, WeightType::BF16}) {
    const std::vector<float> back = dequantize(t, quantize(t, x), x.size());
    EXPECT_LT(ggml_array_rmse(x, back), kGgmlMaxQuantizationTotalError) << type_name(t);
  }
  const std::vector<float> back =
      dequantize(WeightType::F32, quantize(WeightType::F32, x), x.size());
  EXPECT_EQ(back, x);
}

// Per-element bounds, derived. Let d = amax/scale_div (fp32), d16 = fp32(fp16(d)) the stored
// scale, id = fl(1/d). q is computed from fl(x*id) = (x/d)(1 + e), |e| <= 2u, so
//   Q8_0: |q - x/d| <= 1/2 + 127*2u         => |x - d16*q| <= d(1/2 + 254u) + 127|d - d16|
//   Q4_0: unclamped nibbles round half up   => step error <= 1/2 + 8*2u; the clamp (x*id >= 7.5
//         rounds to 15, i.e. 7 steps, for the element opposite the max) costs at most 1 step
//                                           => |x - d16*(nib-8)| <= |d|(1 + 16u) + 8|d - d16|
TEST(QuantRoundTrip, PerElementErrorWithinDerivedBound) {
  const std::vector<float> x = testing::normal_floats(32 * 64, 7, 3.0f);
  const std::vector<float> q8 =
      dequantize(WeightType::Q8_0, quantize(WeightType::Q8_0, x), x.size());
  const std::vector<float> q4 =
      dequantize(WeightType::Q4_0, quantize(WeightType::Q4_0, x), x.size());
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
    const double d8 = amax / 127.0f, d8_16 = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
    const double d4 = amax / 8.0f, d4_16 = fp16_to_fp32(fp32_to_fp16(amax / 8.0f));
    const double bound8 = d8 * (0.5 + 254 * kUnitRoundoff) + 127 * std::fabs(d8 - d8_16);
    const double bound4 = d4 * (1 + 16 * kUnitRoundoff) + 8 * std::fabs(d4 - d4_16);
    for (size_t j = 32 * b; j < 32 * b + 32; ++j) {
      EXPECT_LE(std::fabs(double(x[j]) - q8[j]), bound8) << "q8_0 element " << j;
      EXPECT_LE(std::fabs(double(x[j]) - q4[j]), bound4) << "q4_0 element " << j;
    }
  }
}

__attribute__((target("f16c"))) uint16_t f16c_from_fp32(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, 0));  // round to nearest even
}
__attribute__((target("f16c"))) float f16c_to_fp32(uint16_t h) {
  return _cvtsh_ss(h);
}

TEST(QuantF16, MatchesTheCpusF16cConversion) {
  if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "no F16C on this CPU";
  std::vector<float> x = testing::normal_floats(4096, 11, 1000.0f);
  for (float f : {0.0f, -0.0f, 65504.0f, 65520.0f, 1e-8f, 6e-8f, 3e-5f, -70000.0f, 1.0f / 3}) {
    x.push_back(f);
  }
  while (x.size() % 32 != 0) x.push_back(0.25f);
  for (size_t i = 0; i < 2048; ++i) x[i] *= 1e-8f;  // ~1e-5: the subnormal range of fp16
  const std::vector<std::byte> q = quantize(WeightType::F16, x);
  const std::vector<float> back = dequantize(WeightType::F16, q, x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const uint16_t h = static_cast<uint16_t>(byte_at(q, 2 * i) | (byte_at(q, 2 * i + 1) << 8));
    ASSERT_EQ(h, f16c_from_fp32(x[i])) << "x = " << x[i];
    ASSERT_EQ(back[i], f16c_to_fp32(h)) << "x = " << x[i];
  }
}

TEST(QuantBF16, HandComputedRoundToNearestEven) {
  // 1 + 2^-8 is a tie between 0x3F80 and 0x3F81: even wins; 1 + 3*2^-8 ties up to 0x3F82;
  // 1 + 2^-8 + 2^-20 is above the tie.
  const std::vector<float> x = {
      1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, -2.0f, std::nanf("")};
  const uint16_t want[6] = {0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xC000, 0x7FC0};
  std::vector<std::byte> q(2 * x.size());
  quantize_row(WeightType::BF16, x.data(), q.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(byte_at(q, 2 * i) | (byte_at(q, 2 * i + 1) << 8), want[i]) << "element " << i;
  }
}

TEST(QuantErrors, RejectsLengthsThatAreNotWholeBlocks) {
  std::vector<float> x(64, 1.0f);
  std::vector<std::byte> q(256);
  try {
    quantize_row(WeightType::Q4_0, x.data(), q.data(), 48);
    FAIL() << "no exception";
  } catch (const MatmulError& e) {
    EXPECT_THAT(e.what(), HasSubstr("48"));
    EXPECT_THAT(e.what(), HasSubstr("q4_0"));
  }
  EXPECT_THROW(dequantize_row(WeightType::Q8_0, q.data(), x.data(), 33), MatmulError);
}

}  // namespace
}  // namespace pacer::ops
