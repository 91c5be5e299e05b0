// Q5_1 reference code: the weight quantizer (ggml's rule), the dequantizer and the dot product
// with act-Q8 that the SIMD kernels are tested against.
#include "ops/q5_1.h"

#include <cassert>
#include <cfloat>
#include <cstring>

#include "ops/q8_0.h"

namespace pacer::ops {
namespace {

// trunc(v) clamped to [0, 31] for v = (x - min)*id + 0.5 in [0.5, 31.5 + rounding]; ggml's
// (uint8_t)v for every finite input. NaN -> 0.
uint8_t quant_from_shifted(float v) {
  if (v >= 31.0f) return 31;
  if (v >= 0.0f) return static_cast<uint8_t>(v);
  return 0;
}

}  // namespace

void quantize_row_q5_1_ref(const float* x, BlockQ5_1* y, int64_t n) {
  assert(n % kQ5_1BlockElems == 0);
  constexpr int64_t kHalf = kQ5_1BlockElems / 2;
  for (int64_t b = 0; b < n / kQ5_1BlockElems; ++b, x += kQ5_1BlockElems) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int64_t j = 0; j < kQ5_1BlockElems; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    y[b].m = fp32_to_fp16(min);
    uint32_t qh = 0;
    for (int64_t j = 0; j < kHalf; ++j) {
      const uint8_t lo = quant_from_shifted((x[j] - min) * id + 0.5f);
      const uint8_t hi = quant_from_shifted((x[j + kHalf] - min) * id + 0.5f);
      y[b].qs[j] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
      qh |= static_cast<uint32_t>(lo >> 4) << j;
      qh |= static_cast<uint32_t>(hi >> 4) << (j + kHalf);
    }
    std::memcpy(y[b].qh, &qh, sizeof qh);  // little endian, as GGUF stores it
  }
}

void dequantize_row_q5_1(const BlockQ5_1* x, float* y, int64_t n) {
  assert(n % kQ5_1BlockElems == 0);
  constexpr int64_t kHalf = kQ5_1BlockElems / 2;
  for (int64_t b = 0; b < n / kQ5_1BlockElems; ++b, y += kQ5_1BlockElems) {
    const float d = fp16_to_fp32(x[b].d);
    const float m = fp16_to_fp32(x[b].m);
    uint32_t qh;
    std::memcpy(&qh, x[b].qh, sizeof qh);
    for (int64_t j = 0; j < kHalf; ++j) {
      const int lo = (x[b].qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (x[b].qs[j] >> 4) | static_cast<int>(((qh >> (j + kHalf)) & 1u) << 4);
      y[j] = d * static_cast<float>(lo) + m;
      y[j + kHalf] = d * static_cast<float>(hi) + m;
    }
  }
}

float dot_q5_1_q8_0_ref(int64_t n, const std::byte* w_row, const std::byte* act) {
  assert(n % kQ5_1BlockElems == 0);
  constexpr int64_t kHalf = kQ5_1BlockElems / 2;
  const auto* w = reinterpret_cast<const BlockQ5_1*>(w_row);
  const ActQ8Row x = act_q8_row(act, n);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQ5_1BlockElems; ++b) {
    const int8_t* q = x.q + b * kQ5_1BlockElems;
    uint32_t qh;
    std::memcpy(&qh, w[b].qh, sizeof qh);
    int32_t isum = 0;  // |isum| <= 32 * 31 * 127 = 125984
    for (int64_t j = 0; j < kHalf; ++j) {
      const int lo = (w[b].qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (w[b].qs[j] >> 4) | static_cast<int>(((qh >> (j + kHalf)) & 1u) << 4);
      isum += lo * q[j] + hi * q[j + kHalf];
    }
    acc += fp16_to_fp32(w[b].d) * x.d[b] * static_cast<float>(isum) +
           fp16_to_fp32(w[b].m) * x.d[b] * static_cast<float>(x.sum[b]);
  }
  return acc;
}

}  // namespace pacer::ops
