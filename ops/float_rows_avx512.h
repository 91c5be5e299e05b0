#pragma once
// The AVX-512 dot-rows loop shared by the F32, F16 and BF16 kernels: they differ only in how 16
// weights widen to fp32 (the Widen policy). Include ONLY from *_avx512.cpp files.
//
// Widen must provide, for a weight row `w` and element index j:
//   static __m512 load16(const std::byte* w, int64_t j);                  // w[j..j+16) as fp32
//   static __m512 load16_masked(const std::byte* w, int64_t j, __mmask16); // masked-off lanes 0
#include <cstddef>
#include <cstdint>

#include "ops/matmul_simd_avx512.h"

namespace pacer::ops::avx512 {
namespace {

// out[r] = dot(row r, x) for R rows at w + r*stride. Each x vector is loaded once for all R rows;
// two accumulators per row hide the FMA latency (R*2 independent chains).
template <class Widen, int R>
void float_rows_tile(int64_t n, const std::byte* w, int64_t stride, const float* x, float* out) {
  __m512 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    const __m512 x0 = _mm512_loadu_ps(x + j);
    const __m512 x1 = _mm512_loadu_ps(x + j + 16);
    for (int r = 0; r < R; ++r) {
      const std::byte* wr = w + r * stride;
      acc0[r] = _mm512_fmadd_ps(Widen::load16(wr, j), x0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(Widen::load16(wr, j + 16), x1, acc1[r]);
    }
  }
  for (; j < n; j += 16) {  // tail of 1..31 elements, masked (masked-off lanes never fault)
    const __mmask16 m = first_lanes16(n - j);
    const __m512 x0 = _mm512_maskz_loadu_ps(m, x + j);
    for (int r = 0; r < R; ++r) {
      acc0[r] = _mm512_fmadd_ps(Widen::load16_masked(w + r * stride, j, m), x0, acc0[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));
}

// out[0..nr) for nr rows, four at a time.
template <class Widen>
void float_dot_rows(int64_t n, const std::byte* w, int64_t stride, int64_t nr,
                    const std::byte* act, float* out) {
  const auto* x = reinterpret_cast<const float*>(act);
  int64_t r = 0;
  for (; r + 4 <= nr; r += 4) float_rows_tile<Widen, 4>(n, w + r * stride, stride, x, out + r);
  switch (nr - r) {
    case 3: float_rows_tile<Widen, 3>(n, w + r * stride, stride, x, out + r); break;
    case 2: float_rows_tile<Widen, 2>(n, w + r * stride, stride, x, out + r); break;
    case 1: float_rows_tile<Widen, 1>(n, w + r * stride, stride, x, out + r); break;
    default: break;
  }
}

}  // namespace
}  // namespace pacer::ops::avx512
