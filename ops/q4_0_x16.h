#pragma once
// Q4_0 weights repacked for decode: 16 rows interleaved ("q4_0x16"), built once at model load.
//
// Why: in the file's row-major layout the AVX-512 GEMV puts four rows' blocks in one zmm, and
// per 4 row-blocks pays three merging loads, a scale permute, a conversion and an FMA next to
// its two vpdpbusd: ~2 core cycles per row-block, which is below DRAM speed on one Sapphire
// Rapids core (~15 GB/s hot against a ~16 GB/s read stream). With 16 rows interleaved, one
// vpdpbusd covers 4 quants of all 16 rows (dword i = row i), so a block of 16 rows is 4 loads,
// 12 unpack ops, 8 vpdpbusd and one conversion/scale/FMA for all 16 rows: under 1 cycle per
// row-block. The matrix also becomes one sequential stream (no stream-order trick needed).
//
// Layout: groups of 16 rows (the last group padded with zero rows: d = 0), each group
// `x16_group_bytes(cols)` bytes, groups back to back, 64-byte aligned. Inside a group, blocks go
// in pairs (b = 2p, 2p + 1; an odd last block is paired with a zero block), 576 bytes per pair:
//   bytes   0..31   fp16 d of block 2p for rows 0..15
//   bytes  32..63   fp16 d of block 2p + 1 for rows 0..15
//   bytes  64..319  quants of block 2p: chunk m (m = 0..3, 64 bytes each), dword i = bytes
//                   qs[4m..4m+3] of row i (so low nibbles = elements 4m..4m+3, high nibbles =
//                   elements 16+4m..16+4m+3; values nibble - 8 as in Q4_0)
//   bytes 320..575  quants of block 2p + 1, the same way
// The quant bytes are Q4_0's own (the nibble packing is unchanged), only transposed; the bytes
// per row are Q4_0's (18 per 32 elements) up to the padding.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "ops/matmul.h"

namespace pacer::ops {

constexpr int64_t kX16Rows = 16;
constexpr int64_t kX16PairBytes = 576;

inline int64_t x16_group_bytes(int64_t cols) noexcept {
  const int64_t nb = cols / 32;
  return (nb + 1) / 2 * kX16PairBytes;
}
inline int64_t x16_groups(int64_t rows) noexcept {
  return (rows + kX16Rows - 1) / kX16Rows;
}

// Group g of rows [g0, g0 + n_groups) of an interleaved matrix, dotted with one act-Q8 row:
// out[16 * g + i] = row (16 g + i)'s dot (all 16 of each group, padding rows give 0).
void gemv_q4_0x16_q8_0_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out);
void gemv_q4_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out);
// Prefill: out[t * out_stride + 16 g + i] for nt tokens (token t's act-Q8 row at
// act + t * act_stride); every group writes all 16 of its columns.
void gemm_q4_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride);
void gemm_q4_0x16_q8_0_amx(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride);

}  // namespace pacer::ops
