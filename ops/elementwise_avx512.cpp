// AVX-512 elementwise kernels: 16 floats per step, the tail through a lane mask (no scalar
// epilogue). exp-based activations pay most here: a scalar std::exp costs ~10x a vector lane.
// GCC 12 warns inside its own AVX-512 intrinsics (-Wmaybe-uninitialized on the
// _mm512_undefined_ps() they pass through, GCC bug 105593); silence it for that header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cmath>

#include "ops/elementwise_kernels.h"
#include "ops/softmax_math_avx512.h"

namespace pacer::ops {
namespace {

using avx512::exp_ps;

// Mask of the first `rem` lanes (rem in [0, 16]).
__mmask16 tail_mask(int64_t rem) {
  return rem >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << rem) - 1u);
}

void rmsnorm_avx512(const float* x, const float* w, float eps, float* out, int64_t n) {
  // Four accumulators hide the FMA latency.
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int k = 0; k < 4; ++k) {
      const __m512 v = _mm512_loadu_ps(x + i + 16 * k);
      acc[k] = _mm512_fmadd_ps(v, v, acc[k]);
    }
  }
  for (; i < n; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
    acc[0] = _mm512_fmadd_ps(v, v, acc[0]);
  }
  const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
  const float mean = _mm512_reduce_add_ps(sum) / static_cast<float>(n);
  const __m512 inv_rms = _mm512_set1_ps(1.0f / std::sqrt(mean + eps));
  for (i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 wv = _mm512_maskz_loadu_ps(m, w + i);
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_mul_ps(v, inv_rms), wv));
  }
}

void swiglu_avx512(const float* g, const float* u, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 gv = _mm512_maskz_loadu_ps(m, g + i);
    const __m512 uv = _mm512_maskz_loadu_ps(m, u + i);
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(avx512::silu_ps(gv), uv));
  }
}

void geglu_avx512(const float* g, const float* u, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 gv = _mm512_maskz_loadu_ps(m, g + i);
    const __m512 uv = _mm512_maskz_loadu_ps(m, u + i);
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(avx512::gelu_tanh_ps(gv), uv));
  }
}

void softmax_avx512(float* x, int64_t n) {
  if (n == 0) return;
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 16) {
    vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(vmax, tail_mask(n - i), x + i));
  }
  const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), max));
    sum = _mm512_mask_add_ps(sum, m, sum, e);
    _mm512_mask_storeu_ps(x + i, m, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
  }
}

void add_avx512(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(
        out + i, m,
        _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
  }
}

void scale_avx512(float* x, float s, int64_t n) {
  const __m512 sv = _mm512_set1_ps(s);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), sv));
  }
}

constexpr ElementwiseKernels kAvx512Kernels{rmsnorm_avx512, swiglu_avx512, geglu_avx512,
                                            softmax_avx512, add_avx512,    scale_avx512};

}  // namespace

const ElementwiseKernels& elementwise_kernels_avx512() noexcept {
  return kAvx512Kernels;
}

}  // namespace pacer::ops
