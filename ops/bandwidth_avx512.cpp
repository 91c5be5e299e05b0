// AVX-512 read loop of the bandwidth probe: four concurrent sequential streams (the four
// quarters of the range, like a GEMV reading several rows at once), one cache line per load.
#include "ops/bandwidth.h"
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>

namespace pacer::ops {

uint64_t sum_words_avx512(const std::byte* p, size_t bytes) {
  const size_t quarter = bytes / 4 / 64 * 64;
  const auto* s0 = reinterpret_cast<const __m512i*>(p);
  const auto* s1 = reinterpret_cast<const __m512i*>(p + quarter);
  const auto* s2 = reinterpret_cast<const __m512i*>(p + 2 * quarter);
  const auto* s3 = reinterpret_cast<const __m512i*>(p + 3 * quarter);
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < quarter / 64; ++i) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(s0 + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(s1 + i));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(s2 + i));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(s3 + i));
  }
  const auto* rest = reinterpret_cast<const __m512i*>(p + 4 * quarter);
  for (size_t i = 0; i < (bytes - 4 * quarter) / 64; ++i) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(rest + i));
  }
  const __m512i s = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3));
  // Lane by lane in unsigned arithmetic: the sum wraps by design, and GCC's
  // _mm512_reduce_add_epi64 adds as signed long long (undefined on overflow; UBSan flags it).
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, s);
  uint64_t total = 0;
  for (uint64_t v : lanes) total += v;
  return total;
}

}  // namespace pacer::ops
