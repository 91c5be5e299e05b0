// AVX-512 elementwise kernels: the algorithms of ops/elementwise_simd.h over 16-lane vectors.
// exp-based activations pay most here: a scalar std::exp costs ~10x a vector lane.
#include "ops/vec_avx512.h"  // first: wraps <immintrin.h>

#include "ops/elementwise_simd.h"

namespace pacer::ops {
namespace {

constexpr ElementwiseKernels kAvx512Kernels = elementwise_table<avx512::VecF32>();

}  // namespace

const ElementwiseKernels& elementwise_kernels_avx512() noexcept {
  return kAvx512Kernels;
}

}  // namespace pacer::ops
