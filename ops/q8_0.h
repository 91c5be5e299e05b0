#pragma once
// Q8_0: 32 weights per block, one fp16 scale, signed 8-bit quants. w[j] = d * qs[j].
// Also the activation format every 32-element weight type (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
// IQ4_NL) dots with ("act-Q8", below).
//
// Internal to ops/: the matmul entry points reach these kernels through type_traits.
#include <cstddef>
#include <cstdint>

#include "ops/fp16.h"
#include "ops/types.h"

namespace pacer::ops {

constexpr int64_t kQ8_0BlockElems = 32;

// GGUF/ggml block_q8_0, 34 bytes, no padding:
//   bytes 0..1   d      IEEE fp16 scale (little endian)
//   bytes 2..33  qs[32] int8, element j of the block is d * qs[j]
struct BlockQ8_0 {
  fp16_t d;
  int8_t qs[kQ8_0BlockElems];
};
static_assert(sizeof(BlockQ8_0) == 34, "block_q8_0 is 34 bytes in GGUF");
static_assert(alignof(BlockQ8_0) == 2);

// --- Activations packed for the 32-element weight types ("act-Q8"), one token of n elements --
// Struct of arrays, so a kernel loads 32 quants with one aligned load and reads scales and sums
// without striding:
//   bytes [0, n)            int8  q[n]       q = round(x / d_b) of block b, in [-127, 127]
//   bytes [n, n + 4*nb)     float d[nb]      d_b = max|x| / 127 over block b (kept fp32, unlike
//                                            ggml which rounds it to fp16: slightly more precise)
//   bytes [n+4nb, n+8nb)    int32 sum[nb]    sum_b = sum of q over block b, in [-4064, 4064];
//                                            lets unsigned x signed byte dots (VNNI vpdpbusd,
//                                            maddubs) remove the bias they add (see q4_0.h).
// The row is padded to 64 bytes so consecutive tokens stay cache-line aligned.
struct ActQ8Row {
  const int8_t* q;
  const float* d;
  const int32_t* sum;
};
inline int64_t act_q8_row_bytes(int64_t n) noexcept {
  const int64_t nb = n / kQ8_0BlockElems;
  return (n + 8 * nb + 63) / 64 * 64;
}
inline ActQ8Row act_q8_row(const std::byte* act, int64_t n) noexcept {
  const int64_t nb = n / kQ8_0BlockElems;
  return {reinterpret_cast<const int8_t*>(act), reinterpret_cast<const float*>(act + n),
          reinterpret_cast<const int32_t*>(act + n + 4 * nb)};
}

// --- Reference (scalar) code, straight from the definitions -----------------------------------
// ggml's quantize_row_q8_0_ref, byte for byte: d = amax/127, id = d ? 1/d : 0, q = roundf(x*id),
// d stored as fp16 (round to nearest even).
void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t n);
void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t n);

// act-Q8 quantizer (same rounding rule as the weights, but d stays fp32 and sums are stored).
void quantize_act_q8_ref(const float* x, std::byte* act, int64_t n);
void quantize_act_q8_avx2(const float* x, std::byte* act, int64_t n);
void quantize_act_q8_avx512(const float* x, std::byte* act, int64_t n);

// sum_b d_w(b) * d_x(b) * sum_j qw[j] * qx[j], per block in exact integers, blocks summed in
// float in block order (the SIMD kernels may sum in another order: that is the only difference).
float dot_q8_0_q8_0_ref(int64_t n, const std::byte* w_row, const std::byte* act);
float dot_q8_0_q8_0_avx2(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q8_0_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out);
// The AVX2 prefill GEMM (GemmFn, type_traits.h): dot_rows_q8_0_q8_0_avx2 per token, bit for bit.
void gemm_q8_0_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                         const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                         int64_t out_stride);
// AVX-512 without VNNI (Skylake-X): maddubs-based, 2 rows per zmm.
float dot_q8_0_q8_0_avx512(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q8_0_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out);
// AVX-512 VNNI (Ice Lake and later): vpdpbusd, 2 rows per zmm.
float dot_q8_0_q8_0_avx512vnni(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_q8_0_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                   const std::byte* act, float* out);
// GEMM (several tokens per pass over a row tile), bit-identical to the dot_rows of the same Isa;
// the contract is GemmFn's in type_traits.h.
void gemm_q8_0_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride);
void gemm_q8_0_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                               int64_t out_stride);
// The VNNI GEMM in two steps (GemmPrepareFn / GemmPreparedFn): the activations regrouped by 8
// tokens once per matmul call, then read by every worker.
int64_t gemm_prepare_q8_0_q8_0_avx512vnni(int64_t n, const std::byte* act, int64_t act_stride,
                                          int64_t nt, std::byte* dst, int64_t part, int64_t parts);
void gemm_prepared_q8_0_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                        const std::byte* act, int64_t act_stride,
                                        const std::byte* prepared, int64_t nt, float* out,
                                        int64_t out_stride);
// AMX-INT8 prefill GEMM (quant_gemm_amx.cpp); only where CpuFeatures::amx_int8.
void gemm_q8_0_q8_0_amx(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                        const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                        int64_t out_stride);

}  // namespace pacer::ops
