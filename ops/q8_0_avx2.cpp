// Q8_0 x act-Q8 on AVX2 (+FMA, F16C), and the AVX2 act-Q8 quantizer.
//
// Per weight block: the sign trick turns int8 x int8 into maddubs' unsigned x signed form,
//   |w| (u8, <= 128) * sign(x, w) (s8, |.| <= 127) = w * x,
// pair sums |a0*b0 + a1*b1| <= 2 * 128 * 127 = 32512 < 32767, so vpmaddubsw never saturates;
// vpmaddwd with ones then widens to int32 (8 lanes x 4 products, exact). One cvt + FMA per block
// applies d_w * d_x.
#include <immintrin.h>

#include "ops/matmul_simd_avx2.h"
#include "ops/q8_0.h"
#include "ops/quant_rows_avx2.h"

namespace pacer::ops {
namespace {

// Exactly std::round(v) (half away from zero) for |v| < 2^23, converted to int32: adding the
// largest float below 0.5 with v's sign, then truncating, never rounds a value below .5 up.
inline __m256i round_half_away_epi32(__m256 v) {
  const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
  const __m256 bias = _mm256_or_ps(sign, _mm256_set1_ps(0.49999997f));
  return _mm256_cvttps_epi32(_mm256_add_ps(v, bias));
}

// max(|v0|, ..., |v3|) over all 32 lanes.
inline float max_abs_32(__m256 v0, __m256 v1, __m256 v2, __m256 v3) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v0, abs_mask), _mm256_and_ps(v1, abs_mask)),
                           _mm256_max_ps(_mm256_and_ps(v2, abs_mask), _mm256_and_ps(v3, abs_mask)));
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// int32 x[i] (each in [-127, 127]) of i0..i3 -> 32 int8 in element order (no saturation).
inline __m256i pack_32_epi8(__m256i i0, __m256i i1, __m256i i2, __m256i i3) {
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
  return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Integer dot of one Q8_0 block with 32 activation quants: 8 int32 lanes summing to sum w*x.
inline __m256i block_dot_epi32(const int8_t* w_qs, __m256i x) {
  const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w_qs));
  const __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

struct Q8_0Block {
  using Block = BlockQ8_0;
  static constexpr int32_t kSumFactor = 0;  // the sign trick needs no bias
  static __m256i block_dot(const Block* w, __m256i x, __m256i) { return block_dot_epi32(w->qs, x); }
};

}  // namespace

void quantize_act_q8_avx2(const float* x, std::byte* act, int64_t n) {
  const int64_t nb = n / kQ8_0BlockElems;
  auto* q = reinterpret_cast<int8_t*>(act);
  auto* d_out = reinterpret_cast<float*>(act + n);
  auto* sum_out = reinterpret_cast<int32_t*>(act + n + 4 * nb);
  for (int64_t b = 0; b < nb; ++b, x += 32) {
    const __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    const __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    const float d = max_abs_32(v0, v1, v2, v3) / 127.0f;  // same ops as the reference
    const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    const __m256i i0 = round_half_away_epi32(_mm256_mul_ps(v0, id));
    const __m256i i1 = round_half_away_epi32(_mm256_mul_ps(v1, id));
    const __m256i i2 = round_half_away_epi32(_mm256_mul_ps(v2, id));
    const __m256i i3 = round_half_away_epi32(_mm256_mul_ps(v3, id));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * b), pack_32_epi8(i0, i1, i2, i3));
    d_out[b] = d;
    sum_out[b] =
        avx2::hsum8_epi32(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
  }
}

void dot_rows_q8_0_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out) {
  avx2::quant_dot_rows<Q8_0Block>(n, w, w_stride, nr, act, out);
}

void gemm_q8_0_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                         const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                         int64_t out_stride) {
  avx2::quant_gemm<Q8_0Block>(n, w, w_stride, nr, act, act_stride, nt, out, out_stride);
}

float dot_q8_0_q8_0_avx2(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  avx2::quant_rows_tile<Q8_0Block, 1>(n, w_row, 0, 0, act, &out, 1);
  return out;
}

}  // namespace pacer::ops
