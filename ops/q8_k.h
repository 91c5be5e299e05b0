#pragma once
// Q8_K: the activation format every K-quant weight (Q4_K, Q6_K) dots with. 256 values per block
// ("super-block", QK_K), one fp32 scale, signed 8-bit quants, and the sums of each group of 16
// quants so a kernel can fold a weight offset (Q4_K's mins, Q6_K's -32) into one small dot per
// block instead of one per element.
//
// Internal to ops/: the matmul entry points reach these through type_traits (quantize_act).
#include <cstddef>
#include <cstdint>

#include "ops/types.h"

namespace pacer::ops {

// Elements per K-quant super-block (ggml's QK_K), for Q8_K, Q4_K and Q6_K alike.
constexpr int64_t kQK_K = 256;

// GGUF/ggml block_q8_K, 292 bytes, no padding (4-byte aligned: rows of blocks stay aligned):
//   bytes 0..3      d           fp32 scale; element j of the block is d * qs[j]
//   bytes 4..259    qs[256]     int8 quants, in [-127, 127]
//   bytes 260..291  bsums[16]   int16, bsums[g] = sum of qs[16g .. 16g+15], in [-2032, 2032]
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292, "block_q8_K is 292 bytes in ggml");
static_assert(alignof(BlockQ8_K) == 4);
static_assert(kQK_K == 256);

// Activation quantizers (QuantizeActFn; n % 256 == 0, dst holds n/256 BlockQ8_K). Rule, the same
// as act-Q8 (q8_0.h) over 256 instead of 32 values: d = max|x| / 127, id = d ? 1/d : 0,
// q = round(x * id) with ties away from zero. Every ISA writes the same bytes as the reference.
void quantize_row_q8_K_ref(const float* x, std::byte* dst, int64_t n);
void quantize_row_q8_K_avx2(const float* x, std::byte* dst, int64_t n);
void quantize_row_q8_K_avx512(const float* x, std::byte* dst, int64_t n);

void dequantize_row_q8_K(const BlockQ8_K* x, float* y, int64_t n);

}  // namespace pacer::ops
