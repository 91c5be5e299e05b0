// Q5_0 reference code: the weight quantizer (ggml's rule), the dequantizer and the dot product
// with act-Q8 that the SIMD kernels are tested against.
#include "ops/q5_0.h"

#include <cassert>
#include <cmath>
#include <cstring>

#include "ops/q8_0.h"

namespace pacer::ops {
namespace {

// trunc(v) clamped to [0, 31] for v = x*id + 16.5 in [0.5, 32.5]: ggml's MIN(31, (int8_t)v).
// Only the element opposite the max can reach 32.5; NaN (or a non-finite scale) gives 0.
uint8_t quant_from_shifted(float v) {
  if (v >= 31.0f) return 31;
  if (v >= 0.0f) return static_cast<uint8_t>(v);
  return 0;
}

}  // namespace

void quantize_row_q5_0_ref(const float* x, BlockQ5_0* y, int64_t n) {
  assert(n % kQ5_0BlockElems == 0);
  constexpr int64_t kHalf = kQ5_0BlockElems / 2;
  for (int64_t b = 0; b < n / kQ5_0BlockElems; ++b, x += kQ5_0BlockElems) {
    float amax = 0.0f, max = 0.0f;  // the first element of largest |x|, with its sign
    for (int64_t j = 0; j < kQ5_0BlockElems; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int64_t j = 0; j < kHalf; ++j) {
      const uint8_t lo = quant_from_shifted(x[j] * id + 16.5f);
      const uint8_t hi = quant_from_shifted(x[j + kHalf] * id + 16.5f);
      y[b].qs[j] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
      qh |= static_cast<uint32_t>(lo >> 4) << j;
      qh |= static_cast<uint32_t>(hi >> 4) << (j + kHalf);
    }
    std::memcpy(y[b].qh, &qh, sizeof qh);  // little endian, as GGUF stores it
  }
}

void dequantize_row_q5_0(const BlockQ5_0* x, float* y, int64_t n) {
  assert(n % kQ5_0BlockElems == 0);
  constexpr int64_t kHalf = kQ5_0BlockElems / 2;
  for (int64_t b = 0; b < n / kQ5_0BlockElems; ++b, y += kQ5_0BlockElems) {
    const float d = fp16_to_fp32(x[b].d);
    uint32_t qh;
    std::memcpy(&qh, x[b].qh, sizeof qh);
    for (int64_t j = 0; j < kHalf; ++j) {
      const int lo = (x[b].qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (x[b].qs[j] >> 4) | static_cast<int>(((qh >> (j + kHalf)) & 1u) << 4);
      y[j] = d * static_cast<float>(lo - 16);
      y[j + kHalf] = d * static_cast<float>(hi - 16);
    }
  }
}

float dot_q5_0_q8_0_ref(int64_t n, const std::byte* w_row, const std::byte* act) {
  assert(n % kQ5_0BlockElems == 0);
  constexpr int64_t kHalf = kQ5_0BlockElems / 2;
  const auto* w = reinterpret_cast<const BlockQ5_0*>(w_row);
  const ActQ8Row x = act_q8_row(act, n);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQ5_0BlockElems; ++b) {
    const int8_t* q = x.q + b * kQ5_0BlockElems;
    uint32_t qh;
    std::memcpy(&qh, w[b].qh, sizeof qh);
    int32_t isum = 0;  // |isum| <= 32 * 16 * 127 = 65024
    for (int64_t j = 0; j < kHalf; ++j) {
      const int lo = (w[b].qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (w[b].qs[j] >> 4) | static_cast<int>(((qh >> (j + kHalf)) & 1u) << 4);
      isum += (lo - 16) * q[j] + (hi - 16) * q[j + kHalf];
    }
    acc += fp16_to_fp32(w[b].d) * x.d[b] * static_cast<float>(isum);
  }
  return acc;
}

}  // namespace pacer::ops
