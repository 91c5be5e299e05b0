// AVX-512 read loops of the bandwidth probe: S concurrent sequential streams (S equal stretches of
// the range, like a GEMV reading several rows at once), `burst` 64-byte lines of one stream
// before the next (one load per line), optionally a software prefetch `prefetch` bytes ahead in
// each stream.
#include "ops/bandwidth.h"
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>

namespace pacer::ops {
namespace {

template <int S>
uint64_t sum_streams(const std::byte* p, size_t bytes, size_t burst, size_t prefetch,
                     size_t page_touch) {
  const size_t step = 64 * burst;
  const size_t part = bytes / S / step * step;
  const std::byte* s[S];
  __m512i acc[S];
  for (int k = 0; k < S; ++k) {
    s[k] = p + static_cast<size_t>(k) * part;
    acc[k] = _mm512_setzero_si512();
  }
  for (size_t off = 0; off < part; off += step) {
    for (int k = 0; k < S; ++k) {
      for (size_t line = off; line < off + step; line += 64) {
        if (prefetch != 0)
          _mm_prefetch(reinterpret_cast<const char*>(s[k] + line + prefetch), _MM_HINT_T0);
        if (page_touch != 0 &&
            (reinterpret_cast<uintptr_t>(s[k] + line + page_touch) & uintptr_t{4095}) == 0) {
          _mm_prefetch(reinterpret_cast<const char*>(s[k] + line + page_touch), _MM_HINT_T0);
        }
        acc[k] = _mm512_add_epi64(acc[k], _mm512_load_si512(s[k] + line));
      }
    }
  }
  for (size_t off = S * part; off + 64 <= bytes; off += 64) {
    acc[0] = _mm512_add_epi64(acc[0], _mm512_load_si512(p + off));
  }
  for (int k = 1; k < S; ++k) acc[0] = _mm512_add_epi64(acc[0], acc[k]);
  // Lane by lane in unsigned arithmetic: the sum wraps by design, and GCC's
  // _mm512_reduce_add_epi64 adds as signed long long (undefined on overflow; UBSan flags it).
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, acc[0]);
  uint64_t total = 0;
  for (uint64_t v : lanes) total += v;
  return total;
}

}  // namespace

uint64_t sum_words_avx512(const std::byte* p, size_t bytes, int streams, size_t burst,
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
