// Q5_K reference code: the quantizer, the dequantizer and the dot product with Q8_K that the
// SIMD kernels are tested against, all written from the block layout in q5_k.h.
#include "ops/q5_k.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "ops/kquant_fit.h"

namespace pacer::ops {
namespace {

constexpr int kSubBlocks = 8;  // per super-block
constexpr int kSubElems = 32;  // per sub-block
constexpr int kMaxQ = 31;      // 5-bit levels 0..31
constexpr int kMaxCode = 63;   // 6-bit scale and min codes

// sc_j and m_j of sub-block j (the Q4_K packing, q4_k.h).
void scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
    *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
  }
}

// The inverse of scale_min for all 8 sub-blocks (codes in [0, 63]).
void pack_scale_min(const int sc[kSubBlocks], const int m[kSubBlocks], uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
    s[j + 4] = static_cast<uint8_t>(m[j] | (m[j + 4] >> 4) << 6);
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
  }
}

// q in [0, 31] of element e (sub-block e/32, chunk e/64).
int quant(const BlockQ5_K& b, int e) {
  const int j = e / kSubElems, l = e % kSubElems;
  const int low = (b.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
  return low | ((b.qh[l] >> j) & 1) << 4;
}

// The 6-bit code of v against factor f (nearest, in [0, 63]; 0 when f is 0).
int code_of(float v, float f) {
  if (!(f > 0.0f)) return 0;
  return static_cast<int>(std::clamp(std::nearbyint(v / f), 0.0f, static_cast<float>(kMaxCode)));
}

}  // namespace

void quantize_row_q5_K_ref(const float* x, BlockQ5_K* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    float s[kSubBlocks], m[kSubBlocks];
    float s_max = 0.0f, m_max = 0.0f;
    for (int j = 0; j < kSubBlocks; ++j) {
      float a;
      fit_affine_grid(x + kSubElems * j, kSubElems, kMaxQ, &s[j], &a);
      m[j] = -a;
      s_max = std::max(s_max, s[j]);
      m_max = std::max(m_max, m[j]);
    }
    y[b].d = fp32_to_fp16(s_max / kMaxCode);
    y[b].dmin = fp32_to_fp16(m_max / kMaxCode);
    const float d = fp16_to_fp32(y[b].d), dmin = fp16_to_fp32(y[b].dmin);
    int sc[kSubBlocks], mc[kSubBlocks];
    for (int j = 0; j < kSubBlocks; ++j) {
      sc[j] = code_of(s[j], d);
      mc[j] = code_of(m[j], dmin);
    }
    pack_scale_min(sc, mc, y[b].scales);
    std::fill(std::begin(y[b].qh), std::end(y[b].qh), uint8_t{0});
    std::fill(std::begin(y[b].qs), std::end(y[b].qs), uint8_t{0});
    for (int j = 0; j < kSubBlocks; ++j) {
      const float step = d * static_cast<float>(sc[j]),
                  offset = -(dmin * static_cast<float>(mc[j]));
      for (int l = 0; l < kSubElems; ++l) {
        const int q = nearest_affine_level(x[kSubElems * j + l], step, offset, kMaxQ);
        y[b].qs[32 * (j / 2) + l] |= static_cast<uint8_t>((q & 15) << (4 * (j % 2)));
        y[b].qh[l] |= static_cast<uint8_t>((q >> 4) << j);
      }
    }
  }
}

void dequantize_row_q5_K(const BlockQ5_K* x, float* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, y += kQK_K) {
    const float d = fp16_to_fp32(x[b].d), dmin = fp16_to_fp32(x[b].dmin);
    for (int j = 0; j < kSubBlocks; ++j) {
      int sc, m;
      scale_min(x[b].scales, j, &sc, &m);
      const float step = d * static_cast<float>(sc), offset = dmin * static_cast<float>(m);
      for (int l = 0; l < kSubElems; ++l) {
        const int e = kSubElems * j + l;
        y[e] = step * static_cast<float>(quant(x[b], e)) - offset;
      }
    }
  }
}

float dot_q5_K_q8_K_ref(int64_t n, const std::byte* w_row, const std::byte* act) {
  assert(n % kQK_K == 0);
  const auto* w = reinterpret_cast<const BlockQ5_K*>(w_row);
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int32_t isum = 0;  // sum_j sc_j * sum q*qx: |.| <= 8 * 63 * (32 * 31 * 127) = 63,504,384
    int32_t msum = 0;  // sum_j m_j * (sum qx):   |.| <= 8 * 63 * 4064 = 2,048,256
    for (int j = 0; j < kSubBlocks; ++j) {
      int sc, m;
      scale_min(w[b].scales, j, &sc, &m);
      int32_t dot = 0;
      for (int l = 0; l < kSubElems; ++l) {
        const int e = kSubElems * j + l;
        dot += quant(w[b], e) * x[b].qs[e];
      }
      isum += sc * dot;
      msum += m * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
    }
    const float d = fp16_to_fp32(w[b].d) * x[b].d, dmin = fp16_to_fp32(w[b].dmin) * x[b].d;
    acc += d * static_cast<float>(isum) - dmin * static_cast<float>(msum);
  }
  return acc;
}

}  // namespace pacer::ops
