// Q4_K reference code: the quantizer, the dequantizer and the dot product with Q8_K that the
// SIMD kernels are tested against, all written from the block layout in q4_k.h.
#include "ops/q4_k.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace pacer::ops {
namespace {

constexpr int kSubBlocks = 8;  // per super-block
constexpr int kSubElems = 32;  // per sub-block
constexpr int kMaxQ = 15;      // 4-bit levels 0..15
constexpr int kMaxCode = 63;   // 6-bit scale and min codes

// sc_j and m_j of sub-block j, straight from the byte layout (q4_k.h).
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

// Nearest level of the grid a + s*q, q in [0, 15], for x (0 when the grid has no step).
int nearest_level(float x, float s, float a) {
  if (!(s > 0.0f)) return 0;
  const float q = std::nearbyint((x - a) / s);
  return static_cast<int>(std::clamp(q, 0.0f, static_cast<float>(kMaxQ)));
}

// Sum of squared errors of x against a + s*q[i].
double grid_sse(const float* x, const uint8_t* q, float s, float a) {
  double sse = 0;
  for (int i = 0; i < kSubElems; ++i) {
    const double e = double(a) + double(s) * q[i] - x[i];
    sse += e * e;
  }
  return sse;
}

// The grid (step s >= 0, offset a <= 0: the format stores a as -dmin*m with m >= 0) that
// minimises the squared error of one sub-block, searched over: the min-max grid (step
// range/15 from min(0, min x): covers [min(0, min x), max x], so every element is within s/2),
// steps range/14 ... range/16, and for each the least-squares refit of (s, a) to the levels it
// chose. Keeping the min-max grid among the candidates is what the error bound rests on.
void fit_sub_block(const float* x, float* s_out, float* a_out) {
  float lo = 0.0f, hi = x[0];
  for (int i = 0; i < kSubElems; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  if (!(hi > lo)) {  // every element equals lo <= 0: no step needed
    *s_out = 0.0f;
    *a_out = lo;
    return;
  }
  *s_out = (hi - lo) / kMaxQ;  // the min-max grid, unless a candidate below does better
  *a_out = lo;
  double best = INFINITY;
  uint8_t q[kSubElems];
  for (int k = -5; k <= 5; ++k) {  // k = 0: the min-max grid
    const float levels = static_cast<float>(kMaxQ) + 0.2f * static_cast<float>(k);
    const float s = (hi - lo) / levels, a = lo;
    for (int i = 0; i < kSubElems; ++i) q[i] = static_cast<uint8_t>(nearest_level(x[i], s, a));
    const double sse = grid_sse(x, q, s, a);
    if (sse < best) best = sse, *s_out = s, *a_out = a;
    // Least squares on these levels: minimise sum (s*q + a - x)^2 over s, a; a > 0 is not
    // representable, so then a = 0 and s fits alone.
    double sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < kSubElems; ++i) {
      sq += q[i], sqq += double(q[i]) * q[i], sx += x[i], sqx += double(q[i]) * x[i];
    }
    const double det = kSubElems * sqq - sq * sq;
    if (det <= 0) continue;
    double fs = (kSubElems * sqx - sq * sx) / det, fa = (sqq * sx - sq * sqx) / det;
    if (fa > 0) fa = 0, fs = sqx / sqq;
    if (!(fs > 0)) continue;
    const double fit_sse = grid_sse(x, q, static_cast<float>(fs), static_cast<float>(fa));
    if (fit_sse < best) {
      best = fit_sse, *s_out = static_cast<float>(fs), *a_out = static_cast<float>(fa);
    }
  }
}

// The 6-bit code of v against factor f (nearest, in [0, 63]; 0 when f is 0).
int code_of(float v, float f) {
  if (!(f > 0.0f)) return 0;
  return static_cast<int>(std::clamp(std::nearbyint(v / f), 0.0f, static_cast<float>(kMaxCode)));
}

}  // namespace

void quantize_row_q4_K_ref(const float* x, BlockQ4_K* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    float s[kSubBlocks], m[kSubBlocks];
    float s_max = 0.0f, m_max = 0.0f;
    for (int j = 0; j < kSubBlocks; ++j) {
      float a;
      fit_sub_block(x + kSubElems * j, &s[j], &a);
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
    // Every element to the nearest level of its sub-block's final (coded) grid.
    uint8_t q[kQK_K];
    for (int j = 0; j < kSubBlocks; ++j) {
      const float step = d * static_cast<float>(sc[j]),
                  offset = -(dmin * static_cast<float>(mc[j]));
      for (int i = kSubElems * j; i < kSubElems * (j + 1); ++i) {
        q[i] = static_cast<uint8_t>(nearest_level(x[i], step, offset));
      }
    }
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        y[b].qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | q[64 * c + 32 + l] << 4);
      }
    }
  }
}

void dequantize_row_q4_K(const BlockQ4_K* x, float* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, y += kQK_K) {
    const float d = fp16_to_fp32(x[b].d), dmin = fp16_to_fp32(x[b].dmin);
    for (int j = 0; j < kSubBlocks; ++j) {
      int sc, m;
      scale_min(x[b].scales, j, &sc, &m);
      const float step = d * static_cast<float>(sc), offset = dmin * static_cast<float>(m);
      const int c = j / 2, shift = 4 * (j % 2);  // chunk, and low/high nibble
      for (int l = 0; l < kSubElems; ++l) {
        const int q = (x[b].qs[32 * c + l] >> shift) & 15;
        y[kSubElems * j + l] = step * static_cast<float>(q) - offset;
      }
    }
  }
}

float dot_q4_K_q8_K_ref(int64_t n, const std::byte* w_row, const std::byte* act) {
  assert(n % kQK_K == 0);
  const auto* w = reinterpret_cast<const BlockQ4_K*>(w_row);
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int32_t isum = 0;  // sum_j sc_j * sum q*qx: |.| <= 8 * 63 * (32 * 15 * 127) = 30,720,960
    int32_t msum = 0;  // sum_j m_j * (sum qx):   |.| <= 8 * 63 * 4064 = 2,048,256
    for (int j = 0; j < kSubBlocks; ++j) {
      int sc, m;
      scale_min(w[b].scales, j, &sc, &m);
      const int c = j / 2, shift = 4 * (j % 2);
      int32_t dot = 0;
      for (int l = 0; l < kSubElems; ++l) {
        dot += ((w[b].qs[32 * c + l] >> shift) & 15) * x[b].qs[kSubElems * j + l];
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
