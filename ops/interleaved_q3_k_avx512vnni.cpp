// Q3_K interleaved by 16 rows (interleaved.h) x Q8_K activations on AVX-512 VNNI: the decode GEMV
// and the prefill GEMM (passes of up to 4 tokens, each token's result bit for bit the GEMV's).
//
// Why: the row-major AVX-512 kernel (q3_k_avx512.cpp) merges the 2 low bits and the high bit of
// every quant of one row at a time and read TinyLlama Q3_K_M at 43-44 % of the memory roofline on
// one and two Zen 5 cores. Here one vpdpbusd dots 4 quants of all 16 rows, and the quants of 8
// groups come out of one triple of vectors (interleaved.h):
//   - sets 0-5: one AND each (sets 1, 3, 5 keep their quants in bits 4-6: 16 u);
//   - sets 6 and 7: their 3 bits gathered from bit 3 (7) of N0, N1, N2 into bits 3-5 (5-7) by
//     2 shifts, 2 bit selects and an AND: 8 u and 32 u.
// So ~2 ops per vpdpbusd, as the Q6_K GEMV. Each group's accumulator starts at
// -4 * 2^k * bsums[g] (2^k the set's factor), so it ends at 2^k * sum_g q x with no subtraction;
// that is the group's exact dot, |dot| <= 16 * 4 * 128 = 8192, which fits an int16. Two groups'
// dots (one shifted down by k, the other up by 16 - k) merge into the two halves of each dword
// in one vpblendmw, and one vpdpwssd multiplies both by their scales (sign-extended 16-bit, from
// the 12 packed bytes in 5 ops per 4 groups, and 1-2 shifts per pair) and adds them to the
// super-block's sum: 1.5 ops per group where a vpmulld would take a multiply, an add and the
// sign extension. |isum| <= 16 * 32 * 8192 = 2^22: exact in int32 and in its conversion to
// float; then one FMA per super-block for all 16 rows. The loops over super-blocks, streams and
// tokens are the Q6_K GEMV's (interleaved_kquant_loops_avx512.h), its plan too (x16_gemv_kind).
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

// log2 of the factor set s's quants come out with (interleaved.h: bits 4-6, 3-5, 5-7).
constexpr int kSetShift[8] = {0, 4, 0, 4, 0, 4, 3, 5};

using kquant_x16::act_dword;

// The packed scale bytes at the head of each super-block, ahead of its quants (interleaved.h).
constexpr int64_t kScaleBytes = 192;

// (a & mask) | (b & ~mask), one vpternlogd.
inline __m512i select_bits(__m512i a, __m512i b, char mask) {
  return _mm512_ternarylogic_epi32(a, b, _mm512_set1_epi8(mask), 0xE4);
}

// The starting values of the 16 group accumulators of one activation block:
// -4 * 2^kSetShift[g % 8] * bsums[g]. Stored, so each is one broadcast from memory.
struct GroupOffsets {
  alignas(64) int32_t v[16];
};

inline void group_offsets(const BlockQ8_K& x, GroupOffsets& o) {
  const __m512i shifts = _mm512_setr_epi32(2, 6, 2, 6, 2, 6, 5, 7, 2, 6, 2, 6, 2, 6, 5, 7);
  const __m512i bsums =
      _mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums)));
  _mm512_store_si512(o.v,
                     _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_sllv_epi32(bsums, shifts)));
}

// 2^kSetShift[S] times the unsigned quants of set S, elements 128h + 16S + 4v..+3 of the 16 rows,
// from the triple at `triple` (interleaved.h). The 16-bit shifts move bits across bytes only into
// positions the selects or the final AND drop.
template <int S>
inline __m512i quants(const std::byte* triple) {
  const auto load = [&](int j) { return _mm512_load_si512(triple + 64 * j); };
  if constexpr (S < 6) {
    return _mm512_and_si512(load(S / 2), _mm512_set1_epi8(S % 2 ? 0x70 : 0x07));
  } else if constexpr (S == 6) {  // bit 3 of N0, N1, N2 -> bits 3, 4, 5
    const __m512i n1 = _mm512_slli_epi16(load(1), 1), n2 = _mm512_slli_epi16(load(2), 2);
    const __m512i b45 = select_bits(n1, n2, 0x10);
    return _mm512_and_si512(select_bits(load(0), b45, 0x08), _mm512_set1_epi8(0x38));
  } else {  // bit 7 of N0, N1, N2 -> bits 5, 6, 7
    const __m512i n0 = _mm512_srli_epi16(load(0), 2), n1 = _mm512_srli_epi16(load(1), 1);
    const __m512i b56 = select_bits(n0, n1, 0x20);
    return _mm512_and_si512(select_bits(b56, load(2), 0x60),
                            _mm512_set1_epi8(static_cast<char>(0xE0)));
  }
}

// The scales of groups 4Q'..4Q'+3 (Q' = 2h + Q) of the 16 rows as signed bytes, byte m of dword i
// = sc_{4Q'+m} of row i: the low nibble from scales[0..3] (Q' even) or [4..7], low or high
// (Q' >= 2), the top 2 bits from scales[8..11] bits 2Q', 2Q' + 1 (q3_k.h).
template <int QQ>
inline __m512i scale_bytes(const std::byte* blk) {
  const __m512i low = _mm512_load_si512(blk + 64 * (QQ % 2));
  const __m512i top = _mm512_load_si512(blk + 128);
  __m512i nibble_and_top;
  if constexpr (QQ == 0) nibble_and_top = select_bits(low, _mm512_slli_epi16(top, 4), 0x0F);
  if constexpr (QQ == 1) nibble_and_top = select_bits(low, _mm512_slli_epi16(top, 2), 0x0F);
  if constexpr (QQ == 2) nibble_and_top = select_bits(_mm512_srli_epi16(low, 4), top, 0x0F);
  if constexpr (QQ == 3) {
    nibble_and_top = select_bits(_mm512_srli_epi16(low, 4), _mm512_srli_epi16(top, 2), 0x0F);
  }
  return _mm512_sub_epi8(_mm512_and_si512(nibble_and_top, _mm512_set1_epi8(0x3F)),
                         _mm512_set1_epi8(32));
}

// Groups A (low half of each dword) and B (high half) of one row as an int16 pair, from
// accumulators holding 2^KA and 2^KB times their dots (|dot| <= 8192: exact in 16 bits).
template <int KA, int KB>
inline __m512i dot_pair(__m512i acc_a, __m512i acc_b) {
  const __m512i a = KA == 0 ? acc_a : _mm512_srai_epi32(acc_a, KA);
  return _mm512_mask_blend_epi16(0xAAAAAAAA, a, _mm512_slli_epi32(acc_b, 16 - KB));
}

// sum[t] += sum_g sc_g * dot_g over the 4 groups 8h + 4Q.. 8h + 4Q + 3 (sets 4Q..4Q+3) of one
// super-block (quants at blk) against T activation blocks: the 4 triples of half h in layout
// order, each quant vector built once for all T, 4 accumulators per token.
template <int T, int Q>
inline void quarter_isums_of(const std::byte* blk, int h, const BlockQ8_K* const* x,
                             const GroupOffsets* const* off, __m512i* sum) {
  const std::byte* half = blk + kScaleBytes + 768 * h;
  __m512i acc[T][4];
  for (int t = 0; t < T; ++t) {
    for (int k = 0; k < 4; ++k) acc[t][k] = _mm512_set1_epi32(off[t]->v[8 * h + 4 * Q + k]);
  }
  unroll<4>([&](auto vc) {
    constexpr int V = decltype(vc)::value;
    unroll<4>([&](auto kc) {
      constexpr int K = decltype(kc)::value;
      constexpr int S = 4 * Q + K;
      const __m512i q = quants<S>(half + 192 * V);
      for (int t = 0; t < T; ++t) {
        acc[t][K] =
            _mm512_dpbusd_epi32(acc[t][K], q, act_dword(x[t]->qs, 128 * h + 16 * S + 4 * V));
      }
    });
  });
  // Groups 4Q + 0 / 2 pair with bytes 0 / 2 of the scale dwords, 4Q + 1 / 3 with bytes 1 / 3.
  const __m512i sc = h == 0 ? scale_bytes<Q>(blk) : scale_bytes<2 + Q>(blk);
  const __m512i sc02 = _mm512_srai_epi16(_mm512_slli_epi16(sc, 8), 8);
  const __m512i sc13 = _mm512_srai_epi16(sc, 8);
  constexpr int S = 4 * Q;
  for (int t = 0; t < T; ++t) {
    sum[t] = _mm512_dpwssd_epi32(
        sum[t], dot_pair<kSetShift[S], kSetShift[S + 2]>(acc[t][0], acc[t][2]), sc02);
    sum[t] = _mm512_dpwssd_epi32(
        sum[t], dot_pair<kSetShift[S + 1], kSetShift[S + 3]>(acc[t][1], acc[t][3]), sc13);
  }
}

// The super-block arithmetic above, for the shared loops (interleaved_kquant_loops_avx512.h).
struct Q3KLayout : kquant_x16::SuperBlockPairs<Q3KLayout, kX16Q3KPairBytes, kX16Q3KBlockBytes> {
  // A half's first quarter reads lines 0-1 of each of its triples, the second line 2, and each
  // quarter its scales (the block's first lines) after its quants: so the GEMV touches the
  // super-block's lines in order first where it reads its streams a quarter a turn. Zen 4 guest,
  // builds alternating, cold: 5632x2048 at 1 thread 20.3-20.6 -> 22.5-22.8 GB/s (a plain read
  // 29-31), 2048x5632 at 2 threads 20.6 -> 27.7; in cache (2048x2048) 35 -> 24 GB/s, the price
  // for models that fit the LLC. The same touch of every line cost the Q6_K, IQ4_XS and Q2_K
  // GEMVs 13-17 % cold (their quants read in order; only their scales' lines, kLeadBytes, go
  // first now).
  static constexpr bool kLoadInOrder = true;
  // With long runs, a super-block a turn and no touch in order: one Zen 4 core, 448000 x 2048
  // (0.8 GB) cold, 2 streams, 31.0-32.3 GB/s against 20.5-23.9 a quarter a turn in order (and
  // 23.6-24.6 a super-block a turn in order, 27.4-29.5 on one stream); from L2 40 against 33-35.
  static constexpr bool kWholeTurnsOnLongRuns = true;
  // Its scales read in order first where it reads a super-block a turn (kLeadBytes at
  // interleaved_kquant_loops_avx512.h).
  static constexpr int64_t kLeadBytes = kScaleBytes;
  using Offsets = GroupOffsets;
  static void offsets(const BlockQ8_K& x, Offsets& o) { group_offsets(x, o); }
  template <int T, int Q>
  static void quarter_isums(const std::byte* blk, int h, const BlockQ8_K* const* x,
                            const Offsets* const* off, __m512i* sum) {
    quarter_isums_of<T, Q>(blk, h, x, off, sum);
  }
};

}  // namespace

void gemv_q3_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out) {
  kquant_x16::gemv<Q3KLayout>(WeightType::Q3_K, n, groups, n_groups, act, out);
}

void gemm_q3_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride) {
  kquant_x16::gemm<Q3KLayout>(WeightType::Q3_K, n, groups, n_groups, act, act_stride, nt, out,
                              out_stride);
}

}  // namespace pacer::ops
