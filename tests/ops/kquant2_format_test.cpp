// Block formats of Q5_K, Q3_K, Q2_K and IQ4_XS: dequantize_row of hand-built blocks against
// values worked out by hand from ggml's byte layout (and every element against the test's own
// decoding, kquant2_test_util.h), sizes and names in the type table, and row lengths that are
// not whole blocks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ops/iq4_xs.h"
#include "ops/matmul.h"
#include "ops/q2_k.h"
#include "ops/q3_k.h"
#include "ops/q5_k.h"
#include "tests/ops/kquant2_test_util.h"

namespace pacer::ops {
namespace {

using ::testing::HasSubstr;

std::vector<float> dequantize_block(WeightType t, const void* block) {
  std::vector<float> out(kQK_K);
  dequantize_row(t, static_cast<const std::byte*>(block), out.data(), kQK_K);
  return out;
}

// Every element of a dequantized block against the test's own decoding (exact: all test
// values are small multiples of powers of two).
void expect_matches_decoding(WeightType t, const void* block, const std::vector<float>& y) {
  for (int e = 0; e < kQK_K; ++e) {
    ASSERT_EQ(y[e], testing::decode(t, static_cast<const std::byte*>(block), e).value)
        << type_name(t) << " element " << e;
  }
}

// d = 0.5, dmin = 0.25; scales sc = {1, 2, 3, 63, 17, 40, 5, 33}, mins m = {0, 7, 63, 1, 50,
// 16, 9, 32}, packed by hand as Q4_K's (low 6 bits of bytes 0-3 / 4-7 for j < 4; for j >= 4 a
// nibble of bytes 8-11 and the top 2 bits of bytes j-4 / j):
//   bytes 0-3:  0x41 0x82 0x03 0xBF   bytes 4-7: 0xC0 0x47 0x3F 0x81   bytes 8-11: 0x21 0x08 0x95
//   0x01
// qh[l] = (37l + 5) mod 256, qs[i] = (7i + 3) mod 256.
BlockQ5_K hand_q5_K() {
  BlockQ5_K b;
  b.d = 0x3800;     // 0.5
  b.dmin = 0x3400;  // 0.25
  const uint8_t scales[12] = {0x41, 0x82, 0x03, 0xBF, 0xC0, 0x47,
                              0x3F, 0x81, 0x21, 0x08, 0x95, 0x01};
  std::memcpy(b.scales, scales, sizeof scales);
  for (int l = 0; l < 32; ++l) b.qh[l] = static_cast<uint8_t>(37 * l + 5);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>(7 * i + 3);
  return b;
}

TEST(KQuant2Format, Q5_KHandBuiltBlockDequantizesToHandComputedValues) {
  const BlockQ5_K b = hand_q5_K();
  const std::vector<float> y = dequantize_block(WeightType::Q5_K, &b);
  // element 0:   sub-block 0, qs[0] = 3 low nibble 3, qh[0] = 5 bit 0 = 1: q = 19
  //              0.5*1*19 - 0.25*0 = 9.5
  EXPECT_EQ(y[0], 9.5f);
  // element 32:  sub-block 1, qs[0] high nibble 0, qh[0] = 5 bit 1 = 0: q = 0
  //              0 - 0.25*7 = -1.75
  EXPECT_EQ(y[32], -1.75f);
  // element 100: sub-block 3 (l = 4), qs[36] = 255 high nibble 15, qh[4] = 153 bit 3 = 1: q = 31
  //              0.5*63*31 - 0.25*1 = 976.25
  EXPECT_EQ(y[100], 976.25f);
  // element 130: sub-block 4 (l = 2), qs[66] = 0xD1 low nibble 1, qh[2] = 79 bit 4 = 0: q = 1
  //              0.5*17*1 - 0.25*50 = -4
  EXPECT_EQ(y[130], -4.0f);
  // element 255: sub-block 7 (l = 31), qs[127] = 0x7C high nibble 7, qh[31] = 128 bit 7 = 1:
  //              q = 23; 0.5*33*23 - 0.25*32 = 371.5
  EXPECT_EQ(y[255], 371.5f);
  const int want_sc[8] = {1, 2, 3, 63, 17, 40, 5, 33}, want_m[8] = {0, 7, 63, 1, 50, 16, 9, 32};
  for (int j = 0; j < 8; ++j) {
    const testing::Decoded v = testing::decode_q5_K(reinterpret_cast<const uint8_t*>(&b), 32 * j);
    ASSERT_EQ(v.scale, want_sc[j]) << j;
    ASSERT_EQ(v.min, want_m[j]) << j;
  }
  expect_matches_decoding(WeightType::Q5_K, &b, y);
}

// d = 0.5; stored 6-bit scales u = {0, 63, 32, 33, 31, 1, 40, 20, 10, 50, 5, 60, 16, 48, 47, 17}
// (sc = u - 32 = {-32, 31, 0, 1, -1, -31, 8, -12, -22, 18, -27, 28, -16, 16, 15, -15}), packed
// by hand: byte g < 8 = (u_g & 15) | (u_{g+8} & 15) << 4; byte 8 + i = sum_k (u_{4k+i} >> 4) << 2k:
//   bytes 0-7:  0xA0 0x2F 0x50 0xC1 0x0F 0x01 0xF8 0x14    bytes 8-11: 0x44 0xF3 0x8A 0x76
// hmask[l] = (53l + 7) mod 256, qs[i] = (11i + 9) mod 256.
BlockQ3_K hand_q3_K() {
  BlockQ3_K b;
  const uint8_t scales[12] = {0xA0, 0x2F, 0x50, 0xC1, 0x0F, 0x01,
                              0xF8, 0x14, 0x44, 0xF3, 0x8A, 0x76};
  std::memcpy(b.scales, scales, sizeof scales);
  for (int l = 0; l < 32; ++l) b.hmask[l] = static_cast<uint8_t>(53 * l + 7);
  for (int i = 0; i < 64; ++i) b.qs[i] = static_cast<uint8_t>(11 * i + 9);
  b.d = 0x3800;  // 0.5
  return b;
}

TEST(KQuant2Format, Q3_KHandBuiltBlockDequantizesToHandComputedValues) {
  const BlockQ3_K b = hand_q3_K();
  const std::vector<float> y = dequantize_block(WeightType::Q3_K, &b);
  // element 0:   group 0 (sc -32), qs[0] = 9 bits 0-1 = 1, hmask[0] = 7 bit 0 = 1: q = 1 - 4 + 4
  //              = 1; 0.5 * -32 * 1 = -16
  EXPECT_EQ(y[0], -16.0f);
  // element 17:  group 1 (sc 31), qs[17] = 196 bits 0-1 = 0, hmask[17] = 140 bit 0 = 0: q = -4;
  //              0.5 * 31 * -4 = -62
  EXPECT_EQ(y[17], -62.0f);
  // element 130: group 8 (sc -22), half 1 run 0 l = 2: qs[34] = 127 bits 0-1 = 3, hmask[2] = 113
  //              bit 4 = 1: q = 3; 0.5 * -22 * 3 = -33
  EXPECT_EQ(y[130], -33.0f);
  // element 200: group 12 (sc -16), half 1 run 2 l = 8: qs[40] = 193 bits 4-5 = 0, hmask[8] = 175
  //              bit 6 = 0: q = -4; 0.5 * -16 * -4 = 32
  EXPECT_EQ(y[200], 32.0f);
  // element 255: group 15 (sc -15), half 1 run 3 l = 31: qs[63] = 190 bits 6-7 = 2, hmask[31] =
  //              114 bit 7 = 0: q = -2; 0.5 * -15 * -2 = 15
  EXPECT_EQ(y[255], 15.0f);
  const int want_sc[16] = {-32, 31, 0, 1, -1, -31, 8, -12, -22, 18, -27, 28, -16, 16, 15, -15};
  for (int g = 0; g < 16; ++g) {
    ASSERT_EQ(testing::decode_q3_K(reinterpret_cast<const uint8_t*>(&b), 16 * g).scale, want_sc[g])
        << g;
  }
  expect_matches_decoding(WeightType::Q3_K, &b, y);
}

// d = 0.5, dmin = 0.25; scales sc = {3, 0, 15, 7, 1, 9, 12, 5, 2, 14, 6, 11, 4, 8, 10, 13}, mins
// m = {5, 15, 0, 2, 9, 1, 3, 12, 7, 4, 11, 6, 14, 10, 8, 13}, byte g = sc_g | m_g << 4:
//   0x53 0xF0 0x0F 0x27 0x91 0x19 0x3C 0xC5 0x72 0x4E 0xB6 0x6B 0xE4 0xA8 0x8A 0xDD
// qs[i] = (17i + 6) mod 256.
BlockQ2_K hand_q2_K() {
  BlockQ2_K b;
  const uint8_t scales[16] = {0x53, 0xF0, 0x0F, 0x27, 0x91, 0x19, 0x3C, 0xC5,
                              0x72, 0x4E, 0xB6, 0x6B, 0xE4, 0xA8, 0x8A, 0xDD};
  std::memcpy(b.scales, scales, sizeof scales);
  for (int i = 0; i < 64; ++i) b.qs[i] = static_cast<uint8_t>(17 * i + 6);
  b.d = 0x3800;     // 0.5
  b.dmin = 0x3400;  // 0.25
  return b;
}

TEST(KQuant2Format, Q2_KHandBuiltBlockDequantizesToHandComputedValues) {
  const BlockQ2_K b = hand_q2_K();
  const std::vector<float> y = dequantize_block(WeightType::Q2_K, &b);
  // element 0:   group 0 (sc 3, m 5), qs[0] = 6 bits 0-1 = 2: 0.5*3*2 - 0.25*5 = 1.75
  EXPECT_EQ(y[0], 1.75f);
  // element 20:  group 1 (sc 0, m 15), qs[20] = 90 bits 0-1 = 2: 0 - 0.25*15 = -3.75
  EXPECT_EQ(y[20], -3.75f);
  // element 77:  group 4 (sc 1, m 9), run 2 l = 13: qs[13] = 227 bits 4-5 = 2: 1 - 2.25 = -1.25
  EXPECT_EQ(y[77], -1.25f);
  // element 150: group 9 (sc 14, m 4), half 1 run 0 l = 22: qs[54] = 156 bits 0-1 = 0: -1
  EXPECT_EQ(y[150], -1.0f);
  // element 255: group 15 (sc 13, m 13), half 1 run 3 l = 31: qs[63] = 53 bits 6-7 = 0: -3.25
  EXPECT_EQ(y[255], -3.25f);
  expect_matches_decoding(WeightType::Q2_K, &b, y);
}

// d = 0.5; stored 6-bit scales u = {0, 63, 32, 40, 17, 50, 1, 31} (sc = u - 32 = {-32, 31, 0,
// 8, -15, 18, -31, -1}), packed by hand: scales_l[j/2] nibble j%2 = u_j & 15 -> {0xF0, 0x80,
// 0x21, 0xF1}; scales_h bits 2j, 2j+1 = u_j >> 4 = {0, 3, 2, 2, 1, 3, 0, 1} -> 0x4DAC.
// qs[i] = (29i + 3) mod 256.
BlockIQ4_XS hand_iq4_xs() {
  BlockIQ4_XS b;
  b.d = 0x3800;  // 0.5
  b.scales_h = 0x4DAC;
  const uint8_t scales_l[4] = {0xF0, 0x80, 0x21, 0xF1};
  std::memcpy(b.scales_l, scales_l, sizeof scales_l);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>(29 * i + 3);
  return b;
}

TEST(KQuant2Format, IQ4_XSHandBuiltBlockDequantizesToHandComputedValues) {
  const BlockIQ4_XS b = hand_iq4_xs();
  const std::vector<float> y = dequantize_block(WeightType::IQ4_XS, &b);
  // element 0:   sub-block 0 (sc -32), qs[0] = 3 low nibble 3: level -65; 0.5*-32*-65 = 1040
  EXPECT_EQ(y[0], 1040.0f);
  // element 20:  sub-block 0, l = 20: qs[4] = 119 high nibble 7: level -10; 0.5*-32*-10 = 160
  EXPECT_EQ(y[20], 160.0f);
  // element 47:  sub-block 1 (sc 31), l = 15: qs[31] = 134 low nibble 6: level -22; -341
  EXPECT_EQ(y[47], -341.0f);
  // element 130: sub-block 4 (sc -15), l = 2: qs[66] = 125 low nibble 13: level 69; -517.5
  EXPECT_EQ(y[130], -517.5f);
  // element 255: sub-block 7 (sc -1), l = 31: qs[127] = 102 high nibble 6: level -22; 11
  EXPECT_EQ(y[255], 11.0f);
  const int want_sc[8] = {-32, 31, 0, 8, -15, 18, -31, -1};
  for (int j = 0; j < 8; ++j) {
    ASSERT_EQ(testing::decode_iq4_xs(reinterpret_cast<const uint8_t*>(&b), 32 * j).scale,
              want_sc[j])
        << j;
  }
  for (int k = 0; k < 16; ++k) ASSERT_EQ(kIq4NlLevels[k], testing::kIq4Levels[k]) << k;
  expect_matches_decoding(WeightType::IQ4_XS, &b, y);
}

TEST(KQuant2Format, TypeTableMatchesGgml) {
  struct Want {
    uint32_t id;
    const char* name;
    int64_t bytes;
  };
  const Want wants[] = {
      {13, "q5_K", 176}, {11, "q3_K", 110}, {10, "q2_K", 84}, {23, "iq4_xs", 136}};
  for (WeightType t : testing::kquant2_types()) {
    const uint32_t id = static_cast<uint32_t>(t);
    const Want* w = nullptr;
    for (const Want& c : wants) w = c.id == id ? &c : w;
    ASSERT_NE(w, nullptr) << id;
    EXPECT_EQ(weight_type_from_id(id), t);
    EXPECT_EQ(type_info(t).name, w->name);
    EXPECT_EQ(type_info(t).block_elems, 256);
    EXPECT_EQ(type_info(t).block_bytes, w->bytes);
    EXPECT_EQ(weight_type_from_name(w->name), t);
  }
}

TEST(KQuant2Format, RowLengthsNotWholeBlocksAreRejected) {
  std::vector<std::byte> data(1024);
  std::vector<float> y(288);
  for (WeightType t : testing::kquant2_types()) {
    try {
      dequantize_row(t, data.data(), y.data(), 288);
      FAIL() << "no exception for " << type_name(t);
    } catch (const MatmulError& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string(type_name(t))));
      EXPECT_THAT(e.what(), HasSubstr("256"));
    }
    EXPECT_THROW(quantize_row(t, y.data(), data.data(), 288), MatmulError);
  }
}

}  // namespace
}  // namespace pacer::ops
