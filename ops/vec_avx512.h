#pragma once
// A thin fp32 vector wrapper for AVX-512 (16 lanes), the same interface as vec_avx2.h's, so an
// algorithm over floats is written once (ops/elementwise_simd.h) and compiled per tier. Include
// ONLY from files built with the AVX-512 flags, after ops/softmax_math_avx512.h's intrinsics.
#include <cstdint>

#include "ops/fp16.h"
#include "ops/softmax_math_avx512.h"

namespace pacer::ops::avx512 {

struct VecF32 {
  using Reg = __m512;
  using Mask = __mmask16;
  static constexpr int kLanes = 16;
  static constexpr int kRegisters = 32;  // architectural vector registers, for tile sizes

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
  static Reg exp_nonpositive(Reg v) { return exp_ps(v); }  // vscalefps: one scaling already
  // exp_nonpositive of v[0..N), one after another (AVX2 interleaves its steps; on AVX-512 that
  // is not measured).
  template <int N>
  static void exp_nonpositive_n(Reg* v) {
    for (int i = 0; i < N; ++i) v[i] = exp_ps(v[i]);
  }
  static Reg silu(Reg v) { return silu_ps(v); }
  static Reg gelu_tanh(Reg v) { return gelu_tanh_ps(v); }
  static Reg softcap(Reg v, float cap) { return softcap_ps(v, cap); }

  // 16 rows of 16 floats (r[i]: row i) into columns: col[c] lane i = r[i][c]. Three steps of
  // in-lane and lane-crossing shuffles (64 in all) instead of 256 single-float stores.
  static void transpose(const Reg* r, Reg* col) {
    Reg t[16], u[16];
    for (int i = 0; i < 8; ++i) {  // lane L of t[2i]: r[2i][4L], r[2i+1][4L], r[2i][4L+1], ...
      t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int q = 0; q < 4; ++q) {  // lane L of u[4q + j]: rows 4q..4q+3 at column 4L + j
      const __m512d a = _mm512_castps_pd(t[4 * q]), b = _mm512_castps_pd(t[4 * q + 2]);
      const __m512d c = _mm512_castps_pd(t[4 * q + 1]), d = _mm512_castps_pd(t[4 * q + 3]);
      u[4 * q] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      u[4 * q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
      u[4 * q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
      u[4 * q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
    }
    for (int j = 0; j < 4; ++j) {  // column 4L + j: lane L of u[j], u[4 + j], u[8 + j], u[12 + j]
      const Reg v0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);  // lanes 0, 2 of each
      const Reg v1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);  // lanes 1, 3 of each
      const Reg w0 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
      const Reg w1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
      col[j] = _mm512_shuffle_f32x4(v0, w0, 0x88);
      col[4 + j] = _mm512_shuffle_f32x4(v1, w1, 0x88);
      col[8 + j] = _mm512_shuffle_f32x4(v0, w0, 0xDD);
      col[12 + j] = _mm512_shuffle_f32x4(v1, w1, 0xDD);
    }
  }

  // Loads that widen to fp32. `_first` variants read only the first `rem` (in [1, kLanes])
  // elements, 0 elsewhere (masked loads: masked-off lanes never fault).
  static Reg load_first(const float* p, int64_t rem) { return load(p, first(rem)); }
  static Reg load_f16(const fp16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static Reg load_f16_first(const fp16_t* p, int64_t rem) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(first(rem), p));
  }
  static Reg load_bf16(const uint16_t* p) {
    return widen_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static Reg load_bf16_first(const uint16_t* p, int64_t rem) {
    return widen_bf16(_mm256_maskz_loadu_epi16(first(rem), p));
  }
  // kLanes int8 from q as floats.
  static Reg load_i8(const int8_t* q) {
    const __m128i q8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q8));
  }
  // kLanes int8 from q, times `scale` (a Q8_0 block's half).
  static Reg load_q8(const int8_t* q, Reg scale) {
    const __m128i q8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    return _mm512_mul_ps(scale, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q8)));
  }
  static float f16_scalar(fp16_t h) { return _cvtsh_ss(h); }
  // Round to nearest even, bit-identical to fp32_to_fp16.
  static void store_f16(fp16_t* p, Reg v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }

 private:
  static Reg widen_bf16(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};

}  // namespace pacer::ops::avx512
