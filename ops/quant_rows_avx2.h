#pragma once
// The AVX2 row loop shared by the Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL kernels (act-Q8
// activations). Include ONLY from *_avx2.cpp files, after ops/matmul_simd_avx2.h.
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
// and may provide
//   static constexpr bool kHasMin = true;  // Block has an fp16 offset `m` after `d` (Q4_1, Q5_1):
//                                          // each block adds m_w * d_x * sum_b(x), a strip of
//                                          // 16 blocks at a time outside the integer loop
#include <cstddef>
#include <cstdint>

#include "ops/q8_0.h"

namespace pacer::ops::avx2 {
namespace {

template <class Kernel>
constexpr bool kHasMinV = requires {
  requires Kernel::kHasMin;
};

// m16[k] = block(b0 + k).m (raw fp16) for k < count; see gather_strip_d16.
template <class Block>
inline void gather_strip_m16(const std::byte* row, int64_t b0, int64_t count, uint16_t* m16) {
  const volatile Block* blk = reinterpret_cast<const volatile Block*>(row) + b0;
  if (count == kScaleStrip) {
    for (int64_t k = 0; k < kScaleStrip; ++k) m16[k] = blk[k].m;
  } else {
    for (int64_t k = 0; k < count; ++k) m16[k] = blk[k].m;
  }
}

// acc += fp32(m16[k]) * dx[k] * sum[k] for k < count (<= kScaleStrip), 8 lanes at a time.
inline __m256 strip_offsets(const uint16_t* m16, const float* dx, const int32_t* sum, int64_t count,
                            __m256 acc) {
  for (int h = 0; h < 2; ++h) {
    const int64_t left = count - 8 * h;
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left)), lanes);
    const __m256 m = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(m16 + 8 * h)));
    const __m256 x = _mm256_maskload_ps(dx + 8 * h, mask);  // masked-off lanes read as 0
    const __m256 s = _mm256_cvtepi32_ps(_mm256_maskload_epi32(sum + 8 * h, mask));
    acc = _mm256_fmadd_ps(m, _mm256_mul_ps(x, s), acc);
  }
  return acc;
}

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
  constexpr bool kMin = kHasMinV<Kernel>;
  alignas(32) uint16_t m16[2][kMin ? R : 1][kScaleStrip] = {};  // offsets, likewise (Q4_1, Q5_1)
  __m256 macc[R];
  for (int r = 0; r < R; ++r) {
    macc[r] = _mm256_setzero_ps();
    gather_strip_d16<Block>(w + r * stride, 0, nb < kScaleStrip ? nb : kScaleStrip, d16[0][r]);
    if constexpr (kMin) {
      gather_strip_m16<Block>(w + r * stride, 0, nb < kScaleStrip ? nb : kScaleStrip, m16[0][r]);
    }
  }
  for (int64_t b0 = 0, s = 0; b0 < nb; b0 += kScaleStrip, s ^= 1) {
    const int64_t count = nb - b0 < kScaleStrip ? nb - b0 : kScaleStrip;
    const int64_t next = nb - b0 - count < kScaleStrip ? nb - b0 - count : kScaleStrip;
    for (int r = 0; r < R; ++r) {
      strip_scales(d16[s][r], a.d + b0, count, scales[r]);
      gather_strip_d16<Block>(w + r * stride, b0 + count, next, d16[s ^ 1][r]);
      if constexpr (kMin) {
        macc[r] = strip_offsets(m16[s][r], a.d + b0, a.sum + b0, count, macc[r]);
        gather_strip_m16<Block>(w + r * stride, b0 + count, next, m16[s ^ 1][r]);
      }
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
  for (int r = 0; r < R; ++r) {
    if constexpr (kMin) acc[r] = _mm256_add_ps(acc[r], macc[r]);
    out[r * out_row_step] = hsum8(acc[r]);
  }
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
