#pragma once
// Q4_0: 32 weights per block, one fp16 scale, 4-bit quants with an implicit offset of 8:
// w[j] = d * (nibble_j - 8), nibble in [0, 15] so w/d in [-8, 7]. Dots with act-Q8 (q8_0.h).
//
// Integer trick used by every SIMD kernel: the nibbles are already unsigned bytes, so
//   sum_j (nib_j - 8) * q_j = sum_j nib_j * q_j - 8 * sum_j q_j
// where the first term is an unsigned x signed byte dot (maddubs / VNNI vpdpbusd) and sum_j q_j
// is stored per block in the act-Q8 row. No sign juggling and no saturation (see the kernels).
#include <cstddef>
#include <cstdint>

#include "ops/fp16.h"
#include "ops/types.h"

namespace pacer::ops {

constexpr int64_t kQ4_0BlockElems = 32;

// GGUF/ggml block_q4_0, 18 bytes, no padding:
//   bytes 0..1   d       IEEE fp16 scale
//   bytes 2..17  qs[16]  byte j holds element j in its low nibble and element j+16 in its high
//                        nibble; element value = d * (nibble - 8)
struct BlockQ4_0 {
  fp16_t d;
  uint8_t qs[kQ4_0BlockElems / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "block_q4_0 is 18 bytes in GGUF");
static_assert(alignof(BlockQ4_0) == 2);

// ggml's quantize_row_q4_0_ref, byte for byte: max = the element of largest |x| (signed),
// d = max / -8, id = d ? 1/d : 0, nibble = min(15, trunc(x*id + 8.5)), d stored as fp16.
// (A NaN element quantizes to nibble 0; ggml leaves that case undefined.)
void quantize_row_q4_0_ref(const float* x, BlockQ4_0* y, int64_t n);
void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t n);

// sum_b d_w(b) * d_x(b) * sum_j (nib_j - 8) * q_j, exact integers per block, float across blocks.
float dot_q4_0_q8_0_ref(int64_t n, const std::byte* w_row, const std::byte* act);
float dot_q4_0_q8_0_avx2(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q4_0_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out);
// The AVX2 prefill GEMM (GemmFn, type_traits.h): dot_rows_q4_0_q8_0_avx2 per token, bit for bit.
void gemm_q4_0_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                         const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                         int64_t out_stride);
float dot_q4_0_q8_0_avx512(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q4_0_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out);
float dot_q4_0_q8_0_avx512vnni(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q4_0_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                   const std::byte* act, float* out);
// GEMM (several tokens per pass over a row tile), bit-identical to the dot_rows of the same Isa;
// the contract is GemmFn's in type_traits.h.
void gemm_q4_0_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride);
void gemm_q4_0_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                               int64_t out_stride);
// The VNNI GEMM in two steps (GemmPrepareFn / GemmPreparedFn): the activations regrouped by 8
// tokens once per matmul call, then read by every worker.
int64_t gemm_prepare_q4_0_q8_0_avx512vnni(int64_t n, const std::byte* act, int64_t act_stride,
                                          int64_t nt, std::byte* dst, int64_t part, int64_t parts);
void gemm_prepared_q4_0_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                        const std::byte* act, int64_t act_stride,
                                        const std::byte* prepared, int64_t nt, float* out,
                                        int64_t out_stride);
// AMX-INT8 prefill GEMM (quant_gemm_amx.cpp); only where CpuFeatures::amx_int8.
void gemm_q4_0_q8_0_amx(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                        const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                        int64_t out_stride);

}  // namespace pacer::ops
