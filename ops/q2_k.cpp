// Q2_K reference code: the quantizer, the dequantizer and the dot product with Q8_K that the
// SIMD kernels are tested against, all written from the block layout in q2_k.h.
#include "ops/q2_k.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <iterator>

#include "ops/kquant_fit.h"

namespace pacer::ops {
namespace {

constexpr int kGroups = 16;      // per super-block
constexpr int kGroupElems = 16;  // per group
constexpr int kMaxQ = 3;         // 2-bit levels 0..3
constexpr int kMaxCode = 15;     // 4-bit scale and min codes

// q in [0, 3] of element e.
int quant(const BlockQ2_K& b, int e) {
  const int t = e / 128, r = (e % 128) / 32, l = e % 32;
  return (b.qs[32 * t + l] >> (2 * r)) & 3;
}

// The 4-bit code of v against factor f (nearest, in [0, 15]; 0 when f is 0).
int code_of(float v, float f) {
  if (!(f > 0.0f)) return 0;
  return static_cast<int>(std::clamp(std::nearbyint(v / f), 0.0f, static_cast<float>(kMaxCode)));
}

}  // namespace

void quantize_row_q2_K_ref(const float* x, BlockQ2_K* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    float s[kGroups], m[kGroups];
    float s_max = 0.0f, m_max = 0.0f;
    for (int g = 0; g < kGroups; ++g) {
      float a;
      fit_affine_grid(x + kGroupElems * g, kGroupElems, kMaxQ, &s[g], &a);
      m[g] = -a;
      s_max = std::max(s_max, s[g]);
      m_max = std::max(m_max, m[g]);
    }
    y[b].d = fp32_to_fp16(s_max / kMaxCode);
    y[b].dmin = fp32_to_fp16(m_max / kMaxCode);
    const float d = fp16_to_fp32(y[b].d), dmin = fp16_to_fp32(y[b].dmin);
    std::fill(std::begin(y[b].qs), std::end(y[b].qs), uint8_t{0});
    for (int g = 0; g < kGroups; ++g) {
      const int sc = code_of(s[g], d), mc = code_of(m[g], dmin);
      y[b].scales[g] = static_cast<uint8_t>(sc | mc << 4);
      const float step = d * static_cast<float>(sc), offset = -(dmin * static_cast<float>(mc));
      for (int i = 0; i < kGroupElems; ++i) {
        const int e = kGroupElems * g + i;
        const int q = nearest_affine_level(x[e], step, offset, kMaxQ);
        const int t = e / 128, r = (e % 128) / 32, l = e % 32;
        y[b].qs[32 * t + l] |= static_cast<uint8_t>(q << (2 * r));
      }
    }
  }
}

void dequantize_row_q2_K(const BlockQ2_K* x, float* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, y += kQK_K) {
    const float d = fp16_to_fp32(x[b].d), dmin = fp16_to_fp32(x[b].dmin);
    for (int g = 0; g < kGroups; ++g) {
      const float step = d * static_cast<float>(x[b].scales[g] & 15),
                  offset = dmin * static_cast<float>(x[b].scales[g] >> 4);
      for (int i = 0; i < kGroupElems; ++i) {
        const int e = kGroupElems * g + i;
        y[e] = step * static_cast<float>(quant(x[b], e)) - offset;
      }
    }
  }
}

float dot_q2_K_q8_K_ref(int64_t n, const std::byte* w_row, const std::byte* act) {
  assert(n % kQK_K == 0);
  const auto* w = reinterpret_cast<const BlockQ2_K*>(w_row);
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int32_t isum = 0;  // sum_g sc_g * sum q*qx: |.| <= 16 * 15 * (16 * 3 * 127)
    int32_t msum = 0;  // sum_g m_g * bsums[g]:  |.| <= 16 * 15 * 2032
    for (int g = 0; g < kGroups; ++g) {
      int32_t dot = 0;
      for (int i = 0; i < kGroupElems; ++i) {
        const int e = kGroupElems * g + i;
        dot += quant(w[b], e) * x[b].qs[e];
      }
      isum += (w[b].scales[g] & 15) * dot;
      msum += (w[b].scales[g] >> 4) * x[b].bsums[g];
    }
    const float d = fp16_to_fp32(w[b].d) * x[b].d, dmin = fp16_to_fp32(w[b].dmin) * x[b].d;
    acc += d * static_cast<float>(isum) - dmin * static_cast<float>(msum);
  }
  return acc;
}

}  // namespace pacer::ops
