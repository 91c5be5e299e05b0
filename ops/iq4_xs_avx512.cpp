// IQ4_XS x Q8_K on AVX-512 (F/BW/VL/DQ only; no VNNI instruction).
//
// One zmm holds 64 qs bytes = sub-blocks 4k .. 4k+3 (k = 0, 1), one per 128-bit lane: lane i's
// low nibbles are elements 128k + 32i + 0..15 and its high nibbles 128k + 32i + 16..31. The
// activations are arranged to match once per super-block for all rows of the tile (two
// vpermt2q of plain loads). A vpshufb of the |level| table turns nibbles into magnitudes, and
// since a level is negative exactly when its index is below 8, one vptestnmb gives the lanes
// whose activation is negated (masked vpsubb from 0) so that
//   vpmaddubsw(|level|, +-x): |level| <= 127, |x| <= 127: pair sums |.| <= 32,258 < 2^15;
//   vpmaddwd(p, sc):          the lane's sub-block scale as int16 (|sc| <= 32): |lane| <=
//                             2,064,512; 4 per lane and super-block;
// exact in int32 and in float. Rows run 4 at a time, each prefetching its own stream
// kPrefetchBlocks super-blocks ahead (kquant_simd.h).
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>

#include "ops/gemv_streams.h"
#include "ops/iq4_xs.h"
#include "ops/kquant_simd.h"

// GCC 12 reports the `__Y = __Y` placeholders of its own AVX-512 headers (bug 105593, fixed in
// 13) at the call sites where they are inlined. No variable of this file is uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace pacer::ops {
namespace {

// vpermw index putting int16 scale `first + i` in every word of 128-bit lane i (i = 0..3).
inline __m512i lane_scale_index(int first) {
  const auto rep = [](int v) { return static_cast<long long>(0x0001000100010001LL * v); };
  return _mm512_setr_epi64(rep(first), rep(first), rep(first + 1), rep(first + 1), rep(first + 2),
                           rep(first + 2), rep(first + 3), rep(first + 3));
}

// int16 sc_0..sc_7 (in [-32, 31]) of a block, in the low 128 bits.
inline __m512i unpack_scales16(const BlockIQ4_XS* blk) {
  uint32_t sl;
  std::memcpy(&sl, blk->scales_l, sizeof sl);
  const __m128i v = _mm_cvtsi32_si128(static_cast<int>(sl));
  const __m128i nib = _mm_set1_epi8(0x0F);
  const __m128i low = _mm_unpacklo_epi8(_mm_and_si128(v, nib),  // nibble j%2 of byte j/2
                                        _mm_and_si128(_mm_srli_epi16(v, 4), nib));
  const __m128i high =
      _mm_and_si128(_mm_srlv_epi16(_mm_set1_epi16(static_cast<short>(blk->scales_h)),
                                   _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14)),
                    _mm_set1_epi16(3));
  const __m128i sc = _mm_sub_epi16(_mm_or_si128(_mm_cvtepu8_epi16(low), _mm_slli_epi16(high, 4)),
                                   _mm_set1_epi16(32));
  return _mm512_castsi128_si512(sc);
}

// R rows of n elements (row r at w + r*stride) dotted with one Q8_K row: out[r * out_step].
template <int R>
void iq4_xs_rows_tile(int64_t n, const std::byte* w, int64_t stride, const std::byte* act,
                      float* out, int64_t out_step = 1) {
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  const __m512i nib = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
  const __m512i zero = _mm512_setzero_si512();
  alignas(16) int8_t abs_levels[16];
  for (int k = 0; k < 16; ++k) {
    abs_levels[k] = static_cast<int8_t>(kIq4NlLevels[k] < 0 ? -kIq4NlLevels[k] : kIq4NlLevels[k]);
  }
  const __m512i abs_table =
      _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(abs_levels)));
  // Qwords of the first halves (lo) / second halves (hi) of the four 32-element sub-blocks of
  // two consecutive 64-byte activation loads.
  const __m512i lo_index = _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13);
  const __m512i hi_index = _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15);
  const __m512i scale_index[2] = {lane_scale_index(0), lane_scale_index(4)};
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    __m512i x_lo[2], x_hi[2];
    for (int k = 0; k < 2; ++k) {
      const __m512i a = _mm512_loadu_si512(x[b].qs + 128 * k);
      const __m512i c = _mm512_loadu_si512(x[b].qs + 128 * k + 64);
      x_lo[k] = _mm512_permutex2var_epi64(a, lo_index, c);
      x_hi[k] = _mm512_permutex2var_epi64(a, hi_index, c);
    }
    for (int r = 0; r < R; ++r) {
      const BlockIQ4_XS* blk = reinterpret_cast<const BlockIQ4_XS*>(w + r * stride) + b;
      prefetch_ahead(blk);
      const __m512i sc16 = unpack_scales16(blk);
      __m512i isum = _mm512_setzero_si512();
      for (int k = 0; k < 2; ++k) {
        const __m512i q = _mm512_loadu_si512(blk->qs + 64 * k);
        const __m512i i_lo = _mm512_and_si512(q, nib);
        const __m512i i_hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), nib);
        // Index < 8: a negative level, so the activation is negated.
        const __m512i xs_lo =
            _mm512_mask_sub_epi8(x_lo[k], _mm512_testn_epi8_mask(i_lo, eight), zero, x_lo[k]);
        const __m512i xs_hi =
            _mm512_mask_sub_epi8(x_hi[k], _mm512_testn_epi8_mask(i_hi, eight), zero, x_hi[k]);
        const __m512i p_lo = _mm512_maddubs_epi16(_mm512_shuffle_epi8(abs_table, i_lo), xs_lo);
        const __m512i p_hi = _mm512_maddubs_epi16(_mm512_shuffle_epi8(abs_table, i_hi), xs_hi);
        const __m512i s = _mm512_permutexvar_epi16(scale_index[k], sc16);
        isum = _mm512_add_epi32(
            isum, _mm512_add_epi32(_mm512_madd_epi16(p_lo, s), _mm512_madd_epi16(p_hi, s)));
      }
      const float d = avx512::fp32_from_fp16(blk->d) * x[b].d;
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r * out_step] = _mm512_reduce_add_ps(acc[r]);
}

}  // namespace

void dot_rows_iq4_xs_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                 const std::byte* act, float* out) {
  constexpr int kRows = 4;
  int64_t r = gemv_stream_tiles(nr, kRows, [&](int64_t j, int64_t per_stream) {
    iq4_xs_rows_tile<kRows>(n, w + j * w_stride, per_stream * w_stride, act, out + j, per_stream);
  });
  for (; r + kRows <= nr; r += kRows)
    iq4_xs_rows_tile<kRows>(n, w + r * w_stride, w_stride, act, out + r);
  for (; r < nr; ++r) iq4_xs_rows_tile<1>(n, w + r * w_stride, w_stride, act, out + r);
}

float dot_iq4_xs_q8_K_avx512(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  iq4_xs_rows_tile<1>(n, w_row, 0, act, &out);
  return out;
}

}  // namespace pacer::ops
