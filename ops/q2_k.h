#pragma once
// Q2_K: 256 weights per super-block in 16 groups of 16. Each group g has a 4-bit scale sc_g and
// a 4-bit min m_g; the super-block has two fp16 factors d and dmin:
//   w = d * sc_g * q - dmin * m_g,   q in [0, 3]   (2.625 bits per weight)
// Dots with Q8_K activations (q8_k.h), in integers per super-block:
//   sum_i w_i x_i = d_x * ( d * sum_g sc_g * sum_{i in g} q_i qx_i - dmin * sum_g m_g * bsums[g] )
// so the mins cost one 16-term dot with the activation sums per super-block.
//
// Internal to ops/: the matmul entry points reach these kernels through type_traits.
#include <cstddef>
#include <cstdint>

#include "ops/fp16.h"
#include "ops/q8_k.h"
#include "ops/types.h"

namespace pacer::ops {

// GGUF/ggml block_q2_K, 84 bytes, no padding (the factors come last):
//   bytes 0..15    scales[16]  group g: sc_g in the low nibble of byte g, m_g in the high nibble
//   bytes 16..79   qs[64]      2-bit quants; two halves t = 0, 1 of 32 bytes: bits 2r, 2r+1 of
//                              byte 32t + l belong to element 128t + 32r + l (r = 0..3)
//   bytes 80..81   d           fp16, factor of the scales
//   bytes 82..83   dmin        fp16, factor of the mins
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  fp16_t d;
  fp16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84, "block_q2_K is 84 bytes in GGUF");
static_assert(alignof(BlockQ2_K) == 2);
static_assert(offsetof(BlockQ2_K, d) == 80 && offsetof(BlockQ2_K, dmin) == 82);

// A quantizer of our own (not byte-identical to ggml's): per group of 16 the affine grid of
// kquant_fit.h with 4 levels; then the 4-bit scale / min codes against d = max scale / 15 and
// dmin = max min / 15, and every element re-rounded to the nearest level of its final grid.
// Error bounds: tests/ops/kquant2_quantize_test.cpp.
void quantize_row_q2_K_ref(const float* x, BlockQ2_K* y, int64_t n);
// w = d * sc_g * q - dmin * m_g, computed as fl(fl(d*sc_g) * q) - fl(dmin*m_g).
void dequantize_row_q2_K(const BlockQ2_K* x, float* y, int64_t n);

// Per super-block the two integer sums of the header comment, exact in int32 (|isum| <= 16 * 15
// * 16 * 3 * 127 = 1,463,040; |msum| <= 16 * 15 * 2032 = 487,680), then acc += fl(d * d_x) *
// isum - fl(dmin * d_x) * msum, super-blocks in order. SIMD kernels differ only in float order.
float dot_q2_K_q8_K_ref(int64_t n, const std::byte* w_row, const std::byte* act);
float dot_q2_K_q8_K_avx2(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q2_K_q8_K_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out);
// Plain AVX-512 (F/BW/VL/DQ only: runs on CPUs without VNNI).
float dot_q2_K_q8_K_avx512(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q2_K_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out);
// Prefill GEMM (a GemmFn, type_traits.h): bit-identical to dot_rows per token.
void gemm_q2_K_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride);

}  // namespace pacer::ops
