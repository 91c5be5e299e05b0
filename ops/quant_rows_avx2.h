#pragma once
// The AVX2 row loop shared by the Q8_0 and Q4_0 kernels (act-Q8 activations). Include ONLY from
// *_avx2.cpp files, after ops/matmul_simd_avx2.h.
//
// R rows per pass, one ymm accumulator each; the activation block (quants, sum) is loaded once
// per block for all R rows, and d_w * d_x comes from a per-strip table (strip_scales), so each
// row-block costs its integer dot, one int->float conversion and one FMA with a broadcast load.
//
// Kernel must provide:
//   using Block = ...;
//   static constexpr int32_t kSumFactor;   // lane 0 of `bias` starts at kSumFactor * sum_b(x)
//   static __m256i block_dot(const Block* w, __m256i x, __m256i bias);  // 8 int32 lanes summing
//                                                                      // to the block dot
#include <cstddef>
#include <cstdint>

#include "ops/q8_0.h"

namespace pacer::ops::avx2 {
namespace {

// R rows; each row-block also prefetches the same block of the next tile's rows (R * stride
// further on; see q4_0_avx512.cpp for why a whole-tile lookahead).
// Row r is at w + r * row_step and its result goes to out[r * out_row_step]; each block also
// prefetches `prefetch_offset` bytes further on.
template <class Kernel, int R>
void quant_rows_tile(int64_t n, const std::byte* w, int64_t row_step, int64_t prefetch_offset,
                     const std::byte* act, float* out, int64_t out_row_step) {
  const int64_t stride = row_step;
  using Block = typename Kernel::Block;
  const ActQ8Row a = act_q8_row(act, n);
  const int64_t nb = n / 32;
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  alignas(32) float scales[R][kScaleStrip];
  alignas(32) uint16_t d16[2][R][kScaleStrip] = {};  // double-buffered: strip s and s+1
  for (int r = 0; r < R; ++r) {
    gather_strip_d16<Block>(w + r * stride, 0, nb < kScaleStrip ? nb : kScaleStrip, d16[0][r]);
  }
  for (int64_t b0 = 0, s = 0; b0 < nb; b0 += kScaleStrip, s ^= 1) {
    const int64_t count = nb - b0 < kScaleStrip ? nb - b0 : kScaleStrip;
    const int64_t next = nb - b0 - count < kScaleStrip ? nb - b0 - count : kScaleStrip;
    for (int r = 0; r < R; ++r) {
      strip_scales(d16[s][r], a.d + b0, count, scales[r]);
      gather_strip_d16<Block>(w + r * stride, b0 + count, next, d16[s ^ 1][r]);
    }
    for (int64_t k = 0; k < count; ++k) {
      const int64_t b = b0 + k;
      const __m256i x = _mm256_load_si256(reinterpret_cast<const __m256i*>(a.q + 32 * b));
      const __m256i bias = _mm256_zextsi128_si256(_mm_cvtsi32_si128(Kernel::kSumFactor * a.sum[b]));
      for (int r = 0; r < R; ++r) {
        const Block* blk = reinterpret_cast<const Block*>(w + r * stride) + b;
        _mm_prefetch(reinterpret_cast<const char*>(blk) + prefetch_offset, _MM_HINT_T0);
        const __m256 dot = _mm256_cvtepi32_ps(Kernel::block_dot(blk, x, bias));
        acc[r] = _mm256_fmadd_ps(dot, _mm256_broadcast_ss(&scales[r][k]), acc[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) out[r * out_row_step] = hsum8(acc[r]);
}

// out[0..nr) for nr rows at w + r*stride, four at a time.
template <class Kernel>
void quant_dot_rows(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const std::byte* act,
                    float* out) {
  int64_t r = 0;
  r = gemv_stream_tiles(nr, 4, [&](int64_t j, int64_t per_stream) {
    quant_rows_tile<Kernel, 4>(n, w + j * stride, per_stream * stride,
                               kGemvStreamPrefetchRows * stride, act, out + j, per_stream);
  });
  for (; r + 4 <= nr; r += 4) {
    quant_rows_tile<Kernel, 4>(n, w + r * stride, stride, 4 * stride, act, out + r, 1);
  }
  switch (nr - r) {
    case 3:
      quant_rows_tile<Kernel, 3>(n, w + r * stride, stride, 3 * stride, act, out + r, 1);
      break;
    case 2:
      quant_rows_tile<Kernel, 2>(n, w + r * stride, stride, 2 * stride, act, out + r, 1);
      break;
    case 1:
      quant_rows_tile<Kernel, 1>(n, w + r * stride, stride, stride, act, out + r, 1);
      break;
    default:
      break;
  }
}

}  // namespace
}  // namespace pacer::ops::avx2
