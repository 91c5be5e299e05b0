// The AVX2 (+FMA) Q8_K activation quantizer: the reference's operations lane by lane, so the
// bytes are identical (max is exact, d and id are the same scalar divisions, x * id is one
// rounded multiply, and the rounding below equals std::round).
#include <immintrin.h>

#include "ops/matmul_simd_avx2.h"
#include "ops/q8_k.h"

namespace pacer::ops {
namespace {

// Exactly std::round(v) (half away from zero) for |v| < 2^23, as int32: adding the largest float
// below 0.5 with v's sign, then truncating, never rounds a value below .5 up.
inline __m256i round_half_away_epi32(__m256 v) {
  const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
  const __m256 bias = _mm256_or_ps(sign, _mm256_set1_ps(0.49999997f));
  return _mm256_cvttps_epi32(_mm256_add_ps(v, bias));
}

// max |x[j]| over the 256 floats of one block.
inline float max_abs_256(const float* x) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 m = _mm256_setzero_ps();
  for (int k = 0; k < 32; ++k)
    m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + 8 * k), abs_mask));
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// int32 lanes of i0..i3 (each in [-127, 127]) -> 32 int8 in element order (packs never saturate).
inline __m256i pack_32_epi8(__m256i i0, __m256i i1, __m256i i2, __m256i i3) {
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
  return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

}  // namespace

void quantize_row_q8_K_avx2(const float* x, std::byte* dst, int64_t n) {
  auto* y = reinterpret_cast<BlockQ8_K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    const float d = max_abs_256(x) / 127.0f;
    const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    y[b].d = d;
    for (int k = 0; k < kQK_K / 32; ++k) {  // 32 elements = groups 2k and 2k+1
      const float* xk = x + 32 * k;
      const __m256i i0 = round_half_away_epi32(_mm256_mul_ps(_mm256_loadu_ps(xk), id));
      const __m256i i1 = round_half_away_epi32(_mm256_mul_ps(_mm256_loadu_ps(xk + 8), id));
      const __m256i i2 = round_half_away_epi32(_mm256_mul_ps(_mm256_loadu_ps(xk + 16), id));
      const __m256i i3 = round_half_away_epi32(_mm256_mul_ps(_mm256_loadu_ps(xk + 24), id));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs + 32 * k),
                          pack_32_epi8(i0, i1, i2, i3));
      y[b].bsums[2 * k] = static_cast<int16_t>(avx2::hsum8_epi32(_mm256_add_epi32(i0, i1)));
      y[b].bsums[2 * k + 1] = static_cast<int16_t>(avx2::hsum8_epi32(_mm256_add_epi32(i2, i3)));
    }
  }
}

}  // namespace pacer::ops
