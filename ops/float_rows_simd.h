#pragma once
// The dot-rows loop shared by the F32, F16 and BF16 kernels, written once over a vector wrapper V
// (ops/vec_avx2.h: 8 lanes, 16 registers; ops/vec_avx512.h: 16 lanes, 32 registers) and a Widen
// policy (ops/widen_simd.h: how kLanes weights become fp32). Instantiated by
// float_rows_avx2.cpp and float_rows_avx512.cpp; include ONLY from there, after V's header.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ops/gemv_streams.h"
#include "ops/isa.h"
#include "ops/widen_simd.h"

namespace pacer::ops::float_rows {
namespace {  // internal to each tier's translation unit, which lets GCC inline across the helpers

// The GEMMs with the tokens in the vector lanes (float_rows_avx512.h; the interleaved F16/BF16
// ones of interleaved_float_avx2.cpp and interleaved_float_avx512.cpp): from kLanesMinTokens
// tokens on, over activations transposed once per matmul call, each (row, token) summing its
// products in k order in chunks of kLanesChunk, then the chunk sums.
constexpr int64_t kLanesMinTokens = 8;
constexpr int64_t kLanesChunk = 128;

// Rows and tokens per GEMM tile: each widened weight vector serves the T tokens, each activation
// vector the R rows. The accumulators must leave registers for the loads: on AVX-512, 2 chains
// per (row, token) (to hide the FMA latency in a 4-row GEMV) x 4 rows x 2 tokens = 16 of 32; on
// AVX2, one chain per (row, token) x 3 rows x 4 tokens = 12 of 16 (the activations as FMA
// operands). One chain on AVX2 widens each weight vector once for 4 tokens instead of 3 at 2 x 3
// with two (F16 GEMM 1.1-1.5x at 1 thread); its 4-row GEMV, memory-bound, reads as fast.
template <class V>
constexpr int kTokensPerTile = V::kRegisters >= 32 ? 2 : 4;
template <class V>
constexpr int kRowsPerTile = V::kRegisters >= 32 ? 4 : 3;
template <class V>
constexpr bool kTwoChains = V::kRegisters >= 32;
// Row tiles per block of the 16-register GEMM (gemm): 24 rows, 96 KiB of F16 weights at 2048
// columns and 264 KiB at 5632, which stay in L2 while every kTokensPerTile tokens pass over them.
// On the Zen 4 guest below, blocks of 4 and of 16 tiles ran alike.
constexpr int64_t kBlockTiles = 8;

// out[t * out_stride + r * out_row_step] = dot(row r, token t) for R rows (row r at
// w + r * row_step) and T tokens at x + t * x_stride. Each x vector is loaded once for all R rows
// and each widened weight vector once for all T tokens; two accumulators per (row, token) hide
// the FMA latency where registers allow (kTwoChains); the tail (n % 2kLanes) is masked. Each (row,
// token) pair goes through the same operations whatever R and T are, so the GEMM is bit-identical
// to the GEMV. Every weight cache line also prefetches the line `prefetch_offset` bytes further on
// (0: none; see q4_0_avx512.cpp).
template <class V, class Widen, int R, int T>
void rows_tile(int64_t n, const std::byte* w, int64_t row_step, int64_t prefetch_offset,
               const float* x, int64_t x_stride, float* out, int64_t out_stride,
               int64_t out_row_step) {
  constexpr int64_t L = V::kLanes;
  constexpr int64_t kStepBytes = 2 * L * Widen::kBytes;  // weight bytes per row per step
  using Reg = typename V::Reg;
  Reg acc0[R][T], acc1[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc0[r][t] = acc1[r][t] = V::zero();
  }
  int64_t j = 0;
  for (; j + 2 * L <= n; j += 2 * L) {
    Reg x0[T], x1[T];
    for (int t = 0; t < T; ++t) {
      x0[t] = V::load(x + t * x_stride + j);
      x1[t] = V::load(x + t * x_stride + j + L);
    }
    for (int r = 0; r < R; ++r) {
      const std::byte* wr = w + r * row_step;
      if (prefetch_offset != 0) {
        const char* line = reinterpret_cast<const char*>(wr + j * Widen::kBytes) + prefetch_offset;
        if constexpr (kStepBytes >= 64) {
          for (int64_t b = 0; b < kStepBytes; b += 64) _mm_prefetch(line + b, _MM_HINT_T0);
        } else if ((j * Widen::kBytes) % 64 == 0) {  // once per cache line
          _mm_prefetch(line, _MM_HINT_T0);
        }
      }
      const Reg w0 = Widen::load(wr, j), w1 = Widen::load(wr, j + L);
      for (int t = 0; t < T; ++t) {
        acc0[r][t] = V::fmadd(w0, x0[t], acc0[r][t]);
        if constexpr (kTwoChains<V>) {
          acc1[r][t] = V::fmadd(w1, x1[t], acc1[r][t]);
        } else {
          acc0[r][t] = V::fmadd(w1, x1[t], acc0[r][t]);
        }
      }
    }
  }
  for (; j < n; j += L) {  // tail of 1..2kLanes-1 elements
    const int64_t rem = n - j < L ? n - j : L;
    for (int r = 0; r < R; ++r) {
      const Reg w0 = Widen::load_first(w + r * row_step, j, rem);
      for (int t = 0; t < T; ++t) {
        acc0[r][t] = V::fmadd(w0, V::load_first(x + t * x_stride + j, rem), acc0[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      out[t * out_stride + r * out_row_step] = V::hsum(V::add(acc0[r][t], acc1[r][t]));
    }
  }
}

// rows_tile for 16 registers (AVX2) and T > 1 tokens: the R widened weight vectors of a step
// stay in registers and each token's x vector is loaded once (R x T + R + 1 = 16 at 3 x 4),
// where rows_tile's order (all T x vectors first) left GCC to reload x as an FMA operand for
// every row: R x T loads a step instead of R + T. kLanes at a time, then the last n % kLanes
// masked: per (row, token) the FMAs of rows_tile in its order, so the GEMM stays bit-identical
// to the GEMV. Its own function with nothing else in it: with rows_tile's other loops in the same
// body, GCC 12 stored the 12 accumulators to the stack on every step.
template <class V, class Widen, int R, int T>
[[gnu::noinline]] void rows_tile_16(int64_t n, const std::byte* w, int64_t row_step, const float* x,
                                    int64_t x_stride, float* out, int64_t out_stride) {
  using Reg = typename V::Reg;
  constexpr int64_t L = V::kLanes;
  Reg a[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) a[r][t] = V::zero();
  }
  int64_t j = 0;
  for (; j + L <= n; j += L) {
    Reg wv[R];
    for (int r = 0; r < R; ++r) wv[r] = Widen::load(w + r * row_step, j);
    for (int t = 0; t < T; ++t) {
      const Reg xv = V::load(x + t * x_stride + j);
      for (int r = 0; r < R; ++r) a[r][t] = V::fmadd(wv[r], xv, a[r][t]);
    }
  }
  if (j < n) {
    for (int r = 0; r < R; ++r) {
      const Reg wv = Widen::load_first(w + r * row_step, j, n - j);
      for (int t = 0; t < T; ++t) {
        a[r][t] = V::fmadd(wv, V::load_first(x + t * x_stride + j, n - j), a[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) out[t * out_stride + r] = V::hsum(V::add(a[r][t], V::zero()));
  }
}

// Rows [0, nr) x tokens [0, nt) (x_stride floats between tokens, out_stride between output
// rows): row tiles of kRowsPerTile (then fewer), each reused by every token before the next tile
// (AVX-512), or in blocks of kBlockTiles tiles that every kTokensPerTile tokens pass over in turn
// (AVX2, whose callers pass their whole row range: TypeTraits::gemm_whole_range).
template <class V, class Widen>
void gemm(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const float* x,
          int64_t x_stride, int64_t nt, float* out, int64_t out_stride) {
  constexpr int T = kTokensPerTile<V>;
  constexpr int kRows = kRowsPerTile<V>;
  auto tokens = [&](auto rows_tag, int64_t r) {
    constexpr int kR = decltype(rows_tag)::value;
    int64_t t = 0;
    if constexpr (T > 1) {
      for (; t + T <= nt; t += T) {
        rows_tile<V, Widen, kR, T>(n, w + r * stride, stride, kR * stride, x + t * x_stride,
                                   x_stride, out + t * out_stride + r, out_stride, 1);
      }
    }
    for (; t < nt; ++t) {
      rows_tile<V, Widen, kR, 1>(n, w + r * stride, stride, kR * stride, x + t * x_stride, x_stride,
                                 out + t * out_stride + r, out_stride, 1);
    }
  };
  int64_t r = 0;
  if constexpr (!kTwoChains<V> && T > 1) {
    // Blocks of kBlockTiles row tiles: each T tokens' x serves every tile of the block (from L1
    // and L2) before the next T tokens, where tile by tile over all tokens read them from L2 or
    // L3 for every 12 FMAs (a row of 64 tokens of TinyLlama's ffn_down is 1.4 MiB). With
    // rows_tile_16, and the whole row range per call (matmul had cut it into calls of 8 rows, a
    // quarter of them in tiles of 2), on a Zen 4 guest without AVX-512 (2.87 GHz, 92 GFLOP/s of
    // FMA peak on one core), BM_gemm f16_avx2 at 1 thread, 3 alternating runs: 5632x2048 x 128
    // tokens 47-50 -> 80-81 GFLOP/s, 896x4864 x 64 tokens 48-50 -> 79-80; `pacer bench` TinyLlama
    // F16 pp64, 2 alternating rounds: 1 thread 24.5-25.8 -> 39.0-39.5 t/s, 2 threads 48.7-49.9
    // -> 75.4-78.1 (llama.cpp c392e50 on the same file: 38.5-38.7 and 71-78).
    for (; r + kRows <= nr; r += kBlockTiles * kRows) {
      const int64_t block_end =
          nr - r < kBlockTiles * kRows ? r + (nr - r) / kRows * kRows : r + kBlockTiles * kRows;
      int64_t t = 0;
      for (; t + T <= nt; t += T) {
        for (int64_t rt = r; rt < block_end; rt += kRows) {
          rows_tile_16<V, Widen, kRows, T>(n, w + rt * stride, stride, x + t * x_stride, x_stride,
                                           out + t * out_stride + rt, out_stride);
        }
      }
      for (; t < nt; ++t) {
        for (int64_t rt = r; rt < block_end; rt += kRows) {
          rows_tile<V, Widen, kRows, 1>(n, w + rt * stride, stride, kRows * stride,
                                        x + t * x_stride, x_stride, out + t * out_stride + rt,
                                        out_stride, 1);
        }
      }
      if (block_end < r + kBlockTiles * kRows) {
        r = block_end;
        break;
      }
    }
  } else {
    for (; r + kRows <= nr; r += kRows) tokens(std::integral_constant<int, kRows>{}, r);
  }
  switch (nr - r) {
    case 3:
      if constexpr (kRows > 3) tokens(std::integral_constant<int, 3>{}, r);
      break;
    case 2:
      if constexpr (kRows > 2) tokens(std::integral_constant<int, 2>{}, r);
      break;
    case 1:
      tokens(std::integral_constant<int, 1>{}, r);
      break;
    default:
      break;
  }
}

// out[0..nr) for nr rows and one token (the GEMV): four far-apart row streams per tile (see
// gemv_streams.h), the rows left over in tiles of neighbours.
template <class V, class Widen>
void dot_rows(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const std::byte* act,
              float* out) {
  const auto* x = reinterpret_cast<const float*>(act);
  const int64_t prefetch = gemv_software_prefetch() ? kGemvStreamPrefetchRows * stride : 0;
  const int64_t r = gemv_stream_tiles(nr, 4, [&](int64_t j, int64_t per_stream) {
    rows_tile<V, Widen, 4, 1>(n, w + j * stride, per_stream * stride, prefetch, x, 0, out + j, 0,
                              per_stream);
  });
  if (r < nr) gemm<V, Widen>(n, w + r * stride, stride, nr - r, x, 0, 1, out + r, 0);
}

// One row (the DotFn entry).
template <class V, class Widen>
float dot(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  dot_rows<V, Widen>(n, w_row, 0, 1, act, &out);
  return out;
}

}  // namespace
}  // namespace pacer::ops::float_rows
