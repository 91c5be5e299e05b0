// Q6_K interleaved by 16 rows (interleaved.h) x Q8_K activations on AVX-512 VNNI: the decode GEMV
// and the prefill GEMM.
//
// Per super-block of a group (16 rows x 256 weights), for each half h and each of the 8 triples
// v (interleaved.h): the unsigned quants q_0, q_1, q_2 (one AND each with 0x3F) and 4 q_3 (bits
// 6-7 of A, B and C shifted into bits 2-3, 4-5, 6-7: 5 logic ops), each dotted by vpdpbusd with
// the broadcast activation dword of elements 128h + 32k + 4v.. (4 quants of all 16 rows, exact).
// Triples 0-3 and 4-7 of element set k are groups 8h + 2k and 8h + 2k + 1. Each group's
// accumulator starts at -32 * bsums[g] (x4 for set 3, whose sums come out 4x and are divided
// exactly at the end), so it ends at dot_g - 32 * bsums[g] with no subtraction; that is
// multiplied by the group's int8 scales (16 bytes per group, one sign extension) and added to
// the super-block's integer sum. Then for all 16 rows one conversion and FMA. Integer bounds as
// in q6_k.h: |group dot - 32 bsum| <= 16 * 63 * 128 + 32 * 2048, times |sc| <= 128, over 16
// groups: < 2^31 (set 3's accumulator holds 4x the group term before the division: < 2^20). The
// triples are read in layout order (all 4 element sets of a triple at once). The file's ql/qh split
// took 13 logic ops per triple, 5 of them shifts (port 0 only on Intel); this takes 8, 2 of them
// shifts. The offsets as starting values and the group-major scales take 3 vector ops per group
// (a broadcast from a register, a subtraction, a shift on port 0) out of ~19; that alone measured
// as noise, but with the super-block sums kept in registers (block_isums) one Sapphire Rapids core
// ran 256x2048 in L2 at ~43 GB/s instead of ~38, a cold 2048x5632 at ~12.0 instead of ~11.2.
//
// Every index into the accumulator arrays and every shift count is a compile-time constant
// (ops/unroll.h): with the loops left rolled, GCC 12 kept the accumulators in memory and the GEMV
// ran ~1.4x slower on one Zen 4 core with the matrix in cache.
//
// Against the row-major AVX-512 kernel (q6_k_avx512_kernels.h, ~8 weights per cycle on one Zen 4
// core, ~21 GB/s of Q6_K) this does ~3x less work per weight, so one core keeps up with DRAM.
#include "ops/interleaved.h"
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>

#include <cstring>

#include "ops/interleaved_kquant_loops_avx512.h"
#include "ops/isa.h"
#include "ops/q8_k.h"
#include "ops/unroll.h"

// GCC 12 reports the `__Y = __Y` placeholders of its own AVX-512 headers at the call sites where
// they are inlined (bug 105593, fixed in 13). No variable of this file is uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace pacer::ops {
namespace {

using kquant_x16::act_dword;

// Group g's int8 scale of the 16 rows, as int32 lanes (one sign extension from memory).
inline __m512i group_scale(const std::byte* blk, int g) {
  return _mm512_cvtepi8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(blk + 16 * g)));
}

// The starting values of the 16 group accumulators of one activation block: -32 * bsums[g], or
// -128 * bsums[g] for element set 3 (groups 6, 7, 14, 15), whose sums come out 4x (quants()). So
// each accumulator ends at 4^[set 3] * (dot_g - 32 * bsums[g]) with no subtraction per group, and
// the starting value is one broadcast from memory (load port only).
struct GroupOffsets {
  alignas(64) int32_t v[16];
};

inline void group_offsets(const BlockQ8_K& x, GroupOffsets& o) {
  const __m512i neg = _mm512_sub_epi32(
      _mm512_setzero_si512(),
      _mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums))));
  _mm512_store_si512(
      o.v, _mm512_mask_blend_epi32(0xC0C0, _mm512_slli_epi32(neg, 5), _mm512_slli_epi32(neg, 7)));
}

// The unsigned quants of elements 128h + 32K + 4v..+3 of the 16 rows from triple 8h + v: q_K for
// K < 3, 4 q_3 for K = 3 (bits 6-7 of A, B, C moved to bits 2-3, 4-5, 6-7; the 16-bit shifts act
// on masked or later-masked bytes, so no bit crosses into the neighbouring byte).
template <int K>
inline __m512i quants(const std::byte* triple) {
  if constexpr (K < 3) {
    return _mm512_and_si512(_mm512_load_si512(triple + 64 * K), _mm512_set1_epi8(0x3F));
  } else {
    const __m512i c0 = _mm512_set1_epi8(static_cast<char>(0xC0));
    const __m512i a = _mm512_srli_epi16(_mm512_load_si512(triple), 4);  // bits 6-7 -> 2-3
    const __m512i b = _mm512_srli_epi16(_mm512_and_si512(_mm512_load_si512(triple + 64), c0), 2);
    // 0xE4: (a & c) | (b & ~c) with c = 0x0C: bits 2-3 from a, 4-5 from b (b is 0 elsewhere)
    const __m512i ab = _mm512_ternarylogic_epi32(a, b, _mm512_set1_epi8(0x0C), 0xE4);
    return _mm512_ternarylogic_epi32(ab, _mm512_load_si512(triple + 128), c0, 0xF8);  // ab|(C&c0)
  }
}

// The sum of group 8h + G (element set G / 2) from its accumulator: set 3's holds 4x (quants()).
template <int G>
inline __m512i group_sum(__m512i acc) {
  if constexpr (G / 2 == 3) return _mm512_srai_epi32(acc, 2);
  return acc;
}

// The first triple of half h of a super-block's quants.
inline const std::byte* half_at(const std::byte* blk, int h) {
  return blk + 256 + 192 * 8 * h;
}

// sum[t] += sum_g sc_g * (dot_g - 32 * bsums[g]) over the 4 groups of one quarter of a
// super-block (quants at blk): half h, triples 4QV..4QV+3, groups 8h + 2k + QV (k = 0..3), against
// T activation blocks, reading the quants in the layout's byte order (triple after triple, so each
// stream is sequential), each quant vector built once for all T: 4 accumulators per token, one
// per group. (For prefill's T = 4 this beat going element set by element set with 2 per token: l32
// Q4_K_M pp64 on 2 Zen 4 cores, ~261 vs ~251 tok/s; by quarters rather than halves, half the
// accumulators, the GEMM ran at the same speed on one Sapphire Rapids core.)
template <int T, int QV>
inline void quarter_isums_of(const std::byte* blk, int h, const BlockQ8_K* const* x,
                             const GroupOffsets* const* off, __m512i* sum) {
  const std::byte* base = half_at(blk, h);
  __m512i acc[T][4];
  for (int t = 0; t < T; ++t) {
    for (int k = 0; k < 4; ++k) acc[t][k] = _mm512_set1_epi32(off[t]->v[8 * h + 2 * k + QV]);
  }
  unroll<4>([&](auto vc) {
    constexpr int V = 4 * QV + decltype(vc)::value;
    unroll<4>([&](auto kc) {
      constexpr int K = decltype(kc)::value;
      const __m512i q = quants<K>(base + 192 * V);
      for (int t = 0; t < T; ++t) {
        acc[t][K] =
            _mm512_dpbusd_epi32(acc[t][K], q, act_dword(x[t]->qs, 128 * h + 32 * K + 4 * V));
      }
    });
  });
  unroll<4>([&](auto kc) {
    constexpr int K = decltype(kc)::value;
    constexpr int G = 2 * K + QV;
    const __m512i sc = group_scale(blk, 8 * h + G);
    for (int t = 0; t < T; ++t) {
      sum[t] = _mm512_add_epi32(sum[t], _mm512_mullo_epi32(group_sum<G>(acc[t][K]), sc));
    }
  });
}

// The super-block arithmetic above, for the shared loops (interleaved_kquant_loops_avx512.h).
struct Q6KLayout : kquant_x16::SuperBlockPairs<Q6KLayout, kX16Q6KPairBytes, kX16Q6KBlockBytes> {
  // With long runs, a super-block a turn: one Zen 4 core, 0.9 GB cold, 1.09-1.10x; 0.91x from
  // L2 (ops/isa.h).
  static constexpr bool kWholeTurnsOnLongRuns = true;
  using Offsets = GroupOffsets;
  static void offsets(const BlockQ8_K& x, Offsets& o) { group_offsets(x, o); }
  template <int T, int Q>
  static void quarter_isums(const std::byte* blk, int h, const BlockQ8_K* const* x,
                            const Offsets* const* off, __m512i* sum) {
    quarter_isums_of<T, Q>(blk, h, x, off, sum);
  }
};

}  // namespace

void gemv_q6_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out) {
  kquant_x16::gemv<Q6KLayout>(WeightType::Q6_K, n, groups, n_groups, act, out);
}

void gemm_q6_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride) {
  kquant_x16::gemm<Q6KLayout>(WeightType::Q6_K, n, groups, n_groups, act, act_stride, nt, out,
                              out_stride);
}

}  // namespace pacer::ops
