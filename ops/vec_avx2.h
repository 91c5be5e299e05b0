#pragma once
// A thin fp32 vector wrapper for AVX2 (8 lanes), the same interface as vec_avx512.h's, so an
// algorithm over floats is written once (ops/elementwise_simd.h) and compiled per tier. Include
// ONLY from files built with the AVX2 flags.
#include <immintrin.h>

#include <cstdint>

#include "ops/softmax_math_avx2.h"

namespace pacer::ops::avx2 {

struct VecF32 {
  using Reg = __m256;
  using Mask = __m256i;  // all-ones in the lanes that take part
  static constexpr int kLanes = 8;

  // The first `rem` lanes, rem in [1, kLanes] (the tail of a row: only there, since AVX2's
  // masked stores are slow on several CPUs, AMD Zen's microcoded vmaskmovps among them).
  static Mask first(int64_t rem) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(rem < 8 ? rem : 8)), lane);
  }
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg set1(float v) { return _mm256_set1_ps(v); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static Reg load(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }  // 0 elsewhere
  // Lanes outside m keep `fallback`.
  static Reg load_or(Reg fallback, const float* p, Mask m) {
    return _mm256_blendv_ps(fallback, _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static void store(float* p, Mask m, Reg v) { _mm256_maskstore_ps(p, m, v); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg add(Reg a, Mask m, Reg b) {  // a + b in the lanes of m, a elsewhere
    return _mm256_add_ps(a, _mm256_and_ps(b, _mm256_castsi256_ps(m)));
  }
  static Reg sub(Reg a, Reg b) { return _mm256_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg max(Reg a, Reg b) { return _mm256_max_ps(a, b); }
  static float hsum(Reg v) { return hsum_ps(v); }
  static float hmax(Reg v) { return hmax_ps(v); }
  static Reg exp(Reg v) { return exp_ps(v); }
  static Reg silu(Reg v) { return silu_ps(v); }
  static Reg gelu_tanh(Reg v) { return gelu_tanh_ps(v); }
};

}  // namespace pacer::ops::avx2
