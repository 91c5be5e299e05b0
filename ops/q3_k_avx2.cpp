// Q3_K x Q8_K on AVX2 (+FMA, F16C).
//
// Per super-block and row, the integer sum_g sc_g * (sum_{i in g} u_i qx_i - 4 bsums[g]) of
// q3_k.h. Run rho = 4t + r (t = half, r = 0..3) is elements 128t + 32r + l, l = 0..31: its low 2
// bits are bits 2r, 2r+1 of qs byte 32t + l and its high bit is bit rho of hmask byte l, so with
// 16-bit shifts (bits crossing from a neighbouring byte land outside the masks)
//   u = (qs_t >> 2r & 3) | (hmask >> rho << 2 & 4)   in [0, 7],
// 32 unsigned quants matching 32 consecutive activation bytes, i.e. groups 2rho (low 128-bit
// lane) and 2rho+1 (high lane). Then
//   vpmaddubsw(u, x): u in [0, 7], x in [-127, 127]: pair sums |.| <= 2 * 7 * 127 = 1778;
//   vpmaddwd(p, sc):  the lane's group scale as int16 (|sc| <= 32): |lane| <= 113,792;
// 8 such per lane plus the offset (4 * sum of 2 of the 16 sc_g bsums[g] terms, one vpmaddwd of
// all 16: |.| <= 4 * 2 * 32 * 2032) stay far below 2^24, so the int32 sums and their conversion
// to float are exact. Rows run 2 at a time sharing the activation loads, each prefetching its own
// stream kPrefetchBlocks super-blocks ahead (kquant_simd.h).
#include <immintrin.h>

#include "ops/gemv_streams.h"
#include "ops/kquant_simd.h"
#include "ops/matmul_simd_avx2.h"
#include "ops/q3_k.h"

namespace pacer::ops {
namespace {

// R rows of n elements (row r at w + r*stride) dotted with one Q8_K row: out[r * out_step].
template <int R>
void q3_K_rows_tile(int64_t n, const std::byte* w, int64_t stride, const std::byte* act, float* out,
                    int64_t out_step = 1) {
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  const __m256i two_bits = _mm256_set1_epi8(0x03), bit2 = _mm256_set1_epi8(0x04);
  // pshufb index: bytes 0-7 = group 0's scale, bytes 8-15 = group 1's (shifted along per run).
  const __m128i pair_index = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ3_K* blk[R];
    __m128i sc8[R];  // int8 sc_0..sc_15, shifted down by 2 bytes per run
    __m256i hm[R], isum[R];
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].bsums));
    for (int r = 0; r < R; ++r) {
      blk[r] = reinterpret_cast<const BlockQ3_K*>(w + r * stride) + b;
      prefetch_ahead(blk[r]);
      sc8[r] = unpack_q3_K_scales(blk[r]);
      hm[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[r]->hmask));
      // -4 * sum_g sc_g * bsums[g], spread over 8 lanes.
      const __m256i offset = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8[r]), bsums);
      isum[r] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offset, 2));
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
          const __m256i u =
              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qs[r], 2 * run), two_bits),
                              _mm256_and_si256(_mm256_slli_epi16(hm[r], 2), bit2));
          hm[r] = _mm256_srli_epi16(hm[r], 1);
          const __m256i s = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8[r], pair_index));
          sc8[r] = _mm_srli_si128(sc8[r], 2);
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(_mm256_maddubs_epi16(u, xq), s));
        }
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

void dot_rows_q3_K_q8_K_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out) {
  constexpr int kRows = 2;
  int64_t r = gemv_stream_tiles(nr, kRows, [&](int64_t j, int64_t per_stream) {
    q3_K_rows_tile<kRows>(n, w + j * w_stride, per_stream * w_stride, act, out + j, per_stream);
  });
  for (; r + kRows <= nr; r += kRows) {
    q3_K_rows_tile<kRows>(n, w + r * w_stride, w_stride, act, out + r);
  }
  for (; r < nr; ++r) q3_K_rows_tile<1>(n, w + r * w_stride, w_stride, act, out + r);
}

float dot_q3_K_q8_K_avx2(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  q3_K_rows_tile<1>(n, w_row, 0, act, &out);
  return out;
}

}  // namespace pacer::ops
