#pragma once
// Vector e^x and the activations built on it, for AVX-512 kernels. Include ONLY from *_avx512.cpp
// files (they alone are compiled with -mavx512f etc.).
//
// exp: Cody-Waite reduction x = n*ln2 + r (|r| <= ln2/2, ln2 split in two so n*ln2_hi is exact),
// the Cephes degree-7 polynomial for e^r, then 2^n applied with scalef, which overflows to +inf
// correctly. About 1 ulp on [-87.3, 88]; NaN propagates. Below -87.3 the result is 0, not the
// subnormal e^x: without flush-to-zero (pacer leaves MXCSR alone) an instruction with a subnormal
// result takes a microcode assist on Intel cores, and a peaked softmax puts about a quarter of its
// weights there. BM_attention_peaked (TinyLlama shape, depth 4096, scores of standard deviation
// 30) on one core of a Sapphire-Rapids-class Xeon guest: 0.70 GB/s with subnormals, 8.9-10.0
// without, as with ordinary scores; on Zen 5 no change for AVX-512, 6.6 -> 8.0 GB/s for AVX2.
// What is lost is below 1.2e-38.
// GCC 12 warns inside its own AVX-512 intrinsics (-Wmaybe-uninitialized on the
// _mm512_undefined_ps() they pass through, GCC bug 105593); silence it for that header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "ops/exp_range.h"

namespace pacer::ops::avx512 {

inline __m512 exp_ps(__m512 x) {
  // e^-87.3 = 1.22e-38 is a normal float (the smallest is 1.18e-38), and every step below stays
  // normal for x >= -87.3. NaN compares "not less": kept, and max/min return their second
  // operand when either is NaN, so it survives them too.
  const __m512 flush_below = _mm512_set1_ps(kExpFlushBelow);
  const __mmask16 keep = _mm512_cmp_ps_mask(x, flush_below, _CMP_NLT_UQ);
  x = _mm512_max_ps(flush_below, x);
  x = _mm512_min_ps(_mm512_set1_ps(88.8f), x);  // e^88.8 overflows to +inf anyway
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_scalef_ps(keep, p, n);
}

// silu(x) = x / (1 + e^-x)
inline __m512 silu_ps(__m512 x) {
  const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), x));
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

// gelu_tanh(x) = 0.5 x (1 + tanh(z)), z = sqrt(2/pi) (x + 0.044715 x^3). Since
// 1 + tanh(z) = 2 / (1 + e^-2z), this is x / (1 + e^-2z): no cancellation near z = 0.
inline __m512 gelu_tanh_ps(__m512 x) {
  const __m512 x2 = _mm512_mul_ps(x, x);
  const __m512 inner = _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), x2, _mm512_set1_ps(1.0f));
  // -2z = -2 sqrt(2/pi) x (1 + 0.044715 x^2)
  const __m512 m2z = _mm512_mul_ps(_mm512_mul_ps(x, inner), _mm512_set1_ps(-1.5957691216057308f));
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), exp_ps(m2z)));
}

// s = cap * tanh(s / cap) = cap * (1 - 2 / (e^(2s/cap) + 1))
inline __m512 softcap_ps(__m512 s, float cap) {
  const __m512 e = exp_ps(_mm512_mul_ps(s, _mm512_set1_ps(2.0f / cap)));
  const __m512 t =
      _mm512_sub_ps(_mm512_set1_ps(1.0f),
                    _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
  return _mm512_mul_ps(t, _mm512_set1_ps(cap));
}

}  // namespace pacer::ops::avx512
