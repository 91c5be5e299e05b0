#pragma once
// IQ4_XS: 256 weights per super-block in 8 sub-blocks of 32. Each weight is one of 16 fixed
// non-uniform levels (kIq4NlLevels, ggml's kvalues_iq4nl) times its sub-block's scale; each
// sub-block j has a 6-bit scale stored with an offset of 32 (sc_j in [-32, 31]); the super-block
// has one fp16 factor d:
//   w = d * sc_j * kIq4NlLevels[k],   k in [0, 15]   (4.25 bits per weight)
// Dots with Q8_K activations (q8_k.h), in integers per super-block:
//   sum_i w_i x_i = d_x * d * sum_j sc_j * sum_{i in j} level_i qx_i
// (no offset term: the levels are signed; the bsums are unused).
//
// Internal to ops/: the matmul entry points reach these kernels through type_traits.
#include <cstddef>
#include <cstdint>

#include "ops/fp16.h"
#include "ops/q8_k.h"
#include "ops/types.h"

namespace pacer::ops {

// The 16 levels of IQ4_NL / IQ4_XS (ggml's kvalues_iq4nl), ascending; negative exactly for
// k < 8. |level| <= 127, so level * qx fits vpmaddubsw with the sign moved onto qx.
inline constexpr int8_t kIq4NlLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// GGUF/ggml block_iq4_xs, 136 bytes, no padding:
//   bytes 0..1     d            fp16
//   bytes 2..3     scales_h     uint16: bits 2j, 2j+1 are the top 2 bits of sub-block j's scale
//   bytes 4..7     scales_l[4]  the low 4 bits of sub-block j's scale: nibble j%2 (low nibble
//                               first) of byte j/2; stored scale = sc_j + 32
//   bytes 8..135   qs[128]      level indices; sub-block j is bytes 16j..16j+15: byte l holds
//                               element 32j + l in its low nibble and 32j + 16 + l in its high
struct BlockIQ4_XS {
  fp16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136, "block_iq4_xs is 136 bytes in GGUF");
static_assert(alignof(BlockIQ4_XS) == 2);
static_assert(offsetof(BlockIQ4_XS, scales_l) == 4 && offsetof(BlockIQ4_XS, qs) == 8);

// A quantizer of our own (not byte-identical to ggml's, and without its importance weights): per
// sub-block the scale of kquant_fit.h's fit_scaled_levels over the 16 levels (largest |x| on
// level -127, steps around it and towards 113, least-squares refits); then the scale codes
// against d = (the scale of largest magnitude) / -32, and every element re-rounded to the
// nearest level of its final grid. Error bounds: tests/ops/kquant2_quantize_test.cpp.
void quantize_row_iq4_xs_ref(const float* x, BlockIQ4_XS* y, int64_t n);
// w = fl(d * sc_j) * level.
void dequantize_row_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t n);

// Per super-block the integer sum of the header comment, exact in int32 (|.| <= 8 * 32 * 32 *
// 127 * 127 = 132,128,768 < 2^31), then acc += fl(d * d_x) * isum, super-blocks in order. SIMD
// kernels differ only in the float order.
float dot_iq4_xs_q8_K_ref(int64_t n, const std::byte* w_row, const std::byte* act);
float dot_iq4_xs_q8_K_avx2(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_iq4_xs_q8_K_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out);
// Plain AVX-512 (F/BW/VL/DQ only: runs on CPUs without VNNI).
float dot_iq4_xs_q8_K_avx512(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_iq4_xs_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                 const std::byte* act, float* out);
// Prefill GEMM (a GemmFn, type_traits.h): bit-identical to dot_rows per token.
void gemm_iq4_xs_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                             int64_t out_stride);

}  // namespace pacer::ops
