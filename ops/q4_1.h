#pragma once
// Q4_1: 32 weights per block, an fp16 scale d and an fp16 offset m, 4-bit quants:
// w[j] = d * nibble_j + m, nibble in [0, 15]. Dots with act-Q8 (q8_0.h).
//
// Integer form used by every kernel: with x[j] = d_x * q[j],
//   sum_j w[j] x[j] = d_w d_x sum_j nib_j q_j  +  m_w d_x sum_j q_j
// where the first sum is an unsigned x signed byte dot (maddubs / VNNI vpdpbusd, no bias needed)
// and sum_j q_j is stored per block in the act-Q8 row, so the offset costs one float
// multiply-add per block, done a strip of 16 blocks at a time outside the integer loop.
#include <cstddef>
#include <cstdint>

#include "ops/fp16.h"
#include "ops/types.h"

namespace pacer::ops {

constexpr int64_t kQ4_1BlockElems = 32;

// GGUF/ggml block_q4_1, 20 bytes, no padding:
//   bytes 0..1   d       IEEE fp16 scale
//   bytes 2..3   m       IEEE fp16 offset (the block minimum)
//   bytes 4..19  qs[16]  byte j holds element j in its low nibble and element j+16 in its high
//                        nibble; element value = d * nibble + m
struct BlockQ4_1 {
  fp16_t d;
  fp16_t m;
  uint8_t qs[kQ4_1BlockElems / 2];
};
static_assert(sizeof(BlockQ4_1) == 20, "block_q4_1 is 20 bytes in GGUF");
static_assert(alignof(BlockQ4_1) == 2);

// The same rule as ggml's quantize_row_q4_1_ref (byte-identical for finite inputs): min and max
// of the block, d = (max - min) / 15, id = d ? 1/d : 0, nibble = min(15, trunc((x - min)*id +
// 0.5)), d and m = min stored as fp16. (A NaN element quantizes to nibble 0.)
void quantize_row_q4_1_ref(const float* x, BlockQ4_1* y, int64_t n);
void dequantize_row_q4_1(const BlockQ4_1* x, float* y, int64_t n);

// sum_b [d_w(b) d_x(b) sum_j nib_j q_j + m_w(b) d_x(b) sum_b(q)], exact integers per block,
// float across blocks.
float dot_q4_1_q8_0_ref(int64_t n, const std::byte* w_row, const std::byte* act);
float dot_q4_1_q8_0_avx2(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q4_1_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out);
// The AVX2 prefill GEMM (GemmFn, type_traits.h): dot_rows_q4_1_q8_0_avx2 per token, bit for bit.
void gemm_q4_1_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                         const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                         int64_t out_stride);
// AVX-512 F/BW/VL/DQ only (maddubs), for CPUs without VNNI.
float dot_q4_1_q8_0_avx512(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q4_1_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out);
// AVX-512 VNNI (vpdpbusd).
float dot_q4_1_q8_0_avx512vnni(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q4_1_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                   const std::byte* act, float* out);
// GEMM (several tokens per pass over a row tile: each unpacked weight block serves up to 4
// tokens), bit-identical to the dot_rows of the same Isa; the contract is GemmFn's in
// type_traits.h.
void gemm_q4_1_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride);
void gemm_q4_1_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                               int64_t out_stride);

}  // namespace pacer::ops
