// Q3_K interleaved by 16 rows (interleaved.h) x Q8_K activations on AVX2: the decode GEMV and the
// prefill GEMM of CPUs without AVX-512 VNNI (the VNNI kernels: interleaved_q3_k_avx512vnni.cpp).
//
// Why: the row-major AVX2 kernel (q3_k_avx2.cpp) merges the 2 low bits and the high bit of every
// quant one row at a time; on the Zen 5 dev VM with PACER_ISA=avx2 TinyLlama Q3_K_M decoded at
// 35 % of the roofline on one thread. Here a 32-byte half r of each 64-byte vector of the layout
// holds rows 8r..8r + 7 (dword i = row 8r + i), and the unsigned quants u = q + 4 of one set of
// 8 rows come out of a triple of vectors (interleaved.h) in one AND (sets 0-5: u or 16 u) or 7-8
// logic ops (sets 6 and 7, gathered from bits 3 and 7 of N0, N1, N2 into 8 u and 16 u; VNNI
// gathers set 7 as 32 u, which here would overflow vpmaddubsw's int16 pairs: 2 x 224 x 127). One
// vpmaddubsw dots 4 of them per row with one broadcast activation dword (|pair| <= 2 x 112 x
// 127), one vpmaddwd widens to int32 the sum of 4 such products (the x1 sets), 2 (set 6) or 1 (the
// x16 sets): what int16 holds. Each group's accumulator starts at -4 * 2^k * bsums[g]
// (2^k its set's factor), so it ends at 2^k times the group's exact dot; an arithmetic shift by k
// gives the dot (|dot| <= 8192), one vpmulld scales it by sc_g (sign-extended from the VNNI
// kernel's scale bytes) into the super-block's sum: the VNNI kernel's integers, then its one
// conversion and FMA per super-block, so the two tiers give the same bits and the GEMM (4 tokens
// per pass) equals the GEMV per token.
#include "ops/matmul_simd_avx2.h"  // first: wraps <immintrin.h>

#include <cstring>

#include "ops/gemv_streams.h"
#include "ops/interleaved.h"
#include "ops/isa.h"
#include "ops/q8_k.h"
#include "ops/unroll.h"

namespace pacer::ops {
namespace {

using avx2::act_dword;

// log2 of the factor set s's quants come out with (bits 4-6 for 1, 3, 5 and 7, 3-5 for 6).
constexpr int kSetShift[8] = {0, 4, 0, 4, 0, 4, 3, 4};

// (a & mask) | (b & ~mask).
inline __m256i select_bits(__m256i a, __m256i b, char mask) {
  const __m256i m = _mm256_set1_epi8(mask);
  return _mm256_or_si256(_mm256_and_si256(a, m), _mm256_andnot_si256(m, b));
}

// 2^kSetShift[S] times the unsigned quants of set S of the triple at `triple` (rows 8r.. at
// triple + 32r). The 16-bit shifts move bits across bytes only into positions the masks drop.
template <int S>
inline __m256i quants(const std::byte* triple) {
  const auto load = [&](int j) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(triple + 64 * j));
  };
  if constexpr (S < 6) {
    return _mm256_and_si256(load(S / 2), _mm256_set1_epi8(S % 2 ? 0x70 : 0x07));
  } else if constexpr (S == 6) {  // bit 3 of N0, N1, N2 -> bits 3, 4, 5
    const __m256i b45 =
        select_bits(_mm256_slli_epi16(load(1), 1), _mm256_slli_epi16(load(2), 2), 0x10);
    return _mm256_and_si256(select_bits(load(0), b45, 0x08), _mm256_set1_epi8(0x38));
  } else {  // bit 7 of N0, N1, N2 -> bits 4, 5, 6
    const __m256i b45 =
        select_bits(_mm256_srli_epi16(load(0), 3), _mm256_srli_epi16(load(1), 2), 0x10);
    return _mm256_and_si256(select_bits(b45, _mm256_srli_epi16(load(2), 1), 0x30),
                            _mm256_set1_epi8(0x70));
  }
}

// The scales of groups 4QQ..4QQ+3 of rows 8r..8r + 7 as signed bytes, byte m of dword i =
// sc_{4QQ+m} of row 8r + i: the low nibble from scales[0..3] (QQ even) or [4..7], low or high
// (QQ >= 2), the top 2 bits from scales[8..11] bits 2QQ, 2QQ + 1 (q3_k.h).
template <int QQ>
inline __m256i scale_bytes(const std::byte* blk, int r) {
  const __m256i low =
      _mm256_load_si256(reinterpret_cast<const __m256i*>(blk + 64 * (QQ % 2) + 32 * r));
  const __m256i top = _mm256_load_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * r));
  __m256i nibble_and_top;
  if constexpr (QQ == 0) nibble_and_top = select_bits(low, _mm256_slli_epi16(top, 4), 0x0F);
  if constexpr (QQ == 1) nibble_and_top = select_bits(low, _mm256_slli_epi16(top, 2), 0x0F);
  if constexpr (QQ == 2) nibble_and_top = select_bits(_mm256_srli_epi16(low, 4), top, 0x0F);
  if constexpr (QQ == 3) {
    nibble_and_top = select_bits(_mm256_srli_epi16(low, 4), _mm256_srli_epi16(top, 2), 0x0F);
  }
  return _mm256_sub_epi8(_mm256_and_si256(nibble_and_top, _mm256_set1_epi8(0x3F)),
                         _mm256_set1_epi8(32));
}

// isum[t] = sum_g sc_g * dot_g of rows 8r..8r + 7 of the super-block whose quants start at blk,
// against T activation blocks: group by group (g = 8h + S), the 4 triples of half h, each set's
// quant vector built once for all T tokens.
template <int T>
inline void superblock_isum(const std::byte* blk, int r, const BlockQ8_K* const* x, __m256i* isum) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
  unroll<4>([&](auto qq) {
    constexpr int QQ = decltype(qq)::value;  // groups 4QQ..4QQ + 3: half h = QQ / 2
    constexpr int H = QQ / 2;
    const __m256i sc = scale_bytes<QQ>(blk, r);
    const std::byte* half = blk + 192 + 768 * H + 32 * r;
    unroll<4>([&](auto mc) {
      constexpr int M = decltype(mc)::value;
      constexpr int S = 4 * (QQ % 2) + M;  // the group's set
      constexpr int G = 8 * H + S;
      __m256i acc[T];
      for (int t = 0; t < T; ++t) {
        acc[t] = _mm256_set1_epi32(-(4 << kSetShift[S]) * x[t]->bsums[G]);
      }
      // Products summed in int16 before one vpmaddwd widens them: |pair| <= 2 x 7 x 128 for the
      // x1 sets (4 sum to <= 7168), 2 x 56 x 128 for set 6 (2 sum to <= 28672); the x16 sets'
      // pairs (<= 28672) one at a time. The same integers, ~a third fewer vpmaddwd and adds: on
      // one Zen 4 core (PACER_ISA=avx2) a 5632x2048 matrix 315-320 -> 299-307 us in cache, and
      // TinyLlama Q3_K_M decode 1.04-1.09x, pp64 1.05-1.06x (old and new builds alternating).
      constexpr int kPer16 = kSetShift[S] == 0 ? 4 : (kSetShift[S] == 3 ? 2 : 1);
      __m256i p16[T];
      unroll<4>([&](auto vc) {
        constexpr int V = decltype(vc)::value;
        const __m256i q = quants<S>(half + 192 * V);
        for (int t = 0; t < T; ++t) {
          const __m256i p = _mm256_maddubs_epi16(q, act_dword(x[t]->qs, 128 * H + 16 * S + 4 * V));
          p16[t] = V % kPer16 == 0 ? p : _mm256_add_epi16(p16[t], p);
          if constexpr (V % kPer16 == kPer16 - 1) {
            acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(p16[t], ones));
          }
        }
      });
      const __m256i scale = _mm256_srai_epi32(_mm256_slli_epi32(sc, 24 - 8 * M), 24);
      for (int t = 0; t < T; ++t) {
        const __m256i dot = _mm256_srai_epi32(acc[t], kSetShift[S]);  // exact: 2^k divides it
        isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(dot, scale));
      }
    });
  });
}

// Super-block b of a group: its quants (and scales), and the 16 fp16 d of its rows.
inline const std::byte* block_at(const std::byte* grp, int64_t b) {
  return grp + b / 2 * kX16Q3KPairBytes + 64 + kX16Q3KBlockBytes * (b % 2);
}
inline const std::byte* d_at(const std::byte* grp, int64_t b) {
  return grp + b / 2 * kX16Q3KPairBytes + 32 * (b % 2);
}

// acc + d * d_x * isum for rows 8r..8r + 7 of super-block b.
inline __m256 accumulate(const std::byte* grp, int64_t b, int r, __m256i isum, float dx,
                         __m256 acc) {
  const __m256 d =
      _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(d_at(grp, b) + 16 * r)));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, _mm256_set1_ps(dx)), acc);
}

// The GEMV: S groups (far-apart streams) super-block by super-block, both row halves of each;
// with `prefetch`, each stream's bytes one pair further on, half a pair per super-block.
// Flattened (GCC 12 left superblock_isum out of line): 5632x2048 cold on one Zen 4 core (AVX2
// tier, BM_gemv best rep) 13.0 -> 14.5 GB/s.
template <int S>
[[gnu::flatten]] void gemv_groups(int64_t nb, const std::byte* const* group, const BlockQ8_K* x,
                                  float* const* out, bool prefetch) {
  constexpr int64_t kHalfPair = kX16Q3KPairBytes / 2;
  __m256 acc[S][2];
  for (int s = 0; s < S; ++s) acc[s][0] = acc[s][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_K* xb = x + b;
    for (int s = 0; s < S; ++s) {
      if (prefetch) prefetch_lines(group[s] + (b + 2) * kHalfPair, kHalfPair);
      for (int r = 0; r < 2; ++r) {
        __m256i isum;
        superblock_isum<1>(block_at(group[s], b), r, &xb, &isum);
        acc[s][r] = accumulate(group[s], b, r, isum, xb->d, acc[s][r]);
      }
    }
  }
  for (int s = 0; s < S; ++s) {
    _mm256_storeu_ps(out[s], acc[s][0]);
    _mm256_storeu_ps(out[s] + 8, acc[s][1]);
  }
}

// T tokens against both row halves of one group; out: token 0's 16 outputs.
template <int T>
void gemm_group(int64_t nb, const std::byte* grp, const BlockQ8_K* const* x, float* out,
                int64_t out_stride) {
  for (int r = 0; r < 2; ++r) {
    __m256 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ8_K* xb[T];
      for (int t = 0; t < T; ++t) xb[t] = x[t] + b;
      __m256i isum[T];
      superblock_isum<T>(block_at(grp, b), r, xb, isum);
      for (int t = 0; t < T; ++t) acc[t] = accumulate(grp, b, r, isum[t], xb[t]->d, acc[t]);
    }
    for (int t = 0; t < T; ++t) _mm256_storeu_ps(out + t * out_stride + 8 * r, acc[t]);
  }
}

}  // namespace

void gemv_q3_Kx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out) {
  const int64_t nb = n / 256;
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  x16_gemv_stream_groups<kX16Avx2GemvStreams>(
      groups, n_groups, x16_group_bytes(WeightType::Q3_K, n), out,
      [&](auto streams, const std::byte* const* group, float* const* outs) {
        gemv_groups<decltype(streams)::value>(nb, group, x, outs,
                                              gemv_software_prefetch(GemvKernelClass::Unpacking));
      });
}

void gemm_q3_Kx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride) {
  const int64_t nb = n / 256;
  x16_gemm_token_quads(
      groups, n_groups, x16_group_bytes(WeightType::Q3_K, n), act, act_stride, nt, out, out_stride,
      [&](auto tokens, const std::byte* grp, const std::byte* const* acts, float* o) {
        constexpr int T = decltype(tokens)::value;
        const BlockQ8_K* x[T];
        for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const BlockQ8_K*>(acts[t]);
        gemm_group<T>(nb, grp, x, o, out_stride);
      });
}

}  // namespace pacer::ops
