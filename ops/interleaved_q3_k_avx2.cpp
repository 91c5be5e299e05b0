// Q3_K interleaved by 16 rows (interleaved.h) x Q8_K activations on AVX2: the decode GEMV and the
// prefill GEMM of CPUs without AVX-512 VNNI (the VNNI kernels: interleaved_q3_k_avx512vnni.cpp).
//
// Why: the row-major AVX2 kernel (q3_k_avx2.cpp) merges the 2 low bits and the high bit of every
// quant one row at a time; on the Zen 5 dev VM with PACER_ISA=avx2 TinyLlama Q3_K_M decoded at
// 35 % of the roofline on one thread. Here a 32-byte half r of each 64-byte vector of the layout
// holds rows 8r..8r + 7 (dword i = row 8r + i), and the unsigned quants u = q + 4 of one set of
// 8 rows come out of a triple of vectors (interleaved.h) in one AND (sets 0-5: u or 16 u), or, for
// sets 6 and 7 (bits 3 and 7 of N0, N1, N2), 7 logic ops gathering both sets' bits into one vector
// and one or two more each (as 2 u; VNNI gathers set 7 as 32 u, which here would overflow
// vpmaddubsw's int16 pairs: 2 x 224 x 127). One vpmaddubsw dots 4 of them per row with one
// broadcast activation dword, and one vpmaddwd multiplies the int16 sums by the group's scale as
// it widens them (superblock_isum): the VNNI kernel's integers exactly, then its one conversion
// and FMA per super-block, so the two tiers give the same bits and the GEMM (4 tokens per pass)
// equals the GEMV per token.
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

// log2 of the factor set s's quants come out with: bits 0-2 of N0-N2 (sets 0, 2, 4) as they are,
// bits 4-6 (sets 1, 3, 5) as 16 u, sets 6 and 7 (bits 3 and 7, gathered) as 2 u.
constexpr int kSetShift[8] = {0, 4, 0, 4, 0, 4, 1, 1};

// (a & mask) | (b & ~mask).
inline __m256i select_bits(__m256i a, __m256i b, char mask) {
  const __m256i m = _mm256_set1_epi8(mask);
  return _mm256_or_si256(_mm256_and_si256(a, m), _mm256_andnot_si256(m, b));
}

// 2^kSetShift[S] times the unsigned quants of set S < 6 of the triple at `triple` (rows 8r.. at
// triple + 32r).
template <int S>
inline __m256i quants(const std::byte* triple) {
  static_assert(S < 6);
  return _mm256_and_si256(
      _mm256_load_si256(reinterpret_cast<const __m256i*>(triple + 64 * (S / 2))),
      _mm256_set1_epi8(S % 2 ? 0x70 : 0x07));
}

// The high bits of sets 6 and 7 of a triple side by side: bits 7, 6, 5 of each byte are bit 7 of
// N2, N1, N0 (2^5 times set 7's u), bits 3, 2, 1 bit 3 of N2, N1, N0 (2 u of set 6). The 16-bit
// shifts move bits across bytes only into positions the masks drop. 7 logic ops for both sets
// (the two apart took 9 and 8).
inline __m256i high_sets(const std::byte* triple) {
  const auto load = [&](int j) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(triple + 64 * j));
  };
  const __m256i n2 = _mm256_and_si256(load(2), _mm256_set1_epi8(char(0x88)));
  const __m256i n1 = _mm256_and_si256(_mm256_srli_epi16(load(1), 1), _mm256_set1_epi8(0x44));
  const __m256i n0 = _mm256_and_si256(_mm256_srli_epi16(load(0), 2), _mm256_set1_epi8(0x22));
  return _mm256_or_si256(_mm256_or_si256(n2, n1), n0);
}
inline __m256i set6_quants(__m256i high) {
  return _mm256_and_si256(high, _mm256_set1_epi8(0x0E));
}
inline __m256i set7_quants(__m256i high) {
  return _mm256_and_si256(_mm256_srli_epi16(high, 4), _mm256_set1_epi8(0x0E));
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

// Byte A of every dword of v into the high byte of the dword's low int16, byte B into the high
// byte of its high int16, the low bytes zero: an arithmetic shift by 8 - j then gives the two
// signed bytes times 2^j as int16, the pair vpmaddwd multiplies with.
template <int A, int B>
inline __m256i bytes_to_int16_highs(__m256i v) {
  const __m256i index = _mm256_set_epi8(12 + B, -1, 12 + A, -1, 8 + B, -1, 8 + A, -1, 4 + B, -1,
                                        4 + A, -1, B, -1, A, -1, 12 + B, -1, 12 + A, -1, 8 + B, -1,
                                        8 + A, -1, 4 + B, -1, 4 + A, -1, B, -1, A, -1);
  return _mm256_shuffle_epi8(v, index);
}

// The broadcast int16 pair bsums[g], bsums[g + 1] of one activation block.
inline __m256i bsums_pair(const BlockQ8_K* x, int g) {
  int32_t v;
  __builtin_memcpy(&v, x->bsums + g, 4);
  return _mm256_set1_epi32(v);
}

// isum[t] = sum_g sc_g * dot_g of rows 8r..8r + 7 of the super-block whose quants start at blk,
// against T activation blocks, with the VNNI kernel's integers: each group's dot is
// sum(u * a) - 4 * bsums_g, u = q + 4 (0..7) as the layout stores it. Set by set (g = 8h + S),
// the 4 triples of half h, each set's quant vector built once for all T tokens: vpmaddubsw dots
// 4 quants a row with one broadcast activation dword, int16 sums of up to 4 such pairs
// (|pair| <= 2 x 14 x 128 for the x1 and x2 sets, 4 sum to <= 14336; the x16 sets' pairs, <=
// 28672, one at a time), and one vpmaddwd multiplies each by 2^(4 - k) sc_g (k the set's shift)
// as it widens them: every group lands in one accumulator at 16 times its scaled dot (<= 2^26 in
// all), the bsums terms come off in pairs of groups (vpmaddwd of 64 sc with bsums), and one
// shift by 4 at the end is exact. (Before: one accumulator a group, started at its bsums term,
// shifted by k, vpmulld by sc_g; sets 6 and 7 gathered apart in 9 and 8 ops; ~20 % more
// instructions.) R = 2 (the GEMV) reads both row halves of the super-block in one pass, each
// activation broadcast serving both; the barrier after each accumulator add stops GCC from
// regrouping the integer sums, which it did by keeping every vpmaddwd product on the stack. On
// one Zen 4 core (AVX2 tier), same bits, old and new kernels in one process: 2048 x 256 rows in
// L2 15.4 -> 20.0 GB/s (1.29x), 2048 x 64000 rows from DRAM 13.8 -> 17.5-17.8 GB/s; the GEMM
// (R = 1, 4 tokens a pass, flattened so the barriers' sums stay in registers; unflattened they
// spilled, 0.77x) 52-53 -> 67 GMAC/s at 64 tokens (1.27x), 41.7 -> 51.8 at 7.
template <int R, int T>
inline void superblock_isum(const std::byte* blk, int r0, const BlockQ8_K* const* x,
                            __m256i (*isum)[T]) {
  __m256i acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_si256();
  }
  // NG groups' products (their sets share the shift): quants_at(V, r, q) gives the groups' 4
  // quants a row of vector V of half r0 + r, against activations act_at[g] + 4 V, with the scale
  // vectors sc16[g][r] (2^(4 - k) sc_g per int16).
  const auto add_groups = [&]<int Shift, int NG>(const int(&act_at)[NG], auto quants_at,
                                                 const __m256i(&sc16)[NG][R]) {
    constexpr int kPer16 = Shift == 4 ? 1 : 4;
    __m256i p16[NG][R][T];
    unroll<4>([&](auto vc) {
      constexpr int V = decltype(vc)::value;
      __m256i a[NG][T];
      for (int g = 0; g < NG; ++g) {
        for (int t = 0; t < T; ++t) a[g][t] = act_dword(x[t]->qs, act_at[g] + 4 * V);
      }
      for (int r = 0; r < R; ++r) {
        __m256i q[NG];
        quants_at(vc, r, q);
        for (int g = 0; g < NG; ++g) {
          for (int t = 0; t < T; ++t) {
            const __m256i p = _mm256_maddubs_epi16(q[g], a[g][t]);
            p16[g][r][t] = V % kPer16 == 0 ? p : _mm256_add_epi16(p16[g][r][t], p);
            if constexpr (V % kPer16 == kPer16 - 1) {
              acc[r][t] = _mm256_add_epi32(acc[r][t], _mm256_madd_epi16(p16[g][r][t], sc16[g][r]));
              asm("" : "+x"(acc[r][t]));
            }
          }
        }
      }
    });
  };
  unroll<4>([&](auto qq) {
    constexpr int QQ = decltype(qq)::value;  // groups 4QQ..4QQ + 3: half h = QQ / 2
    constexpr int H = QQ / 2;
    __m256i sc[R];
    for (int r = 0; r < R; ++r) sc[r] = scale_bytes<QQ>(blk, r0 + r);
    for (int r = 0; r < R; ++r) {  // - 16 x 4 x sum_m sc_m bsums_{4QQ + m}
      const __m256i sc01 = _mm256_srai_epi16(bytes_to_int16_highs<0, 1>(sc[r]), 2);
      const __m256i sc23 = _mm256_srai_epi16(bytes_to_int16_highs<2, 3>(sc[r]), 2);
      for (int t = 0; t < T; ++t) {
        const __m256i bs = _mm256_add_epi32(_mm256_madd_epi16(sc01, bsums_pair(x[t], 4 * QQ)),
                                            _mm256_madd_epi16(sc23, bsums_pair(x[t], 4 * QQ + 2)));
        acc[r][t] = _mm256_sub_epi32(acc[r][t], bs);
      }
    }
    const std::byte* half = blk + 192 + 768 * H + 32 * r0;
    // Group 4QQ + M's scale vectors, 2^(4 - k) sc as int16 (k its set's shift), into out.
    const auto scale16 = [&]<int M>(std::integral_constant<int, M>, __m256i(&out)[R]) {
      for (int r = 0; r < R; ++r) {
        out[r] =
            _mm256_srai_epi16(bytes_to_int16_highs<M, M>(sc[r]), 4 + kSetShift[4 * (QQ % 2) + M]);
      }
    };
    unroll<QQ % 2 ? 2 : 4>([&](auto mc) {  // sets 0-3, or 4 and 5
      constexpr int S = 4 * (QQ % 2) + decltype(mc)::value;
      __m256i sc16[1][R];
      scale16(mc, sc16[0]);
      add_groups.template operator()<kSetShift[S], 1>(
          {128 * H + 16 * S},
          [&](auto vc, int r, __m256i* q) {
            q[0] = quants<S>(half + 192 * decltype(vc)::value + 32 * r);
          },
          sc16);
    });
    if constexpr (QQ % 2) {  // sets 6 and 7 from the same vectors of high bits
      static_assert(kSetShift[6] == kSetShift[7]);
      __m256i sc16[2][R];
      scale16(std::integral_constant<int, 2>{}, sc16[0]);
      scale16(std::integral_constant<int, 3>{}, sc16[1]);
      add_groups.template operator()<kSetShift[6], 2>(
          {128 * H + 16 * 6, 128 * H + 16 * 7},
          [&](auto vc, int r, __m256i* q) {
            const __m256i high = high_sets(half + 192 * decltype(vc)::value + 32 * r);
            q[0] = set6_quants(high);
            q[1] = set7_quants(high);
          },
          sc16);
    }
  });
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) isum[r][t] = _mm256_srai_epi32(acc[r][t], 4);  // exact: 16 | it
  }
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
      __m256i isum[2][1];
      superblock_isum<2, 1>(block_at(group[s], b), 0, &xb, isum);
      for (int r = 0; r < 2; ++r)
        acc[s][r] = accumulate(group[s], b, r, isum[r][0], xb->d, acc[s][r]);
    }
  }
  for (int s = 0; s < S; ++s) {
    _mm256_storeu_ps(out[s], acc[s][0]);
    _mm256_storeu_ps(out[s] + 8, acc[s][1]);
  }
}

// T tokens against both row halves of one group; out: token 0's 16 outputs.
template <int T>
[[gnu::flatten]] void gemm_group(int64_t nb, const std::byte* grp, const BlockQ8_K* const* x,
                                 float* out, int64_t out_stride) {
  for (int r = 0; r < 2; ++r) {
    __m256 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ8_K* xb[T];
      for (int t = 0; t < T; ++t) xb[t] = x[t] + b;
      __m256i isum[1][T];
      superblock_isum<1, T>(block_at(grp, b), r, xb, isum);
      for (int t = 0; t < T; ++t) acc[t] = accumulate(grp, b, r, isum[0][t], xb[t]->d, acc[t]);
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
