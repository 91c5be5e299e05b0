// IQ4_XS reference code: the quantizer, the dequantizer and the dot product with Q8_K that the
// SIMD kernels are tested against, all written from the block layout in iq4_xs.h.
#include "ops/iq4_xs.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <iterator>

#include "ops/kquant_fit.h"

namespace pacer::ops {
namespace {

constexpr int kSubBlocks = 8;  // per super-block
constexpr int kSubElems = 32;  // per sub-block

// sc_j in [-32, 31] of sub-block j.
int scale(const BlockIQ4_XS& b, int j) {
  const int low = (b.scales_l[j / 2] >> (4 * (j % 2))) & 15;
  const int high = (b.scales_h >> (2 * j)) & 3;
  return (low | high << 4) - 32;
}

// The level of element e.
int level(const BlockIQ4_XS& b, int e) {
  const int j = e / kSubElems, l = e % kSubElems;
  const uint8_t byte = b.qs[16 * j + l % 16];
  return kIq4NlLevels[l < 16 ? byte & 15 : byte >> 4];
}

}  // namespace

void quantize_row_iq4_xs_ref(const float* x, BlockIQ4_XS* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    float s[kSubBlocks], s_big = 0.0f;  // s_big: the scale of largest magnitude, with its sign
    for (int j = 0; j < kSubBlocks; ++j) {
      s[j] = fit_scaled_levels(x + kSubElems * j, kSubElems, kIq4NlLevels, 16);
      if (std::fabs(s[j]) > std::fabs(s_big)) s_big = s[j];
    }
    y[b].d = fp32_to_fp16(s_big / -32.0f);
    const float d = fp16_to_fp32(y[b].d);
    y[b].scales_h = 0;
    std::fill(std::begin(y[b].scales_l), std::end(y[b].scales_l), uint8_t{0});
    std::fill(std::begin(y[b].qs), std::end(y[b].qs), uint8_t{0});
    for (int j = 0; j < kSubBlocks; ++j) {
      const int code =
          d == 0.0f ? 0 : static_cast<int>(std::clamp(std::nearbyint(s[j] / d), -32.0f, 31.0f));
      const int stored = code + 32;
      y[b].scales_l[j / 2] |= static_cast<uint8_t>((stored & 15) << (4 * (j % 2)));
      y[b].scales_h = static_cast<uint16_t>(y[b].scales_h | (stored >> 4) << (2 * j));
      const float step = d * static_cast<float>(code);
      for (int l = 0; l < kSubElems; ++l) {
        const int k = nearest_scaled_level(x[kSubElems * j + l], step, kIq4NlLevels, 16);
        y[b].qs[16 * j + l % 16] |= static_cast<uint8_t>(k << (l < 16 ? 0 : 4));
      }
    }
  }
}

void dequantize_row_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, y += kQK_K) {
    const float d = fp16_to_fp32(x[b].d);
    for (int j = 0; j < kSubBlocks; ++j) {
      const float step = d * static_cast<float>(scale(x[b], j));
      for (int l = 0; l < kSubElems; ++l) {
        const int e = kSubElems * j + l;
        y[e] = step * static_cast<float>(level(x[b], e));
      }
    }
  }
}

float dot_iq4_xs_q8_K_ref(int64_t n, const std::byte* w_row, const std::byte* act) {
  assert(n % kQK_K == 0);
  const auto* w = reinterpret_cast<const BlockIQ4_XS*>(w_row);
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int32_t isum = 0;  // |.| <= 8 * 32 * (32 * 127 * 127)
    for (int j = 0; j < kSubBlocks; ++j) {
      int32_t dot = 0;
      for (int l = 0; l < kSubElems; ++l) {
        const int e = kSubElems * j + l;
        dot += level(w[b], e) * x[b].qs[e];
      }
      isum += scale(w[b], j) * dot;
    }
    acc += fp16_to_fp32(w[b].d) * x[b].d * static_cast<float>(isum);
  }
  return acc;
}

}  // namespace pacer::ops
