// AVX2 attention: the algorithm of ops/attention_simd.h on 8 lanes (F16C converts F16 rows in
// registers; the rare head_dim tail, head_dim % 8 != 0, stages through a zero-padded buffer).
#include "ops/vec_avx2.h"  // first: the tier's intrinsics

#include "ops/attention_simd.h"

namespace pacer::ops {
namespace {

constexpr AttentionKernels kAvx2Kernels = attention_simd::kernel_table<avx2::VecF32>();

}  // namespace

const AttentionKernels& attention_kernels_avx2() noexcept {
  return kAvx2Kernels;
}

}  // namespace pacer::ops
