#pragma once
// A thin fp32 vector wrapper for AVX-512 (16 lanes), the same interface as vec_avx2.h's, so an
// algorithm over floats is written once (ops/elementwise_simd.h) and compiled per tier. Include
// ONLY from files built with the AVX-512 flags, after ops/softmax_math_avx512.h's intrinsics.
#include <cstdint>

#include "ops/softmax_math_avx512.h"

namespace pacer::ops::avx512 {

struct VecF32 {
  using Reg = __m512;
  using Mask = __mmask16;
  static constexpr int kLanes = 16;

  // The first `rem` lanes, rem in [1, kLanes].
  static Mask first(int64_t rem) {
    return rem >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << rem) - 1u);
  }
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg set1(float v) { return _mm512_set1_ps(v); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static Reg load(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }  // 0 elsewhere
  // Lanes outside m keep `fallback`.
  static Reg load_or(Reg fallback, const float* p, Mask m) {
    return _mm512_mask_loadu_ps(fallback, m, p);
  }
  static void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static void store(float* p, Mask m, Reg v) { _mm512_mask_storeu_ps(p, m, v); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg add(Reg a, Mask m, Reg b) { return _mm512_mask_add_ps(a, m, a, b); }
  static Reg sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
  static float hsum(Reg v) { return _mm512_reduce_add_ps(v); }
  static float hmax(Reg v) { return _mm512_reduce_max_ps(v); }
  static Reg exp(Reg v) { return exp_ps(v); }
  static Reg silu(Reg v) { return silu_ps(v); }
  static Reg gelu_tanh(Reg v) { return gelu_tanh_ps(v); }
};

}  // namespace pacer::ops::avx512
