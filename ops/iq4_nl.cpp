// IQ4_NL reference code: pacer's own weight quantizer (see iq4_nl.h), the dequantizer and the dot
// product with act-Q8 that the SIMD kernels are tested against.
#include "ops/iq4_nl.h"

#include <cassert>
#include <cmath>

#include "ops/q8_0.h"

namespace pacer::ops {
namespace {

constexpr int64_t kHalf = kIq4NlBlockElems / 2;

// Index of the level nearest to v (the lower one on a tie; NaN -> 0). The midpoints between
// neighbouring levels are exact in float.
int nearest_level(float v) {
  int lo = 0, hi = 15;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    const float split = 0.5f * static_cast<float>(kIq4NlValues[mid] + kIq4NlValues[mid + 1]);
    if (v > split) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Levels of x[0..32) at inverse scale id, and the least-squares scale for them:
// d = sum x v / sum v^2, which leaves a squared error of sum x^2 - (sum x v)^2 / sum v^2.
// Returns (sum x v)^2 / sum v^2 (larger is better) and the scale in *d.
double fit_levels(const float* x, float id, uint8_t* idx, float* d) {
  double sxv = 0, svv = 0;
  for (int64_t j = 0; j < kIq4NlBlockElems; ++j) {
    idx[j] = static_cast<uint8_t>(nearest_level(x[j] * id));
    const double v = kIq4NlValues[idx[j]];
    sxv += x[j] * v;
    svv += v * v;
  }
  *d = static_cast<float>(sxv / svv);  // svv >= 32 (every level has |v| >= 1)
  return sxv * sxv / svv;
}

}  // namespace

void quantize_row_iq4_nl_ref(const float* x, BlockIQ4_NL* y, int64_t n) {
  assert(n % kIq4NlBlockElems == 0);
  for (int64_t b = 0; b < n / kIq4NlBlockElems; ++b, x += kIq4NlBlockElems) {
    float amax = 0.0f, max = 0.0f;  // the first element of largest |x|, with its sign
    for (int64_t j = 0; j < kIq4NlBlockElems; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    uint8_t best[kIq4NlBlockElems] = {};
    float best_d = 0.0f;
    if (amax > 0.0f) {
      // Candidates: max lands on -127 + k (k in [-4, 4]) or on 113 + k (k in [-4, 3]); the first
      // (k = 0) alone bounds every element's error by 14 |d| (the widest half-gap is 12, and
      // 113..127 is 14), and the others can only lower the block's squared error.
      double best_score = -1.0;
      uint8_t idx[kIq4NlBlockElems];
      auto consider = [&](float id) {
        float d;
        const double score = fit_levels(x, id, idx, &d);
        if (score > best_score) {
          best_score = score;
          best_d = d;
          for (int64_t j = 0; j < kIq4NlBlockElems; ++j) best[j] = idx[j];
        }
      };
      consider(static_cast<float>(kIq4NlValues[0]) / max);
      for (int k = -4; k <= 4; ++k) {
        if (k != 0) consider(static_cast<float>(kIq4NlValues[0] + k) / max);
      }
      for (int k = -4; k <= 3; ++k) consider(static_cast<float>(kIq4NlValues[15] + k) / max);
      // Nearest levels at the winning scale, then refit: neither step raises the error.
      if (best_d != 0.0f) consider(1.0f / best_d);
    }
    y[b].d = fp32_to_fp16(best_d);
    for (int64_t j = 0; j < kHalf; ++j) {
      y[b].qs[j] = static_cast<uint8_t>(best[j] | (best[j + kHalf] << 4));
    }
  }
}

void dequantize_row_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t n) {
  assert(n % kIq4NlBlockElems == 0);
  for (int64_t b = 0; b < n / kIq4NlBlockElems; ++b, y += kIq4NlBlockElems) {
    const float d = fp16_to_fp32(x[b].d);
    for (int64_t j = 0; j < kHalf; ++j) {
      y[j] = d * static_cast<float>(kIq4NlValues[x[b].qs[j] & 0x0F]);
      y[j + kHalf] = d * static_cast<float>(kIq4NlValues[x[b].qs[j] >> 4]);
    }
  }
}

float dot_iq4_nl_q8_0_ref(int64_t n, const std::byte* w_row, const std::byte* act) {
  assert(n % kIq4NlBlockElems == 0);
  const auto* w = reinterpret_cast<const BlockIQ4_NL*>(w_row);
  const ActQ8Row x = act_q8_row(act, n);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kIq4NlBlockElems; ++b) {
    const int8_t* q = x.q + b * kIq4NlBlockElems;
    int32_t isum = 0;  // |isum| <= 32 * 127 * 127 = 516128
    for (int64_t j = 0; j < kHalf; ++j) {
      isum += kIq4NlValues[w[b].qs[j] & 0x0F] * q[j] + kIq4NlValues[w[b].qs[j] >> 4] * q[j + kHalf];
    }
    acc += fp16_to_fp32(w[b].d) * x.d[b] * static_cast<float>(isum);
  }
  return acc;
}

}  // namespace pacer::ops
