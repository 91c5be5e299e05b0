// Q6_K reference code: the quantizer, the dequantizer and the dot product with Q8_K that the
// SIMD kernels are tested against, all written from the block layout in q6_k.h.
#include "ops/q6_k.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace pacer::ops {
namespace {

constexpr int kGroups = 16;      // per super-block
constexpr int kGroupElems = 16;  // per group
constexpr int kOffset = 32;      // q - 32 in [-32, 31]

// q (in [0, 63]) of element e of a block, straight from the byte layout (q6_k.h).
int quant_of(const BlockQ6_K& b, int e) {
  const int h = e / 128, quarter = (e % 128) / 32, l = e % 32;
  const int low = (b.ql[64 * h + 32 * (quarter & 1) + l] >> (4 * (quarter >> 1))) & 15;
  const int high = (b.qh[32 * h + l] >> (2 * quarter)) & 3;
  return low | high << 4;
}

// Nearest level l in [-32, 31] of the grid s*l for x (0 when the grid has no step).
int nearest_level(float x, float s) {
  if (s == 0.0f || !std::isfinite(s)) return 0;
  return static_cast<int>(std::clamp(std::nearbyint(x / s), -32.0f, 31.0f));
}

// The signed step s of one group minimising sum (s*l_i - x_i)^2, searched over: the grid that
// puts the element of largest |x| exactly on level -32 (the side with one more level; every
// element is then within |s|, and within |s|/2 unless it rounds to +32), grids with that element
// at -31 ... -33, and for each the least-squares refit s = sum x*l / sum l*l to the levels it
// chose. Keeping the first grid among the candidates is what the error bound rests on.
float fit_group(const float* x) {
  float xm = 0.0f;  // the first element of largest |x|, with its sign
  for (int i = 0; i < kGroupElems; ++i) {
    if (std::fabs(x[i]) > std::fabs(xm)) xm = x[i];
  }
  if (xm == 0.0f) return 0.0f;
  double best = INFINITY;
  float best_s = 0.0f;
  for (int k = -5; k <= 5; ++k) {  // k = 0: largest element on -32
    const float s = -xm / (static_cast<float>(kOffset) + 0.2f * static_cast<float>(k));
    int l[kGroupElems];
    double sse = 0, sxl = 0, sll = 0;
    for (int i = 0; i < kGroupElems; ++i) {
      l[i] = nearest_level(x[i], s);
      const double e = double(s) * l[i] - x[i];
      sse += e * e, sxl += double(x[i]) * l[i], sll += double(l[i]) * l[i];
    }
    if (sse < best) best = sse, best_s = s;
    if (sll == 0) continue;
    const double fit = sxl / sll;
    double fit_sse = 0;
    for (int i = 0; i < kGroupElems; ++i) {
      const double e = double(static_cast<float>(fit)) * l[i] - x[i];
      fit_sse += e * e;
    }
    if (fit_sse < best) best = fit_sse, best_s = static_cast<float>(fit);
  }
  return best_s;
}

}  // namespace

void quantize_row_q6_K_ref(const float* x, BlockQ6_K* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    float s[kGroups];
    float s_big = 0.0f;  // the scale of largest magnitude, with its sign
    for (int g = 0; g < kGroups; ++g) {
      s[g] = fit_group(x + kGroupElems * g);
      if (std::fabs(s[g]) > std::fabs(s_big)) s_big = s[g];
    }
    y[b].d = fp32_to_fp16(-s_big / 128.0f);  // s_big gets code -128, the side with one more
    const float d = fp16_to_fp32(y[b].d);
    for (int g = 0; g < kGroups; ++g) {
      const float code = d != 0.0f ? std::nearbyint(s[g] / d) : 0.0f;
      y[b].scales[g] = static_cast<int8_t>(std::clamp(code, -128.0f, 127.0f));
    }
    // Every element to the nearest level of its group's final (coded) grid.
    uint8_t q[kQK_K];
    for (int g = 0; g < kGroups; ++g) {
      const float step = d * static_cast<float>(y[b].scales[g]);
      for (int i = kGroupElems * g; i < kGroupElems * (g + 1); ++i) {
        q[i] = static_cast<uint8_t>(nearest_level(x[i], step) + kOffset);
      }
    }
    for (int h = 0; h < 2; ++h) {
      const uint8_t* qh = q + 128 * h;
      for (int l = 0; l < 32; ++l) {
        y[b].ql[64 * h + l] = static_cast<uint8_t>((qh[l] & 15) | (qh[l + 64] & 15) << 4);
        y[b].ql[64 * h + 32 + l] = static_cast<uint8_t>((qh[l + 32] & 15) | (qh[l + 96] & 15) << 4);
        y[b].qh[32 * h + l] = static_cast<uint8_t>(qh[l] >> 4 | (qh[l + 32] >> 4) << 2 |
                                                   (qh[l + 64] >> 4) << 4 | (qh[l + 96] >> 4) << 6);
      }
    }
  }
}

void dequantize_row_q6_K(const BlockQ6_K* x, float* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, y += kQK_K) {
    const float d = fp16_to_fp32(x[b].d);
    for (int e = 0; e < kQK_K; ++e) {
      const float step = d * static_cast<float>(x[b].scales[e / kGroupElems]);
      y[e] = step * static_cast<float>(quant_of(x[b], e) - kOffset);
    }
  }
}

float dot_q6_K_q8_K_ref(int64_t n, const std::byte* w_row, const std::byte* act) {
  assert(n % kQK_K == 0);
  const auto* w = reinterpret_cast<const BlockQ6_K*>(w_row);
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int32_t isum = 0;  // bounds in q6_k.h
    for (int g = 0; g < kGroups; ++g) {
      int32_t dot = 0;  // sum q*qx, q unsigned as the SIMD kernels take it
      for (int e = kGroupElems * g; e < kGroupElems * (g + 1); ++e) {
        dot += quant_of(w[b], e) * x[b].qs[e];
      }
      isum += w[b].scales[g] * (dot - kOffset * x[b].bsums[g]);
    }
    acc += fp16_to_fp32(w[b].d) * x[b].d * static_cast<float>(isum);
  }
  return acc;
}

}  // namespace pacer::ops
