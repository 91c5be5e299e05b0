// Q6_K x Q8_K on AVX2 (+FMA, F16C).
//
// Per half h of a super-block (elements 128h .. 128h+127) and row: two 32-byte loads of ql and
// one of qh give the four runs of 32 quants q1..q4 (elements +0, +32, +64, +96) as unsigned bytes
// in element order: low 4 bits from a nibble of ql, bits 4-5 from a 2-bit field of qh moved into
// place with one 16-bit shift and an AND (the bits a shift drags in from the neighbouring byte
// fall outside the 0x30 mask). Then
//   vpmaddubsw(q, x): q in [0, 63] unsigned, x in [-127, 127]: pair sums |.| <= 2 * 63 * 127 =
//                     16002 < 32767, no saturation;
//   vpmaddwd(p, sc):  each 128-bit lane is one group of 16, its int8 scale as int16: lane |.| <=
//                     2 * 16002 * 128 = 4,096,512; 8 per lane and super-block < 2^31.
// The offset of 32 comes off once per super-block: -32 * vpmaddwd(bsums, scales). Lane sums may
// exceed 2^24, so their conversion to float rounds (relative 2^-24), as the reference's does.
// Rows run 2 at a time (shared activation loads), each prefetching its own stream
// kPrefetchBlocks super-blocks ahead (kquant_simd.h).
#include <immintrin.h>

#include "ops/gemv_streams.h"
#include "ops/kquant_simd.h"
#include "ops/matmul_simd_avx2.h"
#include "ops/q6_k.h"

namespace pacer::ops {
namespace {

// vpshufb indices: for run k (k = 0..3) of a half, the low lane repeats int16 scale 2k of the
// half (the group of the run's first 16 elements), the high lane int16 scale 2k+1.
inline __m256i run_scale_index(int k) {
  const char a0 = static_cast<char>(4 * k), a1 = static_cast<char>(4 * k + 1);
  const char b0 = static_cast<char>(4 * k + 2), b1 = static_cast<char>(4 * k + 3);
  return _mm256_setr_epi8(a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1,  //
                          b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1);
}

// R rows of n elements (row r at w + r*stride) dotted with one Q8_K row: out[r * out_step].
template <int R>
void q6_K_rows_tile(int64_t n, const std::byte* w, int64_t stride, const std::byte* act, float* out,
                    int64_t out_step = 1) {
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ6_K* blk[R];
    __m256i sc16[R], isum[R];
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].bsums));
    for (int r = 0; r < R; ++r) {
      blk[r] = reinterpret_cast<const BlockQ6_K*>(w + r * stride) + b;
      prefetch_ahead(blk[r]);
      sc16[r] =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[r]->scales)));
      // -32 * sum_g sc_g * bsums[g]: |lane| <= 32 * 2 * 128 * 2032
      isum[r] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                 _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16[r]), 5));
    }
    for (int h = 0; h < 2; ++h) {
      const int8_t* xq = x[b].qs + 128 * h;
      __m256i xs[4];
      for (int k = 0; k < 4; ++k)
        xs[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32 * k));
      for (int r = 0; r < R; ++r) {
        const __m256i ql0 =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[r]->ql + 64 * h));
        const __m256i ql1 =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[r]->ql + 64 * h + 32));
        const __m256i qh =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[r]->qh + 32 * h));
        __m256i q[4];
        q[0] = _mm256_or_si256(_mm256_and_si256(ql0, low4),
                               _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45));
        q[1] = _mm256_or_si256(_mm256_and_si256(ql1, low4),
                               _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45));
        q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                               _mm256_and_si256(qh, bits45));
        q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                               _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45));
        // int16 scales 8h .. 8h+7 in both lanes (the immediate must be a constant, even unrolled).
        const __m256i sc_half = h == 0 ? _mm256_permute2x128_si256(sc16[r], sc16[r], 0x00)
                                       : _mm256_permute2x128_si256(sc16[r], sc16[r], 0x11);
        for (int k = 0; k < 4; ++k) {
          const __m256i s = _mm256_shuffle_epi8(sc_half, run_scale_index(k));
          isum[r] =
              _mm256_add_epi32(isum[r], _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], xs[k]), s));
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const float d = avx2::fp32_from_fp16(blk[r]->d) * x[b].d;
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_set1_ps(d), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r * out_step] = avx2::hsum8(acc[r]);
}

}  // namespace

void dot_rows_q6_K_q8_K_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out) {
  constexpr int kRows = 2;
  int64_t r = gemv_stream_tiles(nr, kRows, [&](int64_t j, int64_t per_stream) {
    q6_K_rows_tile<kRows>(n, w + j * w_stride, per_stream * w_stride, act, out + j, per_stream);
  });
  for (; r + kRows <= nr; r += kRows) {
    q6_K_rows_tile<kRows>(n, w + r * w_stride, w_stride, act, out + r);
  }
  for (; r < nr; ++r) q6_K_rows_tile<1>(n, w + r * w_stride, w_stride, act, out + r);
}

float dot_q6_K_q8_K_avx2(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  q6_K_rows_tile<1>(n, w_row, 0, act, &out);
  return out;
}

}  // namespace pacer::ops
