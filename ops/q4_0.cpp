// Q4_0 reference code: the weight quantizer (ggml-identical) and the dot product with act-Q8 that
// the SIMD kernels are tested against.
#include "ops/q4_0.h"

#include <cassert>
#include <cmath>

#include "ops/q8_0.h"

namespace pacer::ops {
namespace {

// trunc(v) clamped to [0, 15] for v = x*id + 8.5 in [0.5, 16.5]: ggml's MIN(15, (int8_t)v).
uint8_t nibble_from_shifted(float v) {
  if (v >= 15.0f) return 15;
  if (v >= 0.0f) return static_cast<uint8_t>(v);
  return 0;  // only NaN (or a non-finite scale) gets here
}

}  // namespace

void quantize_row_q4_0_ref(const float* x, BlockQ4_0* y, int64_t n) {
  assert(n % kQ4_0BlockElems == 0);
  constexpr int64_t kHalf = kQ4_0BlockElems / 2;
  for (int64_t b = 0; b < n / kQ4_0BlockElems; ++b, x += kQ4_0BlockElems) {
    float amax = 0.0f, max = 0.0f;  // the first element of largest |x|, with its sign
    for (int64_t j = 0; j < kQ4_0BlockElems; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    for (int64_t j = 0; j < kHalf; ++j) {
      const uint8_t lo = nibble_from_shifted(x[j] * id + 8.5f);
      const uint8_t hi = nibble_from_shifted(x[j + kHalf] * id + 8.5f);
      y[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t n) {
  assert(n % kQ4_0BlockElems == 0);
  constexpr int64_t kHalf = kQ4_0BlockElems / 2;
  for (int64_t b = 0; b < n / kQ4_0BlockElems; ++b, y += kQ4_0BlockElems) {
    const float d = fp16_to_fp32(x[b].d);
    for (int64_t j = 0; j < kHalf; ++j) {
      y[j] = d * static_cast<float>((x[b].qs[j] & 0x0F) - 8);
      y[j + kHalf] = d * static_cast<float>((x[b].qs[j] >> 4) - 8);
    }
  }
}

float dot_q4_0_q8_0_ref(int64_t n, const std::byte* w_row, const std::byte* act) {
  assert(n % kQ4_0BlockElems == 0);
  constexpr int64_t kHalf = kQ4_0BlockElems / 2;
  const auto* w = reinterpret_cast<const BlockQ4_0*>(w_row);
  const ActQ8Row x = act_q8_row(act, n);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQ4_0BlockElems; ++b) {
    const int8_t* q = x.q + b * kQ4_0BlockElems;
    int32_t isum = 0;  // |isum| <= 32 * 8 * 127 = 32512
    for (int64_t j = 0; j < kHalf; ++j) {
      isum += ((w[b].qs[j] & 0x0F) - 8) * q[j] + ((w[b].qs[j] >> 4) - 8) * q[j + kHalf];
    }
    acc += fp16_to_fp32(w[b].d) * x.d[b] * static_cast<float>(isum);
  }
  return acc;
}

}  // namespace pacer::ops
