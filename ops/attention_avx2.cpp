// AVX2 attention: the algorithm of ops/attention_simd.h on 8 lanes (F16C converts F16 rows in
// registers; the rare head_dim tail, head_dim % 8 != 0, stages through a zero-padded buffer).
#include "ops/vec_avx2.h"  // first: the tier's intrinsics

#include "ops/attention_simd.h"

namespace pacer::ops {
namespace {

constexpr AttentionKernels kAvx2Kernels = attention_simd::kernel_table<avx2::VecF32>();

// The same vectors, every query head of a KV head in one pass (attention_simd.h heads_per_pass;
// isa.h attention_one_pass says where).
struct VecF32AllHeadsOnePass : avx2::VecF32 {
  static constexpr bool kAllHeadsOnePass = true;
};
constexpr AttentionKernels kAvx2OnePassKernels =
    attention_simd::kernel_table<VecF32AllHeadsOnePass>();

}  // namespace

const AttentionKernels& attention_kernels_avx2() noexcept {
  return kAvx2Kernels;
}

const AttentionKernels& attention_kernels_avx2_one_pass() noexcept {
  return kAvx2OnePassKernels;
}

}  // namespace pacer::ops
