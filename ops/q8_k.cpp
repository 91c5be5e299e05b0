// Q8_K reference code: the activation quantizer the SIMD versions must match byte for byte, and
// the dequantizer tests use.
#include "ops/q8_k.h"

#include <cassert>
#include <cmath>

namespace pacer::ops {

void quantize_row_q8_K_ref(const float* x, std::byte* dst, int64_t n) {
  assert(n % kQK_K == 0);
  auto* y = reinterpret_cast<BlockQ8_K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    float amax = 0.0f;
    for (int64_t j = 0; j < kQK_K; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = d;
    for (int64_t g = 0; g < kQK_K / 16; ++g) {
      int32_t sum = 0;  // |sum| <= 16 * 127
      for (int64_t j = 16 * g; j < 16 * g + 16; ++j) {
        y[b].qs[j] = static_cast<int8_t>(std::round(x[j] * id));  // |x*id| <= 127 (+ulps)
        sum += y[b].qs[j];
      }
      y[b].bsums[g] = static_cast<int16_t>(sum);
    }
  }
}

void dequantize_row_q8_K(const BlockQ8_K* x, float* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    for (int64_t j = 0; j < kQK_K; ++j) *y++ = x[b].d * static_cast<float>(x[b].qs[j]);
  }
}

}  // namespace pacer::ops
