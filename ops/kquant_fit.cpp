// Sub-block grid searches of the K-quant quantizers (see kquant_fit.h).
#include "ops/kquant_fit.h"

#include <algorithm>
#include <cmath>

namespace pacer::ops {
namespace {

// Sum of squared errors of x against a + s*q[i].
double affine_sse(const float* x, const uint8_t* q, int n, float s, float a) {
  double sse = 0;
  for (int i = 0; i < n; ++i) {
    const double e = double(a) + double(s) * q[i] - x[i];
    sse += e * e;
  }
  return sse;
}

// Sum of squared errors of x against s * levels[k[i]].
double scaled_sse(const float* x, const uint8_t* k, int n, float s, const int8_t* levels) {
  double sse = 0;
  for (int i = 0; i < n; ++i) {
    const double e = double(s) * levels[k[i]] - x[i];
    sse += e * e;
  }
  return sse;
}

constexpr int kMaxSubElems = 32;

}  // namespace

int nearest_affine_level(float x, float s, float a, int max_q) {
  if (!(s > 0.0f)) return 0;
  const float q = std::nearbyint((x - a) / s);
  return static_cast<int>(std::clamp(q, 0.0f, static_cast<float>(max_q)));
}

void fit_affine_grid(const float* x, int n, int max_q, float* s_out, float* a_out) {
  float lo = 0.0f, hi = x[0];
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  *s_out = 0.0f;
  *a_out = lo;
  if (!(hi > lo)) return;  // every element equals lo <= 0: no step needed
  *s_out = (hi - lo) / static_cast<float>(max_q);
  double best = INFINITY;
  uint8_t q[kMaxSubElems];
  // Levels spanned by [lo, hi]: max_q (k = 0, the min-max grid) and up to 1 more or less.
  for (int k = -5; k <= 5; ++k) {
    const float levels = static_cast<float>(max_q) + 0.2f * static_cast<float>(k);
    if (!(levels > 0.5f)) continue;
    const float s = (hi - lo) / levels, a = lo;
    for (int i = 0; i < n; ++i)
      q[i] = static_cast<uint8_t>(nearest_affine_level(x[i], s, a, max_q));
    const double sse = affine_sse(x, q, n, s, a);
    if (sse < best) best = sse, *s_out = s, *a_out = a;
    // Least squares on these levels; a > 0 is not representable, so then a = 0 and s alone.
    double sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
      sq += q[i], sqq += double(q[i]) * q[i], sx += x[i], sqx += double(q[i]) * x[i];
    }
    const double det = n * sqq - sq * sq;
    if (det <= 0) continue;
    double fs = (n * sqx - sq * sx) / det, fa = (sqq * sx - sq * sqx) / det;
    if (fa > 0) fa = 0, fs = sqx / sqq;
    if (!(fs > 0)) continue;
    const double fit = affine_sse(x, q, n, static_cast<float>(fs), static_cast<float>(fa));
    if (fit < best) best = fit, *s_out = static_cast<float>(fs), *a_out = static_cast<float>(fa);
  }
}

int nearest_scaled_level(float x, float s, const int8_t* levels, int count) {
  int best = 0;
  float best_err = INFINITY;
  for (int k = 0; k < count; ++k) {
    const float err = std::fabs(s * static_cast<float>(levels[k]) - x);
    if (err < best_err) best_err = err, best = k;
  }
  return best;
}

float fit_scaled_levels(const float* x, int n, const int8_t* levels, int count) {
  float xmax = 0.0f;  // the element of largest magnitude, with its sign
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(xmax)) xmax = x[i];
  }
  if (xmax == 0.0f) return 0.0f;
  const float lo = levels[0], hi = levels[count - 1];
  const float unit = (hi - lo) / static_cast<float>(count - 1);  // mean level spacing
  float best_s = xmax / lo;  // k = 0 towards levels[0]: the grid the error bound rests on
  double best = INFINITY;
  uint8_t k_of[kMaxSubElems];
  for (const float end : {lo, hi}) {
    for (int k = -6; k <= 6; ++k) {
      const float target = end + (end < 0 ? -1.0f : 1.0f) * 0.1f * unit * static_cast<float>(k);
      if (target == 0.0f) continue;
      const float s = xmax / target;
      for (int i = 0; i < n; ++i) {
        k_of[i] = static_cast<uint8_t>(nearest_scaled_level(x[i], s, levels, count));
      }
      const double sse = scaled_sse(x, k_of, n, s, levels);
      if (sse < best) best = sse, best_s = s;
      double sll = 0, slx = 0;  // least squares: s = sum l x / sum l^2 on these levels
      for (int i = 0; i < n; ++i) {
        sll += double(levels[k_of[i]]) * levels[k_of[i]];
        slx += double(levels[k_of[i]]) * x[i];
      }
      if (!(sll > 0)) continue;
      const float fs = static_cast<float>(slx / sll);
      const double fit = scaled_sse(x, k_of, n, fs, levels);
      if (fit < best) best = fit, best_s = fs;
    }
  }
  return best_s;
}

}  // namespace pacer::ops
