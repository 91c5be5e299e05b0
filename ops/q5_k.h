#pragma once
// Q5_K: 256 weights per super-block in 8 sub-blocks of 32, like Q4_K with a fifth bit per quant.
// Each sub-block j has a 6-bit scale sc_j and a 6-bit min m_j; the super-block has two fp16
// factors d and dmin:
//   w = d * sc_j * q - dmin * m_j,   q in [0, 31]   (5.5 bits per weight)
// Dots with Q8_K activations (q8_k.h), in integers per super-block, exactly as Q4_K (q4_k.h):
//   sum_i w_i x_i = d_x * ( d * sum_j sc_j * sum_{i in j} q_i qx_i
//                         - dmin * sum_j m_j * (bsums[2j] + bsums[2j+1]) )
//
// Internal to ops/: the matmul entry points reach these kernels through type_traits.
#include <cstddef>
#include <cstdint>

#include "ops/fp16.h"
#include "ops/q8_k.h"
#include "ops/types.h"

namespace pacer::ops {

// GGUF/ggml block_q5_K, 176 bytes, no padding:
//   bytes 0..1      d           fp16, factor of the sub-block scales
//   bytes 2..3      dmin        fp16, factor of the sub-block mins
//   bytes 4..15     scales[12]  8 scales and 8 mins of 6 bits, packed exactly as Q4_K's (q4_k.h)
//   bytes 16..47    qh[32]      bit 4 of q: bit j of byte l belongs to element 32j + l
//   bytes 48..175   qs[128]     low 4 bits of q, as Q4_K's qs: byte l of chunk c (32 bytes)
//                               holds element 64c + l in its low nibble and 64c + 32 + l in its
//                               high nibble
struct BlockQ5_K {
  fp16_t d;
  fp16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176, "block_q5_K is 176 bytes in GGUF");
static_assert(alignof(BlockQ5_K) == 2);
static_assert(offsetof(BlockQ5_K, qh) == 16 && offsetof(BlockQ5_K, qs) == 48);

// A quantizer of our own (not byte-identical to ggml's; any valid block dots the same way), the
// Q4_K one with 32 levels: per sub-block the affine grid of kquant_fit.h, the 6-bit scale / min
// codes against d = max scale / 63 and dmin = max min / 63, then every element re-rounded to the
// nearest level of its final grid. Error bounds: tests/ops/kquant2_quantize_test.cpp.
void quantize_row_q5_K_ref(const float* x, BlockQ5_K* y, int64_t n);
// w = d * sc_j * q - dmin * m_j, computed as fl(fl(d*sc_j) * q) - fl(dmin*m_j).
void dequantize_row_q5_K(const BlockQ5_K* x, float* y, int64_t n);

// Per super-block the two integer sums of the header comment, exact in int32 (|isum| <= 8 * 63 *
// 32 * 31 * 127 = 63,504,384; |msum| <= 8 * 63 * 4064), then acc += fl(d * d_x) * isum -
// fl(dmin * d_x) * msum, super-blocks in order. SIMD kernels differ only in the float order.
float dot_q5_K_q8_K_ref(int64_t n, const std::byte* w_row, const std::byte* act);
float dot_q5_K_q8_K_avx2(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q5_K_q8_K_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out);
// Plain AVX-512 (F/BW/VL/DQ only: runs on CPUs without VNNI).
float dot_q5_K_q8_K_avx512(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q5_K_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out);
// AVX-512 VNNI: the same kernel with vpdpwssd fusing each scale multiply and its accumulation.
float dot_q5_K_q8_K_avx512vnni(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q5_K_q8_K_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                   const std::byte* act, float* out);

// Prefill GEMMs (GemmFn, type_traits.h): each weight block unpacked once for 4 tokens; equal to
// the same Isa's dot_rows bit for bit.
void gemm_q5_K_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride);
void gemm_q5_K_q8_K_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                               int64_t out_stride);

}  // namespace pacer::ops
