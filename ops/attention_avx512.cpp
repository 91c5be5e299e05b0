// AVX-512 attention: the algorithm of ops/attention_simd.h on 16 lanes (vcvtph2ps, masked loads
// for a head_dim tail).
#include "ops/vec_avx512.h"  // first: wraps <immintrin.h>

#include "ops/attention_simd.h"

namespace pacer::ops {
namespace {

constexpr AttentionKernels kAvx512Kernels = attention_simd::kernel_table<avx512::VecF32>();

}  // namespace

const AttentionKernels& attention_kernels_avx512() noexcept {
  return kAvx512Kernels;
}

}  // namespace pacer::ops
