// AVX2 read loops of the bandwidth probe: S concurrent sequential streams (S equal stretches of
// the range), `burst` 64-byte lines of one stream before the next (two 32-byte loads per line),
// optionally a software prefetch `prefetch` bytes ahead in each stream.
#include <immintrin.h>

#include "ops/bandwidth.h"

namespace pacer::ops {
namespace {

template <int S>
uint64_t sum_streams(const std::byte* p, size_t bytes, size_t burst, size_t prefetch,
                     size_t page_touch) {
  const size_t step = 64 * burst;
  const size_t part = bytes / S / step * step;
  const std::byte* s[S];
  __m256i acc[S];
  for (int k = 0; k < S; ++k) {
    s[k] = p + static_cast<size_t>(k) * part;
    acc[k] = _mm256_setzero_si256();
  }
  for (size_t off = 0; off < part; off += step) {
    for (int k = 0; k < S; ++k) {
      for (size_t at = off; at < off + step; at += 64) {
        if (prefetch != 0)
          _mm_prefetch(reinterpret_cast<const char*>(s[k] + at + prefetch), _MM_HINT_T0);
        if (page_touch != 0 &&
            (reinterpret_cast<uintptr_t>(s[k] + at + page_touch) & uintptr_t{4095}) == 0) {
          _mm_prefetch(reinterpret_cast<const char*>(s[k] + at + page_touch), _MM_HINT_T0);
        }
        const auto* line = reinterpret_cast<const __m256i*>(s[k] + at);
        acc[k] = _mm256_add_epi64(
            acc[k], _mm256_add_epi64(_mm256_load_si256(line), _mm256_load_si256(line + 1)));
      }
    }
  }
  for (size_t off = S * part; off + 32 <= bytes; off += 32) {
    acc[0] = _mm256_add_epi64(acc[0], _mm256_load_si256(reinterpret_cast<const __m256i*>(p + off)));
  }
  for (int k = 1; k < S; ++k) acc[0] = _mm256_add_epi64(acc[0], acc[k]);
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc[0]);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

}  // namespace

uint64_t sum_words_avx2(const std::byte* p, size_t bytes, int streams, size_t burst,
                        size_t prefetch, size_t page_touch) {
  switch (streams) {
    case 1:
      return sum_streams<1>(p, bytes, burst, prefetch, page_touch);
    case 2:
      return sum_streams<2>(p, bytes, burst, prefetch, page_touch);
    case 4:
      return sum_streams<4>(p, bytes, burst, prefetch, page_touch);
    case 8:
      return sum_streams<8>(p, bytes, burst, prefetch, page_touch);
    default:
      return sum_streams<16>(p, bytes, burst, prefetch, page_touch);
  }
}

}  // namespace pacer::ops
