// AVX-512 read loop of the bandwidth probe: four independent 512-bit accumulators, one load per
// cache line.
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>
#include "ops/bandwidth.h"

namespace pacer::ops {

uint64_t sum_words_avx512(const std::byte* p, size_t bytes) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  const auto* v = reinterpret_cast<const __m512i*>(p);
  size_t i = 0;
  const size_t n = bytes / 64;
  for (; i + 4 <= n; i += 4) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(v + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(v + i + 1));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(v + i + 2));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(v + i + 3));
  }
  for (; i < n; ++i) a0 = _mm512_add_epi64(a0, _mm512_load_si512(v + i));
  const __m512i s = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3));
  return static_cast<uint64_t>(_mm512_reduce_add_epi64(s));
}

}  // namespace pacer::ops
