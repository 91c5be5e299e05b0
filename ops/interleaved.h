#pragma once
// Q4_0, Q8_0, the other 32-element block types, K-quants (Q3_K, Q4_K, Q5_K, Q6_K), F16 and BF16
// weights repacked for decode: 16 rows interleaved ("x16"), built once at model load
// (InterleavedMatrix, matmul.h). Internal to ops/.
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
// odd last block stands alone: the pair's header, its d halves for block 2p + 1 zero, then only
// block 2p's quants), x16_pair_bytes() per pair. Alone, not beside a zero block the GEMV skips:
// a hole of one block per group slowed the stream from DRAM (one Zen 4 core, Q8_0 65 blocks a
// row, 2 streams: 25.0 against 35.2 GB/s at 64 blocks; Q6_K 19 super-blocks 25.5 -> 34.1,
// Q3_K 18.2 -> 33.6 with the hole gone):
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
//
// Q5_0 and Q5_1 (llama-quantize's fallback for K-quant mixes whose rows are not a multiple of 256,
// such as Qwen2.5-0.5B's 896 and Gemma 3 1B's 1152) go in pairs of blocks like Q4_0, with the
// fifth bits next to their quants (one stream, read strictly in order):
//   bytes  0..63     fp16 d of blocks 2p and 2p + 1, as Q4_0
//   Q5_1 only: bytes 64..127, fp16 m of block 2p (rows 0..15), then of block 2p + 1
//   then block 2p, then 2p + 1, 320 bytes each:
//     64 bytes of fifth bits: byte b of dword i holds, for m = 0..3, in bit m the fifth bit of
//       element 4m + b and in bit 4 + m that of element 16 + 4m + b, of row i
//     Q4_0's 4 chunks of quant nibbles (256 bytes)
//   So 704 (Q5_0) or 768 (Q5_1) bytes per pair: 16 x 2 x 22 or 24, the type's own bytes.
// IQ4_NL (the block of Q4_0 with table indices for nibbles; llama-quantize's fallback for Q2_K,
// Q3_K and IQ4_XS rows that are not a multiple of 256) is laid out exactly as Q4_0; Q4_1 as Q4_0
// with its m after the d, as Q5_1's: 640 bytes per pair (16 x 2 x 20).
//
// Q4_K (super-blocks of 256, q4_k.h) is laid out per super-block b instead, 2304 bytes (16 rows
// x 144, 64-byte aligned) each, in order:
//   bytes    0..31    fp16 d of rows 0..15
//   bytes   32..63    fp16 dmin of rows 0..15
//   bytes   64..255   3 chunks of 64: chunk k, dword i = scales[4k..4k+3] of row i (the 12 packed
//                     6-bit scale/min bytes, unchanged)
//   bytes  256..2303  the quants: for each 32-byte chunk c of qs (elements 64c..64c+63), 8
//                     vectors of 64 bytes; vector m, dword i = qs[32c+4m..32c+4m+3] of row i
//                     (low nibbles: elements 64c+4m..+3 of sub-block 2c, high nibbles: elements
//                     64c+32+4m..+3 of sub-block 2c+1)
// So one vpdpbusd dots 4 quants of all 16 rows, and the scales of 16 rows unpack in 6 vector ops.
// Exactly the type's 144 bytes per row and super-block.
//
// Q5_K (q5_k.h): Q4_K's layout with each quad of quant vectors preceded by their fifth bits, so
// a super-block is read strictly in order; 2816 bytes (16 x 176) per super-block:
//   bytes    0..255   d, dmin and the scales, as Q4_K
//   then for each chunk c (elements 64c..64c+63) 640 bytes, two quads k = 0, 1 of 320:
//     64 bytes of fifth bits: byte b of dword i holds, for j = 0..3, in bit 2j the fifth bit of
//       element 64c + 16k + 4j + b and in bit 2j + 1 that of element 64c + 32 + 16k + 4j + b
//       (qh[16k + 4j + b] bits 2c and 2c + 1) of row i
//     Q4_K's quant vectors 4k..4k+3 of chunk c (256 bytes)
//
// Q6_K (q6_k.h) goes in pairs of super-blocks (b = 2p, 2p + 1; an odd last one alone after the
// pair's 64 bytes of d, as an odd last block above), 6720 bytes (16 rows x 2 x 210) per pair:
//   bytes 0..31 / 32..63   fp16 d of rows 0..15 for super-block 2p / 2p + 1
//   then super-block 2p, then 2p + 1, 3328 bytes each:
//     bytes    0..255    scales, group by group: byte 16g + i = scales[g] of row i
//     bytes  256..3327   the quants, 16 triples of vectors A, B, C (192 bytes) in the order
//                        the GEMV reads them: in triple 8h + v, byte b of dword i (row i) of
//                        A, B, C holds q_0, q_1, q_2 in bits 0-5 and bits 0-1, 2-3, 4-5 of q_3
//                        in bits 6-7, where q_k (0..63) is the 6-bit quant of element
//                        128h + 32k + 4v + b (q6_k.h's ql/qh re-encoded so that one AND gives
//                        q_0, q_1 or q_2, and 5 logic ops 4 q_3)
//
// Q3_K (q3_k.h) goes in pairs of super-blocks as Q6_K (an odd last one alone, as Q6_K's), 3520
// bytes (16 rows x 2 x 110) per pair:
//   bytes 0..31 / 32..63   fp16 d of rows 0..15 for super-block 2p / 2p + 1
//   then super-block 2p, then 2p + 1, 1728 bytes each:
//     bytes    0..191    the 12 packed scale bytes as Q4_K's: chunk k, dword i = scales[4k..4k+3]
//                        of row i
//     bytes  192..1727   the quants, 8 triples of vectors N0, N1, N2 (192 bytes), triple 4h + v
//                        for half h and position v: byte b of dword i (row i) of vector Nj holds
//                        the unsigned quants u = q + 4 (0..7) of elements e_s = 128h + 16s + 4v + b
//                        (element quad v of group 8h + s, "set s") as
//                          bits 0-2  u of set 2j        bit 3  bit j of u of set 6
//                          bits 4-6  u of set 2j + 1    bit 7  bit j of u of set 7
//                        so sets 0-5 come out of one AND each (sets 1, 3, 5 times 16), sets 6
//                        and 7 of 5 logic ops each (times 8 and 32), all 16 rows at once
// Q2_K (q2_k.h) is laid out per super-block b, 1344 bytes (16 rows x 84) each, in order:
//   bytes    0..31     fp16 d of rows 0..15
//   bytes   32..63     fp16 dmin of rows 0..15
//   bytes   64..319    4 chunks of 64: chunk k, dword i = scales[4k..4k+3] of row i (groups
//                      4k..4k+3: scale in the low nibble, min in the high)
//   bytes  320..1343   16 vectors of 64; vector 4k + v, byte b of dword i holds in bits 2s, 2s + 1
//                      the quant of element 16(4k + s) + 4v + b of row i (s = 0..3), so one AND
//                      gives 4^s times the quants of group 4k + s, element quad v
// IQ4_XS (iq4_xs.h) is laid out per super-block b as Q4_K, 2176 bytes (16 rows x 136, 64-byte
// aligned) each, in order:
//   bytes    0..31     fp16 d of rows 0..15
//   bytes   32..63     scales_h (uint16) of rows 0..15
//   bytes   64..127    dword i = scales_l[0..3] of row i
//   bytes  128..2175   for each sub-block j (elements 32j..32j+31), 4 vectors of 64 bytes; vector
//                      m, dword i = qs[16j+4m..16j+4m+3] of row i (low nibbles: level indices of
//                      elements 32j+4m..+3, high nibbles: of 32j+16+4m..+3), IQ4_NL's chunks
// F16 (any cols) goes column by column, 32 bytes (16 rows x 2) each: bytes 32c + 2i..+1 of a
// group hold element c of row i, unchanged; a group is cols * 32 bytes, the type's own.
// BF16 goes by column pairs, 64 bytes each: dword i of pair p holds row i's elements 2p (low
// half) and 2p + 1 (high half), the operand order of vdpbf16ps; an odd last column is paired with
// a zero one. Why (on AVX-512 F/BW, no VNNI needed): interleaved_float_avx512.cpp.
#include <cstddef>
#include <cstdint>

#include "ops/isa.h"
#include "ops/types.h"

namespace pacer::ops {

constexpr int64_t kX16Rows = 16;

// Whether `t` has an interleaved layout (Q4_0, Q8_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K, IQ4_XS, F16, BF16).
inline bool x16_supported(WeightType t) noexcept {
  return t == WeightType::Q4_0 || t == WeightType::Q8_0 || t == WeightType::Q4_1 ||
         t == WeightType::Q5_0 || t == WeightType::Q5_1 || t == WeightType::IQ4_NL ||
         t == WeightType::Q2_K || t == WeightType::Q3_K || t == WeightType::Q4_K ||
         t == WeightType::Q5_K || t == WeightType::Q6_K || t == WeightType::IQ4_XS ||
         t == WeightType::F16 || t == WeightType::BF16;
}
// Whether t's interleaved layout holds 16-bit floats (F16, BF16) rather than quants.
inline bool x16_float(WeightType t) noexcept {
  return t == WeightType::F16 || t == WeightType::BF16;
}
// Q4_K, Q5_K: bytes of one super-block of 16 rows.
constexpr int64_t kX16Q4KBlockBytes = 16 * 144;
constexpr int64_t kX16Q5KBlockBytes = 16 * 176;
constexpr int64_t kX16IQ4XSBlockBytes = 16 * 136;
constexpr int64_t kX16Q2KBlockBytes = 16 * 84;
// Q6_K: bytes of one pair of super-blocks of 16 rows, and of one super-block's quants in it.
constexpr int64_t kX16Q6KPairBytes = 2 * 16 * 210;
constexpr int64_t kX16Q6KBlockBytes = 3328;
// Q3_K: likewise.
constexpr int64_t kX16Q3KPairBytes = 2 * 16 * 110;
constexpr int64_t kX16Q3KBlockBytes = 1728;
// The 32-element block types (Q4_0, Q8_0, Q4_1, Q5_0, Q5_1, IQ4_NL): bytes of one block of 16 rows
// after the pair's header (Q5: its fifth bits too), of the header (d, and Q4_1's / Q5_1's m) and
// of a pair.
inline int64_t x16_block_qs_bytes(WeightType t) noexcept {
  if (t == WeightType::Q5_0 || t == WeightType::Q5_1) return 320;
  return t == WeightType::Q4_0 || t == WeightType::Q4_1 || t == WeightType::IQ4_NL ? 256 : 512;
}
inline int64_t x16_pair_header_bytes(WeightType t) noexcept {
  return t == WeightType::Q5_1 || t == WeightType::Q4_1 ? 128 : 64;
}
inline int64_t x16_pair_bytes(WeightType t) noexcept {
  return x16_pair_header_bytes(t) + 2 * x16_block_qs_bytes(t);
}
// F16 / BF16: the byte of a group where row i's element c starts.
inline int64_t x16_float_at(WeightType t, int64_t i, int64_t c) noexcept {
  return t == WeightType::F16 ? 32 * c + 2 * i : 64 * (c / 2) + 4 * i + 2 * (c % 2);
}
inline int64_t x16_group_bytes(WeightType t, int64_t cols) noexcept {
  if (t == WeightType::F16) return cols * 32;
  if (t == WeightType::BF16) return (cols + 1) / 2 * 64;
  if (t == WeightType::Q4_K) return cols / 256 * kX16Q4KBlockBytes;
  if (t == WeightType::Q5_K) return cols / 256 * kX16Q5KBlockBytes;
  if (t == WeightType::IQ4_XS) return cols / 256 * kX16IQ4XSBlockBytes;
  if (t == WeightType::Q2_K) return cols / 256 * kX16Q2KBlockBytes;
  // The pair layouts: whole pairs, then an odd last block alone (its pair's header and its own
  // bytes, no zero block after it), so a group's bytes are all read and the next group follows.
  if (t == WeightType::Q6_K) {
    return cols / 512 * kX16Q6KPairBytes + cols / 256 % 2 * (64 + kX16Q6KBlockBytes);
  }
  if (t == WeightType::Q3_K) {
    return cols / 512 * kX16Q3KPairBytes + cols / 256 % 2 * (64 + kX16Q3KBlockBytes);
  }
  return cols / 64 * x16_pair_bytes(t) +
         cols / 32 % 2 * (x16_pair_header_bytes(t) + x16_block_qs_bytes(t));
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
// Q4_1 / Q5_0 / Q5_1 / IQ4_NL (AVX-512 VNNI and AVX2 kernels; below AVX2 they stay row-major,
// InterleavedMatrix::pays): per row and block, d_w * d_x * isum (Q4_1, Q5_1: then + m_w * d_x *
// sum_b(x)), in block order.
void gemv_q5_0x16_q8_0_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out);
void gemv_q5_1x16_q8_0_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out);
void gemv_iq4_nlx16_q8_0_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                             const std::byte* act, float* out);
void gemv_q4_1x16_q8_0_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out);
void gemv_q4_1x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out);
void gemv_iq4_nlx16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                    const std::byte* act, float* out);
void gemv_q5_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out);
void gemv_q5_1x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out);
// AVX2 (interleaved_avx2.cpp): each (row, token) the VNNI kernel's integer block dots and float
// steps, so the two tiers agree bit for bit; the GEMM takes any token count (4 tokens per pass).
// The GEMVs (Q4_K's too) read 2 far-apart stretches at a time on every CPU (with 4, its 8
// accumulators and 8 weight vectors overflow the 16 ymm registers: Q8_0 2048x2048 on one core, 480
// -> 305 us).
constexpr int kX16Avx2GemvStreams = 2;
// The long runs of ops/isa.h x16_gemv_long_runs (how much of one stream a GEMV reads before the
// next stream's turn): blocks of a 32-element block type, F16/BF16 columns. The short ones: a
// block; 128 columns on AVX2 (its chunk), 8 on AVX-512 (its step).
constexpr int64_t kX16LongRunBlocks = 8;
constexpr int64_t kX16LongRunColumns = 64;
// The bytes of a 16-row group the GEMV of type t on `isa` (Avx2, or Avx512 with VNNI for the
// quantized types) reads from one stream before the next stream's turn, for the event log: the
// blocks or columns above (the AVX2 IQ4_NL always a block: bound by its lookups, in runs GCC's
// code for it ran 0.88-0.93x); a K-quant's super-block on AVX2; on AVX-512 a quarter
// super-block, or with long runs a whole one (Q6_K, Q2_K, IQ4_XS) or half of one (Q5_K).
int64_t x16_gemv_run_bytes(WeightType t, Isa isa) noexcept;
void gemv_q4_0x16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out);
// Q4_1 / Q5_0 / Q5_1 / IQ4_NL on AVX2, likewise.
void gemv_q4_1x16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out);
void gemm_q4_1x16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride);
void gemv_q5_0x16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out);
void gemm_q5_0x16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride);
void gemv_q5_1x16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out);
void gemm_q5_1x16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride);
void gemv_iq4_nlx16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                              const std::byte* act, float* out);
void gemm_iq4_nlx16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                              const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                              int64_t out_stride);
void gemv_q8_0x16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out);
void gemv_q4_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out);
// The same, its software prefetch and its page touch twice as far ahead (8 block pairs, 4.6 KiB a
// stream; the plan's touch doubled): for a matmul that runs on one worker, where one core's lines
// in flight bound the GEMV (KernelSet::for_workers; interleaved_avx512vnni.cpp has the figures).
void gemv_q4_0x16_q8_0_avx512vnni_lone(int64_t n, const std::byte* groups, int64_t n_groups,
                                       const std::byte* act, float* out);
void gemv_q8_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out);
// Q4_K x one Q8_K row. The reference gathers each row's blocks back from the layout and runs
// dot_q4_K_q8_K_ref on them (bit for bit the row-major result); the VNNI kernel differs only in
// float order (one FMA per super-block for all 16 rows).
void gemv_q4_Kx16_q8_K_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out);
void gemv_q4_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out);
// Q4_K / Q5_K on AVX2 (interleaved_q45_k_avx2.cpp): the VNNI kernels' integers and float steps,
// 8 rows at a time, so bit for bit their results; the GEMM (4 tokens per pass) equals the GEMV
// per token.
void gemv_q4_Kx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out);
void gemm_q4_Kx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride);
void gemv_q5_Kx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out);
void gemm_q5_Kx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride);
// Q5_K x one Q8_K row, likewise (reference: dot_q5_K_q8_K_ref on the gathered rows).
void gemv_q5_Kx16_q8_K_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out);
void gemv_q5_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out);
// Q6_K x one Q8_K row, likewise (reference: dot_q6_K_q8_K_ref on the gathered rows).
void gemv_q6_Kx16_q8_K_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out);
void gemv_q6_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out);
// Q6_K on AVX2 (interleaved_q6_k_avx2.cpp): the VNNI kernel's integers and float steps, 8 rows at
// a time (bit for bit its results); the GEMM (4 tokens per pass) equals the GEMV per token.
void gemv_q6_Kx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out);
void gemm_q6_Kx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride);
// Q3_K x one Q8_K row (VNNI and AVX2 kernels; below AVX2 Q3_K stays row-major,
// InterleavedMatrix::pays).
// The reference gathers each row back and runs dot_q3_K_q8_K_ref (bit for bit the row-major
// result); the VNNI kernel differs only in float order (one FMA per super-block for all 16 rows).
// Its GEMM (up to 4 tokens a pass) equals the GEMV per token.
void gemv_q3_Kx16_q8_K_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out);
void gemv_q3_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out);
// Q3_K on AVX2 (interleaved_q3_k_avx2.cpp): the VNNI kernel's integers and float steps, 8 rows at a
// time (bit for bit its results); the GEMM (4 tokens per pass) equals the GEMV per token.
void gemv_q3_Kx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out);
void gemm_q3_Kx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride);
// Q2_K x one Q8_K row, likewise (reference: dot_q2_K_q8_K_ref on the gathered rows).
void gemv_q2_Kx16_q8_K_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out);
void gemv_q2_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out);
// Q2_K on AVX2 (interleaved_q2_k_avx2.cpp): the VNNI kernel's integers and float steps, 8 rows at a
// time (bit for bit its results); the GEMM (4 tokens per pass) equals the GEMV per token.
void gemv_q2_Kx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out);
void gemm_q2_Kx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride);
// IQ4_XS x one Q8_K row, likewise (reference: dot_iq4_xs_q8_K_ref on the gathered rows).
void gemv_iq4_xsx16_q8_K_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                             const std::byte* act, float* out);
void gemv_iq4_xsx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                    const std::byte* act, float* out);
// IQ4_XS on AVX2 (interleaved_iq4_xs_avx2.cpp): the VNNI kernel's integers and float steps, 8 rows
// at a time (bit for bit its results); the GEMM (4 tokens per pass) equals the GEMV per token.
void gemv_iq4_xsx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                              const std::byte* act, float* out);
void gemm_iq4_xsx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                              const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                              int64_t out_stride);
// F16 / BF16 x one fp32 row. The references gather each row back and run dot_f16_f32_ref /
// dot_bf16_f32_ref on it (bit for bit the row-major result). The AVX-512 and AVX2 GEMVs sum
// column c of each row into partial sum c % 4 (one FMA each, in column order) and return
// (p0 + p1) + (p2 + p3); the fp32 GEMMs do the same below 16 tokens (bit-identical), and from
// 16 on keep a group's 16 rows in the lanes against a few tokens at a time, summing chunks of 128
// columns (within float reassociation of the GEMV; the AVX2 and AVX-512 GEMMs bit for bit alike).
void gemv_f16x16_f32_ref(int64_t n, const std::byte* groups, int64_t n_groups, const std::byte* act,
                         float* out);
void gemv_bf16x16_f32_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                          const std::byte* act, float* out);
void gemv_f16x16_f32_avx512(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out);
void gemv_bf16x16_f32_avx512(int64_t n, const std::byte* groups, int64_t n_groups,
                             const std::byte* act, float* out);
void gemv_f16x16_f32_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                          const std::byte* act, float* out);
void gemv_bf16x16_f32_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out);
// Prefill: out[t * out_stride + 16 g + i] for nt tokens (token t's act-Q8 row at
// act + t * act_stride); every group writes all 16 of its columns.
using X16GemmFn = void (*)(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride);
void gemm_q4_0x16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride);
void gemm_q8_0x16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride);
void gemm_q4_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride);
void gemm_q8_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride);
// Q4_K, Q5_K, Q6_K: each super-block of a group is unpacked once for 4 tokens at a time; per
// (row, token) the same integer sums and float steps as the GEMV, so the GEMM equals it bit for
// bit.
void gemm_q4_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride);
void gemm_q5_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride);
void gemm_q6_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride);
void gemm_q3_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride);
void gemm_q2_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride);
void gemm_iq4_xsx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                    const std::byte* act, int64_t act_stride, int64_t nt,
                                    float* out, int64_t out_stride);
// The VNNI GEMMs in two steps (as GemmPrepareFn / GemmPreparedFn in type_traits.h): the
// activations regrouped once per matmul call, then read by every worker.
using X16GemmPreparedFn = void (*)(int64_t n, const std::byte* groups, int64_t n_groups,
                                   const std::byte* act, int64_t act_stride,
                                   const std::byte* prepared, int64_t nt, float* out,
                                   int64_t out_stride);
int64_t gemm_prepare_q4_0x16_q8_0_avx512vnni(int64_t n, const std::byte* act, int64_t act_stride,
                                             int64_t nt, std::byte* dst, int64_t part,
                                             int64_t parts);
int64_t gemm_prepare_q8_0x16_q8_0_avx512vnni(int64_t n, const std::byte* act, int64_t act_stride,
                                             int64_t nt, std::byte* dst, int64_t part,
                                             int64_t parts);
void gemm_prepared_q4_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                           const std::byte* act, int64_t act_stride,
                                           const std::byte* prepared, int64_t nt, float* out,
                                           int64_t out_stride);
void gemm_prepared_q8_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                           const std::byte* act, int64_t act_stride,
                                           const std::byte* prepared, int64_t nt, float* out,
                                           int64_t out_stride);
// Q4_0 / Q8_0 x a few act-Q8 rows (2 <= nt < kX16FewTokensMax): the GEMV run over up to 4
// tokens per pass, in its stream order and with its prefetch, each (row, token) bit for bit the
// GEMV's result. A short prompt is memory-bound like decode, where the prefill GEMMs (hex tiles
// of 8 tokens, AMX tiles of 16) would compute padding tokens and read the weights in tile order.
constexpr int64_t kX16FewTokensMax = 16;
// From this many tokens the BF16 GEMM on AVX512_BF16 rounds its inputs to bf16 (vdpbf16ps).
constexpr int64_t kX16Bf16DotMinTokens = 8;
void gemm_few_q4_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                      const std::byte* act, int64_t act_stride, int64_t nt,
                                      float* out, int64_t out_stride);
void gemm_few_q8_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                      const std::byte* act, int64_t act_stride, int64_t nt,
                                      float* out, int64_t out_stride);
// Q4_1 / Q5_0 / Q5_1 / IQ4_NL: the same passes of up to 4 tokens for any token count, their prefill
// GEMM too (a pass reads the weights from DRAM once per 15 tokens; the next passes find them in
// L2).
void gemm_few_q5_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                      const std::byte* act, int64_t act_stride, int64_t nt,
                                      float* out, int64_t out_stride);
void gemm_few_q5_1x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                      const std::byte* act, int64_t act_stride, int64_t nt,
                                      float* out, int64_t out_stride);
void gemm_few_iq4_nlx16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                        const std::byte* act, int64_t act_stride, int64_t nt,
                                        float* out, int64_t out_stride);
void gemm_few_q4_1x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                      const std::byte* act, int64_t act_stride, int64_t nt,
                                      float* out, int64_t out_stride);
// F16 / BF16 (the activations transposed by gemm_prepare_f32_avx512, f32.h's; below 8 tokens
// none: prepared null; below kX16FewTokensMax tokens the GEMM does not read them but runs the
// gemm_few entry: 2 far-apart groups, 4 tokens per pass, each token bit for bit the GEMV's).
void gemm_few_f16x16_f32_avx512(int64_t n, const std::byte* groups, int64_t n_groups,
                                const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                int64_t out_stride);
void gemm_few_bf16x16_f32_avx512(int64_t n, const std::byte* groups, int64_t n_groups,
                                 const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                 int64_t out_stride);
void gemm_f16x16_f32_avx512(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride);
void gemm_bf16x16_f32_avx512(int64_t n, const std::byte* groups, int64_t n_groups,
                             const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                             int64_t out_stride);
void gemm_prepared_f16x16_f32_avx512(int64_t n, const std::byte* groups, int64_t n_groups,
                                     const std::byte* act, int64_t act_stride,
                                     const std::byte* prepared, int64_t nt, float* out,
                                     int64_t out_stride);
void gemm_prepared_bf16x16_f32_avx512(int64_t n, const std::byte* groups, int64_t n_groups,
                                      const std::byte* act, int64_t act_stride,
                                      const std::byte* prepared, int64_t nt, float* out,
                                      int64_t out_stride);
// The same on AVX2 (interleaved_float_avx2.cpp; activations transposed by gemm_prepare_f32_avx2,
// f32.h's, to the same layout).
void gemm_few_f16x16_f32_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                              const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                              int64_t out_stride);
void gemm_few_bf16x16_f32_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                               const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                               int64_t out_stride);
void gemm_f16x16_f32_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                          const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                          int64_t out_stride);
void gemm_bf16x16_f32_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride);
void gemm_prepared_f16x16_f32_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                                   const std::byte* act, int64_t act_stride,
                                   const std::byte* prepared, int64_t nt, float* out,
                                   int64_t out_stride);
void gemm_prepared_bf16x16_f32_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                                    const std::byte* act, int64_t act_stride,
                                    const std::byte* prepared, int64_t nt, float* out,
                                    int64_t out_stride);
// BF16 on AVX512_BF16 (interleaved_bf16_avx512bf16.cpp): from kX16Bf16DotMinTokens on, the
// activations are rounded to bf16 (nearest even) and each column pair of 16 rows goes through one
// vdpbf16ps per token, as llama.cpp computes BF16 weights; below 8 tokens the prepare returns 0
// bytes and the GEMM runs the exact fp32 path above. Prepared layout: per token, ceil(n / 2) uint32
// pairs (element 2p low, 2p + 1 high, a missing odd one 0), padded to 64-byte lines.
int64_t gemm_prepare_bf16_pairs_avx512bf16(int64_t n, const std::byte* act, int64_t act_stride,
                                           int64_t nt, std::byte* dst, int64_t part, int64_t parts);
void gemm_bf16x16_bf16_avx512bf16(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride);
void gemm_prepared_bf16x16_bf16_avx512bf16(int64_t n, const std::byte* groups, int64_t n_groups,
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
