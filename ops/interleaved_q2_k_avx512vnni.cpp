// Q2_K interleaved by 16 rows (interleaved.h) x Q8_K activations on AVX-512 VNNI: the decode GEMV
// and the prefill GEMM (passes of up to 4 tokens, each token's result bit for bit the GEMV's).
//
// Why: the row-major AVX-512 kernel (q2_k_avx512.cpp) read TinyLlama Q2_K's Q2_K matrices at
// 40-46 % of the roofline on the Zen 5 VM. Here one AND of a quant vector gives 4^s times the
// quants of group 4k + s for all 16 rows (interleaved.h), and one vpdpbusd dots 4 of them per
// row: 1 logic op per vpdpbusd. A group's dot (|dot| <= 16 * 3 * 128 = 6144) fits an int16, so
// two groups' dots (shifted down by 2s, or up by 16 - 2s) merge into one dword in one vpblendmw
// and one vpdpwssd multiplies both by their 4-bit scales (as the Q3_K GEMV); the mins term
// sum_g m_g * bsums[g] is one vpdpwssd per two groups against the activation's (bsums[g],
// bsums[g + 2]) pairs. |isum| <= 16 * 15 * 6144, |msum| <= 16 * 15 * 2048 (q2_k.h). Then two FMAs
// per super-block for all 16 rows. The loops over super-blocks, streams and tokens are the Q6_K
// GEMV's (interleaved_kquant_loops_avx512.h), a quarter being 4 groups.
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

// Where a super-block's quants start: after d, dmin and the scales (interleaved.h).
constexpr int64_t kQuantsAt = 320;

// Per activation block, for the mins term of each quarter k (groups 4k..4k+3): the int16 pairs
// (bsums[4k], bsums[4k + 2]) and (bsums[4k + 1], bsums[4k + 3]) as dwords.
struct MinPairs {
  int32_t even[4], odd[4];
};

inline void min_pairs(const BlockQ8_K& x, MinPairs& o) {
  const auto pair = [&](int a) {
    return static_cast<int32_t>(static_cast<uint16_t>(x.bsums[a]) |
                                static_cast<uint32_t>(static_cast<uint16_t>(x.bsums[a + 2])) << 16);
  };
  for (int k = 0; k < 4; ++k) {
    o.even[k] = pair(4 * k);
    o.odd[k] = pair(4 * k + 1);
  }
}

// A token's two integer sums of one super-block: sum_g sc_g * dot_g and sum_g m_g * bsums[g].
struct Sums {
  __m512i isum, msum;
};

// Groups A (low half of each dword) and B (high half) of one row as an int16 pair, from
// accumulators holding 2^KA and 2^KB times their dots (|dot| <= 6144: exact in 16 bits).
template <int KA, int KB>
inline __m512i dot_pair(__m512i acc_a, __m512i acc_b) {
  const __m512i a = KA == 0 ? acc_a : _mm512_srai_epi32(acc_a, KA);
  return _mm512_mask_blend_epi16(0xAAAAAAAA, a, _mm512_slli_epi32(acc_b, 16 - KB));
}

// sum[t] += the sums of groups 4k..4k+3 (k = 2h + Q) of the super-block at sb against T
// activation blocks: the quarter's 4 quant vectors in layout order, each group's quants one AND
// away, built once for all T; 4 accumulators per token.
template <int T, int Q>
inline void quarter_sums(const std::byte* sb, int h, const BlockQ8_K* const* x,
                         const MinPairs* const* off, Sums* sum) {
  const int k = 2 * h + Q;
  const std::byte* quants = sb + kQuantsAt + 256 * k;
  __m512i acc[T][4];
  for (int t = 0; t < T; ++t) {
    for (int s = 0; s < 4; ++s) acc[t][s] = _mm512_setzero_si512();
  }
  unroll<4>([&](auto vc) {
    constexpr int V = decltype(vc)::value;
    const __m512i q = _mm512_load_si512(quants + 64 * V);
    unroll<4>([&](auto sc) {
      constexpr int S = decltype(sc)::value;
      const __m512i w = _mm512_and_si512(q, _mm512_set1_epi8(static_cast<char>(3 << (2 * S))));
      for (int t = 0; t < T; ++t) {
        acc[t][S] =
            _mm512_dpbusd_epi32(acc[t][S], w, act_dword(x[t]->qs, 16 * (4 * k + S) + 4 * V));
      }
    });
  });
  // Scale and min words: groups 4k + 0 / 2 from bytes 0 / 2 of each dword, 4k + 1 / 3 from 1 / 3.
  const __m512i bytes = _mm512_load_si512(sb + 64 + 64 * k);
  const __m512i low_words = _mm512_set1_epi32(0x000F000F);
  const __m512i sc02 = _mm512_and_si512(bytes, low_words);
  const __m512i sc13 = _mm512_and_si512(_mm512_srli_epi16(bytes, 8), low_words);
  const __m512i m02 = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low_words);
  const __m512i m13 = _mm512_srli_epi16(bytes, 12);
  for (int t = 0; t < T; ++t) {
    sum[t].isum = _mm512_dpwssd_epi32(sum[t].isum, dot_pair<0, 4>(acc[t][0], acc[t][2]), sc02);
    sum[t].isum = _mm512_dpwssd_epi32(sum[t].isum, dot_pair<2, 6>(acc[t][1], acc[t][3]), sc13);
    sum[t].msum = _mm512_dpwssd_epi32(sum[t].msum, m02, _mm512_set1_epi32(off[t]->even[k]));
    sum[t].msum = _mm512_dpwssd_epi32(sum[t].msum, m13, _mm512_set1_epi32(off[t]->odd[k]));
  }
}

// The super-block arithmetic above, for the shared loops (interleaved_kquant_loops_avx512.h).
struct Q2KLayout {
  static constexpr int64_t kBlockStep = kX16Q2KBlockBytes;
  // With long runs, a super-block a turn: one Zen 4 core, 0.9 GB cold, 1.09x (ops/isa.h).
  static constexpr bool kWholeTurnsOnLongRuns = true;
  // d, dmin and the scales read in order first: TinyLlama Q2_K (Q2_K in q, k, gate, up), one Zen
  // 4 core, builds alternating, tg32 75.5 -> 81.0 tok/s (4 rounds).
  static constexpr int64_t kLeadBytes = kQuantsAt;
  static const std::byte* block_at(const std::byte* grp, int64_t b) {
    return grp + b * kX16Q2KBlockBytes;
  }
  static const std::byte* d_at(const std::byte* grp, int64_t b) { return block_at(grp, b); }
  using Offsets = MinPairs;
  static void offsets(const BlockQ8_K& x, Offsets& o) { min_pairs(x, o); }
  using Sum = Sums;
  static Sums zero() { return {_mm512_setzero_si512(), _mm512_setzero_si512()}; }
  template <int T, int Q>
  static void quarter_isums(const std::byte* blk, int h, const BlockQ8_K* const* x,
                            const Offsets* const* off, Sums* sum) {
    quarter_sums<T, Q>(blk, h, x, off, sum);
  }
  // acc + d * d_x * isum - dmin * d_x * msum for the 16 rows of super-block b.
  static __m512 accumulate(const std::byte* grp, int64_t b, const Sums& s, float dx, __m512 acc) {
    const std::byte* sb = block_at(grp, b);
    const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sb)));
    const __m512 dmin =
        _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sb + 32)));
    const __m512 vdx = _mm512_set1_ps(dx);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s.isum), _mm512_mul_ps(d, vdx), acc);
    return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(s.msum), _mm512_mul_ps(dmin, vdx), acc);
  }
};

}  // namespace

void gemv_q2_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out) {
  kquant_x16::gemv<Q2KLayout>(WeightType::Q2_K, n, groups, n_groups, act, out);
}

void gemm_q2_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride) {
  kquant_x16::gemm<Q2KLayout>(WeightType::Q2_K, n, groups, n_groups, act, act_stride, nt, out,
                              out_stride);
}

}  // namespace pacer::ops
