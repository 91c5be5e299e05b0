#pragma once
// Q4_K: 256 weights per super-block in 8 sub-blocks of 32. Each sub-block j has a 6-bit scale
// sc_j and a 6-bit min m_j; the super-block has two fp16 factors d and dmin:
//   w = d * sc_j * q - dmin * m_j,   q in [0, 15]   (4.5 bits per weight)
// Dots with Q8_K activations (q8_k.h), in integers per super-block:
//   sum_i w_i x_i = d_x * ( d * sum_j sc_j * sum_{i in j} q_i qx_i
//                         - dmin * sum_j m_j * (bsums[2j] + bsums[2j+1]) )
// so the mins cost one 8-term dot per super-block, not one per element.
//
// Internal to ops/: the matmul entry points reach these kernels through type_traits.
#include <cstddef>
#include <cstdint>

#include "ops/fp16.h"
#include "ops/q8_k.h"
#include "ops/types.h"

namespace pacer::ops {

// GGUF/ggml block_q4_K, 144 bytes, no padding:
//   bytes 0..1     d           fp16, factor of the sub-block scales
//   bytes 2..3     dmin        fp16, factor of the sub-block mins
//   bytes 4..15    scales[12]  8 scales and 8 mins of 6 bits each; for j < 4:
//                                sc_j = scales[j] & 63          m_j = scales[j+4] & 63
//                              for j >= 4 (low 4 bits in byte j+4, high 2 bits in the top bits
//                              of the bytes that hold the j-4 values):
//                                sc_j = (scales[j+4] & 15) | (scales[j-4] >> 6) << 4
//                                m_j  = (scales[j+4] >> 4) | (scales[j]   >> 6) << 4
//   bytes 16..143  qs[128]     4 chunks of 32 bytes; byte l of chunk c holds element 64c + l
//                              (sub-block 2c) in its low nibble and element 64c + 32 + l
//                              (sub-block 2c+1) in its high nibble
struct BlockQ4_K {
  fp16_t d;
  fp16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144, "block_q4_K is 144 bytes in GGUF");
static_assert(alignof(BlockQ4_K) == 2);

// A quantizer of our own (not byte-identical to ggml's; any valid block dots the same way):
// per sub-block, the (scale, min) pair minimising the squared error over a small search of
// grids with least-squares refits; then the 6-bit scale/min codes against the
// super-block's d = max scale / 63 and dmin = max min / 63; then every element re-rounded to the
// nearest level of its final grid. Error bounds: see tests/ops/kquant_quantize_test.cpp.
void quantize_row_q4_K_ref(const float* x, BlockQ4_K* y, int64_t n);
// w = d * sc_j * q - dmin * m_j, computed as fl(fl(d*sc_j) * q) - fl(dmin*m_j).
void dequantize_row_q4_K(const BlockQ4_K* x, float* y, int64_t n);

// Per super-block, the two integer sums of the header comment (exact int32), then
// acc += fl(d * d_x) * isum - fl(dmin * d_x) * msum, super-blocks in order. The SIMD kernels
// differ only in the float order (lanes, FMA).
float dot_q4_K_q8_K_ref(int64_t n, const std::byte* w_row, const std::byte* act);
float dot_q4_K_q8_K_avx2(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q4_K_q8_K_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out);
float dot_q4_K_q8_K_avx512(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q4_K_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out);
// AVX-512 VNNI: the same kernel with vpdpwssd fusing each scale multiply and its accumulation.
float dot_q4_K_q8_K_avx512vnni(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q4_K_q8_K_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                   const std::byte* act, float* out);
// Prefill GEMMs (GemmFn, type_traits.h): each weight block unpacked once for 4 tokens; equal to
// the same Isa's dot_rows bit for bit.
void gemm_q4_K_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride);
void gemm_q4_K_q8_K_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                               int64_t out_stride);

}  // namespace pacer::ops
