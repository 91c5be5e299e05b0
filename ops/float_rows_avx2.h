#pragma once
// The AVX2 dot-rows loop shared by the F32, F16 and BF16 kernels: they differ only in how 8
// weights widen to fp32 (the Widen policy). Include ONLY from *_avx2.cpp files.
//
// Widen must provide kBytes (bytes per weight) and, for a weight row `w` and element index j:
//   static __m256 load8(const std::byte* w, int64_t j);  // w[j..j+8) as fp32
//   static float load1(const std::byte* w, int64_t j);   // w[j] as fp32 (the < 8 tail)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "ops/isa.h"
#include "ops/matmul_simd_avx2.h"

namespace pacer::ops::avx2 {
namespace {

// out[r] = dot(row r, x) for R rows at w + r*stride; x loaded once per R rows, two accumulators
// per row. The tail (n % 16) is summed in scalar, after the vector part. Each step prefetches
// the same bytes of the next tile's rows (R * stride further on; see q4_0_avx512.cpp).
// Row r is at w + r * row_step and its result goes to out[r * out_row_step]; each cache line
// also prefetches `prefetch_offset` bytes further on.
template <class Widen, int R>
void float_rows_tile(int64_t n, const std::byte* w, int64_t row_step, int64_t prefetch_offset,
                     const float* x, float* out, int64_t out_row_step) {
  const int64_t stride = row_step;
  __m256 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m256 x0 = _mm256_loadu_ps(x + j);
    const __m256 x1 = _mm256_loadu_ps(x + j + 8);
    for (int r = 0; r < R; ++r) {
      const std::byte* wr = w + r * stride;
      if (prefetch_offset != 0 && (j * Widen::kBytes) % 64 == 0) {  // once per cache line
        _mm_prefetch(reinterpret_cast<const char*>(wr + j * Widen::kBytes) + prefetch_offset,
                     _MM_HINT_T0);
      }
      acc0[r] = _mm256_fmadd_ps(Widen::load8(wr, j), x0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(Widen::load8(wr, j + 8), x1, acc1[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float s = hsum8(_mm256_add_ps(acc0[r], acc1[r]));
    for (int64_t k = j; k < n; ++k) s += Widen::load1(w + r * stride, k) * x[k];
    out[r * out_row_step] = s;
  }
}

// out[0..nr) for nr rows, four at a time.
template <class Widen>
void float_dot_rows(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const std::byte* act,
                    float* out) {
  const auto* x = reinterpret_cast<const float*>(act);
  const int64_t prefetch = gemv_software_prefetch() ? kGemvStreamPrefetchRows * stride : 0;
  int64_t r = 0;
  r = gemv_stream_tiles(nr, 4, [&](int64_t j, int64_t per_stream) {
    float_rows_tile<Widen, 4>(n, w + j * stride, per_stream * stride, prefetch, x, out + j,
                              per_stream);
  });
  for (; r + 4 <= nr; r += 4) {
    float_rows_tile<Widen, 4>(n, w + r * stride, stride, 4 * stride, x, out + r, 1);
  }
  switch (nr - r) {
    case 3:
      float_rows_tile<Widen, 3>(n, w + r * stride, stride, 3 * stride, x, out + r, 1);
      break;
    case 2:
      float_rows_tile<Widen, 2>(n, w + r * stride, stride, 2 * stride, x, out + r, 1);
      break;
    case 1:
      float_rows_tile<Widen, 1>(n, w + r * stride, stride, stride, x, out + r, 1);
      break;
    default:
      break;
  }
}

}  // namespace
}  // namespace pacer::ops::avx2
