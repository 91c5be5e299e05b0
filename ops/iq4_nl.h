#pragma once
// IQ4_NL: 32 weights per block, one fp16 scale, 4-bit indices into a fixed non-linear table:
// w[j] = d * kIq4NlValues[nibble_j]. Dots with act-Q8 (q8_0.h).
//
// Every kernel looks the 16 table entries up with a byte shuffle (pshufb / vpshufb, one
// 16-byte table per 128-bit lane), giving int8 weights in [-127, 113]; the block dot with the
// int8 activations is then exact in integers. Signed x signed bytes go through maddubs with the
// sign moved onto the activation (|w| <= 127), or, with VNNI, through vpdpbusd on the table
// shifted by +128 (unsigned, [1, 241]) minus 128 * sum_j x_j from the act-Q8 row.
#include <cstddef>
#include <cstdint>

#include "ops/fp16.h"
#include "ops/types.h"

namespace pacer::ops {

constexpr int64_t kIq4NlBlockElems = 32;

// ggml's kvalues_iq4nl: the 16 levels, ascending.
inline constexpr int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// GGUF/ggml block_iq4_nl, 18 bytes, no padding:
//   bytes 0..1   d       IEEE fp16 scale
//   bytes 2..17  qs[16]  byte j holds element j's table index in its low nibble and element
//                        j+16's in its high nibble; element value = d * kIq4NlValues[index]
struct BlockIQ4_NL {
  fp16_t d;
  uint8_t qs[kIq4NlBlockElems / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18, "block_iq4_nl is 18 bytes in GGUF");
static_assert(alignof(BlockIQ4_NL) == 2);

// pacer's own quantizer, NOT byte-identical to ggml's (which weights the error by an importance
// estimate): per block, for 17 candidate scales that put the element of largest |x| at or
// near either end of the table, every element takes its nearest level and the scale is then
// refit by least squares; the candidate with the smallest squared error wins, and one final
// nearest-level pass + refit runs at the winning scale. d is stored as fp16.
void quantize_row_iq4_nl_ref(const float* x, BlockIQ4_NL* y, int64_t n);
void dequantize_row_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t n);

// sum_b d_w(b) * d_x(b) * sum_j kIq4NlValues[nib_j] * x_j, exact integers per block, float
// across blocks.
float dot_iq4_nl_q8_0_ref(int64_t n, const std::byte* w_row, const std::byte* act);
float dot_iq4_nl_q8_0_avx2(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_iq4_nl_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out);
// The AVX2 prefill GEMM (GemmFn, type_traits.h): dot_rows_iq4_nl_q8_0_avx2 per token, bit for bit.
void gemm_iq4_nl_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride);
// AVX-512 F/BW/VL/DQ only (maddubs with the sign moved onto the activations), no VNNI.
float dot_iq4_nl_q8_0_avx512(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_iq4_nl_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                 const std::byte* act, float* out);
// AVX-512 VNNI (vpdpbusd on the +128 table).
float dot_iq4_nl_q8_0_avx512vnni(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_iq4_nl_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                     const std::byte* act, float* out);
// GEMM (several tokens per pass over a row tile: each unpacked weight block serves up to 4
// tokens), bit-identical to the dot_rows of the same Isa; the contract is GemmFn's in
// type_traits.h.
void gemm_iq4_nl_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                             int64_t out_stride);
void gemm_iq4_nl_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                 const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                 int64_t out_stride);

}  // namespace pacer::ops
