// Q5_K x Q8_K on AVX2 (+FMA, F16C).
//
// The Q4_K kernel (q4_k_avx2.cpp) with the fifth bit: the 32 qs bytes of chunk c hold sub-block
// 2c in their low nibbles and 2c+1 in their high nibbles, in element order; byte l of qh holds
// bit 4 of element 32j + l in its bit j. So with qh_c = qh >> 2c (16-bit shifts; the bits that
// cross into a byte from its neighbour land above bit 1 and are masked away),
//   q_lo = (qs & 0x0F) | (qh_c << 4 & 0x10),   q_hi = (qs >> 4 & 0x0F) | (qh_c << 3 & 0x10),
// 32 unsigned quants matching 32 consecutive activation bytes. Then
//   vpmaddubsw(q, x): q in [0, 31] unsigned, x in [-127, 127] signed; pair sums
//                     |.| <= 2 * 31 * 127 = 7874, so it never saturates;
//   vpmaddwd(p, sc):  sc_j (6 bits) broadcast as int16; lane |.| <= 2 * 7874 * 63 = 992,124;
// 8 such per lane and super-block stay below 2^23, so the int32 sum and its conversion to float
// are exact. The mins term is one vpmaddwd of the 8 mins with the 8 activation pair sums, as for
// Q4_K. Rows run 2 at a time sharing the activation loads, each prefetching its own stream
// kPrefetchBlocks super-blocks ahead (kquant_simd.h).
#include <immintrin.h>

#include "ops/gemv_streams.h"
#include "ops/kquant_simd.h"
#include "ops/matmul_simd_avx2.h"
#include "ops/q5_k.h"

namespace pacer::ops {
namespace {

// sc_j replicated into both int16 halves of int32 word j (j = 0..7), for vpbroadcastd from
// memory; m_j (j = 0..7) as 8 int16.
struct Q5KScales {
  alignas(32) uint32_t sc_pairs[8];
  __m128i mins16;
};

inline void unpack_scales(const BlockQ5_K* blk, Q5KScales* out) {
  const __m128i sc_m = unpack_6bit_scales_mins(blk->scales);  // 16 bytes: scales + qh[0..3]
  const __m256i sc32 = _mm256_cvtepu8_epi32(sc_m);
  _mm256_store_si256(reinterpret_cast<__m256i*>(out->sc_pairs),
                     _mm256_or_si256(sc32, _mm256_slli_epi32(sc32, 16)));
  out->mins16 = _mm_cvtepu8_epi16(_mm_srli_si128(sc_m, 8));
}

// R rows of n elements (row r at w + r*stride) dotted with one Q8_K row: out[r * out_step].
template <int R>
void q5_K_rows_tile(int64_t n, const std::byte* w, int64_t stride, const std::byte* act, float* out,
                    int64_t out_step = 1) {
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
  __m256 acc[R];      // the scale part, 8 lanes per row
  __m128 acc_min[R];  // the mins part, 4 lanes per row
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps(), acc_min[r] = _mm_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ5_K* blk[R];
    Q5KScales sc[R];
    __m256i qh[R];
    for (int r = 0; r < R; ++r) {
      blk[r] = reinterpret_cast<const BlockQ5_K*>(w + r * stride) + b;
      prefetch_ahead(blk[r]);
      unpack_scales(blk[r], &sc[r]);
      qh[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[r]->qh));
    }
    const __m128i pair_sums =
        _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].bsums)),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].bsums + 8)));
    __m256i isum[R];
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i x_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 64 * c));
      const __m256i x_hi =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 64 * c + 32));
      for (int r = 0; r < R; ++r) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[r]->qs + 32 * c));
        const __m256i q_lo = _mm256_or_si256(_mm256_and_si256(q, low_nibbles),
                                             _mm256_and_si256(_mm256_slli_epi16(qh[r], 4), bit4));
        const __m256i q_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low_nibbles),
                                             _mm256_and_si256(_mm256_slli_epi16(qh[r], 3), bit4));
        qh[r] = _mm256_srli_epi16(qh[r], 2);
        const __m256i s_lo = _mm256_set1_epi32(static_cast<int>(sc[r].sc_pairs[2 * c]));
        const __m256i s_hi = _mm256_set1_epi32(static_cast<int>(sc[r].sc_pairs[2 * c + 1]));
        const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(q_lo, x_lo), s_lo);
        const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(q_hi, x_hi), s_hi);
        isum[r] = _mm256_add_epi32(isum[r], _mm256_add_epi32(p_lo, p_hi));
      }
    }
    const __m128 dx = _mm_set1_ps(x[b].d);
    for (int r = 0; r < R; ++r) {
      const __m128i msum = _mm_madd_epi16(sc[r].mins16, pair_sums);  // |lane| <= 2 * 63 * 4064
      const __m128 f = fp16_pair_times(blk[r], dx);                  // d*dx, dmin*dx
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_broadcastss_ps(f), acc[r]);
      acc_min[r] = _mm_fnmadd_ps(_mm_cvtepi32_ps(msum), _mm_permute_ps(f, 0x55), acc_min[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    out[r * out_step] = avx2::hsum8(_mm256_add_ps(acc[r], _mm256_zextps128_ps256(acc_min[r])));
  }
}

}  // namespace

void dot_rows_q5_K_q8_K_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out) {
  constexpr int kRows = 2;
  int64_t r = gemv_stream_tiles(nr, kRows, [&](int64_t j, int64_t per_stream) {
    q5_K_rows_tile<kRows>(n, w + j * w_stride, per_stream * w_stride, act, out + j, per_stream);
  });
  for (; r + kRows <= nr; r += kRows) {
    q5_K_rows_tile<kRows>(n, w + r * w_stride, w_stride, act, out + r);
  }
  for (; r < nr; ++r) q5_K_rows_tile<1>(n, w + r * w_stride, w_stride, act, out + r);
}

float dot_q5_K_q8_K_avx2(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  q5_K_rows_tile<1>(n, w_row, 0, act, &out);
  return out;
}

}  // namespace pacer::ops
