// Q3_K reference code: the quantizer, the dequantizer and the dot product with Q8_K that the
// SIMD kernels are tested against, all written from the block layout in q3_k.h.
#include "ops/q3_k.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <iterator>

#include "ops/kquant_fit.h"

namespace pacer::ops {
namespace {

constexpr int kGroups = 16;      // per super-block
constexpr int kGroupElems = 16;  // per group
constexpr int8_t kLevels[8] = {-4, -3, -2, -1, 0, 1, 2, 3};

// sc_g in [-32, 31] of group g.
int scale(const uint8_t* s, int g) {
  const int low = g < 8 ? s[g] & 15 : s[g - 8] >> 4;
  const int high = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
  return (low | high << 4) - 32;
}

// u = q + 4 in [0, 7] of element e.
int unsigned_quant(const BlockQ3_K& b, int e) {
  const int t = e / 128, r = (e % 128) / 32, l = e % 32;
  const int low = (b.qs[32 * t + l] >> (2 * r)) & 3;
  return low | ((b.hmask[l] >> (e / 32)) & 1) << 2;
}

}  // namespace

void quantize_row_q3_K_ref(const float* x, BlockQ3_K* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    float s[kGroups], s_big = 0.0f;  // s_big: the scale of largest magnitude, with its sign
    for (int g = 0; g < kGroups; ++g) {
      s[g] = fit_scaled_levels(x + kGroupElems * g, kGroupElems, kLevels, 8);
      if (std::fabs(s[g]) > std::fabs(s_big)) s_big = s[g];
    }
    y[b].d = fp32_to_fp16(s_big / -32.0f);
    const float d = fp16_to_fp32(y[b].d);
    std::fill(std::begin(y[b].hmask), std::end(y[b].hmask), uint8_t{0});
    std::fill(std::begin(y[b].qs), std::end(y[b].qs), uint8_t{0});
    std::fill(std::begin(y[b].scales), std::end(y[b].scales), uint8_t{0});
    for (int g = 0; g < kGroups; ++g) {
      const int code =
          d == 0.0f ? 0 : static_cast<int>(std::clamp(std::nearbyint(s[g] / d), -32.0f, 31.0f));
      const int stored = code + 32;
      y[b].scales[g % 8] |= static_cast<uint8_t>((stored & 15) << (4 * (g / 8)));
      y[b].scales[8 + g % 4] |= static_cast<uint8_t>((stored >> 4) << (2 * (g / 4)));
      const float step = d * static_cast<float>(code);
      for (int i = 0; i < kGroupElems; ++i) {
        const int e = kGroupElems * g + i;
        const int u = nearest_scaled_level(x[e], step, kLevels, 8);  // index = q + 4
        const int t = e / 128, r = (e % 128) / 32, l = e % 32;
        y[b].qs[32 * t + l] |= static_cast<uint8_t>((u & 3) << (2 * r));
        y[b].hmask[l] |= static_cast<uint8_t>((u >> 2) << (e / 32));
      }
    }
  }
}

void dequantize_row_q3_K(const BlockQ3_K* x, float* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, y += kQK_K) {
    const float d = fp16_to_fp32(x[b].d);
    for (int g = 0; g < kGroups; ++g) {
      const float step = d * static_cast<float>(scale(x[b].scales, g));
      for (int i = 0; i < kGroupElems; ++i) {
        const int e = kGroupElems * g + i;
        y[e] = step * static_cast<float>(unsigned_quant(x[b], e) - 4);
      }
    }
  }
}

float dot_q3_K_q8_K_ref(int64_t n, const std::byte* w_row, const std::byte* act) {
  assert(n % kQK_K == 0);
  const auto* w = reinterpret_cast<const BlockQ3_K*>(w_row);
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int32_t isum = 0;  // |.| <= 16 * 32 * (16 * 7 * 127 + 4 * 2032) (see q3_k.h)
    for (int g = 0; g < kGroups; ++g) {
      int32_t dot = 0;
      for (int i = 0; i < kGroupElems; ++i) {
        const int e = kGroupElems * g + i;
        dot += unsigned_quant(w[b], e) * x[b].qs[e];
      }
      isum += scale(w[b].scales, g) * (dot - 4 * x[b].bsums[g]);
    }
    acc += fp16_to_fp32(w[b].d) * x[b].d * static_cast<float>(isum);
  }
  return acc;
}

}  // namespace pacer::ops
