#pragma once
// The AVX-512 prefill GEMM of the F32, F16 and BF16 kernels with the tokens in the vector lanes,
// over ops/float_rows_simd.h's dot-product tiles (used below kLanesMinTokens). Include ONLY from
// float_rows_avx512.cpp and interleaved_float_avx512.cpp (which shares gemm_prepare), after
// ops/vec_avx512.h.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ops/float_rows_simd.h"
#include "ops/parallel.h"

namespace pacer::ops::float_rows {
namespace {

using avx512::VecF32;

// Prefill GEMM with the tokens in the vector lanes: acc(row i, tokens 16v..16v+15) +=
// w[i][k] (broadcast) * xT[k][16v..16v+15], for R rows x TV vectors of 16 tokens (R * TV = 24
// accumulators, independent FMA chains). Per k: TV loads of transposed activations, R
// broadcasts of the widened weights, R * TV FMAs, and nothing else on the FMA ports, where the
// dot-product tiles above widen every weight vector for 2 tokens and reduce at the end (F16 at
// ~1/3 of the FMA peak). The weights of R rows are widened to fp32 once per tile (panel); the
// activations of up to 64 tokens are transposed (xT, padded with zero tokens) once per matmul call
// and shared by its workers (gemm_prepare).
// Each (row, token) sums its products in k order in chunks of kLanesChunk (float_rows_simd.h),
// then the chunk sums: results agree with the GEMV within float reassociation, not bit for bit.

template <int R, int TV>
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
      for (; j + 16 <= n; j += 16) _mm512_storeu_ps(&panel[i * n + j], Widen::load(wr, j));
      if (j < n) {
        _mm512_mask_storeu_ps(&panel[i * n + j], VecF32::first(n - j),
                              Widen::load_first(wr, j, n - j));
      }
    }
    lanes_tile<R, TV>(n, panel.data(), xt, acc);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t t = 0; t < tokens; ++t) out[t * out_stride + r0 + i] = acc[(i * TV) * 16 + t];
    }
  }
}

// The activations transposed for the lanes GEMM (GemmPrepareFn): blocks of up to 64 tokens, block
// b at float offset 64 * b * n (a block of `tokens` holds n rows of tv = ceil(tokens / 16)
// vectors of 16 tokens, zero-padded). act_stride is in bytes (a multiple of 64). Below
// kLanesMinTokens the GEMM reads the activations as they are: 0 bytes. 16 tokens x 16 columns at
// a time, transposed in registers (one float at a time it took ~2.3 ns per element: TinyLlama
// BF16 pp64 spent 46 ms of a 1.6 s prefill on it on one Sapphire Rapids core). Share `part` of
// `parts` is a range of 16-column chunks, in every block.
inline int64_t gemm_prepare(int64_t n, const std::byte* act, int64_t act_stride, int64_t nt,
                            std::byte* dst, int64_t part, int64_t parts) {
  if (nt < kLanesMinTokens) return 0;
  const int64_t bytes = ((nt + 63) / 64) * 64 * n * static_cast<int64_t>(sizeof(float));
  if (dst == nullptr) return bytes;
  const auto [k_begin, k_end] =
      static_chunk(n, 16, static_cast<int>(parts), static_cast<int>(part));
  const int64_t x_stride = act_stride / static_cast<int64_t>(sizeof(float));
  const auto* x = reinterpret_cast<const float*>(act);
  for (int64_t t0 = 0; t0 < nt; t0 += 64) {
    const int64_t tokens = std::min<int64_t>(64, nt - t0);
    const int64_t tv = (tokens + 15) / 16;
    float* xt = reinterpret_cast<float*>(dst) + t0 * n;
    for (int64_t v = 0; v < tv; ++v) {
      const int64_t rows = std::min<int64_t>(16, tokens - 16 * v);  // the rest are zero tokens
      const float* xv = x + (t0 + 16 * v) * x_stride;
      for (int64_t k0 = k_begin; k0 < k_end; k0 += 16) {
        const int64_t cols = std::min<int64_t>(16, n - k0);
        const __mmask16 m = VecF32::first(cols);
        __m512 r[16], col[16];
        for (int64_t i = 0; i < 16; ++i) {
          r[i] = i < rows ? _mm512_maskz_loadu_ps(m, xv + i * x_stride + k0) : _mm512_setzero_ps();
        }
        VecF32::transpose(r, col);
        float* o = xt + k0 * tv * 16 + v * 16;
        for (int64_t c = 0; c < cols; ++c) _mm512_store_ps(o + c * tv * 16, col[c]);
      }
    }
  }
  return bytes;
}

// The GEMM over the transposed blocks above (xt, 64-byte aligned).
template <class Widen>
void gemm_lanes(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const float* xt,
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

// The GemmPreparedFn entry: `prepared` is gemm_prepare's copy (null below
// kLanesMinTokens, where the dot-product tiles read act directly).
template <class Widen>
void gemm_prepared(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const std::byte* act,
                   int64_t act_stride, const std::byte* prepared, int64_t nt, float* out,
                   int64_t out_stride) {
  if (nt >= kLanesMinTokens) {
    gemm_lanes<Widen>(n, w, stride, nr, reinterpret_cast<const float*>(prepared), nt, out,
                      out_stride);
  } else {
    const auto* x = reinterpret_cast<const float*>(act);
    const int64_t x_stride = act_stride / static_cast<int64_t>(sizeof(float));
    gemm<VecF32, Widen>(n, w, stride, nr, x, x_stride, nt, out, out_stride);
  }
}

// The GemmFn entry (a call on its own): transposes into its own buffer, then as above.
template <class Widen>
void gemm_packed(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const std::byte* act,
                 int64_t act_stride, int64_t nt, float* out, int64_t out_stride) {
  const int64_t bytes = gemm_prepare(n, act, act_stride, nt, nullptr, 0, 1);
  std::vector<float> buf(static_cast<size_t>(bytes / 4 + 16));
  std::byte* xt = reinterpret_cast<std::byte*>(
      buf.data() + (16 - reinterpret_cast<uintptr_t>(buf.data()) % 64 / 4) % 16);
  if (bytes > 0) gemm_prepare(n, act, act_stride, nt, xt, 0, 1);
  gemm_prepared<Widen>(n, w, stride, nr, act, act_stride, bytes > 0 ? xt : nullptr, nt, out,
                       out_stride);
}

}  // namespace
}  // namespace pacer::ops::float_rows
