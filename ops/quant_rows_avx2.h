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
#include <type_traits>

#include "ops/q8_0.h"

namespace pacer::ops::avx2 {
namespace {

template <class Kernel>
constexpr bool kHasMinV = requires {
  requires Kernel::kHasMin;
};

// dm32[k] = the first 4 bytes of block b0 + k (fp16 d, then fp16 m) for k < count: one load and
// store per block for both fields (the gather's stores compete with the dot loop's).
template <class Block>
inline void gather_strip_dm32(const std::byte* row, int64_t b0, int64_t count, uint32_t* dm32) {
  const Block* blk = reinterpret_cast<const Block*>(row) + b0;
  for (int64_t k = 0; k < count; ++k) _mm_storeu_si32(&dm32[k], _mm_loadu_si32(&blk[k]));
}

// The fp16 halves (kHigh: m, else d) of dm32[0..8) as 8 fp32 lanes.
template <bool kHigh>
inline __m256 dm_half_x8(const uint32_t* dm32) {
  __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(dm32));
  v = kHigh ? _mm256_srli_epi32(v, 16) : _mm256_and_si256(v, _mm256_set1_epi32(0xFFFF));
  // Values <= 0xFFFF, so the unsigned saturation of packus keeps them; 128-bit halves in order.
  return _mm256_cvtph_ps(
      _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

// Lanes [8h, 8h + 8) of a strip of `count` blocks: all-ones for lanes < count.
inline __m256i strip_lanes(int64_t count, int h) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count - 8 * h)), lanes);
}

// For blocks with an offset (kHasMin): scales[k] = d[k] * dx[k] as strip_scales does, and
// acc += m[k] * dx[k] * sum[k], for k < count (<= kScaleStrip); lanes >= count add 0.
inline __m256 strip_scales_offsets(const uint32_t* dm32, const float* dx, const int32_t* sum,
                                   int64_t count, float* scales, __m256 acc) {
  for (int h = 0; h < 2; ++h) {
    const __m256i mask = strip_lanes(count, h);
    const __m256 x = _mm256_maskload_ps(dx + 8 * h, mask);  // masked-off lanes read as 0
    _mm256_store_ps(scales + 8 * h, _mm256_mul_ps(dm_half_x8<false>(dm32 + 8 * h), x));
    const __m256 sx =
        _mm256_mul_ps(x, _mm256_cvtepi32_ps(_mm256_maskload_epi32(sum + 8 * h, mask)));
    acc = _mm256_fmadd_ps(dm_half_x8<true>(dm32 + 8 * h), sx, acc);
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
  // Raw fp16 scales, double-buffered (strip s and s+1); with offsets, d and m together (dm32).
  constexpr bool kMin = kHasMinV<Kernel>;
  alignas(32) uint16_t d16[2][kMin ? 1 : R][kScaleStrip] = {};
  alignas(32) uint32_t dm32[2][kMin ? R : 1][kScaleStrip] = {};
  auto gather = [&](int buf, int r, int64_t b0, int64_t count) {
    if constexpr (kMin) {
      gather_strip_dm32<Block>(w + r * stride, b0, count, dm32[buf][r]);
    } else {
      gather_strip_d16<Block>(w + r * stride, b0, count, d16[buf][r]);
    }
  };
  __m256 macc[R];  // the offset terms (kMin)
  for (int r = 0; r < R; ++r) {
    macc[r] = _mm256_setzero_ps();
    gather(0, r, 0, nb < kScaleStrip ? nb : kScaleStrip);
  }
  for (int64_t b0 = 0, s = 0; b0 < nb; b0 += kScaleStrip, s ^= 1) {
    const int64_t count = nb - b0 < kScaleStrip ? nb - b0 : kScaleStrip;
    const int64_t next = nb - b0 - count < kScaleStrip ? nb - b0 - count : kScaleStrip;
    for (int r = 0; r < R; ++r) {
      if constexpr (kMin) {
        macc[r] = strip_scales_offsets(dm32[s][r], a.d + b0, a.sum + b0, count, scales[r], macc[r]);
      } else {
        strip_scales(d16[s][r], a.d + b0, count, scales[r]);
      }
      gather(static_cast<int>(s ^ 1), r, b0 + count, next);
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

// The prefill GEMM's register tile: R rows x T tokens per pass over the blocks, each weight block
// loaded (and unpacked) once for the T tokens, each activation block once for the R rows. Every
// (row, token) takes quant_rows_tile's steps in its order (the same strip scales, the same FMA
// chain, the same horizontal sum), so the GEMM equals dot_rows per token bit for bit.
// out[t * out_stride + r]: row r's result for token t.
template <class Kernel, int R, int T>
void quant_gemm_tile(int64_t n, const std::byte* w, int64_t stride, const ActQ8Row* a, float* out,
                     int64_t out_stride) {
  using Block = typename Kernel::Block;
  constexpr bool kMin = kHasMinV<Kernel>;
  const int64_t nb = n / 32;
  __m256 acc[R][T];
  __m256 macc[R][T];  // the offset terms (kMin)
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = macc[r][t] = _mm256_setzero_ps();
  }
  alignas(32) float scales[R][T][kScaleStrip];
  alignas(32) uint16_t d16[kMin ? 1 : R][kScaleStrip] = {};
  alignas(32) uint32_t dm32[kMin ? R : 1][kScaleStrip] = {};
  for (int64_t b0 = 0; b0 < nb; b0 += kScaleStrip) {
    const int64_t count = nb - b0 < kScaleStrip ? nb - b0 : kScaleStrip;
    for (int r = 0; r < R; ++r) {
      if constexpr (kMin) {
        gather_strip_dm32<Block>(w + r * stride, b0, count, dm32[r]);
        for (int t = 0; t < T; ++t) {
          macc[r][t] = strip_scales_offsets(dm32[r], a[t].d + b0, a[t].sum + b0, count,
                                            scales[r][t], macc[r][t]);
        }
      } else {
        gather_strip_d16<Block>(w + r * stride, b0, count, d16[r]);
        for (int t = 0; t < T; ++t) strip_scales(d16[r], a[t].d + b0, count, scales[r][t]);
      }
    }
    for (int64_t k = 0; k < count; ++k) {
      const int64_t b = b0 + k;
      __m256i x[T], bias[T];
      for (int t = 0; t < T; ++t) {
        x[t] = _mm256_load_si256(reinterpret_cast<const __m256i*>(a[t].q + 32 * b));
        bias[t] = _mm256_zextsi128_si256(_mm_cvtsi32_si128(Kernel::kSumFactor * a[t].sum[b]));
      }
      for (int r = 0; r < R; ++r) {
        const Block* blk = reinterpret_cast<const Block*>(w + r * stride) + b;
        for (int t = 0; t < T; ++t) {
          const __m256 dot = _mm256_cvtepi32_ps(Kernel::block_dot(blk, x[t], bias[t]));
          acc[r][t] = _mm256_fmadd_ps(dot, _mm256_broadcast_ss(&scales[r][t][k]), acc[r][t]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      if constexpr (kMin) acc[r][t] = _mm256_add_ps(acc[r][t], macc[r][t]);
      out[t * out_stride + r] = hsum8(acc[r][t]);
    }
  }
}

// GemmFn (type_traits.h) on the tile above: 4 tokens at a time over pairs of rows; matmul() hands
// it a row tile sized for the cache, which every group of tokens reads again from there.
template <class Kernel>
void quant_gemm(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const std::byte* act,
                int64_t act_stride, int64_t nt, float* out, int64_t out_stride) {
  constexpr int kTokens = 4;
  for (int64_t t0 = 0; t0 < nt; t0 += kTokens) {
    const int64_t tc = nt - t0 < kTokens ? nt - t0 : kTokens;
    ActQ8Row a[kTokens];
    for (int64_t t = 0; t < tc; ++t) a[t] = act_q8_row(act + (t0 + t) * act_stride, n);
    float* o = out + t0 * out_stride;
    auto rows = [&](auto r_const, int64_t r) {
      constexpr int kR = decltype(r_const)::value;
      const std::byte* wr = w + r * stride;
      switch (tc) {
        case 4:
          quant_gemm_tile<Kernel, kR, 4>(n, wr, stride, a, o + r, out_stride);
          break;
        case 3:
          quant_gemm_tile<Kernel, kR, 3>(n, wr, stride, a, o + r, out_stride);
          break;
        case 2:
          quant_gemm_tile<Kernel, kR, 2>(n, wr, stride, a, o + r, out_stride);
          break;
        default:
          quant_gemm_tile<Kernel, kR, 1>(n, wr, stride, a, o + r, out_stride);
          break;
      }
    };
    int64_t r = 0;
    for (; r + 2 <= nr; r += 2) rows(std::integral_constant<int, 2>{}, r);
    if (r < nr) rows(std::integral_constant<int, 1>{}, r);
  }
}

}  // namespace
}  // namespace pacer::ops::avx2
