#pragma once
// Small AVX2 helpers shared by the *_avx2.cpp kernels. Include ONLY from files built with the
// AVX2 flags (ops/CMakeLists.txt); everything here has internal linkage so no copy compiled with
// these flags can be picked by the linker for a baseline file.
#include <immintrin.h>

#include <cstdint>

namespace pacer::ops::avx2 {
namespace {

// Sum of the 8 lanes.
inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Sum of the 8 int32 lanes (exact while the true sum fits in int32).
inline int32_t hsum8_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// fp16 (raw bits) -> fp32 with F16C; exact.
inline float fp32_from_fp16(uint16_t h) { return _cvtsh_ss(h); }

// 8 lanes of the fp32 value of the fp16 at p (unaligned), times `scale`.
inline __m256 broadcast_fp16_times(const void* p, __m256 scale) {
  const __m128i h = _mm_set1_epi16(*static_cast<const int16_t*>(p));
  return _mm256_mul_ps(_mm256_cvtph_ps(h), scale);
}

}  // namespace
}  // namespace pacer::ops::avx2
