// Q4_0 x act-Q8 on AVX-512 (BW/VL/DQ), with and without VNNI.
//
// Two weight rows share one zmm. The 16 quant bytes of row r's block b fill 128-bit lanes 0 and
// 1, row r+1's lanes 2 and 3; lanes 1 and 3 shift right by 4, and the AND with 0x0F leaves
//   [nib 0..15 | nib 16..31] of row r, then the same for row r+1,
// i.e. each 256-bit half is the block in element order, matching the activation block broadcast
// to both halves. Nibbles are unsigned bytes (0..15) and activations signed (|x| <= 127), which
// is vpdpbusd's form as is (VNNI) or vpmaddubsw's (pair sums <= 2 * 15 * 127 = 3810, no
// saturation). The nibble offset of 8 comes off exactly by adding -8 * sum_b(x) in lanes 0 and 8.
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>
#include "ops/q4_0.h"
#include "ops/q8_0.h"

namespace pacer::ops {
namespace {

// Nibbles of block b of two rows, each 256-bit half in element order (see the file comment).
inline __m512i unpack_nibbles_pair(const uint8_t* qs0, const uint8_t* qs1) {
  __m512i q = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs0)));
  q = _mm512_mask_broadcast_i32x4(q, 0xFF00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs1)));
  q = _mm512_mask_srli_epi16(q, 0xFF00FF00u, q, 4);  // 16-bit words of lanes 1 and 3
  return _mm512_and_si512(q, _mm512_set1_epi8(0x0F));
}

// Integer dot of block b of two rows with x (broadcast to both halves), plus `offset`
// (-8 * sum x in lanes 0 and 8): lanes 0..7 sum to row 0's sum (nib - 8) * x, lanes 8..15 to
// row 1's.
template <bool kVnni>
inline __m512i pair_block_dot_epi32(const uint8_t* qs0, const uint8_t* qs1, __m512i x,
                                    __m512i offset) {
  const __m512i nib = unpack_nibbles_pair(qs0, qs1);
  if constexpr (kVnni) {
    return _mm512_dpbusd_epi32(offset, nib, x);
  } else {
    const __m512i pairs = _mm512_maddubs_epi16(nib, x);
    return _mm512_add_epi32(_mm512_madd_epi16(pairs, _mm512_set1_epi16(1)), offset);
  }
}

// P pairs of rows (2P rows; row 2p+1 may repeat row 2p when the caller has an odd count).
template <bool kVnni, int P>
void q4_0_pairs_tile(int64_t n, const std::byte* const* rows, const std::byte* act,
                     float* const* outs) {
  const ActQ8Row a = act_q8_row(act, n);
  const int64_t nb = n / kQ4_0BlockElems;
  __m512 acc[P];
  for (int p = 0; p < P; ++p) acc[p] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m512i x = _mm512_broadcast_i64x4(
        _mm256_load_si256(reinterpret_cast<const __m256i*>(a.q + 32 * b)));
    const __m512 dx = _mm512_set1_ps(a.d[b]);
    const __m512i offset = _mm512_maskz_set1_epi32(0x0101, -8 * a.sum[b]);
    for (int p = 0; p < P; ++p) {
      const auto* b0 = reinterpret_cast<const BlockQ4_0*>(rows[2 * p]) + b;
      const auto* b1 = reinterpret_cast<const BlockQ4_0*>(rows[2 * p + 1]) + b;
      const __m512i dot = pair_block_dot_epi32<kVnni>(b0->qs, b1->qs, x, offset);
      const __m512 s = avx512::pair_fp16_times(&b0->d, &b1->d, dx);
      acc[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, acc[p]);
    }
  }
  for (int p = 0; p < P; ++p) {
    float lo, hi;
    avx512::hsum_halves(acc[p], &lo, &hi);
    *outs[2 * p] = lo;
    *outs[2 * p + 1] = hi;
  }
}

template <bool kVnni>
void q4_0_dot_rows(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const std::byte* act,
                   float* out) {
  int64_t r = 0;
  for (; r + 4 <= nr; r += 4) {
    const std::byte* rows[4] = {w + r * stride, w + (r + 1) * stride, w + (r + 2) * stride,
                                w + (r + 3) * stride};
    float* outs[4] = {out + r, out + r + 1, out + r + 2, out + r + 3};
    q4_0_pairs_tile<kVnni, 2>(n, rows, act, outs);
  }
  if (r < nr) {  // 1..3 rows left: one or two pairs, an odd last row paired with itself
    float spare;
    const std::byte* rows[4];
    float* outs[4];
    for (int k = 0; k < 4; ++k) {
      const int64_t rr = r + k < nr ? r + k : nr - 1;
      rows[k] = w + rr * stride;
      outs[k] = r + k < nr ? out + r + k : &spare;
    }
    if (nr - r > 2) {
      q4_0_pairs_tile<kVnni, 2>(n, rows, act, outs);
    } else {
      q4_0_pairs_tile<kVnni, 1>(n, rows, act, outs);
    }
  }
}

}  // namespace

void dot_rows_q4_0_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out) {
  q4_0_dot_rows<false>(n, w, w_stride, nr, act, out);
}
float dot_q4_0_q8_0_avx512(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  q4_0_dot_rows<false>(n, w_row, 0, 1, act, &out);
  return out;
}
void dot_rows_q4_0_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                   const std::byte* act, float* out) {
  q4_0_dot_rows<true>(n, w, w_stride, nr, act, out);
}
float dot_q4_0_q8_0_avx512vnni(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  q4_0_dot_rows<true>(n, w_row, 0, 1, act, &out);
  return out;
}

}  // namespace pacer::ops
