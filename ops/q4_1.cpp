// Q4_1 reference code: the weight quantizer (ggml's rule), the dequantizer and the dot product
// with act-Q8 that the SIMD kernels are tested against.
#include "ops/q4_1.h"

#include <cassert>
#include <cfloat>

#include "ops/q8_0.h"

namespace pacer::ops {
namespace {

// trunc(v) clamped to [0, 15] for v = (x - min)*id + 0.5 in [0.5, 15.5 + rounding]; NaN -> 0.
uint8_t nibble_from_shifted(float v) {
  if (v >= 15.0f) return 15;
  if (v >= 0.0f) return static_cast<uint8_t>(v);
  return 0;
}

}  // namespace

void quantize_row_q4_1_ref(const float* x, BlockQ4_1* y, int64_t n) {
  assert(n % kQ4_1BlockElems == 0);
  constexpr int64_t kHalf = kQ4_1BlockElems / 2;
  for (int64_t b = 0; b < n / kQ4_1BlockElems; ++b, x += kQ4_1BlockElems) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int64_t j = 0; j < kQ4_1BlockElems; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    y[b].m = fp32_to_fp16(min);
    for (int64_t j = 0; j < kHalf; ++j) {
      const uint8_t lo = nibble_from_shifted((x[j] - min) * id + 0.5f);
      const uint8_t hi = nibble_from_shifted((x[j + kHalf] - min) * id + 0.5f);
      y[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void dequantize_row_q4_1(const BlockQ4_1* x, float* y, int64_t n) {
  assert(n % kQ4_1BlockElems == 0);
  constexpr int64_t kHalf = kQ4_1BlockElems / 2;
  for (int64_t b = 0; b < n / kQ4_1BlockElems; ++b, y += kQ4_1BlockElems) {
    const float d = fp16_to_fp32(x[b].d);
    const float m = fp16_to_fp32(x[b].m);
    for (int64_t j = 0; j < kHalf; ++j) {
      y[j] = d * static_cast<float>(x[b].qs[j] & 0x0F) + m;
      y[j + kHalf] = d * static_cast<float>(x[b].qs[j] >> 4) + m;
    }
  }
}

float dot_q4_1_q8_0_ref(int64_t n, const std::byte* w_row, const std::byte* act) {
  assert(n % kQ4_1BlockElems == 0);
  constexpr int64_t kHalf = kQ4_1BlockElems / 2;
  const auto* w = reinterpret_cast<const BlockQ4_1*>(w_row);
  const ActQ8Row x = act_q8_row(act, n);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQ4_1BlockElems; ++b) {
    const int8_t* q = x.q + b * kQ4_1BlockElems;
    int32_t isum = 0;  // |isum| <= 32 * 15 * 127 = 60960
    for (int64_t j = 0; j < kHalf; ++j) {
      isum += (w[b].qs[j] & 0x0F) * q[j] + (w[b].qs[j] >> 4) * q[j + kHalf];
    }
    acc += fp16_to_fp32(w[b].d) * x.d[b] * static_cast<float>(isum) +
           fp16_to_fp32(w[b].m) * x.d[b] * static_cast<float>(x.sum[b]);
  }
  return acc;
}

}  // namespace pacer::ops
