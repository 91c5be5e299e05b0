// The x16 layouts of the 32-element block types (interleaved.h: Q4_0, Q8_0, Q4_1, Q5_0, Q5_1,
// IQ4_NL) x act-Q8 on AVX2: the decode GEMV and the prefill GEMM of CPUs without AVX-512 VNNI
// (Zen 2/3, Haswell to Cascade Lake clients, or any machine pinned to PACER_ISA=avx2).
//
// Why: the row-major AVX2 kernels pay per row and block a quant unpack, a sign fix-up, vpmaddubsw,
// vpmaddwd, a conversion and an FMA, and per row a horizontal sum; a Q4_0 GEMV on one Sapphire
// Rapids core then reads ~6 GB/s, about 40 % of what the core can pull from DRAM. In the x16
// layout a 32-byte half of a 64-byte chunk holds 4 quants of 8 rows (dword i = row 8h + i), so
// one vpmaddubsw covers 4 quants of 8 rows against one broadcast activation dword, and the
// conversion, scale multiply and FMA serve 8 rows at once. pacer_bench_ops on one core of the
// dev VM (Sapphire Rapids, the kernel set of Isa::Avx2), row-major kernels -> these: Q4_0 GEMV of a
// cold 2048x2048 337 -> 178 us (median); GEMM of 128 tokens 30.9 -> 78.6 GFLOP/s (Q8_0 32.7 ->
// 49.9); the Q8_0 GEMV reads about as fast as the row-major one.
//
// Per half-group of 8 rows and block b, the 16-bit pair sums of vpmaddubsw are:
//   Q4_0, Q4_1  unsigned nibbles (0..15) x signed activations (-127..127): |pair| <= 2 x 15 x
//         127 = 3810, so the 8 vectors of a block sum in int16 (<= 30480) before one vpmaddwd;
//         Q4_0's offset comes off as -8 * sum_b(x), exactly as the VNNI kernel removes it.
//   Q5_0, Q5_1  the nibble with its fifth bit OR-ed into bit 4 (0..31): |pair| <= 7874, so 4
//         vectors sum in int16 (<= 31496), two vpmaddwd a block; Q5_0's offset as -16 * sum_b(x).
//   Q8_0  the stored q + 128 is flipped back to signed q, and each vector goes through
//         vpmaddubsw(|q|, sign(x, q)) (|q| <= 128, |pair| <= 32512) and its own vpmaddwd.
//   IQ4_NL  the nibbles looked up in the signed table (vpshufb; -127..113), then as Q8_0 (the
//         unsigned table + 128 that VNNI reads would reach pair sums of 2 x 241 x 127 and
//         saturate vpmaddubsw).
// Each gives every row's exact integer block dot, then acc += float(isum) * (d_w * d_x) with one
// FMA (Q4_1, Q5_1: then acc += m_w * (d_x * sum_b(x)) with another), in block order: the
// AVX-512 VNNI kernels' steps, so every tier of a machine gives the same bits, and the GEMV, the
// GEMM and any token grouping agree bit for bit.
#include "ops/matmul_simd_avx2.h"  // first: wraps <immintrin.h>

#include <algorithm>
#include <cstring>

#include "ops/gemv_streams.h"
#include "ops/interleaved.h"
#include "ops/iq4_nl.h"
#include "ops/isa.h"
#include "ops/q8_0.h"
#include "ops/unroll.h"

namespace pacer::ops {
namespace {

// Block pairs each stream prefetches ahead, as the VNNI GEMV.
constexpr int64_t kPrefetchPairs = 4;

// Activation dword j of a block (quants 4j..4j + 3), broadcast.
inline __m256i act_dword(const int8_t* q, int j) {
  return avx2::act_dword(q, 4 * j);
}

// A layout: its type, a block's bytes after the pair's header (kQsBytes), the header's bytes (d
// of both blocks, and Q4_1's / Q5_1's m after them), whether an m term follows, and per half h of
// a block (rows 8h..8h + 7): load() its 8 quant vectors (vector j = quants 4j..4j + 3 of the 8
// rows), dot() them with one token's block (its quants q and their sum), and dot_from() the same
// straight from the bytes (the GEMV's case).
template <WeightType T, int64_t kHeader, int32_t kOffset>
struct Q4x16 {
  static constexpr WeightType kType = T;
  static constexpr int64_t kQsBytes = 256;
  static constexpr int64_t kHeaderBytes = kHeader;
  static constexpr bool kHasMin = kHeader == 128;
  // Half h (rows 8h..8h + 7) of one block: vector j = quants 4j..4j + 3 of the 8 rows, unsigned.
  static void load(const std::byte* qs, int h, __m256i* w) {
    const __m256i mask = _mm256_set1_epi8(0x0F);
    for (int m = 0; m < 4; ++m) {
      const __m256i q = _mm256_load_si256(reinterpret_cast<const __m256i*>(qs + 64 * m + 32 * h));
      w[m] = _mm256_and_si256(q, mask);
      w[m + 4] = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
    }
  }
  // One token (the GEMV): the same sums, each chunk unpacked as it is used, so no 8 weight
  // vectors stay live next to the GEMV's accumulators.
  static __m256i dot_from(const std::byte* qs, int h, const int8_t* q, int32_t sum) {
    const __m256i mask = _mm256_set1_epi8(0x0F);
    __m256i s = _mm256_setzero_si256();
    for (int m = 0; m < 4; ++m) {
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(qs + 64 * m + 32 * h));
      s = _mm256_add_epi16(s, _mm256_maddubs_epi16(_mm256_and_si256(v, mask), act_dword(q, m)));
      s = _mm256_add_epi16(s, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), mask),
                                                   act_dword(q, m + 4)));
    }
    return _mm256_add_epi32(_mm256_madd_epi16(s, _mm256_set1_epi16(1)),
                            _mm256_set1_epi32(-kOffset * sum));
  }
  // Both halves (rows 0..15) against one token, the GEMV's step (block_both): each 64-byte line
  // used whole when first read, each activation broadcast serving 16 rows, the 8 pair sums of a
  // half added in int16 (<= 30,480): dot_from's integers. In assembly because GCC 12 regrouped
  // the same intrinsics into a tree with 9 sums on the stack and hoisted broadcasts (then
  // 35.0-35.5 GB/s from L2, where dot_from per half ran 38.1-38.5). Zen 4 guest without AVX-512,
  // old and new kernels in one process, the same bits: Q4_0 256 rows x 2048 columns from L2 38.2
  // -> 40.7 GB/s (1.06x), 64000 rows 1.03x.
  //
  // The order: the 4 products of step m (both halves) go to registers, and their sums are added
  // only after step m + 1's products are issued. On Zen 1 vpmaddubsw runs on one pipe (FP0, two
  // cycles a ymm) and is the bound, while vpaddw and vpand may also go to FP0: a sum issued right
  // behind its product took FP0 cycles from the next product (probe: 5.1 cycles per 32 quant bytes
  // with each sum after its product, 4.0 with the products alone, 4.6 with sums a step later).
  // Zen 1 (EPYC 7001 guest, AVX2), 64 rows x 2048 columns from L2, one core, median of 5
  // alternating runs, the same bits: 62.2 -> 58.2 cycles per 16 x 32 block (1.07x).
  static void dot_from_both(const std::byte* qs, const int8_t* q, int32_t sum, __m256i* isum) {
    __m256i s0, s1, xa, xb, v, p0, p1, p2, p3, p4, p5, p6, p7;
    // clang-format off
#define PACER_Q40_ACT(M)                                     \
  "vpbroadcastd 4*" #M "(%[xq]), %[xa]\n\t"                   \
  "vpbroadcastd 16+4*" #M "(%[xq]), %[xb]\n\t"
    // Half H of step M: low nibbles (quants 4M..4M+3) x xa into PL, high (16+4M..) x xb into PH.
#define PACER_Q40_PROD(M, H, PL, PH)                         \
  "vmovdqa 64*" #M "+32*" #H "(%[qs]), %[v]\n\t"              \
  "vpsrlw $4, %[v], %[" #PH "]\n\t"                           \
  "vpand %[mask], %[v], %[" #PL "]\n\t"                       \
  "vpand %[mask], %[" #PH "], %[" #PH "]\n\t"                 \
  "vpmaddubsw %[xa], %[" #PL "], %[" #PL "]\n\t"              \
  "vpmaddubsw %[xb], %[" #PH "], %[" #PH "]\n\t"
#define PACER_Q40_STEP(M, A, B, C, D)                        \
  PACER_Q40_ACT(M)                                           \
  PACER_Q40_PROD(M, 0, A, B) PACER_Q40_PROD(M, 1, C, D)
#define PACER_Q40_SUM(A, B, C, D)                            \
  "vpaddw %[" #B "], %[" #A "], %[" #A "]\n\t"                \
  "vpaddw %[" #D "], %[" #C "], %[" #C "]\n\t"                \
  "vpaddw %[" #A "], %[s0], %[s0]\n\t"                        \
  "vpaddw %[" #C "], %[s1], %[s1]\n\t"
    asm(PACER_Q40_STEP(0, p0, p1, p2, p3)
        PACER_Q40_STEP(1, p4, p5, p6, p7)
        "vpaddw %[p1], %[p0], %[s0]\n\t"
        "vpaddw %[p3], %[p2], %[s1]\n\t"
        PACER_Q40_STEP(2, p0, p1, p2, p3)
        PACER_Q40_SUM(p4, p5, p6, p7)
        PACER_Q40_STEP(3, p4, p5, p6, p7)
        PACER_Q40_SUM(p0, p1, p2, p3)
        PACER_Q40_SUM(p4, p5, p6, p7)
        : [s0] "=&x"(s0), [s1] "=&x"(s1), [xa] "=&x"(xa), [xb] "=&x"(xb), [v] "=&x"(v),
          [p0] "=&x"(p0), [p1] "=&x"(p1), [p2] "=&x"(p2), [p3] "=&x"(p3), [p4] "=&x"(p4),
          [p5] "=&x"(p5), [p6] "=&x"(p6), [p7] "=&x"(p7)
        : [qs] "r"(qs), [xq] "r"(q), [mask] "x"(_mm256_set1_epi8(0x0F)),
          "m"(*reinterpret_cast<const std::byte(*)[256]>(qs)),
          "m"(*reinterpret_cast<const int8_t(*)[32]>(q)));
#undef PACER_Q40_SUM
#undef PACER_Q40_STEP
#undef PACER_Q40_PROD
#undef PACER_Q40_ACT
    // clang-format on
    const __m256i ones = _mm256_set1_epi16(1), off = _mm256_set1_epi32(-kOffset * sum);
    isum[0] = _mm256_add_epi32(_mm256_madd_epi16(s0, ones), off);
    isum[1] = _mm256_add_epi32(_mm256_madd_epi16(s1, ones), off);
  }
  // The 8 rows' integer dots with one token's block (quants q, their sum).
  static __m256i dot(const __m256i* w, const int8_t* q, int32_t sum) {
    __m256i s = _mm256_maddubs_epi16(w[0], act_dword(q, 0));
    for (int j = 1; j < 8; ++j)
      s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w[j], act_dword(q, j)));
    return _mm256_add_epi32(_mm256_madd_epi16(s, _mm256_set1_epi16(1)),
                            _mm256_set1_epi32(-kOffset * sum));
  }
};
using Q4_0x16 = Q4x16<WeightType::Q4_0, 64, 8>;
using Q4_1x16 = Q4x16<WeightType::Q4_1, 128, 0>;  // Q4_0's nibbles as they are, m after the d

// Q5_0 / Q5_1: Q4_0's nibbles with the fifth bit OR-ed into bit 4. A block starts with the 64
// bytes of fifth bits: byte b of dword i holds those of elements 4m + b (bit m) and 16 + 4m + b
// (bit 4 + m) of row i, so a 16-bit shift by 4 - m (left) or m (right) brings them to bit 4 of
// every byte (no bit crosses a byte boundary into bit 4).
template <WeightType T>
struct Q5x16 {
  static constexpr WeightType kType = T;
  static constexpr int64_t kQsBytes = 320;
  static constexpr int64_t kHeaderBytes = T == WeightType::Q5_1 ? 128 : 64;
  static constexpr int32_t kOffset = T == WeightType::Q5_1 ? 0 : 16;
  static constexpr bool kHasMin = T == WeightType::Q5_1;
  static void load(const std::byte* blk, int h, __m256i* w) {
    const __m256i mask = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
    const __m256i hb = _mm256_load_si256(reinterpret_cast<const __m256i*>(blk + 32 * h));
    const __m256i h_lo[4] = {_mm256_slli_epi16(hb, 4), _mm256_slli_epi16(hb, 3),
                             _mm256_slli_epi16(hb, 2), _mm256_slli_epi16(hb, 1)};
    const __m256i h_hi[4] = {hb, _mm256_srli_epi16(hb, 1), _mm256_srli_epi16(hb, 2),
                             _mm256_srli_epi16(hb, 3)};
    for (int m = 0; m < 4; ++m) {
      const __m256i q =
          _mm256_load_si256(reinterpret_cast<const __m256i*>(blk + 64 + 64 * m + 32 * h));
      w[m] = _mm256_or_si256(_mm256_and_si256(q, mask), _mm256_and_si256(h_lo[m], bit4));
      w[m + 4] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), mask),
                                 _mm256_and_si256(h_hi[m], bit4));
    }
  }
  // Vectors m and m + 4 for m = 0..3 in two int16 sums of 4 (each <= 31496).
  static __m256i dot(const __m256i* w, const int8_t* q, int32_t sum) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i lo = _mm256_maddubs_epi16(w[0], act_dword(q, 0));
    __m256i hi = _mm256_maddubs_epi16(w[4], act_dword(q, 4));
    for (int m = 1; m < 4; ++m) {
      lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(w[m], act_dword(q, m)));
      hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(w[m + 4], act_dword(q, m + 4)));
    }
    return _mm256_add_epi32(
        _mm256_add_epi32(_mm256_madd_epi16(lo, ones), _mm256_madd_epi16(hi, ones)),
        _mm256_set1_epi32(-kOffset * sum));
  }
  static __m256i dot_from(const std::byte* blk, int h, const int8_t* q, int32_t sum) {
    __m256i w[8];
    load(blk, h, w);
    return dot(w, q, sum);
  }
  // dot_from for both halves (rows 0..15) at once, the GEMV's step (block_both): each activation
  // broadcast serves 16 rows. Zen 4 guest without AVX-512, 128 rows x 2048 columns from L2 (a
  // harness calling the kernel alone, best of 3000 calls, alternating): Q5_0 25.0 -> 27.4 GB/s;
  // BM_gemv 5632x2048 at 1 thread, 3 alternating runs: from L3 Q5_0 19-23 -> 23-26, Q5_1 21-24 ->
  // 22-25 GB/s, cold Q5_1 67-73 -> 78-80 % of a plain read. (Q4_0's took assembly to gain:
  // Q4x16::dot_from_both.)
  static void dot_from_both(const std::byte* blk, const int8_t* q, int32_t sum, __m256i* isum) {
    const __m256i mask = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
    const __m256i hb[2] = {_mm256_load_si256(reinterpret_cast<const __m256i*>(blk)),
                           _mm256_load_si256(reinterpret_cast<const __m256i*>(blk + 32))};
    __m256i lo[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}, hi[2] = {lo[0], lo[0]};
    unroll<4>([&](auto mc) {
      constexpr int M = decltype(mc)::value;
      const __m256i xa = act_dword(q, M), xb = act_dword(q, M + 4);
      for (int h = 0; h < 2; ++h) {
        const __m256i v =
            _mm256_load_si256(reinterpret_cast<const __m256i*>(blk + 64 + 64 * M + 32 * h));
        const __m256i h_lo = _mm256_slli_epi16(hb[h], 4 - M);
        const __m256i h_hi = M == 0 ? hb[h] : _mm256_srli_epi16(hb[h], M);
        const __m256i wl = _mm256_or_si256(_mm256_and_si256(v, mask), _mm256_and_si256(h_lo, bit4));
        const __m256i wh = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), mask),
                                           _mm256_and_si256(h_hi, bit4));
        lo[h] = _mm256_add_epi16(lo[h], _mm256_maddubs_epi16(wl, xa));
        hi[h] = _mm256_add_epi16(hi[h], _mm256_maddubs_epi16(wh, xb));
      }
    });
    const __m256i ones = _mm256_set1_epi16(1), off = _mm256_set1_epi32(-kOffset * sum);
    for (int h = 0; h < 2; ++h) {
      isum[h] = _mm256_add_epi32(
          _mm256_add_epi32(_mm256_madd_epi16(lo[h], ones), _mm256_madd_epi16(hi[h], ones)), off);
    }
  }
};
using Q5_0x16 = Q5x16<WeightType::Q5_0>;
using Q5_1x16 = Q5x16<WeightType::Q5_1>;

// vector j's 8 row dwords of signed quants dotted with activation dword j: |q| x sign(x, q),
// exact in int16 for |q| <= 128 (Q8_0, IQ4_NL).
inline __m256i signed_quad_dot(__m256i w, __m256i xj) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(xj, w)),
                           _mm256_set1_epi16(1));
}

struct Q8_0x16 {
  static constexpr WeightType kType = WeightType::Q8_0;
  static constexpr int64_t kQsBytes = 512;
  static constexpr int64_t kHeaderBytes = 64;
  static constexpr bool kHasMin = false;
  // Half h of one block: vector j = quants 4j..4j + 3 of the 8 rows, signed again (q + 128 ^ 0x80).
  static void load(const std::byte* qs, int h, __m256i* w) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int j = 0; j < 8; ++j) {
      w[j] = _mm256_xor_si256(
          _mm256_load_si256(reinterpret_cast<const __m256i*>(qs + 64 * j + 32 * h)), flip);
    }
  }
  // One token (the GEMM's last tokens): each vector loaded as it is used (see
  // Q4_0x16::dot_from). Two chains (vpmaddubsw + vpmaddwd latency ~10), joined at the end, here
  // and in dot().
  static __m256i dot_from(const std::byte* qs, int h, const int8_t* q, int32_t) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    __m256i chain[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int j = 0; j < 8; ++j) {
      const __m256i w = _mm256_xor_si256(
          _mm256_load_si256(reinterpret_cast<const __m256i*>(qs + 64 * j + 32 * h)), flip);
      chain[j % 2] = _mm256_add_epi32(chain[j % 2], signed_quad_dot(w, act_dword(q, j)));
    }
    return _mm256_add_epi32(chain[0], chain[1]);
  }
  // The GEMV's dot_from: each step's product (vpmaddubsw + vpmaddwd) added only after the next
  // step's is issued, as Q4_0x16::dot_from_both (why: there); in assembly to keep that order. The
  // same integers as dot(). Only the GEMV calls it: with the assembly also in the GEMM's one-token
  // tail, GCC's code for the GEMM's 4-token passes ran 2 % slower (64 tokens x 16 groups x 2048
  // columns, 18.25 -> 17.9 GMAC/s). Zen 1 (EPYC 7001 guest, AVX2), 64 rows x 2048 columns from L2,
  // one core, median of 5 alternating runs, the same bits: 89.2 -> 85.8 cycles per 16 x 32 block;
  // TinyLlama Q8_0 tg32 at one thread 13.4 -> 13.7 t/s, Qwen2.5-0.5B Q8_0 26.5 -> 27.2 (3
  // alternating rounds). Both halves in one step (each 64-byte line used whole, each broadcast
  // serving 16 rows, as Q4_0's) ran 84.8 cycles from L2 but 11.0 against 13.4 t/s from DRAM: one
  // half a pass touches the block's 8 lines in half the instructions, so more of them are in flight
  // on a core that Q8_0's plan does not prefetch for (ops/isa.h).
  static __m256i gemv_dot_from(const std::byte* qs, int h, const int8_t* q, int32_t) {
    __m256i s, x, w, a, p0, p1;
    qs += 32 * h;
    // clang-format off
#define PACER_Q80_PROD(J, P)                                  \
  "vpbroadcastd 4*" #J "(%[xq]), %[x]\n\t"                     \
  "vpxor 64*" #J "(%[qs]), %[flip], %[w]\n\t"                  \
  "vpabsb %[w], %[a]\n\t"                                      \
  "vpsignb %[w], %[x], %[w]\n\t"                               \
  "vpmaddubsw %[w], %[a], %[" #P "]\n\t"                       \
  "vpmaddwd %[ones], %[" #P "], %[" #P "]\n\t"
    asm(PACER_Q80_PROD(0, s)
        PACER_Q80_PROD(1, p0)
        PACER_Q80_PROD(2, p1) "vpaddd %[p0], %[s], %[s]\n\t"
        PACER_Q80_PROD(3, p0) "vpaddd %[p1], %[s], %[s]\n\t"
        PACER_Q80_PROD(4, p1) "vpaddd %[p0], %[s], %[s]\n\t"
        PACER_Q80_PROD(5, p0) "vpaddd %[p1], %[s], %[s]\n\t"
        PACER_Q80_PROD(6, p1) "vpaddd %[p0], %[s], %[s]\n\t"
        PACER_Q80_PROD(7, p0) "vpaddd %[p1], %[s], %[s]\n\t"
        "vpaddd %[p0], %[s], %[s]\n\t"
        : [s] "=&x"(s), [x] "=&x"(x), [w] "=&x"(w), [a] "=&x"(a), [p0] "=&x"(p0), [p1] "=&x"(p1)
        : [qs] "r"(qs), [xq] "r"(q), [flip] "x"(_mm256_set1_epi8(static_cast<char>(0x80))),
          [ones] "x"(_mm256_set1_epi16(1)),
          "m"(*reinterpret_cast<const std::byte(*)[480]>(qs)),
          "m"(*reinterpret_cast<const int8_t(*)[32]>(q)));
#undef PACER_Q80_PROD
    // clang-format on
    return s;
  }
  static __m256i dot(const __m256i* w, const int8_t* q, int32_t) {
    __m256i chain[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int j = 0; j < 8; ++j) {
      chain[j % 2] = _mm256_add_epi32(chain[j % 2], signed_quad_dot(w[j], act_dword(q, j)));
    }
    return _mm256_add_epi32(chain[0], chain[1]);
  }
};

// IQ4_NL: Q4_0's layout and nibbles, each looked up in the signed table (the same 16 bytes in
// both lanes), then dotted as Q8_0's signed quants.
struct IQ4_NLx16 {
  static constexpr WeightType kType = WeightType::IQ4_NL;
  static constexpr int64_t kQsBytes = 256;
  static constexpr int64_t kHeaderBytes = 64;
  static constexpr bool kHasMin = false;
  static void load(const std::byte* qs, int h, __m256i* w) {
    const __m256i lut = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues)));
    Q4_0x16::load(qs, h, w);
    for (int j = 0; j < 8; ++j) w[j] = _mm256_shuffle_epi8(lut, w[j]);
  }
  static __m256i dot(const __m256i* w, const int8_t* q, int32_t) {
    __m256i chain[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int j = 0; j < 8; ++j) {
      chain[j % 2] = _mm256_add_epi32(chain[j % 2], signed_quad_dot(w[j], act_dword(q, j)));
    }
    return _mm256_add_epi32(chain[0], chain[1]);
  }
  static __m256i dot_from(const std::byte* qs, int h, const int8_t* q, int32_t sum) {
    __m256i w[8];
    load(qs, h, w);
    return dot(w, q, sum);
  }
  // Both halves against one token (the GEMV): each product as |x| x sign(level, x), so the
  // unsigned operand is the activation dword, broadcast and made absolute once for 16 rows, and a
  // level vector costs one vpsignb (dot() takes a vpabsb and a vpsignb per vector). The same
  // integers, so the same bits. 5632x2048 cold on one Zen 4 core (AVX2 tier, BM_gemv best rep):
  // 18.9 -> 19.6 GB/s. The steps are IQ4_XS's sub-block steps (avx2::iq4_level_dots_16), the
  // block's 32 magnitudes taken first.
  static void dot_from_both(const std::byte* qs, const int8_t* q, int32_t, __m256i* isum) {
    const __m256i lut = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues)));
    alignas(32) int8_t qa[32];
    _mm256_store_si256(reinterpret_cast<__m256i*>(qa),
                       _mm256_abs_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q))));
    avx2::iq4_level_dots_16(qs, q, qa, lut, isum[0], isum[1]);
  }
};

// acc[t] += the block terms of rows 8h..8h + 7 for tokens x[0..T), block b (in the pair at
// `pair`, index b % 2): the weights unpacked once for all T tokens.
template <class Layout>
concept HasGemvDotFrom = requires(const std::byte* p, const int8_t* q) {
  Layout::gemv_dot_from(p, 0, q, int32_t{0});
};

// kGemv: the GEMV's call (T == 1), which takes the layout's gemv_dot_from where it has one.
template <class Layout, int T, bool kGemv = false>
inline void half_block(const std::byte* pair, int64_t b, int h, const ActQ8Row* x, __m256* acc) {
  const int odd = static_cast<int>(b % 2);
  const std::byte* qs = pair + Layout::kHeaderBytes + Layout::kQsBytes * odd;
  const __m256 dw =
      _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(pair + 32 * odd + 16 * h)));
  __m256 mw = _mm256_setzero_ps();
  if constexpr (Layout::kHasMin) {
    mw = _mm256_cvtph_ps(
        _mm_load_si128(reinterpret_cast<const __m128i*>(pair + 64 + 32 * odd + 16 * h)));
  }
  // acc += float(isum) * (d_w * d_x), then (Q4_1, Q5_1) + m_w * (d_x * sum_b(x)): VNNI's steps.
  const auto add = [&](int t, __m256i isum) {
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(x[t].d[b])),
                             acc[t]);
    if constexpr (Layout::kHasMin) {
      acc[t] =
          _mm256_fmadd_ps(mw, _mm256_set1_ps(x[t].d[b] * static_cast<float>(x[t].sum[b])), acc[t]);
    }
  };
  if constexpr (T == 1) {
    if constexpr (kGemv && HasGemvDotFrom<Layout>) {
      add(0, Layout::gemv_dot_from(qs, h, x[0].q + 32 * b, x[0].sum[b]));
    } else {
      add(0, Layout::dot_from(qs, h, x[0].q + 32 * b, x[0].sum[b]));
    }
    return;
  }
  __m256i w[8];
  Layout::load(qs, h, w);
  for (int t = 0; t < T; ++t) add(t, Layout::dot(w, x[t].q + 32 * b, x[t].sum[b]));
}

// Both halves of block b (in the pair at `pair`) against one token, for layouts with
// dot_from_both: the GEMV's step. The float steps are half_block's, per half. Forced inline (GCC
// 12 kept it a call): Q5_0 from L2 27.5 -> 27.9-28.1 GB/s (Zen 4, AVX2 tier, one process, the
// same bits); flattening the whole GEMV instead cost Q8_0 4 %.
template <class Layout>
[[gnu::always_inline]] inline void block_both(const std::byte* pair, int64_t b, const ActQ8Row& x,
                                              __m256* acc0, __m256* acc1) {
  const int odd = static_cast<int>(b % 2);
  const std::byte* qs = pair + Layout::kHeaderBytes + Layout::kQsBytes * odd;
  __m256i isum[2];
  Layout::dot_from_both(qs, x.q + 32 * b, x.sum[b], isum);
  const __m256 dx = _mm256_set1_ps(x.d[b]);
  __m256* acc[2] = {acc0, acc1};
  for (int h = 0; h < 2; ++h) {
    const __m256 dw =
        _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(pair + 32 * odd + 16 * h)));
    *acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[h]), _mm256_mul_ps(dw, dx), *acc[h]);
    if constexpr (Layout::kHasMin) {
      const __m256 mw = _mm256_cvtph_ps(
          _mm_load_si128(reinterpret_cast<const __m128i*>(pair + 64 + 32 * odd + 16 * h)));
      *acc[h] = _mm256_fmadd_ps(mw, _mm256_set1_ps(x.d[b] * static_cast<float>(x.sum[b])), *acc[h]);
    }
  }
}

template <class Layout>
concept HasDotFromBoth = requires(const std::byte* p, const int8_t* q, __m256i* out) {
  Layout::dot_from_both(p, q, int32_t{0}, out);
};

// S groups at once against one token: S sequential streams (gemv_streams.h), kRun blocks of one
// stream, then of the next (kX16LongRunBlocks where ops/isa.h x16_gemv_long_runs says: on AMD;
// else 1). Until session 50 the streams took turns block by block everywhere (a Q4_0 stream moved
// on 288 bytes a turn, a Q8_0 one 544),
// and one Zen 4 core read them from DRAM more slowly than a K-quant GEMV that moves on a
// super-block (2-3 KiB) a turn. In runs of 8 blocks, Zen 4 guest without AVX-512, 448000 rows x
// 2048 columns (0.5-1 GB on 2 MiB pages), old and new kernels in one process, the same bits: Q4_0
// 28.3-31.3 -> 30.1-33.5 GB/s (0.99-1.11x, median 1.07x, with its new both-halves step; a plain
// read 33.3-33.6), Q8_0 1.04-1.06x, Q4_1 1.06-1.07x, Q5_0 1.06-1.08x, Q5_1 1.08-1.10x; from L2
// 0.98-1.06x. Runs of 16 (64000 rows): Q4_0 the same, Q8_0 (8.5 KiB a turn) behind runs of 8.
// IQ4_NL, bound by its table lookups (~21 GB/s from L2 and DRAM alike), keeps the block-by-block
// turns: in runs (or even turns written as runs) GCC's code for it ran 0.88-0.93x. A run of 1
// keeps the loop as it was (not measured against runs on Intel).
template <class Layout, int S, int64_t kRun>
void gemv_groups(int64_t nb, const std::byte* const* group, const ActQ8Row& x, float* const* out,
                 bool prefetch) {
  constexpr int64_t kPairBytes = Layout::kHeaderBytes + 2 * Layout::kQsBytes;
  __m256 acc[S][2];
  for (int s = 0; s < S; ++s) acc[s][0] = acc[s][1] = _mm256_setzero_ps();
  if constexpr (kRun <= 1) {
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t pair_off = b / 2 * kPairBytes;
      if (prefetch && b % 2 == 0) {
        for (int s = 0; s < S; ++s) {
          prefetch_lines(group[s] + pair_off + kPrefetchPairs * kPairBytes, kPairBytes);
        }
      }
      for (int s = 0; s < S; ++s) {
        if constexpr (HasDotFromBoth<Layout>) {
          block_both<Layout>(group[s] + pair_off, b, x, &acc[s][0], &acc[s][1]);
        } else {
          half_block<Layout, 1, true>(group[s] + pair_off, b, 0, &x, &acc[s][0]);
          half_block<Layout, 1, true>(group[s] + pair_off, b, 1, &x, &acc[s][1]);
        }
      }
    }
  } else if constexpr (Layout::kType != WeightType::IQ4_NL) {
    // Block b of stream kS into its accumulators.
    const auto step = [&]<int kS>(std::integral_constant<int, kS>, int64_t b) {
      const std::byte* pair = group[kS] + b / 2 * kPairBytes;
      if (prefetch && b % 2 == 0) prefetch_lines(pair + kPrefetchPairs * kPairBytes, kPairBytes);
      if constexpr (HasDotFromBoth<Layout>) {
        block_both<Layout>(pair, b, x, &acc[kS][0], &acc[kS][1]);
      } else {
        half_block<Layout, 1, true>(pair, b, 0, &x, &acc[kS][0]);
        half_block<Layout, 1, true>(pair, b, 1, &x, &acc[kS][1]);
      }
    };
    for (int64_t b0 = 0; b0 < nb; b0 += kRun) {
      const int64_t end = std::min(nb, b0 + kRun);
      unroll<S>([&](auto sc) {
        for (int64_t b = b0; b < end; ++b) step(sc, b);
      });
    }
  }
  for (int s = 0; s < S; ++s) {
    _mm256_storeu_ps(out[s], acc[s][0]);
    _mm256_storeu_ps(out[s] + 8, acc[s][1]);
  }
}

template <class Layout>
void gemv_x16(int64_t n, const std::byte* groups, int64_t n_groups, const std::byte* act,
              float* out) {
  const int64_t nb = n / 32;
  const ActQ8Row x = act_q8_row(act, n);
  // The two runs of the table (ops/isa.h), each compiled for its length (a run length read at
  // run time cost Q4_0 2-5 % from L2); the prefetch of the type's plan (Zen 1's differs from the
  // class rule for the Q4_0 kind).
  const X16GemvPlan plan = x16_gemv_plan(x16_gemv_kind(Layout::kType));
  const bool long_runs = Layout::kType != WeightType::IQ4_NL && plan.long_runs;
  // Groups from far-apart stretches, 2 at a time (kX16Avx2GemvStreams): one sequential stream
  // per core leaves DRAM bandwidth unused (as the VNNI GEMV).
  x16_gemv_stream_groups<kX16Avx2GemvStreams>(
      groups, n_groups, x16_group_bytes(Layout::kType, n), out,
      [&](auto streams, const std::byte* const* group, float* const* outs) {
        constexpr int kS = decltype(streams)::value;
        const bool prefetch = plan.prefetch;
        if (long_runs) {
          gemv_groups<Layout, kS, kX16LongRunBlocks>(nb, group, x, outs, prefetch);
        } else {
          gemv_groups<Layout, kS, 1>(nb, group, x, outs, prefetch);
        }
      });
}

// T tokens against rows 8h..8h + 7 of one group, every block; out: token 0's 8 outputs.
template <class Layout, int T>
void half_group_tokens(int64_t nb, const std::byte* group, int h, const ActQ8Row* x, float* out,
                       int64_t out_stride) {
  constexpr int64_t kPairBytes = Layout::kHeaderBytes + 2 * Layout::kQsBytes;
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) half_block<Layout, T>(group + b / 2 * kPairBytes, b, h, x, acc);
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(out + t * out_stride, acc[t]);
}

// Prefill (and short prompts): per group and half, the tokens 4 at a time (the remainder 3, 2
// or 1), so each block's weights are unpacked once per 4 tokens while the group stays in L1/L2.
template <class Layout>
void gemm_x16(int64_t n, const std::byte* groups, int64_t n_groups, const std::byte* act,
              int64_t act_stride, int64_t nt, float* out, int64_t out_stride) {
  const int64_t nb = n / 32;
  const int64_t group_bytes = x16_group_bytes(Layout::kType, n);
  for (int64_t g = 0; g < n_groups; ++g) {
    const std::byte* group = groups + g * group_bytes;
    for (int h = 0; h < 2; ++h) {
      int64_t t = 0;
      auto pass = [&](auto tokens) {
        constexpr int kT = decltype(tokens)::value;
        ActQ8Row x[kT];
        for (int k = 0; k < kT; ++k) x[k] = act_q8_row(act + (t + k) * act_stride, n);
        half_group_tokens<Layout, kT>(nb, group, h, x, out + t * out_stride + 16 * g + 8 * h,
                                      out_stride);
        t += kT;
      };
      while (nt - t >= 4) pass(std::integral_constant<int, 4>{});
      if (nt - t == 3) pass(std::integral_constant<int, 3>{});
      if (nt - t == 2) pass(std::integral_constant<int, 2>{});
      if (nt - t == 1) pass(std::integral_constant<int, 1>{});
    }
  }
}

}  // namespace

void gemv_q4_0x16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out) {
  gemv_x16<Q4_0x16>(n, groups, n_groups, act, out);
}

void gemv_q8_0x16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out) {
  gemv_x16<Q8_0x16>(n, groups, n_groups, act, out);
}

void gemm_q4_0x16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride) {
  gemm_x16<Q4_0x16>(n, groups, n_groups, act, act_stride, nt, out, out_stride);
}

void gemm_q8_0x16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride) {
  gemm_x16<Q8_0x16>(n, groups, n_groups, act, act_stride, nt, out, out_stride);
}

void gemv_q4_1x16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out) {
  gemv_x16<Q4_1x16>(n, groups, n_groups, act, out);
}

void gemm_q4_1x16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride) {
  gemm_x16<Q4_1x16>(n, groups, n_groups, act, act_stride, nt, out, out_stride);
}

void gemv_q5_0x16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out) {
  gemv_x16<Q5_0x16>(n, groups, n_groups, act, out);
}

void gemm_q5_0x16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride) {
  gemm_x16<Q5_0x16>(n, groups, n_groups, act, act_stride, nt, out, out_stride);
}

void gemv_q5_1x16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out) {
  gemv_x16<Q5_1x16>(n, groups, n_groups, act, out);
}

void gemm_q5_1x16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride) {
  gemm_x16<Q5_1x16>(n, groups, n_groups, act, act_stride, nt, out, out_stride);
}

void gemv_iq4_nlx16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                              const std::byte* act, float* out) {
  gemv_x16<IQ4_NLx16>(n, groups, n_groups, act, out);
}

void gemm_iq4_nlx16_q8_0_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                              const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                              int64_t out_stride) {
  gemm_x16<IQ4_NLx16>(n, groups, n_groups, act, act_stride, nt, out, out_stride);
}

}  // namespace pacer::ops
