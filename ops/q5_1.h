#pragma once
// Q5_1: 32 weights per block, an fp16 scale d and an fp16 offset m, 5-bit quants:
// w[j] = d * q_j + m, q in [0, 31]. Dots with act-Q8 (q8_0.h).
//
// Integer form used by every kernel (as Q4_1's, q4_1.h): with x[j] = d_x * q[j],
//   sum_j w[j] x[j] = d_w d_x sum_j q_j qx_j  +  m_w d_x sum_j qx_j
// an unsigned x signed byte dot plus the per-block activation sum stored in the act-Q8 row.
#include <cstddef>
#include <cstdint>

#include "ops/fp16.h"
#include "ops/types.h"

namespace pacer::ops {

constexpr int64_t kQ5_1BlockElems = 32;

// GGUF/ggml block_q5_1, 24 bytes, no padding:
//   bytes 0..1   d       IEEE fp16 scale
//   bytes 2..3   m       IEEE fp16 offset (the block minimum)
//   bytes 4..7   qh[4]   the 5th (high) bit of each quant: bit j of the little-endian uint32 is
//                        element j's
//   bytes 8..23  qs[16]  the low 4 bits: byte j holds element j in its low nibble and element
//                        j+16 in its high nibble; element value = d * (nibble | high << 4) + m
struct BlockQ5_1 {
  fp16_t d;
  fp16_t m;
  uint8_t qh[4];
  uint8_t qs[kQ5_1BlockElems / 2];
};
static_assert(sizeof(BlockQ5_1) == 24, "block_q5_1 is 24 bytes in GGUF");
static_assert(alignof(BlockQ5_1) == 2);

// The same rule as ggml's quantize_row_q5_1_ref (byte-identical for finite inputs): min and max
// of the block, d = (max - min) / 31, id = d ? 1/d : 0, q = min(31, trunc((x - min)*id + 0.5)),
// d and m = min stored as fp16. (A NaN element quantizes to 0.)
void quantize_row_q5_1_ref(const float* x, BlockQ5_1* y, int64_t n);
void dequantize_row_q5_1(const BlockQ5_1* x, float* y, int64_t n);

// sum_b [d_w(b) d_x(b) sum_j q_j qx_j + m_w(b) d_x(b) sum_b(qx)], exact integers per block,
// float across blocks.
float dot_q5_1_q8_0_ref(int64_t n, const std::byte* w_row, const std::byte* act);
float dot_q5_1_q8_0_avx2(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q5_1_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out);
// The AVX2 prefill GEMM (GemmFn, type_traits.h): dot_rows_q5_1_q8_0_avx2 per token, bit for bit.
void gemm_q5_1_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                         const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                         int64_t out_stride);
// AVX-512 F/BW/VL/DQ only (maddubs), for CPUs without VNNI.
float dot_q5_1_q8_0_avx512(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q5_1_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out);
// AVX-512 VNNI (vpdpbusd).
float dot_q5_1_q8_0_avx512vnni(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q5_1_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                   const std::byte* act, float* out);
// GEMM (several tokens per pass over a row tile: each unpacked weight block serves up to 4
// tokens), bit-identical to the dot_rows of the same Isa; the contract is GemmFn's in
// type_traits.h.
void gemm_q5_1_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride);
void gemm_q5_1_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                               int64_t out_stride);

}  // namespace pacer::ops
