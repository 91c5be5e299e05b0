// Q6_K interleaved by 16 rows (interleaved.h) x Q8_K activations on AVX2: the decode GEMV and the
// prefill GEMM of CPUs without AVX-512 VNNI (the VNNI kernels: interleaved_q6_k_avx512vnni.cpp).
//
// A 32-byte half r of each 64-byte vector of the layout holds rows 8r..8r + 7 (dword i = row
// 8r + i). Per super-block and group g (16 elements: element set K of triples 4QV..4QV + 3 of half
// h, g = 8h + 2K + QV): the 6-bit quants (one AND for sets 0-2; set 3 gathered from bits 6-7 of
// A, B and C: 3 ANDs, 3 shifts, 2 ORs) go through vpmaddubsw against broadcast activation dwords;
// a 16-bit pair is at most 2 x 63 x 128 = 16,128, so two triples' pairs add in int16 (32,256)
// and each such sum meets the group's int8 scale in one vpmaddwd. The offset comes off as
// 32 * sum_g sc_g * bsums[g] (the GEMM: a vpmaddwd per group against (bsums[g], 0); the GEMV:
// one per two groups, block_isums_16), so the super-block's integer sum is exactly the VNNI
// kernel's sum_g sc_g * (dot_g - 32 * bsums[g]), and one conversion and FMA per super-block
// serve 8 rows, as there: the two tiers give the same bits, and the GEMM (4 tokens per pass)
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

// The 6-bit quants (0..63) of element set K of the triple at t (rows 8r.. at t + 32r).
template <int K>
inline __m256i quants(const std::byte* t) {
  auto at = [&](int v) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(t + 64 * v)); };
  if constexpr (K < 3) {
    return _mm256_and_si256(at(K), _mm256_set1_epi8(0x3F));
  } else {
    // Bits 6-7 of A, B, C are bits 0-1, 2-3, 4-5 of q_3; the 16-bit shifts move masked bits
    // within their own byte.
    const __m256i c0 = _mm256_set1_epi8(static_cast<char>(0xC0));
    const __m256i a = _mm256_srli_epi16(_mm256_and_si256(at(0), c0), 6);
    const __m256i b = _mm256_srli_epi16(_mm256_and_si256(at(1), c0), 4);
    const __m256i c = _mm256_srli_epi16(_mm256_and_si256(at(2), c0), 2);
    return _mm256_or_si256(_mm256_or_si256(a, b), c);
  }
}

// Group g's int8 scale of rows 8r..8r + 7 in both 16-bit words of each row's dword.
inline __m256i group_scale(const std::byte* blk, int g, int r) {
  int64_t bytes;
  std::memcpy(&bytes, blk + 16 * g + 8 * r, 8);
  const __m256i sc = _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(bytes));
  const __m256i dup = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0,
                                       1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
  return _mm256_shuffle_epi8(sc, dup);
}

// The triples of half h of a super-block's quants, rows 8r.. .
inline const std::byte* half_at(const std::byte* blk, int h, int r) {
  return blk + 256 + 192 * 8 * h + 32 * r;
}

// Rows 8r..8r + 7 of the super-block at blk against T tokens (their super-block x[t]):
// isum[t] = sum_g sc_g * (dot_g - 32 * bsums[g]). Each group's 4 quant vectors are built once
// for all T tokens.
template <int T>
inline void block_isums(const std::byte* blk, int r, const BlockQ8_K* const* x, __m256i* isum) {
  __m256i dsum[T], osum[T];
  for (int t = 0; t < T; ++t) dsum[t] = osum[t] = _mm256_setzero_si256();
  for (int h = 0; h < 2; ++h) {
    const std::byte* base = half_at(blk, h, r);
    unroll<2>([&](auto qc) {
      constexpr int QV = decltype(qc)::value;
      unroll<4>([&](auto kc) {
        constexpr int K = decltype(kc)::value;
        const int g = 8 * h + 2 * K + QV;
        __m256i q[4];
        unroll<4>([&](auto vc) {
          constexpr int V = decltype(vc)::value;
          q[V] = quants<K>(base + 192 * (4 * QV + V));
        });
        const __m256i sc = group_scale(blk, g, r);
        for (int t = 0; t < T; ++t) {
          const int8_t* xq = x[t]->qs + 128 * h + 32 * K + 16 * QV;
          const __m256i s01 = _mm256_add_epi16(_mm256_maddubs_epi16(q[0], act_dword(xq, 0)),
                                               _mm256_maddubs_epi16(q[1], act_dword(xq, 4)));
          const __m256i s23 = _mm256_add_epi16(_mm256_maddubs_epi16(q[2], act_dword(xq, 8)),
                                               _mm256_maddubs_epi16(q[3], act_dword(xq, 12)));
          dsum[t] = _mm256_add_epi32(
              dsum[t], _mm256_add_epi32(_mm256_madd_epi16(s01, sc), _mm256_madd_epi16(s23, sc)));
          // (bsums[g], 0) as the word pair: sc_g * bsums[g] per row.
          const auto bsum = static_cast<uint16_t>(x[t]->bsums[g]);
          osum[t] = _mm256_add_epi32(osum[t], _mm256_madd_epi16(sc, _mm256_set1_epi32(bsum)));
          // Held in order in a flattened GEMM (as the GEMV's chains, block_isums_16): 16 groups x
          // 2048 columns, Zen 4, AVX2 tier, one process, the same bits: 64 tokens 60.5 -> 64.3
          // GMAC/s, 7 tokens 1.07-1.08x (osum held too: 1.04-1.06x).
          asm("" : "+x"(dsum[t]));
        }
      });
    });
  }
  for (int t = 0; t < T; ++t) isum[t] = _mm256_sub_epi32(dsum[t], _mm256_slli_epi32(osum[t], 5));
}

// Rows 0..15 of the super-block at blk against one token's super-block x: isum[r] for rows
// 8r..8r + 7, the same integers as block_isums<1> (exact sums, any order). Both row halves of
// each 64-byte line are used at once, so each activation broadcast serves 16 rows, and the offset
// takes two groups a vpmaddwd: (sc_g, sc_g+1) word pairs against (bsums[g], bsums[g + 1]).
// Out of line, as rows_tile_16 (float_rows_simd.h): inlined, it ran at the same speed.
// Flattened: see the chains below.
[[gnu::noinline, gnu::flatten]] void block_isums_16(const std::byte* blk, const BlockQ8_K* x,
                                                    __m256i* isum, const std::byte* ahead) {
  __m256i osum0 = _mm256_setzero_si256(), osum1 = _mm256_setzero_si256();
  for (int g = 0; g < 16; g += 2) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * g));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * g + 16));
    int32_t pair;
    std::memcpy(&pair, x->bsums + g, 4);
    const __m256i bs = _mm256_set1_epi32(pair);
    osum0 = _mm256_add_epi32(osum0,
                             _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, b)), bs));
    osum1 = _mm256_add_epi32(osum1,
                             _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_unpackhi_epi8(a, b)), bs));
  }
  __m256i dsum0 = _mm256_setzero_si256(), dsum1 = _mm256_setzero_si256();
  // Unrolled, one chain per row half held by an empty asm after each group: without it GCC 12
  // sums the groups as a tree with leaves on the stack. The asm lost (0.96x) until the function
  // was flattened: its lambdas then stayed calls that kept the sums in memory. Flattened, against
  // the tree, one Zen 4 core (AVX2 tier), 256 rows x 2048 columns from L2, old and new kernels in
  // one process: 37.6 -> 39.3-39.8 GB/s (1.05x), the same bits.
#pragma GCC unroll 4
  for (int hq = 0; hq < 4; ++hq) {
    const int h = hq / 2, qv = hq % 2;
    const std::byte* base = blk + 256 + 192 * 8 * h + 192 * 4 * qv;
    const int8_t* xh = x->qs + 128 * h + 16 * qv;
    // The quarter's 4 groups' scales, each row's in both words of its dword: sc[K][0] rows 0-7,
    // sc[K][1] rows 8-15 (group 8h + 2K + qv).
    __m256i sc[4][2];
    unroll<4>([&](auto kc) {
      constexpr int K = decltype(kc)::value;
      const int g = 8 * h + 2 * K + qv;
      const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * g));
      sc[K][0] = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(s, s));
      sc[K][1] = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(s, s));
    });
    // Triples 2P and 2P + 1 (6 lines), element set by element set: the quarter's 12 lines are
    // first read 0, 3, 1, 4, 2, 5, then 6, 9, 7, 10, 8, 11, nearly in address order. Until
    // session 50 the sets went outside the triple pairs, and the first reads went 0, 3, 6, 9, 1,
    // 4, 7, 10, 2, 5, 8, 11, and the stream read from DRAM ~10 % below a plain read. Zen 4 (AVX2
    // tier), old and new kernels in one process, the same bits: 448000 rows x 2048 columns (750
    // MB on 2 MiB pages) 26.6-29.3 -> 30.1-32.2 GB/s (1.07-1.13x; a plain read 33.3-33.6), 256
    // rows from L2 40.0 -> 41.6 (1.04x). Strictly in address order (triple by triple, 8 int16
    // sums live): the same speed, with more stack traffic. Touching the 12 lines in order first
    // also gained from DRAM, but cost 5-9 % from L2.
    unroll<2>([&](auto pc) {
      constexpr int P = decltype(pc)::value;
      unroll<4>([&](auto kc) {
        constexpr int K = decltype(kc)::value;
        const int8_t* xq = xh + 32 * K;
        // A 32nd of the lines ahead each step (1-2 lines; see gemv_groups).
        if (ahead) prefetch_part(ahead, kX16Q6KPairBytes / 2, 8 * hq + 4 * P + K, 32);
        const __m256i xa = act_dword(xq, 8 * P), xb = act_dword(xq, 8 * P + 4);
        const __m256i a0 = quants<K>(base + 192 * (2 * P)),
                      b0 = quants<K>(base + 192 * (2 * P + 1));
        const __m256i p0 =
            _mm256_add_epi16(_mm256_maddubs_epi16(a0, xa), _mm256_maddubs_epi16(b0, xb));
        const __m256i a1 = quants<K>(base + 192 * (2 * P) + 32);
        const __m256i b1 = quants<K>(base + 192 * (2 * P + 1) + 32);
        const __m256i p1 =
            _mm256_add_epi16(_mm256_maddubs_epi16(a1, xa), _mm256_maddubs_epi16(b1, xb));
        dsum0 = _mm256_add_epi32(dsum0, _mm256_madd_epi16(p0, sc[K][0]));
        dsum1 = _mm256_add_epi32(dsum1, _mm256_madd_epi16(p1, sc[K][1]));
        asm("" : "+x"(dsum0), "+x"(dsum1));
      });
    });
  }
  isum[0] = _mm256_sub_epi32(dsum0, _mm256_slli_epi32(osum0, 5));
  isum[1] = _mm256_sub_epi32(dsum1, _mm256_slli_epi32(osum1, 5));
}

inline const std::byte* block_quants(const std::byte* grp, int64_t b) {
  return grp + b / 2 * kX16Q6KPairBytes + 64 + kX16Q6KBlockBytes * (b % 2);
}

// acc + d * d_x * isum for rows 8r..8r + 7 of super-block b of the group at grp.
inline __m256 accumulate(const std::byte* grp, int64_t b, int r, __m256i isum, float dx,
                         __m256 acc) {
  const std::byte* pair = grp + b / 2 * kX16Q6KPairBytes;
  const __m256 d = _mm256_cvtph_ps(
      _mm_load_si128(reinterpret_cast<const __m128i*>(pair + 32 * (b % 2) + 16 * r)));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, _mm256_set1_ps(dx)), acc);
}

// The GEMV: S groups (far-apart streams) super-block by super-block, both row halves of each in
// one pass (block_isums_16); with `prefetch`, the pair one further on in each stream, half of it
// per block, a 32nd of that half (1-2 lines) before each of the block's 32 steps. Until session
// 59 the half pair (53 lines) went at once before the block, and on one Zen 1 core that burst
// cost more than the lines gained (the plan kept it off there: 0.65x). Spread, TinyLlama Q6_K
// decode, old and new builds alternating (docs/fidelity.md, Session 59): a 16th every other step
// 1.02-1.08x at 1 thread and 1.11-1.12x at 2 against no prefetch; a quarter per quarter 1.04-1.09x
// at 1 thread but level or slower at 2; a 32nd each step another 1.035-1.04x at 2 threads.
//
// Until session 43 this ran one pass per row half (block_isums<1>), each reading 32 bytes of
// every line 3 lines apart, and so first touched the super-block's lines in order
// (load_lines_in_order): one Zen 4 core's prefetchers lost the stream otherwise (cold 1.7x
// slower). One pass over whole lines needs no touch, and the touch would cost it ~20 % from L2.
// Zen 4 guest without AVX-512 (AVX2 tier), old and new builds alternating, 3 runs: 128 rows x
// 2048 columns from L2 (a harness calling this kernel alone, best of 3000 calls) 26.9 -> 38.4
// GB/s; BM_gemv q6_kx16_avx2 5632x2048 at 1 thread cold 72-80 -> 83-90 % of a plain read,
// 32000x2048 72-73 -> 83-85 %. Not measured on Intel or Zen 5 (they prefetch; see isa.h).
template <int S>
void gemv_groups(int64_t nb, const std::byte* const* group, const BlockQ8_K* x, float* const* out,
                 bool prefetch) {
  constexpr int64_t kHalfPair = kX16Q6KPairBytes / 2;
  __m256 acc[S][2];
  for (int s = 0; s < S; ++s) acc[s][0] = acc[s][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_K* xb = x + b;
    for (int s = 0; s < S; ++s) {
      // Half of the pair one further on, spread over this block's steps (block_isums_16).
      const std::byte* ahead =
          prefetch ? group[s] + (b / 2 + 1) * kX16Q6KPairBytes + (b % 2) * kHalfPair : nullptr;
      __m256i isum[2];
      block_isums_16(block_quants(group[s], b), xb, isum, ahead);
      for (int r = 0; r < 2; ++r) acc[s][r] = accumulate(group[s], b, r, isum[r], xb->d, acc[s][r]);
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
      __m256i isum[T];
      block_isums<T>(block_quants(grp, b), r, xb, isum);
      for (int t = 0; t < T; ++t) acc[t] = accumulate(grp, b, r, isum[t], xb[t]->d, acc[t]);
    }
    for (int t = 0; t < T; ++t) _mm256_storeu_ps(out + t * out_stride + 8 * r, acc[t]);
  }
}

}  // namespace

void gemv_q6_Kx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out) {
  const int64_t nb = n / 256;
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  x16_gemv_stream_groups<kX16Avx2GemvStreams>(
      groups, n_groups, x16_group_bytes(WeightType::Q6_K, n), out,
      [&](auto streams, const std::byte* const* group, float* const* outs) {
        gemv_groups<decltype(streams)::value>(nb, group, x, outs,
                                              x16_gemv_plan(X16Gemv::Q6_K).prefetch);
      });
}

void gemm_q6_Kx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride) {
  const int64_t nb = n / 256;
  x16_gemm_token_quads(
      groups, n_groups, x16_group_bytes(WeightType::Q6_K, n), act, act_stride, nt, out, out_stride,
      [&](auto tokens, const std::byte* grp, const std::byte* const* acts, float* o) {
        constexpr int T = decltype(tokens)::value;
        const BlockQ8_K* x[T];
        for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const BlockQ8_K*>(acts[t]);
        gemm_group<T>(nb, grp, x, o, out_stride);
      });
}

}  // namespace pacer::ops
