// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS interleaved by 16 rows (ops/interleaved.h): the repack
// keeps every byte where the layout says, the scalar references equal the row-major reference dots
// bit for bit, and the AVX-512 VNNI GEMVs and GEMMs agree with the exact dot (computed here in
// double from q4_k.h's, q5_k.h's and q6_k.h's definitions, and Q3_K's from the test decoder of
// kquant2_test_util.h, Q2_K's and IQ4_XS's likewise) within a rounding bound, each GEMM with its
// GEMV bit for bit; matmul() over a repacked view on every Isa.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/interleaved.h"
#include "ops/iq4_xs.h"
#include "ops/kernel_set.h"
#include "ops/matmul.h"
#include "ops/q2_k.h"
#include "ops/q3_k.h"
#include "ops/q4_k.h"
#include "ops/q5_k.h"
#include "ops/q6_k.h"
#include "ops/q8_k.h"
#include "tests/ops/kquant2_test_util.h"
#include "tests/ops/matmul_test_util.h"

namespace pacer::ops {
namespace {

using testing::kUnitRoundoff;

struct Case {
  int64_t rows, cols;
};
// One row, a partial group, exact groups, partial last groups; 1 to 22 super-blocks per row; and
// 4 groups or more, which the GEMVs read as 2 or 4 far-apart streams (gemv_streams.h), with
// leftover groups after them (7, 13, 19 and 33 groups; 4-13 as short as one worker's share on
// many threads).
// 17 x 16640: 65 super-blocks a row, past the 64 whose activation sums the Q4_K / Q5_K GEMVs
// keep on the stack (the heap path).
const Case kCases[] = {{1, 256},   {15, 512},  {16, 256},  {17, 768},  {40, 2048}, {33, 5632},
                       {64, 1024}, {100, 512}, {200, 768}, {300, 512}, {520, 256}, {17, 16640}};

// sc_j and m_j of a Q4_K or Q5_K block, decoded from q4_k.h's description of the 12 scale bytes.
void scale_and_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
    *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
  }
}

// The exact dot of a Q4_K row with a Q8_K row in double, and a bound for a kernel that rounds
// each super-block's two terms (factor products, conversions, FMA) and sums super-blocks in order.
struct Exact {
  double value;
  double bound;
};
// Q4_K / Q5_K: q of element e = 32 j + l, read from q4_k.h's and q5_k.h's descriptions of qs
// (byte 32 (j / 2) + l, nibble j % 2) and qh (bit j of byte l).
int q4_K_quant(const BlockQ4_K& b, int e) {
  const int j = e / 32, l = e % 32;
  return (b.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
}
int q5_K_quant(const BlockQ5_K& b, int e) {
  const int j = e / 32, l = e % 32;
  return ((b.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15) | ((b.qh[l] >> j) & 1) << 4;
}
template <class Block, class Quant>
Exact exact_dot_affine_K(int64_t n, const std::byte* w_row, const std::byte* act, Quant quant) {
  const auto* w = reinterpret_cast<const Block*>(w_row);
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  double value = 0, magnitude = 0;
  const int64_t nb = n / 256;
  for (int64_t b = 0; b < nb; ++b) {
    double scaled = 0, mins = 0;
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      scale_and_min(w[b].scales, j, &sc, &m);
      double dot = 0, xsum = 0;
      for (int e = 32 * j; e < 32 * j + 32; ++e) {
        dot += double(quant(w[b], e)) * x[b].qs[e];
        xsum += x[b].qs[e];
      }
      scaled += sc * dot;
      mins += m * xsum;
    }
    const double d = fp16_to_fp32(w[b].d), dmin = fp16_to_fp32(w[b].dmin);
    value += x[b].d * (d * scaled - dmin * mins);
    magnitude += std::fabs(x[b].d * d * scaled) + std::fabs(x[b].d * dmin * mins);
  }
  return {value, 4.0 * (double(nb) + 4) * kUnitRoundoff * magnitude};
}
Exact exact_dot_q4_K(int64_t n, const std::byte* w_row, const std::byte* act) {
  return exact_dot_affine_K<BlockQ4_K>(n, w_row, act, q4_K_quant);
}
Exact exact_dot_q5_K(int64_t n, const std::byte* w_row, const std::byte* act) {
  return exact_dot_affine_K<BlockQ5_K>(n, w_row, act, q5_K_quant);
}

// Q6_K: q of element e read from q6_k.h's description of ql / qh.
int q6_K_quant(const BlockQ6_K& b, int e) {
  const int h = e / 128, k = e % 128 / 32, l = e % 32;
  const uint8_t ql = b.ql[64 * h + 32 * (k % 2) + l];
  const int low = k < 2 ? ql & 15 : ql >> 4;
  return low | ((b.qh[32 * h + l] >> (2 * k)) & 3) << 4;
}
Exact exact_dot_q6_K(int64_t n, const std::byte* w_row, const std::byte* act) {
  const auto* w = reinterpret_cast<const BlockQ6_K*>(w_row);
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  double value = 0, magnitude = 0;
  const int64_t nb = n / 256;
  for (int64_t b = 0; b < nb; ++b) {
    double isum = 0;
    for (int g = 0; g < 16; ++g) {
      double dot = 0;
      for (int e = 16 * g; e < 16 * g + 16; ++e)
        dot += double(q6_K_quant(w[b], e) - 32) * x[b].qs[e];
      isum += w[b].scales[g] * dot;
    }
    const double term = double(x[b].d) * fp16_to_fp32(w[b].d) * isum;
    value += term;
    magnitude += std::fabs(term);
  }
  return {value, 4.0 * (double(nb) + 4) * kUnitRoundoff * magnitude};
}

// Q3_K: q and the scale of every element from the test decoder (straight from ggml's offsets).
Exact exact_dot_q3_K(int64_t n, const std::byte* w_row, const std::byte* act) {
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  double value = 0, magnitude = 0;
  const int64_t nb = n / 256;
  for (int64_t b = 0; b < nb; ++b) {
    const auto* blk = reinterpret_cast<const uint8_t*>(w_row + 110 * b);
    double isum = 0;
    for (int e = 0; e < 256; ++e) {
      const testing::Decoded w = testing::decode_q3_K(blk, e);
      isum += double(w.scale) * w.q * x[b].qs[e];
    }
    const double term = double(x[b].d) * testing::fp16_at(blk + 108) * isum;
    value += term;
    magnitude += std::fabs(term);
  }
  return {value, 4.0 * (double(nb) + 4) * kUnitRoundoff * magnitude};
}

// IQ4_XS: level and scale of every element from the test decoder.
Exact exact_dot_iq4_xs(int64_t n, const std::byte* w_row, const std::byte* act) {
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  double value = 0, magnitude = 0;
  const int64_t nb = n / 256;
  for (int64_t b = 0; b < nb; ++b) {
    const auto* blk = reinterpret_cast<const uint8_t*>(w_row + 136 * b);
    double isum = 0;
    for (int e = 0; e < 256; ++e) {
      const testing::Decoded w = testing::decode_iq4_xs(blk, e);
      isum += double(w.scale) * testing::kIq4Levels[w.q] * x[b].qs[e];
    }
    const double term = double(x[b].d) * testing::fp16_at(blk) * isum;
    value += term;
    magnitude += std::fabs(term);
  }
  return {value, 4.0 * (double(nb) + 4) * kUnitRoundoff * magnitude};
}

// Q2_K: quant, scale and min of every element from the test decoder; the bound covers the scale
// and min terms apart, as the kernels round them.
Exact exact_dot_q2_K(int64_t n, const std::byte* w_row, const std::byte* act) {
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  double value = 0, magnitude = 0;
  const int64_t nb = n / 256;
  for (int64_t b = 0; b < nb; ++b) {
    const auto* blk = reinterpret_cast<const uint8_t*>(w_row + 84 * b);
    double isum = 0, msum = 0;
    for (int e = 0; e < 256; ++e) {
      const testing::Decoded w = testing::decode_q2_K(blk, e);
      isum += double(w.scale) * w.q * x[b].qs[e];
      msum += double(w.min) * x[b].qs[e];
    }
    const double scaled = double(x[b].d) * testing::fp16_at(blk + 80) * isum;
    const double mins = double(x[b].d) * testing::fp16_at(blk + 82) * msum;
    value += scaled - mins;
    magnitude += std::fabs(scaled) + std::fabs(mins);
  }
  return {value, 4.0 * (double(nb) + 4) * kUnitRoundoff * magnitude};
}

Exact exact_dot(WeightType t, int64_t n, const std::byte* w_row, const std::byte* act) {
  if (t == WeightType::Q2_K) return exact_dot_q2_K(n, w_row, act);
  if (t == WeightType::Q3_K) return exact_dot_q3_K(n, w_row, act);
  if (t == WeightType::IQ4_XS) return exact_dot_iq4_xs(n, w_row, act);
  if (t == WeightType::Q4_K) return exact_dot_q4_K(n, w_row, act);
  if (t == WeightType::Q5_K) return exact_dot_q5_K(n, w_row, act);
  return exact_dot_q6_K(n, w_row, act);
}

std::vector<std::byte> q8_k_rows(const std::vector<float>& x, int64_t cols, int64_t tokens) {
  PackedActivations act;
  act.pack(WeightType::Q4_K, x, cols, tokens, KernelSet::for_isa(Isa::Scalar));
  const int64_t row = row_bytes(WeightType::Q8_K, cols);
  std::vector<std::byte> out(static_cast<size_t>(row * tokens));
  for (int64_t t = 0; t < tokens; ++t) std::memcpy(out.data() + t * row, act.token(t), row);
  return out;
}

bool vnni_here() {
  return isa_supported(Isa::Avx512) && detect_cpu_features().avx512_vnni;
}

// Q4_K and Q5_K: every byte where interleaved.h's layout says (Q4_K: the quants from 256 in
// chunks of 512; Q5_K: chunks of 640, two quads of a fifth-bit vector and 4 quant vectors).
template <class Block>
void check_affine_K_layout(WeightType type) {
  constexpr bool kQ5 = std::is_same_v<Block, BlockQ5_K>;
  constexpr int64_t kBlockBytes = kQ5 ? 2816 : 2304;
  for (const Case c : kCases) {
    const testing::OwnedMatrix w = testing::make_matrix(type, c.rows, c.cols, 61);
    const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
    EXPECT_EQ(m.view().layout, WeightLayout::Interleaved16);
    EXPECT_EQ(m.view().bytes(), w.view.bytes()) << "streamed bytes are the type's";
    EXPECT_EQ(x16_group_bytes(type, c.cols), c.cols / 256 * 16 * int64_t{sizeof(Block)});
    EXPECT_EQ(m.storage_bytes(), x16_groups(c.rows) * x16_group_bytes(type, c.cols));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m.view().data) % 64, 0u);
    const auto byte_at = [&](int64_t r, int64_t b, int64_t offset) {
      const std::byte* sb =
          m.view().data + r / 16 * x16_group_bytes(type, c.cols) + b * kBlockBytes;
      return static_cast<uint8_t>(sb[offset]);
    };
    for (int64_t r = 0; r < x16_groups(c.rows) * 16; ++r) {
      const int64_t i = r % 16;
      for (int64_t b = 0; b < c.cols / 256; ++b) {
        if (r >= c.rows) {  // padding rows: d = dmin = 0, so they dot to 0
          ASSERT_EQ(byte_at(r, b, 2 * i) | byte_at(r, b, 2 * i + 1) | byte_at(r, b, 32 + 2 * i) |
                        byte_at(r, b, 33 + 2 * i),
                    0)
              << "padding row " << r;
          continue;
        }
        const auto& src = reinterpret_cast<const Block*>(w.view.row(r))[b];
        uint8_t d[2], dmin[2];
        std::memcpy(d, &src.d, 2);
        std::memcpy(dmin, &src.dmin, 2);
        for (int k = 0; k < 2; ++k) {
          ASSERT_EQ(byte_at(r, b, 2 * i + k), d[k]) << "d of row " << r << " block " << b;
          ASSERT_EQ(byte_at(r, b, 32 + 2 * i + k), dmin[k]) << "dmin of row " << r;
        }
        for (int k = 0; k < 12; ++k) {  // chunk k / 4, dword i, byte k % 4
          ASSERT_EQ(byte_at(r, b, 64 + 64 * (k / 4) + 4 * i + k % 4), src.scales[k])
              << "scale byte " << k << " of row " << r << " block " << b;
        }
        for (int k = 0; k < 128; ++k) {  // chunk k / 32, quant vector m = k % 32 / 4, byte k % 4
          const int64_t c = k / 32, m = k % 32 / 4;
          const int64_t at =
              kQ5 ? 256 + 640 * c + 320 * (m / 4) + 64 + 64 * (m % 4) : 256 + 512 * c + 64 * m;
          ASSERT_EQ(byte_at(r, b, at + 4 * i + k % 4), src.qs[k])
              << "qs byte " << k << " of row " << r << " block " << b;
        }
        if constexpr (kQ5) {
          // Fifth bits: chunk c, quad q, byte bb of dword i; bit 2j / 2j + 1 = bit 2c / 2c + 1 of
          // qh[16q + 4j + bb].
          for (int c = 0; c < 4; ++c) {
            for (int q = 0; q < 2; ++q) {
              for (int bb = 0; bb < 4; ++bb) {
                int want = 0;
                for (int j = 0; j < 4; ++j) {
                  const int qh = src.qh[16 * q + 4 * j + bb];
                  want |= ((qh >> (2 * c)) & 1) << (2 * j) | ((qh >> (2 * c + 1)) & 1)
                                                                 << (2 * j + 1);
                }
                ASSERT_EQ(byte_at(r, b, 256 + 640 * c + 320 * q + 4 * i + bb), want)
                    << "fifth bits, chunk " << c << " quad " << q << " byte " << bb << " of row "
                    << r << " block " << b;
              }
            }
          }
        }
      }
    }
  }
}

TEST(InterleavedQ4K, RepackPutsEveryByteWhereTheLayoutSays) {
  check_affine_K_layout<BlockQ4_K>(WeightType::Q4_K);
}

TEST(InterleavedQ5K, RepackPutsEveryByteWhereTheLayoutSays) {
  check_affine_K_layout<BlockQ5_K>(WeightType::Q5_K);
}

struct KQuantKernels {
  X16GemvFn ref, gemv;
  X16GemmFn gemm;
  float (*row_major_ref)(int64_t, const std::byte*, const std::byte*);
};
KQuantKernels kernels_of(WeightType t) {
  if (t == WeightType::Q2_K) {
    return {gemv_q2_Kx16_q8_K_ref, gemv_q2_Kx16_q8_K_avx512vnni, gemm_q2_Kx16_q8_K_avx512vnni,
            dot_q2_K_q8_K_ref};
  }
  if (t == WeightType::IQ4_XS) {
    return {gemv_iq4_xsx16_q8_K_ref, gemv_iq4_xsx16_q8_K_avx512vnni, gemm_iq4_xsx16_q8_K_avx512vnni,
            dot_iq4_xs_q8_K_ref};
  }
  if (t == WeightType::Q3_K) {
    return {gemv_q3_Kx16_q8_K_ref, gemv_q3_Kx16_q8_K_avx512vnni, gemm_q3_Kx16_q8_K_avx512vnni,
            dot_q3_K_q8_K_ref};
  }
  if (t == WeightType::Q4_K) {
    return {gemv_q4_Kx16_q8_K_ref, gemv_q4_Kx16_q8_K_avx512vnni, gemm_q4_Kx16_q8_K_avx512vnni,
            dot_q4_K_q8_K_ref};
  }
  if (t == WeightType::Q5_K) {
    return {gemv_q5_Kx16_q8_K_ref, gemv_q5_Kx16_q8_K_avx512vnni, gemm_q5_Kx16_q8_K_avx512vnni,
            dot_q5_K_q8_K_ref};
  }
  return {gemv_q6_Kx16_q8_K_ref, gemv_q6_Kx16_q8_K_avx512vnni, gemm_q6_Kx16_q8_K_avx512vnni,
          dot_q6_K_q8_K_ref};
}

class InterleavedKQuant : public ::testing::TestWithParam<WeightType> {};

TEST_P(InterleavedKQuant, ScalarReferenceEqualsTheRowMajorReferenceBitForBit) {
  const WeightType type = GetParam();
  const KQuantKernels k = kernels_of(type);
  for (const Case c : kCases) {
    const testing::OwnedMatrix w = testing::make_matrix(type, c.rows, c.cols, 62);
    const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
    const std::vector<std::byte> act =
        q8_k_rows(testing::normal_floats(static_cast<size_t>(c.cols), 63), c.cols, 1);
    std::vector<float> y(static_cast<size_t>(x16_groups(c.rows) * 16), NAN);
    k.ref(c.cols, m.view().data, x16_groups(c.rows), act.data(), y.data());
    for (int64_t r = 0; r < c.rows; ++r) {
      ASSERT_EQ(y[r], k.row_major_ref(c.cols, w.view.row(r), act.data()))
          << c.rows << "x" << c.cols << " row " << r;
    }
    for (int64_t r = c.rows; r < x16_groups(c.rows) * 16; ++r) EXPECT_EQ(y[r], 0.0f);
  }
}

TEST_P(InterleavedKQuant, VnniGemvAndGemmMatchTheExactDot) {
  if (!vnni_here()) GTEST_SKIP() << "no AVX-512 VNNI here";
  const WeightType type = GetParam();
  const KQuantKernels k = kernels_of(type);
  for (const Case c : kCases) {
    const testing::OwnedMatrix w = testing::make_matrix(type, c.rows, c.cols, 71);
    const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
    const int64_t groups = x16_groups(c.rows), padded = groups * 16, tokens = 7;
    const int64_t act_stride = row_bytes(WeightType::Q8_K, c.cols);
    const std::vector<std::byte> act =
        q8_k_rows(testing::normal_floats(static_cast<size_t>(tokens * c.cols), 72), c.cols, tokens);
    std::vector<float> yt(static_cast<size_t>(tokens * padded), NAN);
    k.gemm(c.cols, m.view().data, groups, act.data(), act_stride, tokens, yt.data(), padded);
    for (int64_t t = 0; t < tokens; ++t) {
      const std::byte* xt = act.data() + t * act_stride;
      std::vector<float> y(static_cast<size_t>(padded), NAN);
      k.gemv(c.cols, m.view().data, groups, xt, y.data());
      for (int64_t r = 0; r < c.rows; ++r) {
        const Exact e = exact_dot(type, c.cols, w.view.row(r), xt);
        ASSERT_NEAR(y[r], e.value, e.bound) << c.rows << "x" << c.cols << " t " << t << " r " << r;
        ASSERT_EQ(yt[t * padded + r], y[r]) << "gemm vs gemv, token " << t << " row " << r;
      }
      for (int64_t r = c.rows; r < padded; ++r) {
        EXPECT_EQ(y[r], 0.0f) << "padding row " << r;
        EXPECT_EQ(yt[t * padded + r], 0.0f) << "padding row " << r;
      }
    }
  }
}

// The integer extremes: every quant at its top (Q4_K 15, Q5_K 31) or 0, every scale and min 63,
// activations at -128 / 127. The sub-block sums (up to 126,976), the scaled super-block sum
// (~64 M) and the mins (8 * 63 * 4096) must not wrap in the kernel's int32 lanes and int16 pairs.
// 16 rows x cols of blocks filled by fill(block, k) (k: the block's index), repacked, against
// activations all `lowest` (-128, or -127 for the kernels that flip signs: pacer's Q8_K quants
// stay in [-127, 127]) or all 127: the GEMV within the exact dot's bound, the GEMM equal to it.
template <class Block, class Fill>
void check_extreme_blocks(WeightType type, int64_t cols, Fill fill, X16GemvFn gemv, X16GemmFn gemm,
                          Exact (*exact)(int64_t, const std::byte*, const std::byte*),
                          int8_t lowest = -128) {
  const int64_t rows = 16;
  std::vector<Block> blocks(static_cast<size_t>(rows * cols / 256));
  for (size_t k = 0; k < blocks.size(); ++k) fill(blocks[k], k);
  const WeightMatrix w{type, reinterpret_cast<const std::byte*>(blocks.data()), rows, cols};
  const InterleavedMatrix m = InterleavedMatrix::repack(w);
  for (int sign : {-1, 1}) {
    std::vector<BlockQ8_K> x(static_cast<size_t>(cols / 256));
    for (BlockQ8_K& b : x) {
      b.d = 0.01f;
      for (int8_t& q : b.qs) q = sign < 0 ? lowest : int8_t{127};
      for (int16_t& s : b.bsums) s = static_cast<int16_t>(16 * b.qs[0]);
    }
    const auto* act = reinterpret_cast<const std::byte*>(x.data());
    std::vector<float> y(rows, NAN), yt(rows, NAN);
    gemv(cols, m.view().data, 1, act, y.data());
    gemm(cols, m.view().data, 1, act, 0, 1, yt.data(), rows);
    for (int64_t r = 0; r < rows; ++r) {
      const Exact e = exact(cols, w.row(r), act);
      ASSERT_NEAR(y[r], e.value, e.bound) << "sign " << sign << " row " << r;
      ASSERT_EQ(yt[r], y[r]);
    }
  }
}

// Q4_K / Q5_K: every quant at its top or 0, every scale and min 63.
template <class Block>
void fill_extreme_affine_k(Block& b, size_t k) {
  b.d = fp32_to_fp16(k % 2 ? 0.5f : 1.0f);
  b.dmin = fp32_to_fp16(0.25f);
  std::memset(b.scales, 0xFF, sizeof b.scales);
  std::memset(b.qs, k % 3 ? 0xFF : 0x0F, sizeof b.qs);
  if constexpr (std::is_same_v<Block, BlockQ5_K>) std::memset(b.qh, k % 3 ? 0xFF : 0x0F, 32);
}

TEST(InterleavedQ4K, ExtremeBlocksDoNotOverflow) {
  if (!vnni_here()) GTEST_SKIP() << "no AVX-512 VNNI here";
  check_extreme_blocks<BlockQ4_K>(WeightType::Q4_K, 512, fill_extreme_affine_k<BlockQ4_K>,
                                  gemv_q4_Kx16_q8_K_avx512vnni, gemm_q4_Kx16_q8_K_avx512vnni,
                                  exact_dot_q4_K);
}

TEST(InterleavedQ4K, Avx2ExtremeBlocksDoNotOverflow) {
  if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "no AVX2 here";
  check_extreme_blocks<BlockQ4_K>(WeightType::Q4_K, 512, fill_extreme_affine_k<BlockQ4_K>,
                                  gemv_q4_Kx16_q8_K_avx2, gemm_q4_Kx16_q8_K_avx2, exact_dot_q4_K);
}

TEST(InterleavedQ5K, Avx2ExtremeBlocksDoNotOverflow) {
  if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "no AVX2 here";
  check_extreme_blocks<BlockQ5_K>(WeightType::Q5_K, 512, fill_extreme_affine_k<BlockQ5_K>,
                                  gemv_q5_Kx16_q8_K_avx2, gemm_q5_Kx16_q8_K_avx2, exact_dot_q5_K);
}

// The AVX2 GEMV of every K-quant and IQ4_XS within the exact dot's bound and, where VNNI
// runs, equal to the VNNI GEMV bit for bit; the AVX2 GEMM (4 tokens per pass, then one at a time)
// equal to the AVX2 GEMV per token, for 1-9 tokens.
class InterleavedAvx2KQuant : public ::testing::TestWithParam<WeightType> {};

TEST_P(InterleavedAvx2KQuant, GemvAndGemmMatchTheExactDotAndTheVnniGemvBitForBit) {
  if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "no AVX2 here";
  const WeightType type = GetParam();
  const bool q4 = type == WeightType::Q4_K;
  const bool q6 = type == WeightType::Q6_K;
  const bool xs = type == WeightType::IQ4_XS;
  const bool q3 = type == WeightType::Q3_K;
  const bool q2 = type == WeightType::Q2_K;
  const X16GemvFn gemv = q4   ? gemv_q4_Kx16_q8_K_avx2
                         : q6 ? gemv_q6_Kx16_q8_K_avx2
                         : xs ? gemv_iq4_xsx16_q8_K_avx2
                         : q3 ? gemv_q3_Kx16_q8_K_avx2
                         : q2 ? gemv_q2_Kx16_q8_K_avx2
                              : gemv_q5_Kx16_q8_K_avx2;
  const X16GemmFn gemm = q4   ? gemm_q4_Kx16_q8_K_avx2
                         : q6 ? gemm_q6_Kx16_q8_K_avx2
                         : xs ? gemm_iq4_xsx16_q8_K_avx2
                         : q3 ? gemm_q3_Kx16_q8_K_avx2
                         : q2 ? gemm_q2_Kx16_q8_K_avx2
                              : gemm_q5_Kx16_q8_K_avx2;
  const KernelSet kernels = KernelSet::for_isa(Isa::Avx2);
  EXPECT_EQ(kernels.x16(type).gemv, gemv);
  EXPECT_EQ(kernels.x16(type).gemm, gemm);
  for (const Case c : kCases) {
    const testing::OwnedMatrix w = testing::make_matrix(type, c.rows, c.cols, 73);
    const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
    const int64_t groups = x16_groups(c.rows), padded = groups * 16, max_tokens = 9;
    const int64_t act_stride = row_bytes(WeightType::Q8_K, c.cols);
    const std::vector<std::byte> act = q8_k_rows(
        testing::normal_floats(static_cast<size_t>(max_tokens * c.cols), 74), c.cols, max_tokens);
    std::vector<std::vector<float>> per_token;
    for (int64_t t = 0; t < max_tokens; ++t) {
      const std::byte* xt = act.data() + t * act_stride;
      std::vector<float>& y = per_token.emplace_back(static_cast<size_t>(padded), NAN);
      gemv(c.cols, m.view().data, groups, xt, y.data());
      for (int64_t r = 0; r < c.rows; ++r) {
        const Exact e = exact_dot(type, c.cols, w.view.row(r), xt);
        ASSERT_NEAR(y[r], e.value, e.bound) << c.rows << "x" << c.cols << " t " << t << " r " << r;
      }
      for (int64_t r = c.rows; r < padded; ++r) ASSERT_EQ(y[r], 0.0f) << "padding row " << r;
      if (vnni_here()) {
        std::vector<float> yv(static_cast<size_t>(padded), NAN);
        kernels_of(type).gemv(c.cols, m.view().data, groups, xt, yv.data());
        ASSERT_EQ(y, yv) << "AVX2 against VNNI, " << c.rows << "x" << c.cols << " t " << t;
      }
    }
    for (int64_t tokens : {1, 2, 4, 5, 8, 9}) {
      std::vector<float> yt(static_cast<size_t>(tokens * padded), NAN);
      gemm(c.cols, m.view().data, groups, act.data(), act_stride, tokens, yt.data(), padded);
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t r = 0; r < padded; ++r) {
          ASSERT_EQ(yt[t * padded + r], per_token[t][r])
              << c.rows << "x" << c.cols << ", " << tokens << " tokens, t " << t << " r " << r;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, InterleavedAvx2KQuant,
                         ::testing::Values(WeightType::Q2_K, WeightType::Q3_K, WeightType::Q4_K,
                                           WeightType::Q5_K, WeightType::Q6_K, WeightType::IQ4_XS),
                         [](const auto& info) { return std::string(type_name(info.param)); });

TEST(InterleavedQ5K, ExtremeBlocksDoNotOverflow) {
  if (!vnni_here()) GTEST_SKIP() << "no AVX-512 VNNI here";
  check_extreme_blocks<BlockQ5_K>(WeightType::Q5_K, 512, fill_extreme_affine_k<BlockQ5_K>,
                                  gemv_q5_Kx16_q8_K_avx512vnni, gemm_q5_Kx16_q8_K_avx512vnni,
                                  exact_dot_q5_K);
}

TEST(InterleavedQ6K, RepackPutsEveryByteWhereTheLayoutSays) {
  for (const Case c : kCases) {
    const testing::OwnedMatrix w = testing::make_matrix(WeightType::Q6_K, c.rows, c.cols, 65);
    const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
    const int64_t nb = c.cols / 256;
    EXPECT_EQ(m.view().bytes(), w.view.bytes()) << "streamed bytes are the type's";
    // Whole pairs, then an odd last super-block alone (its pair's 64 bytes of d, 3328 of its own).
    EXPECT_EQ(x16_group_bytes(WeightType::Q6_K, c.cols), nb / 2 * 2 * 16 * 210 + nb % 2 * 3392);
    EXPECT_EQ(m.storage_bytes(), x16_groups(c.rows) * x16_group_bytes(WeightType::Q6_K, c.cols));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m.view().data) % 64, 0u);
    for (int64_t r = 0; r < x16_groups(c.rows) * 16; ++r) {
      const int64_t i = r % 16;
      for (int64_t b = 0; b < nb; ++b) {
        const std::byte* pair =
            m.view().data + r / 16 * x16_group_bytes(WeightType::Q6_K, c.cols) + b / 2 * 6720;
        const std::byte* blk = pair + 64 + 3328 * (b % 2);
        const auto at = [](const std::byte* p, int64_t off) {
          return static_cast<uint8_t>(p[off]);
        };
        if (r >= c.rows) {  // padding rows: d = 0
          ASSERT_EQ(at(pair, 32 * (b % 2) + 2 * i) | at(pair, 32 * (b % 2) + 2 * i + 1), 0);
          continue;
        }
        const auto& src = reinterpret_cast<const BlockQ6_K*>(w.view.row(r))[b];
        uint8_t d[2];
        std::memcpy(d, &src.d, 2);
        for (int k = 0; k < 2; ++k) {
          ASSERT_EQ(at(pair, 32 * (b % 2) + 2 * i + k), d[k]) << "d of row " << r << " block " << b;
        }
        for (int k = 0; k < 16; ++k) {
          ASSERT_EQ(static_cast<int8_t>(at(blk, 16 * k + i)), src.scales[k])
              << "scale " << k << " of row " << r << " block " << b;
        }
        // Quants: element 128h + 32k + l of the row is q_k = its ql nibble | its two qh bits << 4
        // (ggml's dequantize_row_q6_K); triple 8h + l / 4, byte l % 4 of row i's dword holds
        // q_j | (bits 2j, 2j + 1 of q_3) << 6 in vector j = 0, 1, 2.
        for (int h = 0; h < 2; ++h) {
          for (int l = 0; l < 32; ++l) {
            int q[4];
            for (int k = 0; k < 4; ++k) {
              q[k] = (src.ql[64 * h + l + 32 * (k % 2)] >> (4 * (k / 2)) & 0xF) |
                     (src.qh[32 * h + l] >> (2 * k) & 3) << 4;
            }
            for (int j = 0; j < 3; ++j) {
              ASSERT_EQ(at(blk, 256 + 192 * (8 * h + l / 4) + 64 * j + 4 * i + l % 4),
                        q[j] | (q[3] >> (2 * j) & 3) << 6)
                  << "half " << h << " position " << l << " vector " << j << " of row " << r
                  << " block " << b;
            }
          }
        }
      }
    }
  }
}

// Q6_K's extremes: q = 63 or 0, scales -128 / 127, activations -128 / 127 (|group term| up to
// 129,024 + 65,536, times 128, over 16 groups).
// Q6_K: every quant 63 or 0, every scale -128 or 127.
void fill_extreme_q6_k(BlockQ6_K& b, size_t k) {
  b.d = fp32_to_fp16(k % 2 ? 0.5f : 1.0f);
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<int8_t>(k % 3 ? -128 : 127);
  std::memset(b.ql, k % 4 ? 0xFF : 0x00, sizeof b.ql);
  std::memset(b.qh, k % 4 ? 0xFF : 0x00, sizeof b.qh);
}

TEST(InterleavedQ6K, ExtremeBlocksDoNotOverflow) {
  if (!vnni_here()) GTEST_SKIP() << "no AVX-512 VNNI here";
  check_extreme_blocks<BlockQ6_K>(WeightType::Q6_K, 768, fill_extreme_q6_k,
                                  gemv_q6_Kx16_q8_K_avx512vnni, gemm_q6_Kx16_q8_K_avx512vnni,
                                  exact_dot_q6_K);
}

// The AVX2 kernel's int16 pair sums (2 x 63 x 128, two of them added) at the same extremes.
TEST(InterleavedQ6K, Avx2ExtremeBlocksDoNotOverflow) {
  if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "no AVX2 here";
  check_extreme_blocks<BlockQ6_K>(WeightType::Q6_K, 768, fill_extreme_q6_k, gemv_q6_Kx16_q8_K_avx2,
                                  gemm_q6_Kx16_q8_K_avx2, exact_dot_q6_K);
}

TEST(InterleavedQ3K, RepackPutsEveryByteWhereTheLayoutSays) {
  for (const Case c : kCases) {
    const testing::OwnedMatrix w = testing::make_matrix(WeightType::Q3_K, c.rows, c.cols, 66);
    const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
    const int64_t nb = c.cols / 256;
    EXPECT_EQ(m.view().bytes(), w.view.bytes()) << "streamed bytes are the type's";
    EXPECT_EQ(x16_group_bytes(WeightType::Q3_K, c.cols), nb / 2 * 2 * 16 * 110 + nb % 2 * 1792);
    EXPECT_EQ(m.storage_bytes(), x16_groups(c.rows) * x16_group_bytes(WeightType::Q3_K, c.cols));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m.view().data) % 64, 0u);
    const auto at = [](const std::byte* p, int64_t off) { return static_cast<uint8_t>(p[off]); };
    for (int64_t r = 0; r < x16_groups(c.rows) * 16; ++r) {
      const int64_t i = r % 16;
      for (int64_t b = 0; b < nb; ++b) {
        const std::byte* pair =
            m.view().data + r / 16 * x16_group_bytes(WeightType::Q3_K, c.cols) + b / 2 * 3520;
        const std::byte* blk = pair + 64 + 1728 * (b % 2);
        if (r >= c.rows) {  // padding rows: d = 0
          ASSERT_EQ(at(pair, 32 * (b % 2) + 2 * i) | at(pair, 32 * (b % 2) + 2 * i + 1), 0);
          continue;
        }
        const auto* src = reinterpret_cast<const uint8_t*>(w.view.row(r)) + 110 * b;
        for (int k = 0; k < 2; ++k) {
          ASSERT_EQ(at(pair, 32 * (b % 2) + 2 * i + k), src[108 + k]) << "d, row " << r;
        }
        for (int k = 0; k < 12; ++k) {
          ASSERT_EQ(at(blk, 64 * (k / 4) + 4 * i + k % 4), src[96 + k])
              << "scale byte " << k << " of row " << r << " block " << b;
        }
        // Triple 4h + v, vector j, byte `byte` of row i's dword: u = q + 4 of set 2j in bits 0-2,
        // of set 2j + 1 in bits 4-6, bit j of set 6's in bit 3 and of set 7's in bit 7, where set
        // s is element 128h + 16s + 4v + byte.
        for (int h = 0; h < 2; ++h) {
          for (int v = 0; v < 4; ++v) {
            for (int byte = 0; byte < 4; ++byte) {
              int u[8];
              for (int s = 0; s < 8; ++s) {
                u[s] = testing::decode_q3_K(src, 128 * h + 16 * s + 4 * v + byte).q + 4;
              }
              for (int j = 0; j < 3; ++j) {
                const int want =
                    u[2 * j] | (u[6] >> j & 1) << 3 | u[2 * j + 1] << 4 | (u[7] >> j & 1) << 7;
                ASSERT_EQ(at(blk, 192 + 192 * (4 * h + v) + 64 * j + 4 * i + byte), want)
                    << "half " << h << " position " << v << " vector " << j << " byte " << byte
                    << " of row " << r << " block " << b;
              }
            }
          }
        }
      }
    }
  }
}

// Blocks of random bytes (every quant and scale code equally likely; d in [0.25, 1)), where
// quantized Gaussian weights leave some codes rare: the reference over the layout equal to the
// row-major one, the VNNI GEMV within the exact dot's bound and its GEMM equal to it. Q2_K, Q3_K
// and IQ4_XS, whose layouts rearrange the scale or quant bits (the others copy the file's bytes).
class InterleavedRandomBlocks : public ::testing::TestWithParam<WeightType> {};

TEST_P(InterleavedRandomBlocks, MatchTheExactDot) {
  const WeightType type = GetParam();
  const KQuantKernels k = kernels_of(type);
  const int64_t rows = 37, cols = 1280, block = row_bytes(type, 256);
  // The fp16 factors in the block (ggml's offsets): d, and Q2_K's dmin.
  const int64_t d_at = type == WeightType::Q3_K ? 108 : type == WeightType::Q2_K ? 80 : 0;
  const int64_t dmin_at = type == WeightType::Q2_K ? 82 : -1;
  std::mt19937 rng(91);
  std::vector<std::byte> bytes(static_cast<size_t>(rows * cols / 256 * block));
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (int64_t(i) % block == d_at || int64_t(i) % block == dmin_at) {
      const fp16_t d = fp32_to_fp16(0.25f + static_cast<float>(rng() % 750) / 1000.0f);
      std::memcpy(&bytes[i], &d, 2);
      ++i;
    } else {
      bytes[i] = static_cast<std::byte>(rng());
    }
  }
  const WeightMatrix w{type, bytes.data(), rows, cols};
  const InterleavedMatrix m = InterleavedMatrix::repack(w);
  const int64_t groups = x16_groups(rows), padded = groups * 16, tokens = 5;
  const int64_t act_stride = row_bytes(WeightType::Q8_K, cols);
  const std::vector<std::byte> act =
      q8_k_rows(testing::normal_floats(static_cast<size_t>(tokens * cols), 92), cols, tokens);
  std::vector<float> yt(static_cast<size_t>(tokens * padded), NAN);
  if (vnni_here())
    k.gemm(cols, m.view().data, groups, act.data(), act_stride, tokens, yt.data(), padded);
  for (int64_t t = 0; t < tokens; ++t) {
    const std::byte* xt = act.data() + t * act_stride;
    std::vector<float> y_ref(static_cast<size_t>(padded), NAN), y(y_ref);
    k.ref(cols, m.view().data, groups, xt, y_ref.data());
    if (vnni_here()) k.gemv(cols, m.view().data, groups, xt, y.data());
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(y_ref[r], k.row_major_ref(cols, w.row(r), xt)) << "t " << t << " r " << r;
      if (!vnni_here()) continue;
      const Exact e = exact_dot(type, cols, w.row(r), xt);
      ASSERT_NEAR(y[r], e.value, e.bound) << "t " << t << " r " << r;
      ASSERT_EQ(yt[t * padded + r], y[r]) << "gemm vs gemv, token " << t << " row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, InterleavedRandomBlocks,
                         ::testing::Values(WeightType::Q2_K, WeightType::Q3_K, WeightType::IQ4_XS),
                         [](const auto& info) { return std::string(type_name(info.param)); });

// The layouts of one super-block at a time (IQ4_XS, Q2_K): every case's matrix of type t (file
// blocks of `block` bytes) repacked, the streamed bytes, sizes and alignment checked, then
// check(sb, src, i) for each real row's super-block (sb: in the group, src: the file's block, i:
// the row in the group), and a zero d (bytes 2i, 2i + 1) for padding rows.
template <class Check>
void check_superblock_layout(WeightType t, int64_t block, uint32_t seed, Check check) {
  for (const Case c : kCases) {
    const testing::OwnedMatrix w = testing::make_matrix(t, c.rows, c.cols, seed);
    const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
    const int64_t nb = c.cols / 256;
    EXPECT_EQ(m.view().bytes(), w.view.bytes()) << "streamed bytes are the type's";
    EXPECT_EQ(x16_group_bytes(t, c.cols), nb * 16 * block);
    EXPECT_EQ(m.storage_bytes(), x16_groups(c.rows) * x16_group_bytes(t, c.cols));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m.view().data) % 64, 0u);
    for (int64_t r = 0; r < x16_groups(c.rows) * 16; ++r) {
      const int64_t i = r % 16;
      for (int64_t b = 0; b < nb; ++b) {
        const std::byte* sb = m.view().data + r / 16 * x16_group_bytes(t, c.cols) + b * 16 * block;
        if (r >= c.rows) {
          ASSERT_EQ(static_cast<uint8_t>(sb[2 * i]) | static_cast<uint8_t>(sb[2 * i + 1]), 0)
              << "padding row " << r;
          continue;
        }
        const auto* src = reinterpret_cast<const uint8_t*>(w.view.row(r)) + block * b;
        check(sb, src, i);
        if (::testing::Test::HasFatalFailure()) {
          ADD_FAILURE() << c.rows << "x" << c.cols << " row " << r << " block " << b;
          return;
        }
      }
    }
  }
}

uint8_t byte_at(const std::byte* p, int64_t off) {
  return static_cast<uint8_t>(p[off]);
}

TEST(InterleavedIQ4XS, RepackPutsEveryByteWhereTheLayoutSays) {
  // The file's block: d @0, scales_h @2, scales_l[4] @4, qs[128] @8 (ggml's offsets).
  check_superblock_layout(
      WeightType::IQ4_XS, 136, 67, [](const std::byte* sb, const uint8_t* src, int64_t i) {
        for (int k = 0; k < 2; ++k) {
          ASSERT_EQ(byte_at(sb, 2 * i + k), src[k]) << "d";
          ASSERT_EQ(byte_at(sb, 32 + 2 * i + k), src[2 + k]) << "scales_h";
        }
        for (int k = 0; k < 4; ++k) {
          ASSERT_EQ(byte_at(sb, 64 + 4 * i + k), src[4 + k]) << "scales_l";
        }
        // qs[16j + 4m + byte]: vector 4j + m after the 128-byte header.
        for (int k = 0; k < 128; ++k) {
          ASSERT_EQ(byte_at(sb, 128 + 256 * (k / 16) + 64 * (k % 16 / 4) + 4 * i + k % 4),
                    src[8 + k])
              << "qs[" << k << "]";
        }
      });
}

TEST(InterleavedQ2K, RepackPutsEveryByteWhereTheLayoutSays) {
  // The file's block: scales[16] @0, qs[64] @16, d @80, dmin @82 (ggml's offsets).
  check_superblock_layout(
      WeightType::Q2_K, 84, 68, [](const std::byte* sb, const uint8_t* src, int64_t i) {
        for (int k = 0; k < 2; ++k) {
          ASSERT_EQ(byte_at(sb, 2 * i + k), src[80 + k]) << "d";
          ASSERT_EQ(byte_at(sb, 32 + 2 * i + k), src[82 + k]) << "dmin";
        }
        for (int k = 0; k < 16; ++k) {
          ASSERT_EQ(byte_at(sb, 64 + 64 * (k / 4) + 4 * i + k % 4), src[k])
              << "scales[" << k << "]";
        }
        // Vector 4k + v, byte `byte` of row i's dword: bits 2s, 2s + 1 = q of element
        // 16(4k + s) + 4v + byte.
        for (int k = 0; k < 4; ++k) {
          for (int v = 0; v < 4; ++v) {
            for (int byte = 0; byte < 4; ++byte) {
              int want = 0;
              for (int s = 0; s < 4; ++s) {
                want |= testing::decode_q2_K(src, 16 * (4 * k + s) + 4 * v + byte).q << (2 * s);
              }
              ASSERT_EQ(byte_at(sb, 320 + 64 * (4 * k + v) + 4 * i + byte), want)
                  << "quarter " << k << " position " << v << " byte " << byte;
            }
          }
        }
      });
}

// Q2_K's extremes: every q 3 or 0, every scale and min 15 or 0, activations -128 / 127: a group's
// dot reaches 16 * 3 * 128 = 6144 (the kernel's int16 halves), group 4k + 3's accumulator 64 times
// that.
void fill_extreme_q2_k(BlockQ2_K& b, size_t k) {
  b.d = fp32_to_fp16(k % 2 ? 0.5f : 1.0f);
  b.dmin = fp32_to_fp16(0.25f);
  std::memset(b.qs, k % 4 ? 0xFF : 0x00, sizeof b.qs);
  std::memset(b.scales, k % 3 == 0 ? 0xFF : k % 3 == 1 ? 0x0F : 0xF0, sizeof b.scales);
}

TEST(InterleavedQ2K, ExtremeBlocksDoNotOverflow) {
  if (!vnni_here()) GTEST_SKIP() << "no AVX-512 VNNI here";
  check_extreme_blocks<BlockQ2_K>(WeightType::Q2_K, 768, fill_extreme_q2_k,
                                  gemv_q2_Kx16_q8_K_avx512vnni, gemm_q2_Kx16_q8_K_avx512vnni,
                                  exact_dot_q2_K);
}

// On AVX2 a group's 4 quant vectors add in int16 (up to 4 x 2 x 12 x 128 = 12,288) before its
// scale: the extremes must not wrap there, nor the odd groups' shift back by 2.
TEST(InterleavedQ2K, Avx2ExtremeBlocksDoNotOverflow) {
  if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "no AVX2 here";
  check_extreme_blocks<BlockQ2_K>(WeightType::Q2_K, 768, fill_extreme_q2_k, gemv_q2_Kx16_q8_K_avx2,
                                  gemm_q2_Kx16_q8_K_avx2, exact_dot_q2_K);
}

// IQ4_XS's extremes: every level index 0 (-127) or 8 (1) or 15 (113), scales -32 / 31,
// activations -128 / 127: a sub-block's dot reaches 32 * 127 * 128 = 520,192 and the scaled sum
// 8 * 32 times that, within int32.
void fill_extreme_iq4_xs(BlockIQ4_XS& b, size_t k) {
  b.d = fp32_to_fp16(k % 2 ? 0.5f : 1.0f);
  std::memset(b.qs, k % 3 == 0 ? 0x00 : k % 3 == 1 ? 0xFF : 0x88, sizeof b.qs);
  b.scales_h = k % 4 ? 0xFFFF : 0x0000;  // with scales_l below: codes 31 or -32
  std::memset(b.scales_l, k % 4 ? 0xFF : 0x00, sizeof b.scales_l);
}

TEST(InterleavedIQ4XS, ExtremeBlocksDoNotOverflow) {
  if (!vnni_here()) GTEST_SKIP() << "no AVX-512 VNNI here";
  check_extreme_blocks<BlockIQ4_XS>(WeightType::IQ4_XS, 768, fill_extreme_iq4_xs,
                                    gemv_iq4_xsx16_q8_K_avx512vnni, gemm_iq4_xsx16_q8_K_avx512vnni,
                                    exact_dot_iq4_xs);
}

// On AVX2 each pair of level x activation products (up to 2 x 127 x 127 = 32,258) must hold in
// vpmaddubsw's int16 (|level| against the activation with the level's sign).
TEST(InterleavedIQ4XS, Avx2ExtremeBlocksDoNotOverflow) {
  if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "no AVX2 here";
  check_extreme_blocks<BlockIQ4_XS>(WeightType::IQ4_XS, 768, fill_extreme_iq4_xs,
                                    gemv_iq4_xsx16_q8_K_avx2, gemm_iq4_xsx16_q8_K_avx2,
                                    exact_dot_iq4_xs, -127);
}

// Q3_K's extremes: every u at 7 or 0 (q = 3 or -4), every scale code 31 or -32, activations -128
// / 127: a group's dot reaches 16 * 4 * 128 = 8192, the most the kernel's int16 halves hold with
// room, and set 7's accumulator 32 times that.
void fill_extreme_q3_k(BlockQ3_K& b, size_t k) {
  b.d = fp32_to_fp16(k % 2 ? 0.5f : 1.0f);
  const uint8_t bits = k % 4 ? 0xFF : 0x00;
  std::memset(b.hmask, bits, sizeof b.hmask);
  std::memset(b.qs, bits, sizeof b.qs);
  std::memset(b.scales, k % 3 ? 0xFF : 0x00, sizeof b.scales);  // stored 63 or 0: 31 or -32
}

TEST(InterleavedQ3K, ExtremeBlocksDoNotOverflow) {
  if (!vnni_here()) GTEST_SKIP() << "no AVX-512 VNNI here";
  check_extreme_blocks<BlockQ3_K>(WeightType::Q3_K, 768, fill_extreme_q3_k,
                                  gemv_q3_Kx16_q8_K_avx512vnni, gemm_q3_Kx16_q8_K_avx512vnni,
                                  exact_dot_q3_K);
}

// On AVX2 set 7 comes out as 16 u (not VNNI's 32 u): pairs up to 2 x 112 x 128 in vpmaddubsw's
// int16, and each group's accumulator shifted back by its own factor.
TEST(InterleavedQ3K, Avx2ExtremeBlocksDoNotOverflow) {
  if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "no AVX2 here";
  check_extreme_blocks<BlockQ3_K>(WeightType::Q3_K, 768, fill_extreme_q3_k, gemv_q3_Kx16_q8_K_avx2,
                                  gemm_q3_Kx16_q8_K_avx2, exact_dot_q3_K);
}

// matmul() over the repacked view, fused with a second matrix, GEMV and GEMM, on every Isa (below
// AVX-512 VNNI the view runs the scalar reference), and matmul_rows over ranges that cut groups.
TEST_P(InterleavedKQuant, MatmulOverTheRepackedViewMatchesTheExactDot) {
  const WeightType type = GetParam();
  for (Isa isa : supported_isas()) {
    for (int64_t tokens : {1, 6}) {
      const testing::OwnedMatrix a = testing::make_matrix(type, 40, 512, 81);
      const testing::OwnedMatrix b = testing::make_matrix(type, 24, 512, 82);
      const InterleavedMatrix ma = InterleavedMatrix::repack(a.view);
      const InterleavedMatrix mb = InterleavedMatrix::repack(b.view);
      const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * 512), 83);
      std::vector<float> ya(static_cast<size_t>(tokens * 40), NAN), yb(tokens * 24, NAN);
      PackedActivations scratch;
      const MatmulOutput outs[] = {{ma.view(), ya}, {mb.view(), yb}};
      matmul(outs, x, tokens, scratch, SerialParallel(3), KernelSet::for_isa(isa));
      const auto check = [&](const testing::OwnedMatrix& w, const std::vector<float>& y, int64_t lo,
                             int64_t hi, const std::string& what) {
        for (int64_t t = 0; t < tokens; ++t) {
          for (int64_t r = lo; r < hi; ++r) {
            const Exact e = exact_dot(type, 512, w.view.row(r), scratch.token(t));
            ASSERT_NEAR(y[t * w.view.rows + r], e.value, e.bound)
                << what << " " << isa_name(isa) << " tokens " << tokens << " t " << t << " r " << r;
          }
        }
      };
      check(a, ya, 0, 40, "fused a");
      check(b, yb, 0, 24, "fused b");
      for (auto [lo, hi] : {std::pair<int64_t, int64_t>{5, 37}, {3, 9}, {16, 32}, {33, 40}}) {
        std::vector<float> y(static_cast<size_t>(tokens * 40), -7.0f);
        matmul_rows(ma.view(), scratch, y, lo, hi, KernelSet::for_isa(isa));
        check(a, y, lo, hi, "range");
        for (int64_t t = 0; t < tokens; ++t) {
          for (int64_t r = 0; r < 40; ++r) {
            if (r < lo || r >= hi) {
              ASSERT_EQ(y[t * 40 + r], -7.0f) << "row " << r << " written";
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, InterleavedKQuant,
                         ::testing::Values(WeightType::Q2_K, WeightType::Q3_K, WeightType::Q4_K,
                                           WeightType::Q5_K, WeightType::Q6_K, WeightType::IQ4_XS),
                         [](const auto& info) { return std::string(type_name(info.param)); });

}  // namespace
}  // namespace pacer::ops
