#pragma once
// The AVX-512 dot-rows loop shared by the F32, F16 and BF16 kernels: they differ only in how 16
// weights widen to fp32 (the Widen policy). Include ONLY from *_avx512.cpp files.
//
// Widen must provide kBytes (bytes per weight) and, for a weight row `w` and element index j:
//   static __m512 load16(const std::byte* w, int64_t j);                  // w[j..j+16) as fp32
//   static __m512 load16_masked(const std::byte* w, int64_t j, __mmask16); // masked-off lanes 0
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "ops/isa.h"
#include "ops/matmul_simd_avx512.h"

namespace pacer::ops::avx512 {
namespace {

// Tokens per GEMM tile: each widened weight vector serves 2 tokens (4 rows x 2 tokens x 2
// accumulators = 16 zmm).
constexpr int kFloatTokensPerTile = 2;

// out[t * out_stride + r] = dot(row r, token t) for R rows at w + r*stride and T tokens at
// x + t*x_stride. Each x vector is loaded once for all R rows and each widened weight vector
// once for all T tokens; two accumulators per (row, token) hide the FMA latency. Each (row,
// token) pair goes through the same operations whatever R and T are, so the GEMM is
// bit-identical to the GEMV (the GEMM of 8 tokens or more uses float_gemm_lanes below). Every cache
// line also prefetches the same line of the next tile's rows (R * stride further on; see
// q4_0_avx512.cpp).
//
// Row r is at w + r * row_step and its output at out[t * out_stride + r * out_row_step]: the GEMM
// passes neighbouring rows (row_step = stride, out_row_step = 1), the GEMV rows from far-apart
// streams (see float_dot_rows). Each weight line also prefetches the line `prefetch_offset`
// bytes further on.
template <class Widen, int R, int T>
void float_rows_tile(int64_t n, const std::byte* w, int64_t row_step, int64_t prefetch_offset,
                     const float* x, int64_t x_stride, float* out, int64_t out_stride,
                     int64_t out_row_step) {
  __m512 acc0[R][T], acc1[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc0[r][t] = acc1[r][t] = _mm512_setzero_ps();
  }
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    __m512 x0[T], x1[T];
    for (int t = 0; t < T; ++t) {
      x0[t] = _mm512_loadu_ps(x + t * x_stride + j);
      x1[t] = _mm512_loadu_ps(x + t * x_stride + j + 16);
    }
    for (int r = 0; r < R; ++r) {
      const std::byte* wr = w + r * row_step;
      if (prefetch_offset != 0) {
        for (int64_t line = 0; line < 32 * Widen::kBytes; line += 64) {
          _mm_prefetch(
              reinterpret_cast<const char*>(wr + j * Widen::kBytes + line) + prefetch_offset,
              _MM_HINT_T0);
        }
      }
      const __m512 w0 = Widen::load16(wr, j), w1 = Widen::load16(wr, j + 16);
      for (int t = 0; t < T; ++t) {
        acc0[r][t] = _mm512_fmadd_ps(w0, x0[t], acc0[r][t]);
        acc1[r][t] = _mm512_fmadd_ps(w1, x1[t], acc1[r][t]);
      }
    }
  }
  for (; j < n; j += 16) {  // tail of 1..31 elements, masked (masked-off lanes never fault)
    const __mmask16 m = first_lanes16(n - j);
    for (int r = 0; r < R; ++r) {
      const __m512 w0 = Widen::load16_masked(w + r * row_step, j, m);
      for (int t = 0; t < T; ++t) {
        acc0[r][t] =
            _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m, x + t * x_stride + j), acc0[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      out[t * out_stride + r * out_row_step] =
          _mm512_reduce_add_ps(_mm512_add_ps(acc0[r][t], acc1[r][t]));
    }
  }
}

// Rows [0, nr) x tokens [0, nt) (x_stride floats between tokens, out_stride between output
// rows): row tiles of four (then 3, 2 or 1), each reused by every token before the next tile.
template <class Widen>
void float_gemm(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const float* x,
                int64_t x_stride, int64_t nt, float* out, int64_t out_stride) {
  auto tokens = [&](auto rows_tag, int64_t r) {
    constexpr int kR = decltype(rows_tag)::value;
    int64_t t = 0;
    for (; t + kFloatTokensPerTile <= nt; t += kFloatTokensPerTile) {
      float_rows_tile<Widen, kR, kFloatTokensPerTile>(n, w + r * stride, stride, kR * stride,
                                                      x + t * x_stride, x_stride,
                                                      out + t * out_stride + r, out_stride, 1);
    }
    for (; t < nt; ++t) {
      float_rows_tile<Widen, kR, 1>(n, w + r * stride, stride, kR * stride, x + t * x_stride,
                                    x_stride, out + t * out_stride + r, out_stride, 1);
    }
  };
  int64_t r = 0;
  for (; r + 4 <= nr; r += 4) tokens(std::integral_constant<int, 4>{}, r);
  switch (nr - r) {
    case 3:
      tokens(std::integral_constant<int, 3>{}, r);
      break;
    case 2:
      tokens(std::integral_constant<int, 2>{}, r);
      break;
    case 1:
      tokens(std::integral_constant<int, 1>{}, r);
      break;
    default:
      break;
  }
}

// out[0..nr) for nr rows and one token (the GEMV).
template <class Widen>
void float_dot_rows(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const std::byte* act,
                    float* out) {
  const auto* x = reinterpret_cast<const float*>(act);
  const int64_t prefetch = gemv_software_prefetch() ? kGemvStreamPrefetchRows * stride : 0;
  int64_t r = 0;
  r = gemv_stream_tiles(nr, 4, [&](int64_t j, int64_t per_stream) {
    float_rows_tile<Widen, 4, 1>(n, w + j * stride, per_stream * stride, prefetch, x, 0, out + j, 0,
                                 per_stream);
  });
  if (r < nr) float_gemm<Widen>(n, w + r * stride, stride, nr - r, x, 0, 1, out + r, 0);
}

// Prefill GEMM with the tokens in the vector lanes: acc(row i, tokens 16v..16v+15) +=
// w[i][k] (broadcast) * xT[k][16v..16v+15], for R rows x TV vectors of 16 tokens (R * TV = 24
// accumulators, independent FMA chains). Per k: TV loads of transposed activations, R
// broadcasts of the widened weights, R * TV FMAs, and nothing else on the FMA ports, where the
// dot-product tiles above widen every weight vector for 2 tokens and reduce at the end (F16 at
// ~1/3 of the FMA peak). The weights of R rows are widened to fp32 once per tile (panel); the
// activations of up to 64 tokens are transposed (xT, padded with zero tokens) once per matmul call
// and shared by its workers (float_gemm_prepare).
// Each (row, token) sums its products in k order in chunks of kLanesChunk, then the chunk sums:
// results agree with the GEMV within float reassociation, not bit for bit.
constexpr int64_t kLanesMinTokens = 8;
constexpr int64_t kLanesChunk = 128;

template <class Widen, int R, int TV>
void lanes_tile(int64_t n, const float* panel, const float* xt, float* acc_out) {
  for (int i = 0; i < R * TV; ++i) _mm512_store_ps(acc_out + 16 * i, _mm512_setzero_ps());
  // Chunks of kLanesChunk k: one sequential chain over all of k would round ~n times in a row
  // (the GEMV's 32 partial sums round ~n/32 times); chunk sums added to a running total keep
  // it near kLanesChunk + n / kLanesChunk.
  for (int64_t k0 = 0; k0 < n; k0 += kLanesChunk) {
    const int64_t k1 = std::min(n, k0 + kLanesChunk);
    __m512 acc[R][TV];
    for (int i = 0; i < R; ++i) {
      for (int v = 0; v < TV; ++v) acc[i][v] = _mm512_setzero_ps();
    }
    for (int64_t k = k0; k < k1; ++k) {
      __m512 xv[TV];
      for (int v = 0; v < TV; ++v) xv[v] = _mm512_load_ps(xt + (k * TV + v) * 16);
      for (int i = 0; i < R; ++i) {
        const __m512 wk = _mm512_set1_ps(panel[i * n + k]);
        for (int v = 0; v < TV; ++v) acc[i][v] = _mm512_fmadd_ps(wk, xv[v], acc[i][v]);
      }
    }
    for (int i = 0; i < R; ++i) {  // the running totals live in memory: registers are full
      for (int v = 0; v < TV; ++v) {
        float* o = acc_out + (i * TV + v) * 16;
        _mm512_store_ps(o, _mm512_add_ps(_mm512_load_ps(o), acc[i][v]));
      }
    }
  }
}

template <class Widen, int TV>
void lanes_gemm_block(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const float* xt,
                      int64_t tokens, float* out, int64_t out_stride, std::vector<float>& panel) {
  constexpr int R = TV == 1 ? 12 : 24 / TV;
  panel.resize(static_cast<size_t>(R * n));
  alignas(64) float acc[R * TV * 16];
  for (int64_t r0 = 0; r0 < nr; r0 += R) {
    const int64_t rows = std::min<int64_t>(R, nr - r0);
    for (int i = 0; i < R; ++i) {  // rows past nr repeat the last one (outputs dropped)
      const std::byte* wr = w + std::min<int64_t>(r0 + i, nr - 1) * stride;
      int64_t j = 0;
      for (; j + 16 <= n; j += 16) _mm512_storeu_ps(&panel[i * n + j], Widen::load16(wr, j));
      if (j < n) {
        const __mmask16 m = first_lanes16(n - j);
        _mm512_mask_storeu_ps(&panel[i * n + j], m, Widen::load16_masked(wr, j, m));
      }
    }
    lanes_tile<Widen, R, TV>(n, panel.data(), xt, acc);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t t = 0; t < tokens; ++t) out[t * out_stride + r0 + i] = acc[(i * TV) * 16 + t];
    }
  }
}

// The activations transposed for the lanes GEMM (GemmPrepareFn): blocks of up to 64 tokens, block
// b at float offset 64 * b * n (a block of `tokens` holds n rows of tv = ceil(tokens / 16)
// vectors of 16 tokens, zero-padded). act_stride is in bytes (a multiple of 64). Below
// kLanesMinTokens the GEMM reads the activations as they are: 0 bytes.
inline int64_t float_gemm_prepare(int64_t n, const std::byte* act, int64_t act_stride, int64_t nt,
                                  std::byte* dst) {
  if (nt < kLanesMinTokens) return 0;
  const int64_t bytes = ((nt + 63) / 64) * 64 * n * static_cast<int64_t>(sizeof(float));
  if (dst == nullptr) return bytes;
  const int64_t x_stride = act_stride / static_cast<int64_t>(sizeof(float));
  const auto* x = reinterpret_cast<const float*>(act);
  for (int64_t t0 = 0; t0 < nt; t0 += 64) {
    const int64_t tokens = std::min<int64_t>(64, nt - t0);
    const int64_t tv = (tokens + 15) / 16;
    float* xt = reinterpret_cast<float*>(dst) + t0 * n;
    std::fill(xt, xt + n * tv * 16, 0.0f);
    for (int64_t t = 0; t < tokens; ++t) {
      const float* xr = x + (t0 + t) * x_stride;
      for (int64_t k = 0; k < n; ++k) xt[k * tv * 16 + t] = xr[k];
    }
  }
  return bytes;
}

// The GEMM over the transposed blocks above (xt, 64-byte aligned).
template <class Widen>
void float_gemm_lanes(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const float* xt,
                      int64_t nt, float* out, int64_t out_stride) {
  std::vector<float> panel;
  for (int64_t t0 = 0; t0 < nt; t0 += 64) {
    const int64_t tokens = std::min<int64_t>(64, nt - t0);
    const int tv = static_cast<int>((tokens + 15) / 16);
    const float* xb = xt + t0 * n;
    float* o = out + t0 * out_stride;
    switch (tv) {
      case 1:
        lanes_gemm_block<Widen, 1>(n, w, stride, nr, xb, tokens, o, out_stride, panel);
        break;
      case 2:
        lanes_gemm_block<Widen, 2>(n, w, stride, nr, xb, tokens, o, out_stride, panel);
        break;
      case 3:
        lanes_gemm_block<Widen, 3>(n, w, stride, nr, xb, tokens, o, out_stride, panel);
        break;
      default:
        lanes_gemm_block<Widen, 4>(n, w, stride, nr, xb, tokens, o, out_stride, panel);
        break;
    }
  }
}

// The GemmPreparedFn entry: `prepared` is float_gemm_prepare's copy (null below
// kLanesMinTokens, where the dot-product tiles read act directly).
template <class Widen>
void float_gemm_prepared(int64_t n, const std::byte* w, int64_t stride, int64_t nr,
                         const std::byte* act, int64_t act_stride, const std::byte* prepared,
                         int64_t nt, float* out, int64_t out_stride) {
  if (nt >= kLanesMinTokens) {
    float_gemm_lanes<Widen>(n, w, stride, nr, reinterpret_cast<const float*>(prepared), nt, out,
                            out_stride);
  } else {
    const auto* x = reinterpret_cast<const float*>(act);
    const int64_t x_stride = act_stride / static_cast<int64_t>(sizeof(float));
    float_gemm<Widen>(n, w, stride, nr, x, x_stride, nt, out, out_stride);
  }
}

// The GemmFn entry (a call on its own): transposes into its own buffer, then as above.
template <class Widen>
void float_gemm_packed(int64_t n, const std::byte* w, int64_t stride, int64_t nr,
                       const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                       int64_t out_stride) {
  const int64_t bytes = float_gemm_prepare(n, act, act_stride, nt, nullptr);
  std::vector<float> buf(static_cast<size_t>(bytes / 4 + 16));
  std::byte* xt = reinterpret_cast<std::byte*>(
      buf.data() + (16 - reinterpret_cast<uintptr_t>(buf.data()) % 64 / 4) % 16);
  if (bytes > 0) float_gemm_prepare(n, act, act_stride, nt, xt);
  float_gemm_prepared<Widen>(n, w, stride, nr, act, act_stride, bytes > 0 ? xt : nullptr, nt, out,
                             out_stride);
}

}  // namespace
}  // namespace pacer::ops::avx512
