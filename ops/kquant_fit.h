#pragma once
// Grid searches shared by the quantizers of Q5_K, Q3_K, Q2_K and IQ4_XS (baseline code, not hot:
// only `pacer gguf quantize` and the tests run them). Each fits one sub-block's scale (and
// offset) in float; the caller then codes the scales against the super-block factors and
// re-rounds every element to the nearest level of its final grid.
#include <cstdint>

namespace pacer::ops {

// The affine grid a + s*q, q in [0, max_q], with s >= 0 and a <= 0 (the K-quant formats store
// the offset as -dmin*m, m >= 0) that minimises the squared error over a small search: the
// min-max grid (step (hi - lo)/max_q from lo = min(0, min x) to hi = max x, so every element
// is within s/2 of a level), coarser and finer steps around it, and the least-squares refit of
// (s, a) to the levels each candidate picks. The min-max grid stays a candidate, so the result's
// rms error is at most (hi - lo) / (2 max_q).
void fit_affine_grid(const float* x, int n, int max_q, float* s_out, float* a_out);
// Nearest q in [0, max_q] of the grid a + s*q for x (0 when s is not positive).
int nearest_affine_level(float x, float s, float a, int max_q);

// The scale s (either sign) of the grid s * levels[k], k in [0, count) (levels ascending, with
// levels[0] < 0 the one of largest magnitude) that minimises the squared error over a small
// search: s mapping the element of largest |x| onto levels[0] (every element is then within
// max_gap/2 * |s| of a level, or (|levels[0]| - levels[count-1]) * |s| at the clamped end),
// steps around it, the same towards levels[count-1], and the least-squares refit of each.
// Returns 0 for an all-zero sub-block.
float fit_scaled_levels(const float* x, int n, const int8_t* levels, int count);
// Index k of the level s * levels[k] nearest to x (exact scan; ties to the lower index).
int nearest_scaled_level(float x, float s, const int8_t* levels, int count);

}  // namespace pacer::ops
