#pragma once
// Q5_1 x act-Q8 on AVX-512 (BW/VL/DQ), with and without VNNI.
//
// Per quad-block: nibbles + 16 where the fifth bit is set give unsigned quants q in [0, 31],
// dotted with the activation quants (signed, |x| <= 127) through vpdpbusd (VNNI) or vpmaddubsw
// (pair sums <= 2 * 31 * 127 = 7874, lo + hi <= 15748, no saturation) + vpmaddwd; no bias. The
// offset m_w * d_x * sum_b(x) is added per strip.
//
// The row/token loop is quant32_quads_avx512.h's: four rows per zmm, one per 128-bit lane, scales
// (and offsets) prepared per strip of 16 blocks. The plain _avx512 kernels use no VNNI
// instruction (they run on Skylake-SP/X, which has no VNNI).
//
// The kernels shared by q5_1_avx512.cpp (AVX-512 F/BW/VL/DQ) and q5_1_avx512vnni.cpp
// (+VNNI): each includes this header and is compiled with exactly its own tier's flags, so the
// plain AVX-512 entry points can hold no VNNI instruction (tests/check_isa_tiers.sh). The
// anonymous namespace gives each of the two TUs its own copy, built for that TU's tier.
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>
#include "ops/q5_1.h"
#include "ops/q8_0.h"
#include "ops/quant32_quads_avx512.h"

namespace pacer::ops {
namespace {

struct Kernel {
  using Block = BlockQ5_1;
  static constexpr bool kHasMin = true;
  static constexpr bool kHasHighBits = true;
  static constexpr int kQhOffset = 4;  // after d and m
  template <bool kVnni>
  static constexpr int32_t kSumFactor = 0;
  template <bool kVnni>
  static __m512i quad_dot(__m512i lo, __m512i hi, __m512i x_lo, __m512i x_hi, __m512i bias) {
    return avx512::quad_dot_unsigned<kVnni>(lo, hi, x_lo, x_hi, bias);
  }
};

}  // namespace

}  // namespace pacer::ops
