// Q5_0 x act-Q8 on AVX2 (+FMA, F16C).
//
// Per weight block: the 32 nibbles unpack to bytes in element order and the 32 fifth bits
// (qh) expand to 0x10 bytes OR-ed on top, giving unsigned quants q in [0, 31]; vpmaddubsw with
// the activation quants (pair sums <= 2 * 31 * 127 = 7874, no saturation) and vpmaddwd with
// ones give 8 int32 lanes, and -16 * sum_b(x) added to lane 0 removes the offset of 16:
// sum_j (q_j - 16) * x_j. One cvt + FMA per block applies d_w * d_x.
#include <immintrin.h>

#include "ops/matmul_simd_avx2.h"
#include "ops/q5_0.h"
#include "ops/q8_0.h"
#include "ops/quant32_simd_avx2.h"
#include "ops/quant_rows_avx2.h"

namespace pacer::ops {
namespace {

struct Q5_0Block {
  using Block = BlockQ5_0;
  static constexpr int32_t kSumFactor = -16;
  static __m256i block_dot(const Block* w, __m256i x, __m256i bias) {
    const __m256i q = _mm256_or_si256(avx2::unpack_nibbles_32(w->qs), avx2::high_bits_32(w->qh));
    return avx2::dot_u5_s8(q, x, bias);
  }
};

}  // namespace

void dot_rows_q5_0_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out) {
  avx2::quant_dot_rows<Q5_0Block>(n, w, w_stride, nr, act, out);
}

void gemm_q5_0_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                         const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                         int64_t out_stride) {
  avx2::quant_gemm<Q5_0Block>(n, w, w_stride, nr, act, act_stride, nt, out, out_stride);
}

float dot_q5_0_q8_0_avx2(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  avx2::quant_rows_tile<Q5_0Block, 1>(n, w_row, 0, 0, act, &out, 1);
  return out;
}

}  // namespace pacer::ops
