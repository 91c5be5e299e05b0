// Q4_1 x act-Q8 on AVX2 (+FMA, F16C).
//
// Per weight block: the 32 nibbles unpack to unsigned bytes in element order, vpmaddubsw with
// the activation quants (pair sums <= 2 * 15 * 127 = 3810, no saturation) and vpmaddwd with ones
// give 8 int32 lanes of sum_j nib_j * x_j; one cvt + FMA applies d_w * d_x. The offset term
// m_w * d_x * sum_b(x) is added per strip of 16 blocks (quant_rows_avx2.h, kHasMin).
#include <immintrin.h>

#include "ops/matmul_simd_avx2.h"
#include "ops/q4_1.h"
#include "ops/q8_0.h"
#include "ops/quant32_simd_avx2.h"
#include "ops/quant_rows_avx2.h"

namespace pacer::ops {
namespace {

struct Q4_1Block {
  using Block = BlockQ4_1;
  static constexpr int32_t kSumFactor = 0;  // the offset is applied in float, per strip
  static constexpr bool kHasMin = true;
  static __m256i block_dot(const Block* w, __m256i x, __m256i bias) {
    return avx2::dot_u5_s8(avx2::unpack_nibbles_32(w->qs), x, bias);
  }
};

}  // namespace

void dot_rows_q4_1_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out) {
  avx2::quant_dot_rows<Q4_1Block>(n, w, w_stride, nr, act, out);
}

void gemm_q4_1_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                         const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                         int64_t out_stride) {
  avx2::quant_gemm<Q4_1Block>(n, w, w_stride, nr, act, act_stride, nt, out, out_stride);
}

float dot_q4_1_q8_0_avx2(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  avx2::quant_rows_tile<Q4_1Block, 1>(n, w_row, 0, 0, act, &out, 1);
  return out;
}

}  // namespace pacer::ops
