// AVX2 read loop of the bandwidth probe: four independent 256-bit accumulators, one load per
// 32 bytes, so the loop is limited by memory, not by add latency.
#include <immintrin.h>

#include "ops/bandwidth.h"

namespace pacer::ops {

uint64_t sum_words_avx2(const std::byte* p, size_t bytes) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  const auto* v = reinterpret_cast<const __m256i*>(p);
  size_t i = 0;
  const size_t n = bytes / 32;
  for (; i + 4 <= n; i += 4) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(v + i));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(v + i + 1));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(v + i + 2));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(v + i + 3));
  }
  for (; i < n; ++i) a0 = _mm256_add_epi64(a0, _mm256_load_si256(v + i));
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

}  // namespace pacer::ops
