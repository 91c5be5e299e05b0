#pragma once
// Q6_K: 256 weights per super-block in 16 groups of 16. Each group g has a signed 8-bit scale
// sc_g; the super-block has one fp16 factor d:
//   w = d * sc_g * (q - 32),   q in [0, 63]   (6.5625 bits per weight)
// Dots with Q8_K activations (q8_k.h), in integers per super-block:
//   sum_i w_i x_i = d_x * d * sum_g sc_g * (sum_{i in g} q_i qx_i - 32 * bsums[g])
// where q is unsigned (the form vpmaddubsw / vpdpbusd take) and the offset of 32 costs one
// 16-term dot with the activation sums per super-block.
//
// Internal to ops/: the matmul entry points reach these kernels through type_traits.
#include <cstddef>
#include <cstdint>

#include "ops/fp16.h"
#include "ops/q8_k.h"
#include "ops/types.h"

namespace pacer::ops {

// GGUF/ggml block_q6_K, 210 bytes, no padding (d comes last):
//   bytes 0..127    ql[128]     low 4 bits of q; two halves h = 0, 1 of 64 bytes. In half h,
//                               byte l < 32 holds element 128h + l (low nibble) and 128h + 64 + l
//                               (high nibble); byte 32 + l holds 128h + 32 + l and 128h + 96 + l
//   bytes 128..191  qh[64]      high 2 bits of q; half h is bytes 32h..32h+31. Byte l holds those
//                               of elements 128h + l (bits 0-1), +32 + l (2-3), +64 + l (4-5)
//                               and +96 + l (6-7)
//   bytes 192..207  scales[16]  int8 sc_g of group g = elements 16g..16g+15
//   bytes 208..209  d           fp16
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  fp16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210, "block_q6_K is 210 bytes in GGUF");
static_assert(alignof(BlockQ6_K) == 2);

// A quantizer of our own (not byte-identical to ggml's): per group of 16, the scale minimising
// the squared error over a small search of grids (the one that maps the element of largest |x|
// to -32, and slightly finer / coarser ones) with least-squares refits; then the int8 scale codes
// against the super-block's d (the largest |scale| maps to -128); then every element re-rounded
// to the nearest level of its final grid. Error bounds: tests/ops/kquant_quantize_test.cpp.
void quantize_row_q6_K_ref(const float* x, BlockQ6_K* y, int64_t n);
// w = fl(d * sc_g) * (q - 32).
void dequantize_row_q6_K(const BlockQ6_K* x, float* y, int64_t n);

// Per super-block the integer sum of the header comment (exact int32: the q part alone is
// <= 16 * 128 * (16 * 63 * 127) = 262,176,768 < 2^31, the total <= 16 * 128 * (16 * 32 * 127)),
// then acc += fl(d * d_x) * isum, super-blocks in order. SIMD kernels differ only in float order.
float dot_q6_K_q8_K_ref(int64_t n, const std::byte* w_row, const std::byte* act);
float dot_q6_K_q8_K_avx2(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q6_K_q8_K_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out);
float dot_q6_K_q8_K_avx512(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q6_K_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out);
// AVX-512 VNNI: the same kernel with vpdpwssd fusing each scale multiply and its accumulation.
float dot_q6_K_q8_K_avx512vnni(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q6_K_q8_K_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                   const std::byte* act, float* out);

// Prefill GEMMs (GemmFn, type_traits.h): each weight block unpacked once for 4 tokens; equal to
// the same Isa's dot_rows bit for bit.
void gemm_q6_K_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride);
void gemm_q6_K_q8_K_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                               int64_t out_stride);

}  // namespace pacer::ops
