// q8_0 entry points, AVX-512 F/BW/VL/DQ tier (no VNNI). The kernels: q8_0_avx512_kernels.h.
#include "ops/q8_0_avx512_kernels.h"

namespace pacer::ops {

void quantize_act_q8_avx512(const float* x, std::byte* act, int64_t n) {
  const int64_t nb = n / kQ8_0BlockElems;
  auto* q = reinterpret_cast<int8_t*>(act);
  auto* d_out = reinterpret_cast<float*>(act + n);
  auto* sum_out = reinterpret_cast<int32_t*>(act + n + 4 * nb);
  for (int64_t b = 0; b < nb; ++b, x += 32) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;  // same ops as the reference
    const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    const __m512i i0 = round_half_away_epi32(_mm512_mul_ps(v0, id));
    const __m512i i1 = round_half_away_epi32(_mm512_mul_ps(v1, id));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * b), _mm512_cvtepi32_epi8(i0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * b + 16), _mm512_cvtepi32_epi8(i1));
    d_out[b] = d;
    sum_out[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
  }
}

void dot_rows_q8_0_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out) {
  avx512::quant_gemm<Q8_0Pair<false>, avx512::kPairsPerTile>(n, w, w_stride, nr, act, 0, 1, out, 0);
}

float dot_q8_0_q8_0_avx512(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  avx512::quant_gemm<Q8_0Pair<false>, avx512::kPairsPerTile>(n, w_row, 0, 1, act, 0, 1, &out, 0);
  return out;
}

void gemm_q8_0_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride) {
  avx512::quant_gemm<Q8_0Pair<false>, avx512::kPairsPerTile>(n, w, w_stride, nr, act, act_stride,
                                                             nt, out, out_stride);
}

}  // namespace pacer::ops
