// AVX2 elementwise kernels: the algorithms of ops/elementwise_simd.h over 8-lane vectors.
#include "ops/elementwise_simd.h"
#include "ops/vec_avx2.h"

namespace pacer::ops {
namespace {

constexpr ElementwiseKernels kAvx2Kernels = elementwise_table<avx2::VecF32>();

}  // namespace

const ElementwiseKernels& elementwise_kernels_avx2() noexcept {
  return kAvx2Kernels;
}

}  // namespace pacer::ops
