// IQ4_XS x Q8_K on AVX2 (+FMA, F16C).
//
// Per super-block and row, the integer sum_j sc_j * sum_{i in j} level_i qx_i of iq4_xs.h. The
// 32 qs bytes of pair p (sub-blocks 2p and 2p+1) hold in their low nibbles elements 64p + 0..15
// (low 128-bit lane) and 64p + 32..47 (high lane), in their high nibbles 64p + 16..31 and
// 64p + 48..63; the activations are loaded in that lane order once per pair for all rows. A
// vpshufb of the 16-entry level table turns nibbles into signed levels; vpmaddubsw needs one
// unsigned operand, so the sign moves onto the activations (vpsignb; no level is 0) and
//   vpmaddubsw(|level|, +-x): |level| <= 127, |x| <= 127: pair sums |.| <= 32,258 < 2^15;
//   vpmaddwd(p, sc):          each 128-bit lane is one sub-block, its scale as int16 (|sc| <=
//                             32): |lane| <= 2,064,512;
// 2 per pair, 8 per lane and super-block: |lane sum| <= 16,516,096 < 2^24, so the int32 sum and
// its conversion to float are exact. Rows run 2 at a time, each prefetching its own stream
// kPrefetchBlocks super-blocks ahead (kquant_simd.h).
#include <immintrin.h>

#include "ops/gemv_streams.h"
#include "ops/iq4_xs.h"
#include "ops/kquant_simd.h"
#include "ops/matmul_simd_avx2.h"

namespace pacer::ops {
namespace {

// sc_j (j = 0..7) replicated into both int16 halves of int32 word j: scales_l's nibbles are the
// low 4 bits, bits 2j, 2j+1 of scales_h the top 2, minus 32.
inline __m256i unpack_scale_pairs(const BlockIQ4_XS* blk) {
  uint32_t sl;
  std::memcpy(&sl, blk->scales_l, sizeof sl);
  const __m128i v = _mm_cvtsi32_si128(static_cast<int>(sl));
  const __m128i nib = _mm_set1_epi8(0x0F);
  const __m128i low = _mm_unpacklo_epi8(_mm_and_si128(v, nib),  // nibble j%2 of byte j/2
                                        _mm_and_si128(_mm_srli_epi16(v, 4), nib));
  const __m256i high =
      _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(blk->scales_h),
                                         _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                       _mm256_set1_epi32(3));
  const __m256i sc =
      _mm256_sub_epi32(_mm256_or_si256(_mm256_cvtepu8_epi32(low), _mm256_slli_epi32(high, 4)),
                       _mm256_set1_epi32(32));
  return _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xFFFF)),
                         _mm256_slli_epi32(sc, 16));
}

// R rows of n elements (row r at w + r*stride) dotted with one Q8_K row: out[r * out_step].
template <int R>
void iq4_xs_rows_tile(int64_t n, const std::byte* w, int64_t stride, const std::byte* act,
                      float* out, int64_t out_step = 1) {
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  const __m256i nib = _mm256_set1_epi8(0x0F);
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlLevels)));
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockIQ4_XS* blk[R];
    __m256i sc_pairs[R], isum[R];
    for (int r = 0; r < R; ++r) {
      blk[r] = reinterpret_cast<const BlockIQ4_XS*>(w + r * stride) + b;
      prefetch_ahead(blk[r]);
      sc_pairs[r] = unpack_scale_pairs(blk[r]);
      isum[r] = _mm256_setzero_si256();
    }
    for (int p = 0; p < 4; ++p) {
      const int8_t* xp = x[b].qs + 64 * p;
      const __m256i x_lo = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(xp + 32),
                                               reinterpret_cast<const __m128i*>(xp));
      const __m256i x_hi = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(xp + 48),
                                               reinterpret_cast<const __m128i*>(xp + 16));
      // int16 sc_{2p} in the low lane, sc_{2p+1} in the high lane.
      const __m256i lane_index =
          _mm256_setr_epi32(2 * p, 2 * p, 2 * p, 2 * p, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1);
      for (int r = 0; r < R; ++r) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[r]->qs + 32 * p));
        const __m256i lv_lo = _mm256_shuffle_epi8(table, _mm256_and_si256(q, nib));
        const __m256i lv_hi =
            _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), nib));
        const __m256i p_lo =
            _mm256_maddubs_epi16(_mm256_abs_epi8(lv_lo), _mm256_sign_epi8(x_lo, lv_lo));
        const __m256i p_hi =
            _mm256_maddubs_epi16(_mm256_abs_epi8(lv_hi), _mm256_sign_epi8(x_hi, lv_hi));
        const __m256i s = _mm256_permutevar8x32_epi32(sc_pairs[r], lane_index);
        isum[r] = _mm256_add_epi32(
            isum[r], _mm256_add_epi32(_mm256_madd_epi16(p_lo, s), _mm256_madd_epi16(p_hi, s)));
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m256 d = _mm256_set1_ps(avx2::fp32_from_fp16(blk[r]->d) * x[b].d);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), d, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r * out_step] = avx2::hsum8(acc[r]);
}

}  // namespace

void dot_rows_iq4_xs_q8_K_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out) {
  constexpr int kRows = 2;
  int64_t r = gemv_stream_tiles(nr, kRows, [&](int64_t j, int64_t per_stream) {
    iq4_xs_rows_tile<kRows>(n, w + j * w_stride, per_stream * w_stride, act, out + j, per_stream);
  });
  for (; r + kRows <= nr; r += kRows) {
    iq4_xs_rows_tile<kRows>(n, w + r * w_stride, w_stride, act, out + r);
  }
  for (; r < nr; ++r) iq4_xs_rows_tile<1>(n, w + r * w_stride, w_stride, act, out + r);
}

float dot_iq4_xs_q8_K_avx2(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  iq4_xs_rows_tile<1>(n, w_row, 0, act, &out);
  return out;
}

}  // namespace pacer::ops
