#pragma once
// The AVX-512 two-rows-per-register loop for block types whose 32 quants fill 32 bytes (Q8_0;
// Q4_0's 16 bytes pack four rows per register instead, see q4_0_avx512.cpp). Include ONLY from
// *_avx512.cpp files, after ops/matmul_simd_avx512.h.
//
// Two weight rows share one zmm (row 2p in bytes 0-31, row 2p+1 in 32-63) against the activation
// block broadcast to both halves, so the activation quants, scale and sum are loaded once per
// block for all rows of the tile. Scales are prepared per strip of 16 blocks (strip_scales; the
// raw fp16 scales are gathered one strip ahead), so the inner loop applies d_w * d_x with one
// merge-broadcast per pair of rows.
//
// Kernel must provide:
//   using Block = ...;                     // e.g. BlockQ8_0 (fp16 scale `d` first)
//   static constexpr int32_t kSumFactor;   // bias lanes 0 and 8 start at kSumFactor * sum_b(x)
//   static __m512i load_pair(const Block* b0, const Block* b1);  // both rows' quants, prepared
//   static __m512i pair_dot(__m512i w, __m512i x, __m512i bias);
//       // int32 lanes: 0-7 sum to row 2p's block dot, 8-15 to row 2p+1's (bias included)
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ops/q8_0.h"

namespace pacer::ops::avx512 {
namespace {

// Row pairs per tile: 4 pairs (8 rows) amortize the per-block activation work (broadcast, bias,
// loop control) over 8 row-blocks; the kernel is bound by instruction issue, not ports.
constexpr int kPairsPerTile = 4;

// Tokens per GEMM tile: each loaded weight pair serves up to 4 tokens (P * 4 accumulators).
constexpr int kTokensPerTile = 4;

// 2P rows x T tokens: outs[t * 2P + i] = dot of rows[i] with acts[t] (an odd caller repeats its
// last row and discards the copy). Each (row, token) pair goes through the same operations
// whatever T is, so the GEMM (T > 1) is bit-identical to T = 1 calls. Each row-block also
// prefetches `prefetch_offset` bytes further on, the same block of the next tile's rows (see
// q4_0_avx512.cpp for why a whole-tile lookahead).
template <class Kernel, int P, int T>
void quant_pairs_tile(int64_t n, const std::byte* const* rows, const std::byte* const* acts,
                      float* const* outs, int64_t prefetch_offset) {
  using Block = typename Kernel::Block;
  ActQ8Row a[T];
  for (int t = 0; t < T; ++t) a[t] = act_q8_row(acts[t], n);
  const int64_t nb = n / 32;
  __m512 acc[T][P];
  for (int t = 0; t < T; ++t) {
    for (int p = 0; p < P; ++p) acc[t][p] = _mm512_setzero_ps();
  }
  alignas(64) float scales[T][2 * P][kScaleStrip];
  alignas(32) uint16_t d16[2][2 * P][kScaleStrip] = {};  // double-buffered: strip s and s+1
  for (int r = 0; r < 2 * P; ++r) {
    gather_strip_d16<Block>(rows[r], 0, nb < kScaleStrip ? nb : kScaleStrip, d16[0][r]);
  }
  for (int64_t b0 = 0, s = 0; b0 < nb; b0 += kScaleStrip, s ^= 1) {
    const int64_t count = nb - b0 < kScaleStrip ? nb - b0 : kScaleStrip;
    const int64_t next = nb - b0 - count < kScaleStrip ? nb - b0 - count : kScaleStrip;
    for (int r = 0; r < 2 * P; ++r) {
      for (int t = 0; t < T; ++t) strip_scales(d16[s][r], a[t].d + b0, count, scales[t][r]);
      gather_strip_d16<Block>(rows[r], b0 + count, next, d16[s ^ 1][r]);
    }
    for (int64_t k = 0; k < count; ++k) {
      const int64_t b = b0 + k;
      __m512i w[P];
      for (int p = 0; p < P; ++p) {
        const Block* w0 = reinterpret_cast<const Block*>(rows[2 * p]) + b;
        const Block* w1 = reinterpret_cast<const Block*>(rows[2 * p + 1]) + b;
        _mm_prefetch(reinterpret_cast<const char*>(w0) + prefetch_offset, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(w1) + prefetch_offset, _MM_HINT_T0);
        w[p] = Kernel::load_pair(w0, w1);
      }
      for (int t = 0; t < T; ++t) {
        const __m512i x = _mm512_broadcast_i64x4(
            _mm256_load_si256(reinterpret_cast<const __m256i*>(a[t].q + 32 * b)));
        const __m512i bias = _mm512_maskz_set1_epi32(0x0101, Kernel::kSumFactor * a[t].sum[b]);
        for (int p = 0; p < P; ++p) {
          const __m512i dot = Kernel::pair_dot(w[p], x, bias);
          acc[t][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                                      pair_scales(&scales[t][2 * p][k], &scales[t][2 * p + 1][k]),
                                      acc[t][p]);
        }
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    for (int p = 0; p < P; ++p) {
      hsum_halves(acc[t][p], outs[t * 2 * P + 2 * p], outs[t * 2 * P + 2 * p + 1]);
    }
  }
}

// Rows [0, nr) x tokens [0, nt): tiles of 2*kPairs rows (then single pairs, a lone last row
// paired with itself), and within each row tile, groups of kTokensPerTile tokens (then one at a
// time), so a row tile is reused from L1 by every token before the next one is loaded.
template <class Kernel, int kPairs>
void quant_gemm(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const std::byte* act,
                int64_t act_stride, int64_t nt, float* out, int64_t out_stride) {
  constexpr int kRows = 2 * kPairs;
  const std::byte* rows[kRows];
  const std::byte* acts[kTokensPerTile];
  float* outs[kTokensPerTile * kRows];
  float spare[kTokensPerTile * kRows];
  int64_t r = 0;
  if (nt == 1) {  // GEMV: rows in far-apart sequential streams (ops/gemv_streams.h)
    acts[0] = act;
    r = gemv_stream_row_tables<kRows>(w, stride, nr, out, rows, outs, [&] {
      quant_pairs_tile<Kernel, kPairs, 1>(n, rows, acts, outs, kGemvStreamPrefetchRows * stride);
    });
  }
  for (; r < nr;) {
    const bool full = r + kRows <= nr;
    const int tile_rows = full ? kRows : 2;
    for (int i = 0; i < tile_rows; ++i) rows[i] = w + (r + i < nr ? r + i : nr - 1) * stride;
    auto run = [&](auto tokens_tag, int64_t t0) {
      constexpr int kT = decltype(tokens_tag)::value;
      for (int t = 0; t < kT; ++t) {
        acts[t] = act + (t0 + t) * act_stride;
        for (int i = 0; i < tile_rows; ++i) {
          outs[t * tile_rows + i] =
              r + i < nr ? out + (t0 + t) * out_stride + r + i : &spare[t * tile_rows + i];
        }
      }
      if (full) {
        quant_pairs_tile<Kernel, kPairs, kT>(n, rows, acts, outs, kRows * stride);
      } else {
        quant_pairs_tile<Kernel, 1, kT>(n, rows, acts, outs, 2 * stride);
      }
    };
    int64_t t = 0;
    for (; t + kTokensPerTile <= nt; t += kTokensPerTile) {
      run(std::integral_constant<int, kTokensPerTile>{}, t);
    }
    for (; t < nt; ++t) run(std::integral_constant<int, 1>{}, t);
    r += tile_rows;
  }
}

}  // namespace
}  // namespace pacer::ops::avx512
