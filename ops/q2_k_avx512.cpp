// Q2_K x Q8_K on AVX-512 (F/BW/VL/DQ only; no VNNI instruction).
//
// Per half t of a super-block (elements 128t .. 128t+127) and row, two zmm of 64 quants each:
// zmm k holds runs 2k and 2k+1 (elements 128t + 64k + 0..63, in order, matching one plain
// 64-byte activation load). The 32 qs bytes of the half, broadcast to both 256-bit halves, give
// the quants through one per-half variable 16-bit shift (by 4k / 4k+2) and an AND with 3. Each
// 128-bit lane of zmm k is one group (8t + 4k + lane), its int16 scale spread by one vpermw. Then
//   vpmaddubsw(q, x): q in [0, 3], x in [-127, 127]: pair sums |.| <= 762;
//   vpmaddwd(p, sc):  4-bit scales: |lane| <= 22,860; 4 per lane and super-block;
// all exact in int32 and in float. The mins term is one vpmaddwd of the 16 mins with the 16
// activation group sums. Rows run 4 at a time sharing the activation loads, each prefetching its
// own stream (kquant_simd.h).
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>

#include "ops/gemv_streams.h"
#include "ops/kquant_simd.h"
#include "ops/q2_k.h"

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

// Words that differ between the two 256-bit halves of a zmm.
inline __m512i halves16(int first, int second) {
  return _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(static_cast<short>(first)),
                                 _mm512_set1_epi16(static_cast<short>(second)));
}

// R rows of n elements (row r at w + r*stride) dotted with one Q8_K row: out[r * out_step].
template <int R>
void q2_K_rows_tile(int64_t n, const std::byte* w, int64_t stride, const std::byte* act, float* out,
                    int64_t out_step = 1) {
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  const __m512i two_bits = _mm512_set1_epi8(0x03);
  const __m128i nibble = _mm_set1_epi8(0x0F);
  const __m512i shift[2] = {halves16(0, 2), halves16(4, 6)};  // [k]: runs 2k, 2k+1
  __m512i scale_index[2][2];                                  // [t][k]
  for (int t = 0; t < 2; ++t) {
    for (int k = 0; k < 2; ++k) scale_index[t][k] = lane_scale_index(8 * t + 4 * k);
  }
  __m512 acc[R];
  __m256 acc_min[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps(), acc_min[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].bsums));
    __m512i xs[2][2];  // [t][k]
    for (int t = 0; t < 2; ++t) {
      for (int k = 0; k < 2; ++k) xs[t][k] = _mm512_loadu_si512(x[b].qs + 128 * t + 64 * k);
    }
    const __m128 dx = _mm_set1_ps(x[b].d);
    for (int r = 0; r < R; ++r) {
      const BlockQ2_K* blk = reinterpret_cast<const BlockQ2_K*>(w + r * stride) + b;
      prefetch_ahead(blk);
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->scales));
      const __m512i sc16z = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(v, nibble)));
      const __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), nibble));
      const __m256i msum = _mm256_madd_epi16(m16, bsums);  // |lane| <= 2 * 15 * 2032
      __m512i isum = _mm512_setzero_si512();
      for (int t = 0; t < 2; ++t) {
        const __m512i qs = _mm512_broadcast_i64x4(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs + 32 * t)));
        for (int k = 0; k < 2; ++k) {
          const __m512i q = _mm512_and_si512(_mm512_srlv_epi16(qs, shift[k]), two_bits);
          const __m512i s = _mm512_permutexvar_epi16(scale_index[t][k], sc16z);
          isum = _mm512_add_epi32(isum, _mm512_madd_epi16(_mm512_maddubs_epi16(q, xs[t][k]), s));
        }
      }
      const __m128 f = fp16_pair_times(&blk->d, dx);  // d*dx, dmin*dx
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_broadcastss_ps(f), acc[r]);
      acc_min[r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum),
                                    _mm256_broadcastss_ps(_mm_permute_ps(f, 0x55)), acc_min[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    out[r * out_step] =
        _mm512_reduce_add_ps(_mm512_add_ps(acc[r], _mm512_zextps256_ps512(acc_min[r])));
  }
}

}  // namespace

void dot_rows_q2_K_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out) {
  constexpr int kRows = 4;
  int64_t r = gemv_stream_tiles(nr, kRows, [&](int64_t j, int64_t per_stream) {
    q2_K_rows_tile<kRows>(n, w + j * w_stride, per_stream * w_stride, act, out + j, per_stream);
  });
  for (; r + kRows <= nr; r += kRows)
    q2_K_rows_tile<kRows>(n, w + r * w_stride, w_stride, act, out + r);
  for (; r < nr; ++r) q2_K_rows_tile<1>(n, w + r * w_stride, w_stride, act, out + r);
}

float dot_q2_K_q8_K_avx512(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  q2_K_rows_tile<1>(n, w_row, 0, act, &out);
  return out;
}

}  // namespace pacer::ops
