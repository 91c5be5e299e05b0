// K-quant block formats: dequantize_row of hand-built Q4_K / Q6_K blocks against values worked
// out by hand from the byte layout, the Q8_K activation quantizer (layout, sums, every ISA
// writing the reference's bytes), and the errors for row lengths that are not whole blocks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ops/isa.h"
#include "ops/kernel_set.h"
#include "ops/matmul.h"
#include "ops/type_traits.h"
#include "tests/ops/kquant_test_util.h"
#include "tests/ops/matmul_test_util.h"

namespace pacer::ops {
namespace {

using ::testing::HasSubstr;

template <class Block>
std::vector<float> dequantize_block(WeightType t, const Block& b) {
  std::vector<float> out(kQK_K);
  dequantize_row(t, reinterpret_cast<const std::byte*>(&b), out.data(), kQK_K);
  return out;
}

// d = 0.5, dmin = 0.25; scales sc = {1, 2, 3, 63, 17, 40, 5, 33}, mins m = {0, 7, 63, 1, 50,
// 16, 9, 32}, packed by hand (the j >= 4 values split into a low nibble in bytes 8-11 and their
// top 2 bits in bits 6-7 of bytes 0-3 / 4-7):
//   bytes 0-3:  1|(17>>4)<<6 = 0x41, 2|(40>>4)<<6 = 0x82, 3|(5>>4)<<6 = 0x03, 63|(33>>4)<<6 = 0xBF
//   bytes 4-7:  0|(50>>4)<<6 = 0xC0, 7|(16>>4)<<6 = 0x47, 63|(9>>4)<<6 = 0x3F, 1|(32>>4)<<6 = 0x81
//   bytes 8-11: 1|2<<4 = 0x21, 8|0<<4 = 0x08, 5|9<<4 = 0x95, 1|0<<4 = 0x01
// qs[i] = (7i + 3) mod 256. All values are exact in float, so they compare with ==.
BlockQ4_K hand_q4_K() {
  BlockQ4_K b;
  b.d = 0x3800;     // 0.5
  b.dmin = 0x3400;  // 0.25
  const uint8_t scales[12] = {0x41, 0x82, 0x03, 0xBF, 0xC0, 0x47,
                              0x3F, 0x81, 0x21, 0x08, 0x95, 0x01};
  std::memcpy(b.scales, scales, sizeof scales);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>(7 * i + 3);
  return b;
}

TEST(KQuantFormat, Q4_KHandBuiltBlockDequantizesToHandComputedValues) {
  const std::vector<float> y = dequantize_block(WeightType::Q4_K, hand_q4_K());
  // element 0:   sub-block 0, low nibble of qs[0] = 3:             0.5*1*3   - 0.25*0  = 1.5
  EXPECT_EQ(y[0], 1.5f);
  // element 32:  sub-block 1, high nibble of qs[0] = 0:            0.5*2*0   - 0.25*7  = -1.75
  EXPECT_EQ(y[32], -1.75f);
  // element 100: sub-block 3, high nibble of qs[36] = 255 -> 15:   0.5*63*15 - 0.25*1  = 472.25
  EXPECT_EQ(y[100], 472.25f);
  // element 130: sub-block 4, low nibble of qs[66] = 0xD1 -> 1:     0.5*17*1  - 0.25*50 = -4
  EXPECT_EQ(y[130], -4.0f);
  // element 255: sub-block 7, high nibble of qs[127] = 0x7C -> 7:   0.5*33*7  - 0.25*32 = 107.5
  EXPECT_EQ(y[255], 107.5f);
  // Every element, through the test's own decoding of the layout.
  const int want_sc[8] = {1, 2, 3, 63, 17, 40, 5, 33}, want_m[8] = {0, 7, 63, 1, 50, 16, 9, 32};
  const BlockQ4_K b = hand_q4_K();
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    testing::q4_K_scale_min(b, j, &sc, &m);
    ASSERT_EQ(sc, want_sc[j]) << j;
    ASSERT_EQ(m, want_m[j]) << j;
  }
  for (int e = 0; e < kQK_K; ++e) {
    const double want = 0.5 * want_sc[e / 32] * testing::q4_K_quant(b, e) - 0.25 * want_m[e / 32];
    ASSERT_EQ(y[e], want) << "element " << e;
  }
}

// d = 0.5; scales {-128, 127, 1, -1, 2, -2, 3, -3, 10, -10, 20, -20, 64, -64, 100, -100};
// ql[i] = (13i + 5) mod 256, qh[i] = (29i + 11) mod 256.
BlockQ6_K hand_q6_K() {
  BlockQ6_K b;
  const int8_t scales[16] = {-128, 127, 1, -1, 2, -2, 3, -3, 10, -10, 20, -20, 64, -64, 100, -100};
  std::memcpy(b.scales, scales, sizeof scales);
  for (int i = 0; i < 128; ++i) b.ql[i] = static_cast<uint8_t>(13 * i + 5);
  for (int i = 0; i < 64; ++i) b.qh[i] = static_cast<uint8_t>(29 * i + 11);
  b.d = 0x3800;  // 0.5
  return b;
}

TEST(KQuantFormat, Q6_KHandBuiltBlockDequantizesToHandComputedValues) {
  const std::vector<float> y = dequantize_block(WeightType::Q6_K, hand_q6_K());
  // element 0:   ql[0]=5 low nibble 5, qh[0]=11 bits 0-1 = 3: q = 5+48 = 53, group 0:
  //              0.5 * -128 * (53-32) = -1344
  EXPECT_EQ(y[0], -1344.0f);
  // element 33:  ql[33]=0xB2 low nibble 2, qh[1]=40 bits 2-3 = 2: q = 34, group 2: 0.5*1*2 = 1
  EXPECT_EQ(y[33], 1.0f);
  // element 111: ql[47]=0x68 high nibble 6, qh[15]=190 bits 6-7 = 2: q = 38, group 6: 0.5*3*6 = 9
  EXPECT_EQ(y[111], 9.0f);
  // element 200: half 1, ql[72]=0xAD high nibble 10, qh[40]=147 bits 4-5 = 1: q = 26, group 12:
  //              0.5 * 64 * (26-32) = -192
  EXPECT_EQ(y[200], -192.0f);
  const BlockQ6_K b = hand_q6_K();
  for (int e = 0; e < kQK_K; ++e) {
    const double want = 0.5 * b.scales[e / 16] * (testing::q6_K_quant(b, e) - 32);
    ASSERT_EQ(y[e], want) << "element " << e;
  }
}

TEST(KQuantFormat, Q8_KReferenceLayoutHoldsQuantsScaleAndGroupSums) {
  // Block 0: amax 127 -> d = 1, q = roundf(x), ties away from zero. Block 1: all zero.
  std::vector<float> x(2 * kQK_K, 0.0f);
  const float vals[8] = {127, -2.5f, 2.5f, 0.5f, -0.5f, 0.49999997f, 1.5f, -126.5f};
  const int8_t want[8] = {127, -3, 3, 1, -1, 0, 2, -127};
  std::memcpy(x.data(), vals, sizeof vals);
  for (int j = 16; j < 32; ++j) x[j] = -1.0f;  // group 1 sums to -16
  const std::vector<std::byte> act = testing::pack_q8_K(x);
  BlockQ8_K b[2];
  ASSERT_EQ(act.size(), sizeof b);
  std::memcpy(b, act.data(), sizeof b);
  EXPECT_EQ(b[0].d, 1.0f);
  int sum0 = 0;
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(b[0].qs[j], want[j]) << j;
    sum0 += want[j];
  }
  EXPECT_EQ(b[0].bsums[0], sum0);
  EXPECT_EQ(b[0].bsums[1], -16);
  for (int g = 2; g < 16; ++g) EXPECT_EQ(b[0].bsums[g], 0) << g;
  EXPECT_EQ(b[1].d, 0.0f);
  for (int j = 0; j < kQK_K; ++j) ASSERT_EQ(b[1].qs[j], 0);
  std::vector<float> back(2 * kQK_K);
  dequantize_row(WeightType::Q8_K, act.data(), back.data(), 2 * kQK_K);
  for (int j = 0; j < 8; ++j) EXPECT_EQ(back[j], static_cast<float>(want[j]));
}

class Q8_KQuantizerIsa : public ::testing::TestWithParam<Isa> {};

TEST_P(Q8_KQuantizerIsa, SameBytesAsReference) {
  for (WeightType t : {WeightType::Q4_K, WeightType::Q6_K}) {
    ASSERT_EQ(type_traits(t).act_type, WeightType::Q8_K);
    const QuantizeActFn fn = KernelSet::for_isa(GetParam()).matmul(t).quantize_act;
    for (int64_t n : {256, 2048, 14336}) {
      std::vector<float> x = testing::normal_floats(static_cast<size_t>(n), 21, 3.0f);
      // Exact ties: amax 127 gives id = 1, so k + 0.5 is a tie; then an all-zero block.
      x[0] = 127.0f;
      for (int j = 1; j < 256; ++j) x[static_cast<size_t>(j)] = static_cast<float>(j % 9) - 4.5f;
      if (n > 512) std::fill(x.begin() + 256, x.begin() + 512, 0.0f);
      std::vector<std::byte> got(static_cast<size_t>(row_bytes(WeightType::Q8_K, n)));
      fn(x.data(), got.data(), n);
      EXPECT_EQ(got, testing::pack_q8_K(x)) << isa_name(GetParam()) << " n=" << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, Q8_KQuantizerIsa, ::testing::ValuesIn(supported_isas()),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

TEST(KQuantFormat, RowLengthsThatAreNotWholeSuperBlocksAreRejected) {
  std::vector<float> x(288);
  std::vector<std::byte> q(1024);
  for (WeightType t : {WeightType::Q4_K, WeightType::Q6_K}) {
    try {
      quantize_row(t, x.data(), q.data(), 288);
      FAIL() << "no exception for " << type_name(t);
    } catch (const MatmulError& e) {
      EXPECT_THAT(e.what(), HasSubstr("288"));
      EXPECT_THAT(e.what(), HasSubstr(std::string(type_name(t))));
    }
    EXPECT_THROW(dequantize_row(t, q.data(), x.data(), 288), MatmulError);
  }
}

}  // namespace
}  // namespace pacer::ops
