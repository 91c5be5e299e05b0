#pragma once
// Vector e^x and the activations built on it, for AVX-512 kernels. Include ONLY from *_avx512.cpp
// files (they alone are compiled with -mavx512f etc.).
//
// exp: Cody-Waite reduction x = n*ln2 + r (|r| <= ln2/2, ln2 split in two so n*ln2_hi is exact),
// the Cephes degree-7 polynomial for e^r, then 2^n applied with scalef, which underflows to 0
// and overflows to +inf correctly. About 1 ulp on [-87, 88]; NaN propagates.
// GCC 12 warns inside its own AVX-512 intrinsics (-Wmaybe-uninitialized on the
// _mm512_undefined_ps() they pass through, GCC bug 105593); silence it for that header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

namespace pacer::ops::avx512 {

inline __m512 exp_ps(__m512 x) {
  // max/min return their second operand when either is NaN: keep x there so NaN survives.
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);  // e^-104 is below the smallest subnormal
  x = _mm512_min_ps(_mm512_set1_ps(88.8f), x);    // e^88.8 overflows to +inf anyway
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
  return _mm512_scalef_ps(p, n);
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
