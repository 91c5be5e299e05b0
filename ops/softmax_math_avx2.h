#pragma once
// Vector e^x and the activations built on it, for AVX2 kernels. Include ONLY from *_avx2.cpp files
// (they alone are compiled with -mavx2 -mfma).
//
// exp: the same reduction and Cephes polynomial as softmax_math_avx512.h, and like it 0 below -87.3
// instead of a subnormal (see there; BM_attention_peaked AVX2 on the Intel guest 0.35-0.42
// -> 5.2-5.6 GB/s, on Zen 5 6.6 -> 8.0). AVX2 has no scalef, so 2^n is built in the exponent field
// in two halves (2^(n/2) * 2^(n - n/2), each a normal float for n in [-126, 128]): results overflow
// to +inf exactly as a single scaling would. About 1 ulp on [-87.3, 88]; NaN propagates.
#include <immintrin.h>

#include "ops/exp_range.h"

namespace pacer::ops::avx2 {

// x (already flushed and clamped) as p * 2^n: n = round(x / ln 2), p = e^r of the reduced r (the
// Cephes polynomial), n as an integer.
struct ExpParts {
  __m256 p;
  __m256i n;
};
// exp_parts of N vectors, each step taken on all N before the next (per lane the same operations
// in the same order, so the same bits as N calls): see exp_nonpositive_ps_n.
template <int N>
inline void exp_parts_n(const __m256* x, ExpParts* e) {
  __m256 n[N], r[N], p[N];
  for (int i = 0; i < N; ++i) {
    n[i] = _mm256_round_ps(_mm256_mul_ps(x[i], _mm256_set1_ps(1.44269504088896341f)),
                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  for (int i = 0; i < N; ++i) r[i] = _mm256_fnmadd_ps(n[i], _mm256_set1_ps(0.693359375f), x[i]);
  for (int i = 0; i < N; ++i) r[i] = _mm256_fnmadd_ps(n[i], _mm256_set1_ps(-2.12194440e-4f), r[i]);
  for (int i = 0; i < N; ++i) {
    p[i] =
        _mm256_fmadd_ps(_mm256_set1_ps(1.9875691500e-4f), r[i], _mm256_set1_ps(1.3981999507e-3f));
  }
  for (int i = 0; i < N; ++i) p[i] = _mm256_fmadd_ps(p[i], r[i], _mm256_set1_ps(8.3334519073e-3f));
  for (int i = 0; i < N; ++i) p[i] = _mm256_fmadd_ps(p[i], r[i], _mm256_set1_ps(4.1665795894e-2f));
  for (int i = 0; i < N; ++i) p[i] = _mm256_fmadd_ps(p[i], r[i], _mm256_set1_ps(1.6666665459e-1f));
  for (int i = 0; i < N; ++i) p[i] = _mm256_fmadd_ps(p[i], r[i], _mm256_set1_ps(5.0000001201e-1f));
  for (int i = 0; i < N; ++i) {
    e[i].p =
        _mm256_fmadd_ps(p[i], _mm256_mul_ps(r[i], r[i]), _mm256_add_ps(r[i], _mm256_set1_ps(1.0f)));
  }
  for (int i = 0; i < N; ++i) e[i].n = _mm256_cvtps_epi32(n[i]);
}
inline ExpParts exp_parts(__m256 x) {
  ExpParts e;
  exp_parts_n<1>(&x, &e);
  return e;
}

inline __m256 exp_ps(__m256 x) {
  const __m256 flush_below = _mm256_set1_ps(kExpFlushBelow);
  const __m256 keep = _mm256_cmp_ps(x, flush_below, _CMP_NLT_UQ);  // NaN too
  x = _mm256_max_ps(flush_below, x);                               // NaN stays (second operand)
  x = _mm256_min_ps(_mm256_set1_ps(88.8f), x);
  const ExpParts e = exp_parts(x);
  const __m256i n1 = _mm256_srai_epi32(e.n, 1);
  const __m256i n2 = _mm256_sub_epi32(e.n, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_and_ps(keep, _mm256_mul_ps(_mm256_mul_ps(e.p, s1), s2));
}

// e^x for the arguments of a softmax, x - max <= 0 (valid below 88.37, where n <= 127), with
// exp_ps's bits: no upper clamp, and 2^n in one step (n >= -126 after the flush: a normal float).
// The product p * 2^n is rounded once either way (exp_ps's first half-scaling is exact), so the
// bits are exp_ps's; 6 of its 24 operations fewer. The softmax's exp loop was about 70 of the 550
// us of an attention decode step at depth 4096 (BM_attention f16_avx2, TinyLlama shape, one Zen 4
// core): 1.03x.
inline __m256 exp_nonpositive_ps(__m256 x) {
  const __m256 flush_below = _mm256_set1_ps(kExpFlushBelow);
  const __m256 keep = _mm256_cmp_ps(x, flush_below, _CMP_NLT_UQ);  // NaN too
  const ExpParts e = exp_parts(_mm256_max_ps(flush_below, x));     // NaN stays (second operand)
  const __m256i biased = _mm256_add_epi32(e.n, _mm256_set1_epi32(127));
  return _mm256_and_ps(keep,
                       _mm256_mul_ps(e.p, _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23))));
}

// exp_nonpositive_ps of N vectors, each step taken on all N before the next: per lane the same
// operations in the same order (the same bits), as N chains side by side. One exp is a chain of
// about 15 dependent steps (~50 cycles), and a softmax's loop that ran them one vector after
// another kept only the few whose steps fitted the core's floating-point scheduler in flight:
// ~10 cycles a vector where its multiplies and FMAs need ~5.5 (a tile of 8 heads x 128 scores,
// one Zen 4 core: 11.6 -> 9.3 cycles a vector, N = 4).
template <int N>
inline void exp_nonpositive_ps_n(__m256* x) {
  const __m256 flush_below = _mm256_set1_ps(kExpFlushBelow);
  __m256 keep[N];
  for (int i = 0; i < N; ++i) keep[i] = _mm256_cmp_ps(x[i], flush_below, _CMP_NLT_UQ);
  for (int i = 0; i < N; ++i) x[i] = _mm256_max_ps(flush_below, x[i]);
  ExpParts e[N];
  exp_parts_n<N>(x, e);
  for (int i = 0; i < N; ++i) {
    const __m256i biased = _mm256_add_epi32(e[i].n, _mm256_set1_epi32(127));
    x[i] = _mm256_and_ps(keep[i],
                         _mm256_mul_ps(e[i].p, _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23))));
  }
}

// silu(x) = x / (1 + e^-x)
inline __m256 silu_ps(__m256 x) {
  const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// gelu_tanh(x) = x / (1 + e^-2z), z = sqrt(2/pi) (x + 0.044715 x^3); see softmax_math_avx512.h.
inline __m256 gelu_tanh_ps(__m256 x) {
  const __m256 x2 = _mm256_mul_ps(x, x);
  const __m256 inner = _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x2, _mm256_set1_ps(1.0f));
  const __m256 m2z = _mm256_mul_ps(_mm256_mul_ps(x, inner), _mm256_set1_ps(-1.5957691216057308f));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp_ps(m2z)));
}

// s = cap * tanh(s / cap) = cap * (1 - 2 / (e^(2s/cap) + 1))
inline __m256 softcap_ps(__m256 s, float cap) {
  const __m256 e = exp_ps(_mm256_mul_ps(s, _mm256_set1_ps(2.0f / cap)));
  const __m256 t =
      _mm256_sub_ps(_mm256_set1_ps(1.0f),
                    _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
  return _mm256_mul_ps(t, _mm256_set1_ps(cap));
}

// Sum of the 8 lanes.
inline float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Max of the 8 lanes.
inline float hmax_ps(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace pacer::ops::avx2
