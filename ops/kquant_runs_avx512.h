#pragma once
// AVX-512 helpers shared by the Q2_K, Q3_K and IQ4_XS kernels (q2_k_avx512.cpp, q3_k_avx512.cpp,
// iq4_xs_avx512.cpp). Include ONLY from files built with the AVX-512 F/BW/VL/DQ flags (after
// ops/matmul_simd_avx512.h); everything here has internal linkage.
#include <cstdint>

#include "ops/q8_k.h"

namespace pacer::ops {
namespace {

// vpermw index putting int16 scale `first + i` in every word of 128-bit lane i (i = 0..3).
inline __m512i lane_scale_index(int first) {
  const auto rep = [](int v) { return static_cast<long long>(0x0001000100010001LL * v); };
  return _mm512_setr_epi64(rep(first), rep(first), rep(first + 1), rep(first + 1), rep(first + 2),
                           rep(first + 2), rep(first + 3), rep(first + 3));
}

// Words / bytes that differ between the two 256-bit halves of a zmm.
inline __m512i halves16(int first, int second) {
  return _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(static_cast<short>(first)),
                                 _mm512_set1_epi16(static_cast<short>(second)));
}
inline __m512i halves8(int first, int second) {
  return _mm512_mask_blend_epi64(0xF0, _mm512_set1_epi8(static_cast<char>(first)),
                                 _mm512_set1_epi8(static_cast<char>(second)));
}

// One token's Q8_K activations of a super-block in element order: xs[t][k] holds elements
// 128t + 64k + 0..63 (one plain load each), bsums the 16 group sums.
struct Q8KRuns {
  __m512i xs[2][2];
  __m256i bsums;
};

inline Q8KRuns load_runs(const BlockQ8_K& x) {
  Q8KRuns a;
  for (int t = 0; t < 2; ++t) {
    for (int k = 0; k < 2; ++k) a.xs[t][k] = _mm512_loadu_si512(x.qs + 128 * t + 64 * k);
  }
  a.bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums));
  return a;
}

}  // namespace
}  // namespace pacer::ops
