// The AVX-512 Q8_K activation quantizer: the reference's operations lane by lane, so the bytes
// are identical (see q8_k_avx2.cpp). One zmm is one group of 16, i.e. one bsums entry.
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>
#include "ops/q8_k.h"

namespace pacer::ops {
namespace {

// Exactly std::round(v) (half away from zero) for |v| < 2^23, as int32 (see q8_k_avx2.cpp).
inline __m512i round_half_away_epi32(__m512 v) {
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN));
  const __m512 bias =
      _mm512_castsi512_ps(_mm512_or_si512(sign, _mm512_castps_si512(_mm512_set1_ps(0.49999997f))));
  return _mm512_cvttps_epi32(_mm512_add_ps(v, bias));
}

}  // namespace

void quantize_row_q8_K_avx512(const float* x, std::byte* dst, int64_t n) {
  auto* y = reinterpret_cast<BlockQ8_K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    __m512 m = _mm512_setzero_ps();
    for (int g = 0; g < kQK_K / 16; ++g)
      m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * g)));
    const float d = _mm512_reduce_max_ps(m) / 127.0f;
    const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    y[b].d = d;
    for (int g = 0; g < kQK_K / 16; ++g) {
      const __m512i q = round_half_away_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * g), id));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs + 16 * g), _mm512_cvtepi32_epi8(q));
      y[b].bsums[g] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
  }
}

}  // namespace pacer::ops
