#pragma once
// Q5_0: 32 weights per block, one fp16 scale, 5-bit quants with an implicit offset of 16:
// w[j] = d * (q_j - 16), q in [0, 31] so w/d in [-16, 15]. Dots with act-Q8 (q8_0.h).
// llama.cpp's quantizer falls back to Q5_0 for K-quant mixes whose rows are not a multiple of
// 256 (Qwen2.5-0.5B's 896), so it shows up in otherwise K-quantized files.
//
// Integer trick used by every SIMD kernel, as for Q4_0 (q4_0.h): q_j is an unsigned byte, so
//   sum_j (q_j - 16) x_j = sum_j q_j x_j - 16 * sum_j x_j
// with the first term an unsigned x signed byte dot and sum_j x_j stored in the act-Q8 row.
#include <cstddef>
#include <cstdint>

#include "ops/fp16.h"
#include "ops/types.h"

namespace pacer::ops {

constexpr int64_t kQ5_0BlockElems = 32;

// GGUF/ggml block_q5_0, 22 bytes, no padding:
//   bytes 0..1   d       IEEE fp16 scale
//   bytes 2..5   qh[4]   the 5th (high) bit of each quant: bit j of the little-endian uint32 is
//                        element j's
//   bytes 6..21  qs[16]  the low 4 bits: byte j holds element j in its low nibble and element
//                        j+16 in its high nibble; element value = d * ((nibble | high << 4) - 16)
struct BlockQ5_0 {
  fp16_t d;
  uint8_t qh[4];
  uint8_t qs[kQ5_0BlockElems / 2];
};
static_assert(sizeof(BlockQ5_0) == 22, "block_q5_0 is 22 bytes in GGUF");
static_assert(alignof(BlockQ5_0) == 2);

// The same rule as ggml's quantize_row_q5_0_ref (byte-identical for finite inputs): max = the
// first element of largest |x| (signed), d = max / -16, id = d ? 1/d : 0,
// q = min(31, trunc(x*id + 16.5)), d stored as fp16. (A NaN element quantizes to 0.)
void quantize_row_q5_0_ref(const float* x, BlockQ5_0* y, int64_t n);
void dequantize_row_q5_0(const BlockQ5_0* x, float* y, int64_t n);

// sum_b d_w(b) * d_x(b) * sum_j (q_j - 16) * x_j, exact integers per block, float across blocks.
float dot_q5_0_q8_0_ref(int64_t n, const std::byte* w_row, const std::byte* act);
float dot_q5_0_q8_0_avx2(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q5_0_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out);
// The AVX2 prefill GEMM (GemmFn, type_traits.h): dot_rows_q5_0_q8_0_avx2 per token, bit for bit.
void gemm_q5_0_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                         const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                         int64_t out_stride);
// AVX-512 F/BW/VL/DQ only (maddubs), for CPUs without VNNI.
float dot_q5_0_q8_0_avx512(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q5_0_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out);
// AVX-512 VNNI (vpdpbusd).
float dot_q5_0_q8_0_avx512vnni(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q5_0_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                   const std::byte* act, float* out);
// GEMM (several tokens per pass over a row tile: each unpacked weight block serves up to 4
// tokens), bit-identical to the dot_rows of the same Isa; the contract is GemmFn's in
// type_traits.h.
void gemm_q5_0_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride);
void gemm_q5_0_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                               int64_t out_stride);

}  // namespace pacer::ops
