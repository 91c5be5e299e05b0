// Q2_K x Q8_K on AVX2 (+FMA, F16C).
//
// Per super-block and row, the integer sums of q2_k.h. Run rho = 4t + r (t = half, r = 0..3) is
// elements 128t + 32r + l, l = 0..31, whose quants are bits 2r, 2r+1 of qs byte 32t + l: one
// 16-bit shift and an AND with 3 (bits crossing from the neighbouring byte land above bit 1)
// give 32 unsigned quants matching 32 consecutive activation bytes, i.e. groups 2rho (low
// 128-bit lane) and 2rho+1 (high lane). Then
//   vpmaddubsw(q, x): q in [0, 3], x in [-127, 127]: pair sums |.| <= 2 * 3 * 127 = 762;
//   vpmaddwd(p, sc):  the lane's 4-bit group scale as int16: |lane| <= 22,860;
// 8 such per lane and super-block, exact in int32 and in float. The mins term is one vpmaddwd of
// the 16 mins with the 16 activation group sums (|lane| <= 2 * 15 * 2032). Rows run 2 at a time
// sharing the activation loads, each prefetching its own stream (kquant_simd.h).
#include <immintrin.h>

#include "ops/gemv_streams.h"
#include "ops/kquant_simd.h"
#include "ops/matmul_simd_avx2.h"
#include "ops/q2_k.h"

namespace pacer::ops {
namespace {

// R rows of n elements (row r at w + r*stride) dotted with one Q8_K row: out[r * out_step].
template <int R>
void q2_K_rows_tile(int64_t n, const std::byte* w, int64_t stride, const std::byte* act, float* out,
                    int64_t out_step = 1) {
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  const __m256i two_bits = _mm256_set1_epi8(0x03);
  const __m128i nibble = _mm_set1_epi8(0x0F);
  // pshufb index: bytes 0-7 = group 0's scale, bytes 8-15 = group 1's (shifted along per run).
  const __m128i pair_index = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  __m256 acc[R], acc_min[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps(), acc_min[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ2_K* blk[R];
    __m128i sc8[R];  // sc_0..sc_15 as bytes, shifted down by 2 bytes per run
    __m256i isum[R], msum[R];
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].bsums));
    for (int r = 0; r < R; ++r) {
      blk[r] = reinterpret_cast<const BlockQ2_K*>(w + r * stride) + b;
      prefetch_ahead(blk[r]);
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[r]->scales));
      sc8[r] = _mm_and_si128(v, nibble);
      const __m128i m8 = _mm_and_si128(_mm_srli_epi16(v, 4), nibble);
      msum[r] = _mm256_madd_epi16(_mm256_cvtepu8_epi16(m8), bsums);
      isum[r] = _mm256_setzero_si256();
    }
    for (int t = 0; t < 2; ++t) {
      __m256i qs[R];
      for (int r = 0; r < R; ++r) {
        qs[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[r]->qs + 32 * t));
      }
      for (int run = 0; run < 4; ++run) {
        const __m256i xq =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 128 * t + 32 * run));
        for (int r = 0; r < R; ++r) {
          const __m256i q = _mm256_and_si256(_mm256_srli_epi16(qs[r], 2 * run), two_bits);
          const __m256i s = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sc8[r], pair_index));
          sc8[r] = _mm_srli_si128(sc8[r], 2);
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(_mm256_maddubs_epi16(q, xq), s));
        }
      }
    }
    const __m128 dx = _mm_set1_ps(x[b].d);
    for (int r = 0; r < R; ++r) {
      const __m128 f = fp16_pair_times(&blk[r]->d, dx);  // d*dx, dmin*dx
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_broadcastss_ps(f), acc[r]);
      acc_min[r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum[r]),
                                    _mm256_broadcastss_ps(_mm_permute_ps(f, 0x55)), acc_min[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r * out_step] = avx2::hsum8(_mm256_add_ps(acc[r], acc_min[r]));
}

}  // namespace

void dot_rows_q2_K_q8_K_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out) {
  constexpr int kRows = 2;
  int64_t r = gemv_stream_tiles(nr, kRows, [&](int64_t j, int64_t per_stream) {
    q2_K_rows_tile<kRows>(n, w + j * w_stride, per_stream * w_stride, act, out + j, per_stream);
  });
  for (; r + kRows <= nr; r += kRows) {
    q2_K_rows_tile<kRows>(n, w + r * w_stride, w_stride, act, out + r);
  }
  for (; r < nr; ++r) q2_K_rows_tile<1>(n, w + r * w_stride, w_stride, act, out + r);
}

float dot_q2_K_q8_K_avx2(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  q2_K_rows_tile<1>(n, w_row, 0, act, &out);
  return out;
}

}  // namespace pacer::ops
