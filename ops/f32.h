#pragma once
// F32 weights: a plain fp32 dot against fp32 activations (act type F32: the packed row is the
// token's floats themselves). Internal to ops/.
#include <cstddef>
#include <cstdint>

namespace pacer::ops {

// sum_j w[j] * x[j], summed in index order.
float dot_f32_f32_ref(int64_t n, const std::byte* w_row, const std::byte* act);
float dot_f32_f32_avx2(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_f32_f32_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, float* out);
// The AVX2 prefill GEMM (GemmFn): 3 rows x 4 tokens per tile, each (row, token) through
// dot_rows_f32_f32_avx2's operations, so equal to it per token bit for bit.
void gemm_f32_f32_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                       const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                       int64_t out_stride);
float dot_f32_f32_avx512(int64_t n, const std::byte* w_row, const std::byte* act);
void dot_rows_f32_f32_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out);
// GEMM (from 8 tokens: tokens in the vector lanes, see ops/float_rows_avx512.h), equal to
// dot_rows_f32_f32_avx512 per (row, token) within float reassociation; GemmFn's contract.
void gemm_f32_f32_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                         const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                         int64_t out_stride);
// The same GEMM in two steps (GemmPrepareFn / GemmPreparedFn): the activations transposed once
// per matmul call by gemm_prepare_f32_avx512 (shared by F32, F16 and BF16), then read by every
// worker.
void gemm_prepared_f32_f32_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                  const std::byte* act, int64_t act_stride,
                                  const std::byte* prepared, int64_t nt, float* out,
                                  int64_t out_stride);
int64_t gemm_prepare_f32_avx512(int64_t n, const std::byte* act, int64_t act_stride, int64_t nt,
                                std::byte* dst, int64_t part, int64_t parts);
// The same layout on AVX2, for the interleaved F16/BF16 GEMMs (interleaved_float_avx2.cpp).
int64_t gemm_prepare_f32_avx2(int64_t n, const std::byte* act, int64_t act_stride, int64_t nt,
                              std::byte* dst, int64_t part, int64_t parts);

}  // namespace pacer::ops
