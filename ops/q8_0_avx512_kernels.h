#pragma once
// Q8_0 x act-Q8 on AVX-512 (BW/VL/DQ), with and without VNNI, and the AVX-512 act-Q8 quantizer.
//
// Two weight rows share one zmm: bytes 0..31 are row r's block b, bytes 32..63 row r+1's, and
// the activation block is broadcast to both halves, so each instruction serves two rows and
// the activation quants, scale and sum are loaded once per block for all rows of the tile.
//
// VNNI (vpdpbusd multiplies unsigned by signed bytes): w ^ 0x80 is w + 128 as an unsigned byte
// (0..255), so each lane accumulates sum (w + 128) * x over 4 bytes (|.| <= 4 * 255 * 128, no
// overflow) and the accumulator starts at -128 * sum_b(x) in lanes 0 and 8, which removes the
// bias exactly: the 8 lanes of each half sum to sum w * x.
// Without VNNI: the sign trick (|w| * sign(x, w), pair sums <= 2 * 128 * 127 < 32767, so
// vpmaddubsw never saturates), then vpmaddwd with ones.
//
// The kernels shared by q8_0_avx512.cpp (AVX-512 F/BW/VL/DQ) and q8_0_avx512vnni.cpp
// (+VNNI): each includes this header and is compiled with exactly its own tier's flags, so the
// plain AVX-512 entry points can hold no VNNI instruction (tests/check_isa_tiers.sh). The
// anonymous namespace gives each of the two TUs its own copy, built for that TU's tier.
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>
#include "ops/q8_0.h"
#include "ops/quant_rows_avx512.h"
#include "ops/repacked_gemm_avx512.h"

namespace pacer::ops {
namespace {

// Exactly std::round(v) (half away from zero) for |v| < 2^23, as int32 (see q8_0_avx2.cpp).
inline __m512i round_half_away_epi32(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i sign = _mm512_and_si512(bits, _mm512_set1_epi32(INT32_MIN));
  const __m512 bias =
      _mm512_castsi512_ps(_mm512_or_si512(sign, _mm512_castps_si512(_mm512_set1_ps(0.49999997f))));
  return _mm512_cvttps_epi32(_mm512_add_ps(v, bias));
}

// Block dot of two Q8_0 rows against x (see the file comment for both variants).
template <bool kVnni>
struct Q8_0Pair {
  using Block = BlockQ8_0;
  static constexpr int32_t kSumFactor = kVnni ? -128 : 0;  // VNNI: removes the +128 bias of w
  // Both rows' quants; for VNNI already biased to w + 128 (w ^ 0x80), an unsigned byte.
  static __m512i load_pair(const Block* b0, const Block* b1) {
    const __m512i w = avx512::load_pair_256(b0->qs, b1->qs);
    if constexpr (kVnni) return _mm512_xor_si512(w, _mm512_set1_epi8(static_cast<char>(0x80)));
    return w;
  }
  static __m512i pair_dot(__m512i w, __m512i x, __m512i bias) {
    if constexpr (kVnni) {
      return _mm512_dpbusd_epi32(bias, w, x);
    } else {
      const __mmask64 negative = _mm512_movepi8_mask(w);
      const __m512i x_signed = _mm512_mask_sub_epi8(x, negative, _mm512_setzero_si512(), x);
      const __m512i pairs = _mm512_maddubs_epi16(_mm512_abs_epi8(w), x_signed);
      return _mm512_madd_epi16(pairs, _mm512_set1_epi16(1));  // bias is 0 here
    }
  }
};

// Prefill GEMM repacking (repacked_gemm_avx512.h): w ^ 0x80 = w + 128 as an unsigned byte.
struct Q8_0Unsigned {
  using Block = BlockQ8_0;
  static constexpr int32_t kOffset = 128;
  static __m512i load_two(const Block& a, const Block& b) {
    return _mm512_xor_si512(avx512::load_pair_256(a.qs, b.qs),
                            _mm512_set1_epi8(static_cast<char>(0x80)));
  }
};

}  // namespace

}  // namespace pacer::ops
