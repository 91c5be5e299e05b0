// AVX2 + FMA chains of the FMA probe: K independent accumulators, one vfmadd231ps each per
// iteration, so the loop is bound by the FMA units' throughput, not their latency.
#include <immintrin.h>

#include "ops/fma_probe.h"

namespace pacer::ops {
namespace {

// Not instrumented in sanitizer builds: with AddressSanitizer GCC kept acc[] on the stack and the
// probe read 6 GFLOP/s where the core does 89 (the test's lower bound failed).
template <int K>
[[gnu::no_sanitize_address]] float chains(int64_t iterations) {
  // acc -> acc * m + c converges to c / (1 - m) = 1 from any start near it: normal floats only.
  const __m256 m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(0.001f);
  __m256 acc[K];
  for (int k = 0; k < K; ++k) acc[k] = _mm256_set1_ps(1.0f + 0.001f * static_cast<float>(k));
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 32
    for (int k = 0; k < K; ++k) acc[k] = _mm256_fmadd_ps(acc[k], m, c);
  }
  for (int k = 1; k < K; ++k) acc[0] = _mm256_add_ps(acc[0], acc[k]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc[0]);
  float s = 0;
  for (float v : lanes) s += v;
  return s;
}

}  // namespace

float fma_chains_avx2(int64_t iterations, int accumulators) {
  switch (accumulators) {
    case 8:
      return chains<8>(iterations);
    default:
      return chains<12>(iterations);
  }
}

}  // namespace pacer::ops
