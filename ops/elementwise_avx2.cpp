// AVX2 elementwise kernels: 8 floats per step; the tail goes through maskload/maskstore so it
// runs the same vector math as the body (no scalar epilogue with different rounding).
#include <immintrin.h>

#include <cmath>

#include "ops/elementwise_kernels.h"
#include "ops/softmax_math_avx2.h"

namespace pacer::ops {
namespace {

using avx2::exp_ps;

// Lane mask (all-ones lanes) for the first `rem` lanes, rem in [0, 8].
__m256i tail_mask(int64_t rem) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(rem < 8 ? rem : 8)), lane);
}

void rmsnorm_avx2(const float* x, const float* w, float eps, float* out, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      const __m256 v = _mm256_loadu_ps(x + i + 8 * k);
      acc[k] = _mm256_fmadd_ps(v, v, acc[k]);
    }
  }
  for (; i < n; i += 8) {
    const __m256 v = _mm256_maskload_ps(x + i, tail_mask(n - i));
    acc[0] = _mm256_fmadd_ps(v, v, acc[0]);
  }
  const __m256 sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
  const float mean = avx2::hsum_ps(sum) / static_cast<float>(n);
  const __m256 inv_rms = _mm256_set1_ps(1.0f / std::sqrt(mean + eps));
  for (i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    const __m256 v = _mm256_maskload_ps(x + i, m);
    const __m256 wv = _mm256_maskload_ps(w + i, m);
    _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(_mm256_mul_ps(v, inv_rms), wv));
  }
}

void swiglu_avx2(const float* g, const float* u, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    const __m256 gv = _mm256_maskload_ps(g + i, m);
    const __m256 uv = _mm256_maskload_ps(u + i, m);
    _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(avx2::silu_ps(gv), uv));
  }
}

void geglu_avx2(const float* g, const float* u, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    const __m256 gv = _mm256_maskload_ps(g + i, m);
    const __m256 uv = _mm256_maskload_ps(u + i, m);
    _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(avx2::gelu_tanh_ps(gv), uv));
  }
}

void softmax_avx2(float* x, int64_t n) {
  if (n == 0) return;
  const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
  __m256 vmax = neg_inf;
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    const __m256 v =
        _mm256_blendv_ps(neg_inf, _mm256_maskload_ps(x + i, m), _mm256_castsi256_ps(m));
    vmax = _mm256_max_ps(vmax, v);
  }
  const __m256 max = _mm256_set1_ps(avx2::hmax_ps(vmax));
  __m256 sum = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), max));
    sum = _mm256_add_ps(sum, _mm256_and_ps(e, _mm256_castsi256_ps(m)));
    _mm256_maskstore_ps(x + i, m, e);
  }
  const __m256 inv = _mm256_set1_ps(1.0f / avx2::hsum_ps(sum));
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(x + i, m, _mm256_mul_ps(_mm256_maskload_ps(x + i, m), inv));
  }
}

void add_avx2(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(out + i, m,
                        _mm256_add_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m)));
  }
}

void scale_avx2(float* x, float s, int64_t n) {
  const __m256 sv = _mm256_set1_ps(s);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(x + i, m, _mm256_mul_ps(_mm256_maskload_ps(x + i, m), sv));
  }
}

constexpr ElementwiseKernels kAvx2Kernels{rmsnorm_avx2, swiglu_avx2, geglu_avx2,
                                          softmax_avx2, add_avx2,    scale_avx2};

}  // namespace

const ElementwiseKernels& elementwise_kernels_avx2() noexcept {
  return kAvx2Kernels;
}

}  // namespace pacer::ops
