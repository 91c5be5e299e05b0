// AVX-512 chains of the FMA probe: K independent accumulators, one vfmadd231ps zmm each per
// iteration. On Zen 4 a 512-bit FMA issues as two 256-bit halves, so this loop runs no more flops
// than the AVX2 one there; on Intel server cores with two 512-bit FMA units, twice as many.
#include "ops/fma_probe.h"
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>

namespace pacer::ops {
namespace {

// Not instrumented in sanitizer builds (see fma_probe_avx2.cpp).
template <int K>
[[gnu::no_sanitize_address]] float chains(int64_t iterations) {
  const __m512 m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(0.001f);  // converges to 1
  __m512 acc[K];
  for (int k = 0; k < K; ++k) acc[k] = _mm512_set1_ps(1.0f + 0.001f * static_cast<float>(k));
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 32
    for (int k = 0; k < K; ++k) acc[k] = _mm512_fmadd_ps(acc[k], m, c);
  }
  for (int k = 1; k < K; ++k) acc[0] = _mm512_add_ps(acc[0], acc[k]);
  return _mm512_reduce_add_ps(acc[0]);
}

}  // namespace

float fma_chains_avx512(int64_t iterations, int accumulators) {
  switch (accumulators) {
    case 8:
      return chains<8>(iterations);
    case 12:
      return chains<12>(iterations);
    case 16:
      return chains<16>(iterations);
    default:
      return chains<24>(iterations);
  }
}

}  // namespace pacer::ops
