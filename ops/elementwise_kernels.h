#pragma once
// Per-Isa tables of the elementwise kernels behind ops/elementwise.h. Internal to ops/ (and the
// tests, which hold every Isa's table to the scalar one). A KernelSet (kernel_set.h) picks the
// table once per session; the tables are constants.
//
// Raw pointers + lengths because the public wrappers have already checked the span sizes.
#include <cstdint>

#include "ops/isa.h"

namespace pacer::ops {

struct ElementwiseKernels {
  // out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]; out may alias x.
  void (*rmsnorm)(const float* x, const float* w, float eps, float* out, int64_t n);
  // out[i] = silu(g[i]) * u[i]; out may alias g or u.
  void (*swiglu)(const float* g, const float* u, float* out, int64_t n);
  // out[i] = gelu_tanh(g[i]) * u[i]; out may alias g or u.
  void (*geglu)(const float* g, const float* u, float* out, int64_t n);
  // In place: x[i] = exp(x[i] - max) / sum.
  void (*softmax)(float* x, int64_t n);
  // out[i] = a[i] + b[i]; out may alias a or b.
  void (*add)(const float* a, const float* b, float* out, int64_t n);
  // x[i] *= s
  void (*scale)(float* x, float s, int64_t n);
};

// The table for `isa` (Scalar is plain C++ with std::exp/std::tanh: the reference the SIMD tables
// are tested against). Callers must check isa_supported(isa) before running an Avx2/Avx512 table.
const ElementwiseKernels& elementwise_kernels(Isa isa) noexcept;

// Defined in elementwise_avx2.cpp / elementwise_avx512.cpp (compiled with their -m flags).
const ElementwiseKernels& elementwise_kernels_avx2() noexcept;
const ElementwiseKernels& elementwise_kernels_avx512() noexcept;

}  // namespace pacer::ops
