// AVX2 read loop of the bandwidth probe: four concurrent sequential streams (the four quarters
// of the range, like a GEMV reading several rows at once), one independent accumulator each.
#include <immintrin.h>

#include "ops/bandwidth.h"

namespace pacer::ops {

uint64_t sum_words_avx2(const std::byte* p, size_t bytes) {
  const size_t quarter = bytes / 4 / 64 * 64;
  const auto* s0 = reinterpret_cast<const __m256i*>(p);
  const auto* s1 = reinterpret_cast<const __m256i*>(p + quarter);
  const auto* s2 = reinterpret_cast<const __m256i*>(p + 2 * quarter);
  const auto* s3 = reinterpret_cast<const __m256i*>(p + 3 * quarter);
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < quarter / 32; i += 2) {  // one 64-byte line per stream per step
    a0 = _mm256_add_epi64(
        a0, _mm256_add_epi64(_mm256_load_si256(s0 + i), _mm256_load_si256(s0 + i + 1)));
    a1 = _mm256_add_epi64(
        a1, _mm256_add_epi64(_mm256_load_si256(s1 + i), _mm256_load_si256(s1 + i + 1)));
    a2 = _mm256_add_epi64(
        a2, _mm256_add_epi64(_mm256_load_si256(s2 + i), _mm256_load_si256(s2 + i + 1)));
    a3 = _mm256_add_epi64(
        a3, _mm256_add_epi64(_mm256_load_si256(s3 + i), _mm256_load_si256(s3 + i + 1)));
  }
  const auto* rest = reinterpret_cast<const __m256i*>(p + 4 * quarter);
  for (size_t i = 0; i < (bytes - 4 * quarter) / 32; ++i) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(rest + i));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

}  // namespace pacer::ops
