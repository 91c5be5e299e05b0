// Q8_0 reference code: the weight quantizer (ggml-identical), the act-Q8 quantizer and the dot
// product the SIMD kernels are tested against.
#include "ops/q8_0.h"

#include <cassert>
#include <cmath>

namespace pacer::ops {
namespace {

// max |x[j]| over one block of 32.
float block_amax(const float* x) {
  float amax = 0.0f;
  for (int64_t j = 0; j < kQ8_0BlockElems; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  return amax;
}

}  // namespace

void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t n) {
  assert(n % kQ8_0BlockElems == 0);
  for (int64_t b = 0; b < n / kQ8_0BlockElems; ++b, x += kQ8_0BlockElems) {
    const float d = block_amax(x) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    for (int64_t j = 0; j < kQ8_0BlockElems; ++j) {
      y[b].qs[j] = static_cast<int8_t>(std::round(x[j] * id));  // |x*id| <= 127 (+ulps)
    }
  }
}

void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t n) {
  assert(n % kQ8_0BlockElems == 0);
  for (int64_t b = 0; b < n / kQ8_0BlockElems; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    for (int64_t j = 0; j < kQ8_0BlockElems; ++j) *y++ = d * static_cast<float>(x[b].qs[j]);
  }
}

void quantize_act_q8_ref(const float* x, std::byte* act, int64_t n) {
  assert(n % kQ8_0BlockElems == 0);
  const int64_t nb = n / kQ8_0BlockElems;
  auto* q = reinterpret_cast<int8_t*>(act);
  auto* d_out = reinterpret_cast<float*>(act + n);
  auto* sum_out = reinterpret_cast<int32_t*>(act + n + 4 * nb);
  for (int64_t b = 0; b < nb; ++b, x += kQ8_0BlockElems, q += kQ8_0BlockElems) {
    const float d = block_amax(x) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int32_t sum = 0;
    for (int64_t j = 0; j < kQ8_0BlockElems; ++j) {
      q[j] = static_cast<int8_t>(std::round(x[j] * id));
      sum += q[j];
    }
    d_out[b] = d;
    sum_out[b] = sum;
  }
}

float dot_q8_0_q8_0_ref(int64_t n, const std::byte* w_row, const std::byte* act) {
  assert(n % kQ8_0BlockElems == 0);
  const auto* w = reinterpret_cast<const BlockQ8_0*>(w_row);
  const ActQ8Row x = act_q8_row(act, n);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQ8_0BlockElems; ++b) {
    int32_t isum = 0;  // |isum| <= 32 * 127 * 127 = 516128
    for (int64_t j = 0; j < kQ8_0BlockElems; ++j) {
      isum += static_cast<int32_t>(w[b].qs[j]) * x.q[b * kQ8_0BlockElems + j];
    }
    acc += fp16_to_fp32(w[b].d) * x.d[b] * static_cast<float>(isum);
  }
  return acc;
}

}  // namespace pacer::ops
