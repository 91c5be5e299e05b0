#pragma once
// IQ4_NL x act-Q8 on AVX-512 (BW/VL/DQ), with and without VNNI.
//
// Per quad-block: vpshufb looks the nibbles up in the level table (one copy per 128-bit lane).
// VNNI: the table is shifted by +128 to unsigned bytes in [1, 241], vpdpbusd dots them with the
// activation quants exactly, and the bias -128 * sum_b(x) takes the shift back off. Without
// VNNI: the signed levels w in [-127, 113] go through vpmaddubsw as |w| (u8, <= 127) times x
// negated where w < 0 (s8, |x| <= 127; x = -128 never occurs), pair sums <= 2 * 127 * 127 =
// 32258 < 32767, so lo and hi are widened by vpmaddwd separately (their sum could saturate).
//
// The row/token loop is quant32_quads_avx512.h's: four rows per zmm, one per 128-bit lane, scales
// (and offsets) prepared per strip of 16 blocks. The plain _avx512 kernels use no VNNI
// instruction (they run on Skylake-SP/X, which has no VNNI).
//
// The kernels shared by iq4_nl_avx512.cpp (AVX-512 F/BW/VL/DQ) and iq4_nl_avx512vnni.cpp
// (+VNNI): each includes this header and is compiled with exactly its own tier's flags, so the
// plain AVX-512 entry points can hold no VNNI instruction (tests/check_isa_tiers.sh). The
// anonymous namespace gives each of the two TUs its own copy, built for that TU's tier.
#include "ops/iq4_nl.h"
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>
#include "ops/q8_0.h"
#include "ops/quant32_quads_avx512.h"

namespace pacer::ops {
namespace {

// The 16 levels (+128 for the unsigned VNNI form) in every 128-bit lane.
template <bool kVnni>
inline __m512i level_table() {
  const __m128i levels = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues));
  const __m128i table = kVnni ? _mm_xor_si128(levels, _mm_set1_epi8(static_cast<char>(0x80)))
                              : levels;  // v + 128 == v ^ 0x80 for int8 v
  return _mm512_broadcast_i32x4(table);
}

// |w| * (x with w's sign), vpmaddwd-widened: 16 int32 lanes summing 4 products each.
inline __m512i signed_pairs_epi32(__m512i w, __m512i x) {
  const __m512i sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
  return _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(w), sx), _mm512_set1_epi16(1));
}

struct Kernel {
  using Block = BlockIQ4_NL;
  static constexpr bool kHasMin = false;
  static constexpr bool kHasHighBits = false;
  static constexpr int kQhOffset = 0;  // no qh
  template <bool kVnni>
  static constexpr int32_t kSumFactor = kVnni ? -128 : 0;
  template <bool kVnni>
  static __m512i quad_dot(__m512i lo, __m512i hi, __m512i x_lo, __m512i x_hi, __m512i bias) {
    const __m512i table = level_table<kVnni>();
    const __m512i w_lo = _mm512_shuffle_epi8(table, lo);
    const __m512i w_hi = _mm512_shuffle_epi8(table, hi);
    if constexpr (kVnni) {
      return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(bias, w_lo, x_lo), w_hi, x_hi);
    } else {
      return _mm512_add_epi32(
          _mm512_add_epi32(signed_pairs_epi32(w_lo, x_lo), signed_pairs_epi32(w_hi, x_hi)), bias);
    }
  }
};

}  // namespace

}  // namespace pacer::ops
