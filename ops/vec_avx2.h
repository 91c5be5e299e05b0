#pragma once
// A thin fp32 vector wrapper for AVX2 (8 lanes), the same interface as vec_avx512.h's, so an
// algorithm over floats is written once (ops/elementwise_simd.h) and compiled per tier. Include
// ONLY from files built with the AVX2 flags.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "ops/fp16.h"
#include "ops/softmax_math_avx2.h"

namespace pacer::ops::avx2 {

struct VecF32 {
  using Reg = __m256;
  using Mask = __m256i;  // all-ones in the lanes that take part
  static constexpr int kLanes = 8;
  static constexpr int kRegisters = 16;  // architectural vector registers, for tile sizes

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
  static Reg exp_nonpositive(Reg v) { return exp_nonpositive_ps(v); }  // a softmax's x - max
  // exp_nonpositive of v[0..N), interleaved (the same bits; softmax_math_avx2.h says why).
  template <int N>
  static void exp_nonpositive_n(Reg* v) {
    exp_nonpositive_ps_n<N>(v);
  }
  static Reg silu(Reg v) { return silu_ps(v); }
  static Reg gelu_tanh(Reg v) { return gelu_tanh_ps(v); }
  static Reg softcap(Reg v, float cap) { return softcap_ps(v, cap); }


  // Loads that widen to fp32. `_first` variants read only the first `rem` (in [1, kLanes])
  // elements, 0 elsewhere; AVX2 has no masked 16-bit load, so those stage through a buffer.
  static Reg load_first(const float* p, int64_t rem) { return load(p, first(rem)); }
  static Reg load_f16(const fp16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static Reg load_f16_first(const fp16_t* p, int64_t rem) {
    alignas(16) fp16_t buf[kLanes] = {};
    std::memcpy(buf, p, static_cast<size_t>(rem) * sizeof(fp16_t));
    return load_f16(buf);
  }
  static Reg load_bf16(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static Reg load_bf16_first(const uint16_t* p, int64_t rem) {
    alignas(16) uint16_t buf[kLanes] = {};
    std::memcpy(buf, p, static_cast<size_t>(rem) * sizeof(uint16_t));
    return load_bf16(buf);
  }
  // kLanes int8 from q, times `scale` (a Q8_0 block's part).
  static Reg load_q8(const int8_t* q, Reg scale) {
    const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q));
    return _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)));
  }
  static float f16_scalar(fp16_t h) { return _cvtsh_ss(h); }
  // Round to nearest even, bit-identical to fp32_to_fp16.
  static void store_f16(fp16_t* p, Reg v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};

}  // namespace pacer::ops::avx2
