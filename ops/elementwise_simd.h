#pragma once
// The elementwise kernels written once over a vector wrapper V (ops/vec_avx2.h, vec_avx512.h),
// as highway does: elementwise_avx2.cpp and elementwise_avx512.cpp each instantiate them with
// their tier's wrapper, compiled with exactly that tier's flags. Whole vectors run unmasked; only
// a row's last partial vector goes through a lane mask, with the same vector math (no scalar
// epilogue with another rounding). Internal to ops/.
#include <cmath>
#include <cstdint>

#include "ops/elementwise_kernels.h"

namespace pacer::ops {
namespace {

// f(i, mask-or-none): i runs over [0, n) by V::kLanes; the call for the last partial vector gets
// the mask of its lanes (load/store overloads take it), the others none.
template <class V, class Body, class Tail>
inline void for_each_vector(int64_t n, const Body& body, const Tail& tail) {
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) body(i);
  if (i < n) tail(i, V::first(n - i));
}

template <class V>
void rmsnorm_simd(const float* x, const float* w, float eps, float* out, int64_t n) {
  using R = typename V::Reg;
  // Four accumulators hide the FMA latency; a tail vector adds into the first.
  R acc[4] = {V::zero(), V::zero(), V::zero(), V::zero()};
  int64_t i = 0;
  for (; i + 4 * V::kLanes <= n; i += 4 * V::kLanes) {
    for (int k = 0; k < 4; ++k) {
      const R v = V::load(x + i + V::kLanes * k);
      acc[k] = V::fmadd(v, v, acc[k]);
    }
  }
  for (; i < n; i += V::kLanes) {
    const R v = i + V::kLanes <= n ? V::load(x + i) : V::load(x + i, V::first(n - i));
    acc[0] = V::fmadd(v, v, acc[0]);
  }
  const float mean =
      V::hsum(V::add(V::add(acc[0], acc[1]), V::add(acc[2], acc[3]))) / static_cast<float>(n);
  const R inv_rms = V::set1(1.0f / std::sqrt(mean + eps));
  for_each_vector<V>(
      n,
      [&](int64_t j) {
        V::store(out + j, V::mul(V::mul(V::load(x + j), inv_rms), V::load(w + j)));
      },
      [&](int64_t j, auto m) {
        V::store(out + j, m, V::mul(V::mul(V::load(x + j, m), inv_rms), V::load(w + j, m)));
      });
}

// out = act(g) * u, act one of V's activations.
template <class V, class Act>
void gated_simd(const float* g, const float* u, float* out, int64_t n, const Act& act) {
  for_each_vector<V>(
      n, [&](int64_t i) { V::store(out + i, V::mul(act(V::load(g + i)), V::load(u + i))); },
      [&](int64_t i, auto m) {
        V::store(out + i, m, V::mul(act(V::load(g + i, m)), V::load(u + i, m)));
      });
}

template <class V>
void swiglu_simd(const float* g, const float* u, float* out, int64_t n) {
  gated_simd<V>(g, u, out, n, [](typename V::Reg v) { return V::silu(v); });
}

template <class V>
void geglu_simd(const float* g, const float* u, float* out, int64_t n) {
  gated_simd<V>(g, u, out, n, [](typename V::Reg v) { return V::gelu_tanh(v); });
}

template <class V>
void softmax_simd(float* x, int64_t n) {
  using R = typename V::Reg;
  if (n == 0) return;
  R vmax = V::set1(-INFINITY);
  for_each_vector<V>(
      n, [&](int64_t i) { vmax = V::max(vmax, V::load(x + i)); },
      [&](int64_t i, auto m) { vmax = V::max(vmax, V::load_or(vmax, x + i, m)); });
  const R max = V::set1(V::hmax(vmax));
  R sum = V::zero();
  for_each_vector<V>(
      n,
      [&](int64_t i) {
        const R e = V::exp_nonpositive(V::sub(V::load(x + i), max));
        sum = V::add(sum, e);
        V::store(x + i, e);
      },
      [&](int64_t i, auto m) {
        const R e = V::exp_nonpositive(V::sub(V::load(x + i, m), max));
        sum = V::add(sum, m, e);
        V::store(x + i, m, e);
      });
  const R inv = V::set1(1.0f / V::hsum(sum));
  for_each_vector<V>(
      n, [&](int64_t i) { V::store(x + i, V::mul(V::load(x + i), inv)); },
      [&](int64_t i, auto m) { V::store(x + i, m, V::mul(V::load(x + i, m), inv)); });
}

template <class V>
void add_simd(const float* a, const float* b, float* out, int64_t n) {
  for_each_vector<V>(
      n, [&](int64_t i) { V::store(out + i, V::add(V::load(a + i), V::load(b + i))); },
      [&](int64_t i, auto m) {
        V::store(out + i, m, V::add(V::load(a + i, m), V::load(b + i, m)));
      });
}

template <class V>
void scale_simd(float* x, float s, int64_t n) {
  const typename V::Reg sv = V::set1(s);
  for_each_vector<V>(
      n, [&](int64_t i) { V::store(x + i, V::mul(V::load(x + i), sv)); },
      [&](int64_t i, auto m) { V::store(x + i, m, V::mul(V::load(x + i, m), sv)); });
}

// The table of one tier.
template <class V>
constexpr ElementwiseKernels elementwise_table() {
  return {rmsnorm_simd<V>, swiglu_simd<V>, geglu_simd<V>,
          softmax_simd<V>, add_simd<V>,    scale_simd<V>};
}

}  // namespace
}  // namespace pacer::ops
