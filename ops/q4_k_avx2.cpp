// Q4_K x Q8_K on AVX2 (+FMA, F16C).
//
// Per super-block and row, the integer sum_j sc_j * sum_{i in j} q_i qx_i of q4_k.h: the 32 qs
// bytes of chunk c hold sub-block 2c in their low nibbles and 2c+1 in their high nibbles, each
// in element order, so one AND / shift+AND gives 32 unsigned quants matching 32 consecutive
// activation bytes. Then
//   vpmaddubsw(q, x): q in [0, 15] unsigned, x in [-127, 127] signed; pair sums
//                     |.| <= 2 * 15 * 127 = 3810, so it never saturates;
//   vpmaddwd(p, sc):  sc_j (6 bits) broadcast as int16; lane |.| <= 2 * 3810 * 63 = 480,060;
// 8 such per lane and super-block stay below 2^22, so the int32 sum and its conversion to float
// are exact. The mins term sum_j m_j * (bsums[2j] + bsums[2j+1]) is one vpmaddwd of the 8 mins
// with the 8 pair sums (|pair sum| <= 4064 fits int16). Rows are processed R at a time so the
// activation loads and pair sums are shared; each row prefetches its own stream kPrefetchBlocks
// super-blocks ahead (kquant_simd.h).
#include <immintrin.h>

#include "ops/gemv_streams.h"
#include "ops/kquant_simd.h"
#include "ops/matmul_simd_avx2.h"
#include "ops/q4_k.h"

namespace pacer::ops {
namespace {

// sc_j replicated into both int16 halves of int32 word j (j = 0..7), for vpbroadcastd from
// memory (a load-port-only broadcast); m_j (j = 0..7) as 8 int16.
struct Q4KScales {
  alignas(32) uint32_t sc_pairs[8];
  __m128i mins16;
};

inline void unpack_scales(const BlockQ4_K* blk, Q4KScales* out) {
  const __m128i sc_m = unpack_q4_K_scales_mins(blk);
  const __m256i sc32 = _mm256_cvtepu8_epi32(sc_m);
  _mm256_store_si256(reinterpret_cast<__m256i*>(out->sc_pairs),
                     _mm256_or_si256(sc32, _mm256_slli_epi32(sc32, 16)));
  out->mins16 = _mm_cvtepu8_epi16(_mm_srli_si128(sc_m, 8));
}

// R rows of n elements (row r at w + r*stride) dotted with one Q8_K row: out[r * out_step].
template <int R>
void q4_K_rows_tile(int64_t n, const std::byte* w, int64_t stride, const std::byte* act, float* out,
                    int64_t out_step = 1) {
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  __m256 acc[R];      // the scale part, 8 lanes per row
  __m128 acc_min[R];  // the mins part, 4 lanes per row
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps(), acc_min[r] = _mm_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ4_K* blk[R];
    Q4KScales sc[R];
    for (int r = 0; r < R; ++r) {
      blk[r] = reinterpret_cast<const BlockQ4_K*>(w + r * stride) + b;
      prefetch_ahead(blk[r]);
      unpack_scales(blk[r], &sc[r]);
    }
    // bsums[2j] + bsums[2j+1], j = 0..7: the activation sum of each 32-element sub-block.
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
        const __m256i q_lo = _mm256_and_si256(q, low_nibbles);
        const __m256i q_hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low_nibbles);
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
      const __m128 f = q4_K_factors(blk[r], dx);                     // d*dx, dmin*dx
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_broadcastss_ps(f), acc[r]);
      acc_min[r] = _mm_fnmadd_ps(_mm_cvtepi32_ps(msum), _mm_permute_ps(f, 0x55), acc_min[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    out[r * out_step] = avx2::hsum8(_mm256_add_ps(acc[r], _mm256_zextps128_ps256(acc_min[r])));
  }
}

}  // namespace

void dot_rows_q4_K_q8_K_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out) {
  constexpr int kRows = 2;
  int64_t r = gemv_stream_tiles(nr, kRows, [&](int64_t j, int64_t per_stream) {
    q4_K_rows_tile<kRows>(n, w + j * w_stride, per_stream * w_stride, act, out + j, per_stream);
  });
  for (; r + kRows <= nr; r += kRows) {
    q4_K_rows_tile<kRows>(n, w + r * w_stride, w_stride, act, out + r);
  }
  for (; r < nr; ++r) q4_K_rows_tile<1>(n, w + r * w_stride, w_stride, act, out + r);
}

float dot_q4_K_q8_K_avx2(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  q4_K_rows_tile<1>(n, w_row, 0, act, &out);
  return out;
}

}  // namespace pacer::ops
