#pragma once
// Q3_K: 256 weights per super-block in 16 groups of 16. Each group g has a 6-bit scale stored
// with an offset of 32 (sc_g in [-32, 31]); the super-block has one fp16 factor d:
//   w = d * sc_g * q,   q in [-4, 3]   (3.4375 bits per weight)
// q is stored as 2 low bits and a high bit h, q = low - 4 + 4h, i.e. u = q + 4 = low + 4h in
// [0, 7] unsigned (the form vpmaddubsw takes). Dots with Q8_K activations (q8_k.h), in integers
// per super-block:
//   sum_i w_i x_i = d_x * d * sum_g sc_g * (sum_{i in g} u_i qx_i - 4 * bsums[g])
// so the offset of 4 costs one 16-term dot with the activation sums per super-block.
//
// Internal to ops/: the matmul entry points reach these kernels through type_traits.
#include <cstddef>
#include <cstdint>

#include "ops/fp16.h"
#include "ops/q8_k.h"
#include "ops/types.h"

namespace pacer::ops {

// GGUF/ggml block_q3_K, 110 bytes, no padding (d comes last):
//   bytes 0..31     hmask[32]   high bit h: bit k of byte l belongs to element 32k + l
//   bytes 32..95    qs[64]      low 2 bits; two halves t = 0, 1 of 32 bytes: bits 2r, 2r+1 of
//                               byte 32t + l belong to element 128t + 32r + l (r = 0..3)
//   bytes 96..107   scales[12]  16 scales of 6 bits (stored value sc_g + 32): low 4 bits of
//                               group g are the low nibble of byte g for g < 8, the high nibble
//                               of byte g - 8 for g >= 8; the top 2 bits are bits 2(g/4), +1 of
//                               byte 8 + g%4
//   bytes 108..109  d           fp16
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  fp16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110, "block_q3_K is 110 bytes in GGUF");
static_assert(alignof(BlockQ3_K) == 2);
static_assert(offsetof(BlockQ3_K, scales) == 96 && offsetof(BlockQ3_K, d) == 108);

// A quantizer of our own (not byte-identical to ggml's): per group of 16 the scale of
// kquant_fit.h's fit_scaled_levels over the levels -4..3 (the largest |x| on level -4, steps
// around it, least-squares refits); then the scale codes against d = (the scale of largest
// magnitude) / -32, and every element re-rounded to the nearest level of its final grid.
// Error bounds: tests/ops/kquant2_quantize_test.cpp.
void quantize_row_q3_K_ref(const float* x, BlockQ3_K* y, int64_t n);
// w = fl(d * sc_g) * q.
void dequantize_row_q3_K(const BlockQ3_K* x, float* y, int64_t n);

// Per super-block the integer sum of the header comment, exact in int32 (the u part <= 16 * 32 *
// (16 * 7 * 127) = 7,282,688, the offset part <= 4 * 16 * 32 * 2032 = 4,161,536 in magnitude),
// then acc += fl(d * d_x) * isum, super-blocks in order. SIMD kernels differ only in float order.
float dot_q3_K_q8_K_ref(int64_t n, const std::byte* w_row, const std::byte* act);
float dot_q3_K_q8_K_avx2(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q3_K_q8_K_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out);
// Plain AVX-512 (F/BW/VL/DQ only: runs on CPUs without VNNI).
float dot_q3_K_q8_K_avx512(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q3_K_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out);
// Prefill GEMM (a GemmFn, type_traits.h): bit-identical to dot_rows per token.
void gemm_q3_K_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride);

}  // namespace pacer::ops
