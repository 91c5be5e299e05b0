// Q6_K interleaved by 16 rows (interleaved.h) x Q8_K activations on AVX-512 VNNI: the decode GEMV
// and the prefill GEMM.
//
// Per super-block of a group (16 rows x 256 weights), for each half h and each of the 4 element
// sets k (elements 128h + 32k + l, l < 32): 8 vectors of unsigned quants q in [0, 63], vector v
// built from ql vector 16h + 8(k % 2) + v (low or high nibbles) and qh vector 8h + v (bits 2k,
// 2k+1 moved to bits 4-5, merged by one vpternlogd), and dotted by vpdpbusd with the broadcast
// activation dword of elements 128h + 32k + 4v.. (4 quants of all 16 rows, exact). Vectors 0-3
// and 4-7 are groups 8h + 2k and 8h + 2k + 1; each group's sum minus 32 * bsums[g] is multiplied
// by its int8 scale (vpshufb to the dword's top byte, arithmetic shift) and added to the
// super-block's integer sum. Then for all 16 rows one conversion and FMA. Integer bounds as in
// q6_k.h: |group dot - 32 bsum| <= 16 * 63 * 128 + 32 * 2048, times |sc| <= 128, over 16 groups:
// < 2^31. The triples are read in layout order (all 4 element sets of a triple at once).
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

#include "ops/gemv_streams.h"
#include "ops/isa.h"
#include "ops/q8_k.h"
#include "ops/unroll.h"

// GCC 12 reports the `__Y = __Y` placeholders of its own AVX-512 headers at the call sites where
// they are inlined (bug 105593, fixed in 13). No variable of this file is uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace pacer::ops {
namespace {

// vpshufb controls (the same in every 128-bit lane): byte j of each dword to its top byte, so an
// arithmetic shift by 24 sign-extends the int8 scale.
struct Controls {
  __m512i scale[4];
};

inline Controls controls() {
  Controls c;
  for (int j = 0; j < 4; ++j) {
    const auto top = [j](uint32_t base) {
      return static_cast<int32_t>(0x00808080u | (base + j) << 24);
    };
    c.scale[j] = _mm512_set4_epi32(top(12), top(8), top(4), top(0));
  }
  return c;
}

inline __m512i act_dword(const int8_t* q, int64_t at) {
  int32_t v;
  std::memcpy(&v, q + at, 4);
  return _mm512_set1_epi32(v);
}

// Group g's int8 scale of the 16 rows, as int32 lanes.
inline __m512i group_scale(const std::byte* blk, int g, const Controls& ctl) {
  const __m512i v = _mm512_load_si512(blk + 64 * (g / 4));
  return _mm512_srai_epi32(_mm512_shuffle_epi8(v, ctl.scale[g % 4]), 24);
}

// The unsigned quants of elements 128h + 32K + 4v..+3 of the 16 rows, from triple 8h + v: the
// low or high nibbles of its ql vector K % 2, and bits 2K, 2K + 1 of its qh vector moved to bits
// 4-5 (one vpternlogd merges them).
template <int K>
inline __m512i quants(const std::byte* triple) {
  const __m512i c0f = _mm512_set1_epi8(0x0F), c30 = _mm512_set1_epi8(0x30);
  const __m512i l = _mm512_load_si512(triple + 64 * (K % 2));
  const __m512i hb = _mm512_load_si512(triple + 128);
  const __m512i low = _mm512_and_si512(K < 2 ? l : _mm512_srli_epi16(l, 4), c0f);
  __m512i high;
  if constexpr (K == 0) high = _mm512_slli_epi16(hb, 4);
  if constexpr (K == 1) high = _mm512_slli_epi16(hb, 2);
  if constexpr (K == 2) high = hb;
  if constexpr (K == 3) high = _mm512_srli_epi16(hb, 2);
  return _mm512_ternarylogic_epi32(low, high, c30, 0xF8);  // low | (high & 0x30)
}

// The first triple of half h of a super-block's quants.
inline const std::byte* half_at(const std::byte* blk, int h) {
  return blk + 256 + 192 * 8 * h;
}

// isum[t] = sum_g sc_g * (dot_g - 32 * bsums[g]) of one super-block (quants at blk) of 16 rows
// against T activation blocks, reading the quants in the layout's byte order (triple after triple,
// so each stream is sequential), each quant vector built once for all T: 8 accumulators per token,
// one per group of the half. (For prefill's T = 4 this beat going element set by element set with
// 2 per token: l32 Q4_K_M pp64 on 2 Zen 4 cores, ~261 vs ~251 tok/s.)
template <int T>
inline void block_isums(const std::byte* blk, const BlockQ8_K* const* x, const Controls& ctl,
                        __m512i* isum) {
  for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
  for (int h = 0; h < 2; ++h) {
    const std::byte* base = half_at(blk, h);
    __m512i acc[T][4][2];
    for (int t = 0; t < T; ++t) {
      for (int k = 0; k < 4; ++k) acc[t][k][0] = acc[t][k][1] = _mm512_setzero_si512();
    }
    unroll<8>([&](auto vc) {
      constexpr int V = decltype(vc)::value;
      unroll<4>([&](auto kc) {
        constexpr int K = decltype(kc)::value;
        const __m512i q = quants<K>(base + 192 * V);
        for (int t = 0; t < T; ++t) {
          acc[t][K][V / 4] = _mm512_dpbusd_epi32(acc[t][K][V / 4], q,
                                                 act_dword(x[t]->qs, 128 * h + 32 * K + 4 * V));
        }
      });
    });
    unroll<8>([&](auto gc) {  // group 8h + G: element set G / 2, vectors 4 (G % 2)..+3
      constexpr int G = decltype(gc)::value;
      const int g = 8 * h + G;
      const __m512i sc = group_scale(blk, g, ctl);
      for (int t = 0; t < T; ++t) {
        const __m512i offset = _mm512_set1_epi32(32 * x[t]->bsums[g]);
        isum[t] = _mm512_add_epi32(
            isum[t], _mm512_mullo_epi32(_mm512_sub_epi32(acc[t][G / 2][G % 2], offset), sc));
      }
    });
  }
}

// acc + d * d_x * isum for the 16 rows of super-block b of the group at grp.
inline __m512 accumulate(const std::byte* grp, int64_t b, __m512i isum, float dx, __m512 acc) {
  const std::byte* pair = grp + b / 2 * kX16Q6KPairBytes;
  const __m512 d =
      _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(pair + 32 * (b % 2))));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, _mm512_set1_ps(dx)), acc);
}

inline const std::byte* block_quants(const std::byte* grp, int64_t b) {
  return grp + b / 2 * kX16Q6KPairBytes + 64 + kX16Q6KBlockBytes * (b % 2);
}

// S groups at once (S far-apart streams), super-block by super-block; each stream's block pair
// prefetch_pairs further on prefetched (0: none; one Sapphire Rapids core, cold Q6_K x16:
// ~8-9.4 -> 8.3-10.6 GB/s with one pair).
template <int S>
void gemv_groups(int64_t nb, const std::byte* const* group, const BlockQ8_K* x, const Controls& ctl,
                 float* const* out, int64_t prefetch_pairs) {
  __m512 acc[S];
  for (int s = 0; s < S; ++s) acc[s] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    for (int s = 0; s < S; ++s) {
      if (prefetch_pairs > 0 && b % 2 == 0 && b + 2 * prefetch_pairs < nb) {
        prefetch_lines(group[s] + (b / 2 + prefetch_pairs) * kX16Q6KPairBytes, kX16Q6KPairBytes);
      }
      const BlockQ8_K* xb = x + b;
      __m512i isum;
      block_isums<1>(block_quants(group[s], b), &xb, ctl, &isum);
      acc[s] = accumulate(group[s], b, isum, x[b].d, acc[s]);
    }
  }
  for (int s = 0; s < S; ++s) _mm512_storeu_ps(out[s], acc[s]);
}

// T tokens against one group.
template <int T>
void gemm_group(int64_t nb, const std::byte* grp, const BlockQ8_K* const* x, const Controls& ctl,
                float* out, int64_t out_stride) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_K* xb[T];
    for (int t = 0; t < T; ++t) xb[t] = x[t] + b;
    __m512i isum[T];
    block_isums<T>(block_quants(grp, b), xb, ctl, isum);
    for (int t = 0; t < T; ++t) acc[t] = accumulate(grp, b, isum[t], xb[t]->d, acc[t]);
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + t * out_stride, acc[t]);
}

}  // namespace

void gemv_q6_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out) {
  const int64_t nb = n / 256;
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  const Controls ctl = controls();
  x16_gemv_stream_groups(x16_gemv_streams(), groups, n_groups, x16_group_bytes(WeightType::Q6_K, n),
                         out, [&](auto streams, const std::byte* const* group, float* const* outs) {
                           gemv_groups<decltype(streams)::value>(nb, group, x, ctl, outs,
                                                                 gemv_software_prefetch() ? 1 : 0);
                         });
}

void gemm_q6_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride) {
  const int64_t nb = n / 256;
  const Controls ctl = controls();
  x16_gemm_token_quads(
      groups, n_groups, x16_group_bytes(WeightType::Q6_K, n), act, act_stride, nt, out, out_stride,
      [&](auto tokens, const std::byte* grp, const std::byte* const* acts, float* o) {
        constexpr int T = decltype(tokens)::value;
        const BlockQ8_K* x[T];
        for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const BlockQ8_K*>(acts[t]);
        gemm_group<T>(nb, grp, x, ctl, o, out_stride);
      });
}

}  // namespace pacer::ops
