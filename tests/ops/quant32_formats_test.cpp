// Q4_1, Q5_0, Q5_1 and IQ4_NL blocks: type ids and names, hand-built blocks whose values are
// worked out by hand below, the quantizers' bytes on hand-computed blocks (ggml's rules for the
// first three, exact recovery of on-grid data for IQ4_NL), and the round-trip error against fp32
// with ggml's named limit and with derived per-element / per-block bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/fp16.h"
#include "ops/iq4_nl.h"
#include "ops/matmul.h"
#include "ops/q4_1.h"
#include "ops/q5_0.h"
#include "ops/q5_1.h"
#include "ops/types.h"
#include "tests/ops/matmul_test_util.h"

namespace pacer::ops {
namespace {

using testing::kUnitRoundoff;

// ggml tests/test-quantize-fns.cpp: RMSE-over-n of a quantize/dequantize round trip of its
// cosine test data must stay below this for every 4+ bit type.
constexpr float kGgmlMaxQuantizationTotalError = 0.002f;

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

std::vector<std::byte> bytes(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (int b : v) out.push_back(static_cast<std::byte>(b));
  return out;
}

uint8_t byte_at(const std::vector<std::byte>& v, size_t i) {
  return static_cast<uint8_t>(v[i]);
}

uint16_t u16_at(const std::vector<std::byte>& v, size_t i) {
  return static_cast<uint16_t>(byte_at(v, i) | (byte_at(v, i + 1) << 8));
}

// qs[j] = j | (15 - j) << 4: element j has nibble j, element 16 + j nibble 15 - j.
void append_ramp_qs(std::vector<std::byte>& blk) {
  for (int j = 0; j < 16; ++j) blk.push_back(static_cast<std::byte>(j | ((15 - j) << 4)));
}

TEST(Quant32Types, IdsNamesAndBlockSizesAreGgmls) {
  struct Want {
    uint32_t id;
    WeightType type;
    const char* name;
    int64_t block_bytes;
  };
  for (const Want& w :
       {Want{3, WeightType::Q4_1, "q4_1", 20}, Want{6, WeightType::Q5_0, "q5_0", 22},
        Want{7, WeightType::Q5_1, "q5_1", 24}, Want{20, WeightType::IQ4_NL, "iq4_nl", 18}}) {
    EXPECT_EQ(weight_type_from_id(w.id), w.type) << w.name;
    EXPECT_EQ(type_name(w.type), w.name);
    EXPECT_EQ(type_info(w.type).block_elems, 32) << w.name;
    EXPECT_EQ(type_info(w.type).block_bytes, w.block_bytes) << w.name;
    EXPECT_EQ(weight_type_from_name(w.name), w.type);
    EXPECT_EQ(row_bytes(w.type, 896), 28 * w.block_bytes) << w.name;  // Qwen2.5-0.5B's n_embd
  }
  EXPECT_EQ(weight_type_from_name("IQ4_NL"), WeightType::IQ4_NL);
  EXPECT_EQ(weight_type_from_id(4), std::nullopt);  // ggml's removed Q4_2
  EXPECT_EQ(weight_type_from_id(5), std::nullopt);  // ggml's removed Q4_3
  EXPECT_EQ(sizeof(BlockQ4_1), 20u);
  EXPECT_EQ(sizeof(BlockQ5_0), 22u);
  EXPECT_EQ(sizeof(BlockQ5_1), 24u);
  EXPECT_EQ(sizeof(BlockIQ4_NL), 18u);
}

TEST(Quant32Format, Q4_1HandBuiltBlock) {
  // d = 0.5 (fp16 0x3800), m = -2 (0xC000): element j = 0.5 j - 2, element 16 + j = 0.5 (15-j) - 2.
  std::vector<std::byte> blk = bytes({0x00, 0x38, 0x00, 0xC0});
  append_ramp_qs(blk);
  const float want[32] = {-2,  -1.5, -1,  -0.5, 0,   0.5, 1,    1.5, 2,    2.5, 3,
                          3.5, 4,    4.5, 5,    5.5, 5.5, 5,    4.5, 4,    3.5, 3,
                          2.5, 2,    1.5, 1,    0.5, 0,   -0.5, -1,  -1.5, -2};
  const std::vector<float> got = dequantize(WeightType::Q4_1, blk, 32);
  for (size_t j = 0; j < 32; ++j) EXPECT_EQ(got[j], want[j]) << "element " << j;
}

TEST(Quant32Format, Q5_0HandBuiltBlockPlacesEachFifthBit) {
  // d = 0.25 (0x3400); qh bytes 01 80 00 FF = uint32 0xFF008001: bits 0, 15 and 24..31 set.
  // Element j < 16: q = j, + 16 for j = 0 and 15; element 16 + j: q = 15 - j, + 16 for j >= 8.
  // Value 0.25 (q - 16).
  std::vector<std::byte> blk = bytes({0x00, 0x34, 0x01, 0x80, 0x00, 0xFF});
  append_ramp_qs(blk);
  const float want[32] = {0,     -3.75, -3.5,  -3.25, -3,   -2.75, -2.5, -2.25, -2,   -1.75, -1.5,
                          -1.25, -1,    -0.75, -0.5,  3.75, -0.25, -0.5, -0.75, -1,   -1.25, -1.5,
                          -1.75, -2,    1.75,  1.5,   1.25, 1,     0.75, 0.5,   0.25, 0};
  const std::vector<float> got = dequantize(WeightType::Q5_0, blk, 32);
  for (size_t j = 0; j < 32; ++j) EXPECT_EQ(got[j], want[j]) << "element " << j;
}

TEST(Quant32Format, Q5_1HandBuiltBlock) {
  // d = 0.5 (0x3800), m = 1 (0x3C00), same qh and qs as the Q5_0 block: value 0.5 q + 1.
  std::vector<std::byte> blk = bytes({0x00, 0x38, 0x00, 0x3C, 0x01, 0x80, 0x00, 0xFF});
  append_ramp_qs(blk);
  const float want[32] = {9,   1.5, 2,    2.5, 3,    3.5, 4,    4.5, 5,   5.5, 6,
                          6.5, 7,   7.5,  8,   16.5, 8.5, 8,    7.5, 7,   6.5, 6,
                          5.5, 5,   12.5, 12,  11.5, 11,  10.5, 10,  9.5, 9};
  const std::vector<float> got = dequantize(WeightType::Q5_1, blk, 32);
  for (size_t j = 0; j < 32; ++j) EXPECT_EQ(got[j], want[j]) << "element " << j;
}

TEST(Quant32Format, IQ4_NLHandBuiltBlockLooksUpGgmlsLevels) {
  // d = 2 (0x4000): element j = 2 * level[j], element 16 + j = 2 * level[15 - j], with ggml's
  // levels -127 -104 -83 -65 -49 -35 -22 -10 1 13 25 38 53 69 89 113.
  std::vector<std::byte> blk = bytes({0x00, 0x40});
  append_ramp_qs(blk);
  const float want[16] = {-254, -208, -166, -130, -98, -70, -44, -20,
                          2,    26,   50,   76,   106, 138, 178, 226};
  const std::vector<float> got = dequantize(WeightType::IQ4_NL, blk, 32);
  for (size_t j = 0; j < 16; ++j) {
    EXPECT_EQ(got[j], want[j]) << "element " << j;
    EXPECT_EQ(got[16 + j], want[15 - j]) << "element " << 16 + j;
  }
}

TEST(Quant32Quantize, Q4_1HandComputedBlock) {
  // min = -1, max = 6.5: d = 7.5 / 15 = 0.5 exactly, id = 2, q = min(15, trunc((x + 1) 2 + 0.5)):
  // -1 -> 0, 6.5 -> 15, 0 -> 2, 0.2 -> 2.9 -> 2, 0.3 -> 3.1 -> 3, -0.75 -> 1.0 -> 1,
  // -0.76 -> 0.98 -> 0, 3 -> 8.5 -> 8.
  std::vector<float> x(32, 0.0f);
  x[0] = -1, x[1] = 6.5f, x[3] = 0.2f, x[4] = 0.3f, x[5] = -0.75f, x[6] = -0.76f;
  x[16] = 3, x[31] = -1;
  const std::vector<std::byte> q = quantize(WeightType::Q4_1, x);
  ASSERT_EQ(q.size(), 20u);
  EXPECT_EQ(u16_at(q, 0), 0x3800);  // d = 0.5
  EXPECT_EQ(u16_at(q, 2), 0xBC00);  // m = -1
  const uint8_t want[16] = {0x80, 0x2F, 0x22, 0x22, 0x23, 0x21, 0x20, 0x22,
                            0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x02};
  for (size_t j = 0; j < 16; ++j) EXPECT_EQ(byte_at(q, 4 + j), want[j]) << "byte " << j;
}

TEST(Quant32Quantize, Q5_0HandComputedBlock) {
  // The first element of largest |x| is -16: d = 1 (0x3C00), id = 1, q = min(31, trunc(x +
  // 16.5)): -16 -> 0, 15 -> 31, 16 -> 32.5 -> clamped to 31, 0 -> 16, -0.5 -> 16, -0.51 -> 15,
  // 3.7 -> 20. The fifth bit is set for every q >= 16: all elements but 0 and 5.
  std::vector<float> x(32, 0.0f);
  x[0] = -16, x[1] = 15, x[2] = 16, x[4] = -0.5f, x[5] = -0.51f, x[6] = 3.7f;
  const std::vector<std::byte> q = quantize(WeightType::Q5_0, x);
  ASSERT_EQ(q.size(), 22u);
  EXPECT_EQ(u16_at(q, 0), 0x3C00);
  EXPECT_EQ(byte_at(q, 2), 0xDE);  // qh = 0xFFFFFFDE, little endian
  EXPECT_EQ(byte_at(q, 3), 0xFF);
  EXPECT_EQ(byte_at(q, 4), 0xFF);
  EXPECT_EQ(byte_at(q, 5), 0xFF);
  // low nibbles = q & 15 of elements 0..15; elements 16..31 are 16 -> high nibbles 0
  const uint8_t want[16] = {0x00, 0x0F, 0x0F, 0x00, 0x00, 0x0F, 0x04, 0x00,
                            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  for (size_t j = 0; j < 16; ++j) EXPECT_EQ(byte_at(q, 6 + j), want[j]) << "byte " << j;
  const std::vector<float> back = dequantize(WeightType::Q5_0, q, 32);
  EXPECT_EQ(back[2], 15.0f);  // the clamped element loses one step
  EXPECT_EQ(back[6], 4.0f);
}

TEST(Quant32Quantize, Q5_1HandComputedBlock) {
  // min = 0, max = 31: d = 1 (0x3C00), m = 0, q = trunc(x + 0.5): 31 -> 31, 16 -> 16,
  // 15.49 -> 15, 15.5 -> 16, 1 -> 1, 17 -> 17. Fifth bits: elements 1, 2, 4 and 20.
  std::vector<float> x(32, 1.0f);
  x[0] = 0, x[1] = 31, x[2] = 16, x[3] = 15.49f, x[4] = 15.5f, x[20] = 17;
  const std::vector<std::byte> q = quantize(WeightType::Q5_1, x);
  ASSERT_EQ(q.size(), 24u);
  EXPECT_EQ(u16_at(q, 0), 0x3C00);
  EXPECT_EQ(u16_at(q, 2), 0x0000);
  EXPECT_EQ(byte_at(q, 4), 0x16);  // qh = 0x00100016
  EXPECT_EQ(byte_at(q, 5), 0x00);
  EXPECT_EQ(byte_at(q, 6), 0x10);
  EXPECT_EQ(byte_at(q, 7), 0x00);
  const uint8_t want[16] = {0x10, 0x1F, 0x10, 0x1F, 0x10, 0x11, 0x11, 0x11,
                            0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11};
  for (size_t j = 0; j < 16; ++j) EXPECT_EQ(byte_at(q, 8 + j), want[j]) << "byte " << j;
}

TEST(Quant32Quantize, IQ4_NLRecoversOnGridDataExactly) {
  // x = 0.5 * level: the first candidate scale (max -63.5 -> level -127) hits every level
  // exactly and the least-squares refit keeps d = 0.5, so the block comes back bit for bit.
  std::vector<float> x(32);
  for (int j = 0; j < 16; ++j) {
    x[j] = 0.5f * kIq4NlValues[j];
    x[16 + j] = 0.5f * kIq4NlValues[15 - j];
  }
  const std::vector<std::byte> q = quantize(WeightType::IQ4_NL, x);
  ASSERT_EQ(q.size(), 18u);
  EXPECT_EQ(u16_at(q, 0), 0x3800);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(byte_at(q, 2 + j), j | ((15 - j) << 4)) << "byte " << j;
  EXPECT_EQ(dequantize(WeightType::IQ4_NL, q, 32), x);
}

TEST(Quant32Quantize, ZeroBlocksComeBackZero) {
  for (WeightType t : {WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1, WeightType::IQ4_NL}) {
    const std::vector<float> back = dequantize(t, quantize(t, std::vector<float>(64, 0.0f)), 64);
    for (size_t j = 0; j < back.size(); ++j) EXPECT_EQ(back[j], 0.0f) << type_name(t) << " " << j;
  }
}

TEST(Quant32RoundTrip, WithinGgmlTotalErrorLimit) {
  std::vector<float> x(32 * 128);  // ggml's test data: 0.1 + 2 cos(i)
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f + 2.0f * std::cos(static_cast<float>(i));
  for (WeightType t : {WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1, WeightType::IQ4_NL}) {
    const std::vector<float> back = dequantize(t, quantize(t, x), x.size());
    double sum = 0;  // ggml's array_rmse: sqrt(sum of squared differences) / n
    for (size_t i = 0; i < x.size(); ++i)
      sum += (double(x[i]) - back[i]) * (double(x[i]) - back[i]);
    EXPECT_LT(std::sqrt(sum) / static_cast<double>(x.size()), kGgmlMaxQuantizationTotalError)
        << type_name(t);
  }
}

// Per-element bounds, derived. d is the quantizer's fp32 scale, d16 / m16 the stored fp16 scale
// and offset. The quant index is computed from fl(fl(x - min) * id) + 0.5 (or x * id + 16.5):
// three roundings of values <= 32 in magnitude move it by at most 32 * 3u + 32u (the addition's
// half ulp at 32) < 2^7 u = kIndexSlack, so
//   Q4_1 / Q5_1: |q - (x - min)/d| <= 1/2 + kIndexSlack (no clamp is reached)
//                => |x - (d16 q + m16)| <= d (1/2 + kIndexSlack) + qmax |d - d16| + |min - m16|
//   Q5_0:        the clamp (x*id >= 15.5 rounds to 31, i.e. 15 steps, for the element opposite
//                the max) costs at most one step
//                => |x - d16 (q - 16)| <= |d| (1 + kIndexSlack) + 16 |d - d16|
// plus one rounding of the dequantized float itself (u |w|).
constexpr double kIndexSlack = 128 * kUnitRoundoff;

TEST(Quant32RoundTrip, PerElementErrorWithinDerivedBound) {
  const std::vector<float> x = testing::normal_floats(32 * 256, 7, 3.0f);
  const int64_t n = static_cast<int64_t>(x.size());
  for (WeightType t : {WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1}) {
    const std::vector<std::byte> q = quantize(t, x);
    const std::vector<float> back = dequantize(t, q, x.size());
    const size_t bb = static_cast<size_t>(type_info(t).block_bytes);
    for (int64_t b = 0; b < n / 32; ++b) {
      const float* xb = x.data() + 32 * b;
      const float mn = *std::min_element(xb, xb + 32), mx = *std::max_element(xb, xb + 32);
      const double d16 = fp16_to_fp32(u16_at(q, b * bb));
      double bound;
      if (t == WeightType::Q5_0) {
        const float max = std::fabs(mn) > std::fabs(mx) ? mn : mx;  // ties: either sign
        const double d = max / -16.0f;
        bound = std::fabs(d) * (1 + kIndexSlack) + 16 * std::fabs(d - d16);
      } else {
        const int qmax = t == WeightType::Q4_1 ? 15 : 31;
        const double d = (mx - mn) / static_cast<float>(qmax);
        const double m16 = fp16_to_fp32(u16_at(q, b * bb + 2));
        bound = d * (0.5 + kIndexSlack) + qmax * std::fabs(d - d16) + std::fabs(mn - m16);
      }
      for (int64_t j = 32 * b; j < 32 * b + 32; ++j) {
        const double err = std::fabs(double(x[j]) - back[j]);
        EXPECT_LE(err, bound + kUnitRoundoff * std::fabs(back[j]))
            << type_name(t) << " element " << j;
      }
    }
  }
}

// IQ4_NL, per block (its quantizer picks the best of several scales, so the bound is on the
// block's RMS error). The first candidate, id = fl(-127 / max), maps the block into
// [-127, 127] (up to 2u relative); there every element is within 14 index units of a level (the
// widest half-gap between levels is 12, and 113..127 is 14), so at the scale 1/id the RMS error
// is <= (14 + 2^-10) amax / 127 (2^-10 covers the roundings). The least-squares refit and the
// other candidates only lower the squared error. Storing d as fp16 adds at most
// |d - d16| * rms(levels) <= 2^-11 |d16| (1 + 2^-11) * 127.
TEST(Quant32RoundTrip, IQ4_NLBlockRmsWithinDerivedBound) {
  const std::vector<float> x = testing::normal_floats(32 * 256, 9, 3.0f);
  const std::vector<std::byte> q = quantize(WeightType::IQ4_NL, x);
  const std::vector<float> back = dequantize(WeightType::IQ4_NL, q, x.size());
  for (size_t b = 0; b < x.size() / 32; ++b) {
    double amax = 0, sse = 0;
    for (size_t j = 32 * b; j < 32 * b + 32; ++j) {
      amax = std::max(amax, std::fabs(double(x[j])));
      sse += (double(x[j]) - back[j]) * (double(x[j]) - back[j]);
    }
    const double d16 = std::fabs(fp16_to_fp32(u16_at(q, 18 * b)));
    const double bound = (14 + 0x1p-10) * amax / 127 + 0x1p-11 * (1 + 0x1p-11) * d16 * 127;
    EXPECT_LE(std::sqrt(sse / 32), bound) << "block " << b;
  }
}

// Gaussian weights: the non-linear levels (denser near 0) and the refit scale beat Q4_0's
// uniform ones at the same 4.5 bits, and the fifth bit / the offset rank as in ggml:
// Q5_1 <= Q5_0 < Q4_1 <= Q4_0 (RMS over 8192 elements; ggml's tables show the same order).
TEST(Quant32RoundTrip, GaussianRmsRanksAsExpected) {
  const std::vector<float> x = testing::normal_floats(32 * 256, 11, 1.0f);
  auto rms = [&](WeightType t) {
    const std::vector<float> back = dequantize(t, quantize(t, x), x.size());
    double sse = 0;
    for (size_t j = 0; j < x.size(); ++j)
      sse += (double(x[j]) - back[j]) * (double(x[j]) - back[j]);
    return std::sqrt(sse / static_cast<double>(x.size()));
  };
  const double q4_0 = rms(WeightType::Q4_0), q4_1 = rms(WeightType::Q4_1);
  const double q5_0 = rms(WeightType::Q5_0), q5_1 = rms(WeightType::Q5_1);
  const double iq4 = rms(WeightType::IQ4_NL);
  EXPECT_LT(iq4, q4_0);
  EXPECT_LE(q4_1, q4_0);
  EXPECT_LT(q5_0, q4_1);
  EXPECT_LE(q5_1, q5_0);
}

}  // namespace
}  // namespace pacer::ops
