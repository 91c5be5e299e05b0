#pragma once
// The AVX-512 row loop shared by the Q8_0 and Q4_0 kernels (act-Q8 activations). Include ONLY
// from *_avx512.cpp files, after ops/matmul_simd_avx512.h.
//
// Two weight rows share one zmm (row 2p in bytes 0-31, row 2p+1 in 32-63) against the activation
// block broadcast to both halves, so the activation quants, scale and sum are loaded once per
// block for all rows of the tile. Scales are prepared per strip of 16 blocks (strip_scales; the
// raw fp16 scales are gathered one strip ahead), so the inner loop applies d_w * d_x with one
// merge-broadcast per pair of rows.
//
// Kernel must provide:
//   using Block = ...;                     // BlockQ8_0 / BlockQ4_0
//   static constexpr int32_t kSumFactor;   // bias lanes 0 and 8 start at kSumFactor * sum_b(x)
//   static __m512i pair_dot(const Block* b0, const Block* b1, __m512i x, __m512i bias);
//       // int32 lanes: 0-7 sum to row 2p's block dot, 8-15 to row 2p+1's (bias included)
#include <cstddef>
#include <cstdint>

#include "ops/q8_0.h"

namespace pacer::ops::avx512 {
namespace {

// Row pairs per tile: 4 pairs (8 rows) amortize the per-block activation work (broadcast, bias,
// loop control) over 8 row-blocks; the kernel is bound by instruction issue, not ports.
constexpr int kPairsPerTile = 4;
// Software prefetch distance in blocks (576 bytes of Q4_0, 1088 of Q8_0 per row): on the
// development machine (Sapphire Rapids VM) streaming from DRAM ran 25-40% faster with it; the
// hardware prefetcher alone falls behind on 8 concurrent row streams.
constexpr int64_t kPrefetchBlocks = 32;

// P pairs of rows (2P rows; an odd caller repeats its last row and discards the copy).
template <class Kernel, int P>
void quant_pairs_tile(int64_t n, const std::byte* const* rows, const std::byte* act,
                      float* const* outs) {
  using Block = typename Kernel::Block;
  const ActQ8Row a = act_q8_row(act, n);
  const int64_t nb = n / 32;
  __m512 acc[P];
  for (int p = 0; p < P; ++p) acc[p] = _mm512_setzero_ps();
  alignas(64) float scales[2 * P][kScaleStrip];
  alignas(32) uint16_t d16[2][2 * P][kScaleStrip] = {};  // double-buffered: strip s and s+1
  for (int r = 0; r < 2 * P; ++r) {
    gather_strip_d16<Block>(rows[r], 0, nb < kScaleStrip ? nb : kScaleStrip, d16[0][r]);
  }
  for (int64_t b0 = 0, s = 0; b0 < nb; b0 += kScaleStrip, s ^= 1) {
    const int64_t count = nb - b0 < kScaleStrip ? nb - b0 : kScaleStrip;
    const int64_t next = nb - b0 - count < kScaleStrip ? nb - b0 - count : kScaleStrip;
    for (int r = 0; r < 2 * P; ++r) {
      strip_scales(d16[s][r], a.d + b0, count, scales[r]);
      gather_strip_d16<Block>(rows[r], b0 + count, next, d16[s ^ 1][r]);
    }
    for (int64_t k = 0; k < count; ++k) {
      const int64_t b = b0 + k;
      const __m512i x = _mm512_broadcast_i64x4(
          _mm256_load_si256(reinterpret_cast<const __m256i*>(a.q + 32 * b)));
      const __m512i bias = _mm512_maskz_set1_epi32(0x0101, Kernel::kSumFactor * a.sum[b]);
      for (int p = 0; p < P; ++p) {
        const Block* w0 = reinterpret_cast<const Block*>(rows[2 * p]) + b;
        const Block* w1 = reinterpret_cast<const Block*>(rows[2 * p + 1]) + b;
        _mm_prefetch(reinterpret_cast<const char*>(w0 + kPrefetchBlocks), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(w1 + kPrefetchBlocks), _MM_HINT_T0);
        const __m512i dot = Kernel::pair_dot(w0, w1, x, bias);
        acc[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                                 pair_scales(&scales[2 * p][k], &scales[2 * p + 1][k]), acc[p]);
      }
    }
  }
  for (int p = 0; p < P; ++p) hsum_halves(acc[p], outs[2 * p], outs[2 * p + 1]);
}

// out[0..nr) for nr rows at w + r*stride: tiles of 2*kPairs rows, then the 1..2*kPairs-1 left.
template <class Kernel, int kPairs>
void quant_dot_rows(int64_t n, const std::byte* w, int64_t stride, int64_t nr,
                    const std::byte* act, float* out) {
  constexpr int kRows = 2 * kPairs;
  const std::byte* rows[kRows];
  float* outs[kRows];
  float spare;
  int64_t r = 0;
  for (; r + kRows <= nr; r += kRows) {
    for (int k = 0; k < kRows; ++k) {
      rows[k] = w + (r + k) * stride;
      outs[k] = out + r + k;
    }
    quant_pairs_tile<Kernel, kPairs>(n, rows, act, outs);
  }
  while (r < nr) {  // 1 or 2 rows at a time; a lone last row is paired with itself
    const int64_t left = nr - r;
    rows[0] = w + r * stride;
    outs[0] = out + r;
    rows[1] = left > 1 ? rows[0] + stride : rows[0];
    outs[1] = left > 1 ? out + r + 1 : &spare;
    quant_pairs_tile<Kernel, 1>(n, rows, act, outs);
    r += left > 1 ? 2 : 1;
  }
}

}  // namespace
}  // namespace pacer::ops::avx512
