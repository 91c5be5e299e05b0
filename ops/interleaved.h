#pragma once
// Q4_0 and Q8_0 weights repacked for decode: 16 rows interleaved ("x16"), built once at model
// load (InterleavedMatrix, matmul.h). Internal to ops/.
//
// Why: in the file's row-major layout the AVX-512 GEMVs put 4 rows' blocks (Q4_0) or 2 (Q8_0)
// in one zmm, and per register pay merging loads, a scale merge or permute, a conversion and an
// FMA next to the vpdpbusd: ~2-3 core cycles per row-block, close to or below what one Sapphire
// Rapids core needs to keep up with DRAM. With 16 rows interleaved, one vpdpbusd covers 4 quants
// of all 16 rows (dword i = row i), so a block of 16 rows costs 8 vpdpbusd (Q4_0: plus 12
// unpack ops) and one conversion, scale multiply and FMA for all 16 rows: under 1 cycle per
// row-block.
//
// Layout: groups of 16 rows (the last group padded with zero rows: d = 0), x16_group_bytes()
// each, back to back, 64-byte aligned. Inside a group, blocks go in pairs (b = 2p, 2p + 1; an
// odd last block is paired with a zero block), x16_pair_bytes() per pair:
//   bytes  0..31   fp16 d of block 2p for rows 0..15
//   bytes 32..63   fp16 d of block 2p + 1 for rows 0..15
//   then the quants of block 2p, then those of block 2p + 1, in 64-byte chunks, dword i of a
//   chunk from row i:
//   Q4_0  4 chunks (256 bytes): chunk m holds bytes qs[4m..4m+3] of row i, Q4_0's own bytes
//         (low nibbles = elements 4m..4m+3, high nibbles = elements 16+4m..16+4m+3, value
//         nibble - 8)
//   Q8_0  8 chunks (512 bytes): chunk j holds elements 4j..4j+3 of row i as unsigned bytes
//         q + 128 (q ^ 0x80), the form vpdpbusd takes
// The bytes a decode token streams are the type's own (18 or 34 per 32 elements) up to padding.
#include <cstddef>
#include <cstdint>

#include "ops/types.h"

namespace pacer::ops {

constexpr int64_t kX16Rows = 16;

// Whether `t` has an interleaved layout (Q4_0, Q8_0).
inline bool x16_supported(WeightType t) noexcept {
  return t == WeightType::Q4_0 || t == WeightType::Q8_0;
}
// Quant bytes of one block of 16 rows.
inline int64_t x16_block_qs_bytes(WeightType t) noexcept {
  return t == WeightType::Q4_0 ? 256 : 512;
}
inline int64_t x16_pair_bytes(WeightType t) noexcept {
  return 64 + 2 * x16_block_qs_bytes(t);
}
inline int64_t x16_group_bytes(WeightType t, int64_t cols) noexcept {
  return (cols / 32 + 1) / 2 * x16_pair_bytes(t);
}
inline int64_t x16_groups(int64_t rows) noexcept {
  return (rows + kX16Rows - 1) / kX16Rows;
}

// Row-major rows [16 g, 16 g + 16) of src (type t, `rows` x `cols`) into one group at dst.
void x16_repack_group(WeightType t, const std::byte* src, int64_t rows, int64_t cols, int64_t g,
                      std::byte* dst);

// GEMV over n_groups groups at `groups` with one act-Q8 row: out[16 g + i] = row (16 g + i)'s
// dot (all 16 of each group; padding rows give 0). The scalar references read the layout above
// straight from its description.
using X16GemvFn = void (*)(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out);
void gemv_q4_0x16_q8_0_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out);
void gemv_q8_0x16_q8_0_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out);
void gemv_q4_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out);
void gemv_q8_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out);
// Prefill: out[t * out_stride + 16 g + i] for nt tokens (token t's act-Q8 row at
// act + t * act_stride); every group writes all 16 of its columns.
using X16GemmFn = void (*)(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride);
void gemm_q4_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride);
void gemm_q8_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride);
// The VNNI GEMMs in two steps (as GemmPrepareFn / GemmPreparedFn in type_traits.h): the
// activations regrouped once per matmul call, then read by every worker.
using X16GemmPreparedFn = void (*)(int64_t n, const std::byte* groups, int64_t n_groups,
                                   const std::byte* act, int64_t act_stride,
                                   const std::byte* prepared, int64_t nt, float* out,
                                   int64_t out_stride);
int64_t gemm_prepare_q4_0x16_q8_0_avx512vnni(int64_t n, const std::byte* act, int64_t act_stride,
                                             int64_t nt, std::byte* dst);
int64_t gemm_prepare_q8_0x16_q8_0_avx512vnni(int64_t n, const std::byte* act, int64_t act_stride,
                                             int64_t nt, std::byte* dst);
void gemm_prepared_q4_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                           const std::byte* act, int64_t act_stride,
                                           const std::byte* prepared, int64_t nt, float* out,
                                           int64_t out_stride);
void gemm_prepared_q8_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                           const std::byte* act, int64_t act_stride,
                                           const std::byte* prepared, int64_t nt, float* out,
                                           int64_t out_stride);
void gemm_q4_0x16_q8_0_amx(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride);
void gemm_q8_0x16_q8_0_amx(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride);

}  // namespace pacer::ops
