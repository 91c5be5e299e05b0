// Q2_K interleaved by 16 rows (interleaved.h) x Q8_K activations on AVX2: the decode GEMV and the
// prefill GEMM of CPUs without AVX-512 VNNI (the VNNI kernels: interleaved_q2_k_avx512vnni.cpp).
//
// Why: the row-major AVX2 kernel (q2_k_avx2.cpp) unpacks and sums one row at a time; on the Zen 5
// dev VM with PACER_ISA=avx2 TinyLlama Q2_K decoded at 26 % of the roofline on one thread. Here a
// 32-byte half r of each 64-byte vector of the layout holds rows 8r..8r + 7 (dword i = row 8r +
// i), and the quants of group 4k + s come out of quant vector 4k + v as 4^(s % 2) q: an AND (s =
// 0, 1) or a shift and an AND (s = 2, 3). One vpmaddubsw dots 4 of them per row with one
// broadcast activation dword: |pair| <= 2 x 12 x 128 = 3072, so a group's 4 vectors add in int16
// (<= 12,288), and one vpmaddwd against the group's 4-bit scale (spread to both words of each
// row's dword by vpshufb) gives 4^(s % 2) sc_g dot_g in int32; the odd groups' sum is shifted back
// by 2, exactly. The mins term sum_g m_g * bsums[g] is 2 vpmaddwd per 4 groups on (m, m') word
// pairs. Both sums are the VNNI kernel's integers, and its two FMAs per super-block follow, so
// the two tiers give the same bits and the GEMM (4 tokens per pass) equals the GEMV per token.
#include "ops/matmul_simd_avx2.h"  // first: wraps <immintrin.h>

#include <cstring>
#include <memory>
#include <vector>

#include "ops/gemv_streams.h"
#include "ops/interleaved.h"
#include "ops/isa.h"
#include "ops/q8_k.h"
#include "ops/unroll.h"

namespace pacer::ops {
namespace {

using avx2::act_dword;

// Scale words from byte s of each row's dword (scale[s]); min word pairs from bytes 2p, 2p + 1
// (mins[p]).
using avx2::Controls;
using avx2::controls;

// Per activation block, the int16 pairs (bsums[2p], bsums[2p + 1]) as dwords, p = 0..7.
struct MinPairs {
  int32_t v[8];
};

inline MinPairs min_pairs(const BlockQ8_K& x) {
  MinPairs m{};
  for (int p = 0; p < 8; ++p) {
    m.v[p] = static_cast<int32_t>(static_cast<uint16_t>(x.bsums[2 * p]) |
                                  static_cast<uint32_t>(static_cast<uint16_t>(x.bsums[2 * p + 1]))
                                      << 16);
  }
  return m;
}

// A token's two integer sums of one super-block, rows 8r..8r + 7: sum_g sc_g * dot_g and
// sum_g m_g * bsums[g].
struct Sums {
  __m256i isum, msum;
};

// 4^(S % 2) times the quants of group 4k + S in quant vector v (rows 8r.. at vec).
template <int S>
inline __m256i quants(const std::byte* vec) {
  __m256i q = _mm256_load_si256(reinterpret_cast<const __m256i*>(vec));
  if constexpr (S >= 2) q = _mm256_srli_epi16(q, 4);
  return _mm256_and_si256(q, _mm256_set1_epi8(S % 2 ? 0x0C : 0x03));
}

// sums[t] over the 16 groups of rows 8r..8r + 7 of super-block sb against T activation blocks:
// chunk by chunk (groups 4k..4k + 3), each group's 4 quant vectors built once for all T tokens.
template <int T>
inline void superblock_sums(const std::byte* sb, int r, const BlockQ8_K* const* x,
                            const MinPairs* const* pairs, const Controls& ctl, Sums* sums) {
  for (int t = 0; t < T; ++t) sums[t] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  unroll<4>([&](auto kc) {
    constexpr int K = decltype(kc)::value;
    const __m256i packed =
        _mm256_load_si256(reinterpret_cast<const __m256i*>(sb + 64 + 64 * K + 32 * r));
    const __m256i c0f = _mm256_set1_epi8(0x0F);
    const __m256i sc = _mm256_and_si256(packed, c0f);
    const __m256i m = _mm256_and_si256(_mm256_srli_epi16(packed, 4), c0f);
    for (int t = 0; t < T; ++t) {
      for (int p = 0; p < 2; ++p) {
        const __m256i mp = _mm256_shuffle_epi8(m, ctl.mins[p]);
        sums[t].msum = _mm256_add_epi32(
            sums[t].msum, _mm256_madd_epi16(mp, _mm256_set1_epi32(pairs[t]->v[2 * K + p])));
      }
    }
    unroll<4>([&](auto sc_) {
      constexpr int S = decltype(sc_)::value;
      constexpr int G = 4 * K + S;
      __m256i acc[T];
      unroll<4>([&](auto vc) {
        constexpr int V = decltype(vc)::value;
        const __m256i q = quants<S>(sb + 320 + 64 * (4 * K + V) + 32 * r);
        for (int t = 0; t < T; ++t) {
          const __m256i p = _mm256_maddubs_epi16(q, act_dword(x[t]->qs, 16 * G + 4 * V));
          if constexpr (V == 0) {
            acc[t] = p;
          } else {
            acc[t] = _mm256_add_epi16(acc[t], p);
          }
        }
      });
      const __m256i scale = _mm256_shuffle_epi8(sc, ctl.scale[S]);
      for (int t = 0; t < T; ++t) {
        __m256i term = _mm256_madd_epi16(acc[t], scale);  // 4^(S % 2) sc_g dot_g
        if constexpr (S % 2) term = _mm256_srai_epi32(term, 2);
        sums[t].isum = _mm256_add_epi32(sums[t].isum, term);
      }
    });
  });
}

// acc + d * d_x * isum - dmin * d_x * msum for rows 8r..8r + 7 of super-block sb.
inline __m256 accumulate(const std::byte* sb, int r, const Sums& s, float dx, __m256 acc) {
  const __m256 d = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sb + 16 * r)));
  const __m256 dmin =
      _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sb + 32 + 16 * r)));
  const __m256 vdx = _mm256_set1_ps(dx);
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s.isum), _mm256_mul_ps(d, vdx), acc);
  return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(s.msum), _mm256_mul_ps(dmin, vdx), acc);
}

// The GEMV: S groups (far-apart streams) super-block by super-block, both row halves of each; the
// super-block one further on in each stream is prefetched when `prefetch`. Flattened: GCC 12 kept
// superblock_sums' chunk steps as calls that reread their captures and stored the sums to the
// stack; inlined, 5632x2048 cold on one Zen 4 core (AVX2 tier, BM_gemv best rep) 13.6 -> 17.5
// GB/s.
template <int S>
[[gnu::flatten]] void gemv_groups(int64_t nb, const std::byte* const* group, const BlockQ8_K* x,
                                  const MinPairs* pairs, const Controls& ctl, float* const* out,
                                  bool prefetch) {
  __m256 acc[S][2];
  for (int s = 0; s < S; ++s) acc[s][0] = acc[s][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_K* xb = x + b;
    const MinPairs* pb = pairs + b;
    for (int s = 0; s < S; ++s) {
      const std::byte* sb = group[s] + b * kX16Q2KBlockBytes;
      if (prefetch) prefetch_lines(sb + kX16Q2KBlockBytes, kX16Q2KBlockBytes);
      for (int r = 0; r < 2; ++r) {
        // The activations' address laundered per pass: GCC 12 otherwise hoisted the super-block's
        // 64 activation dwords out of the stream and half loops into general registers and the
        // stack, and broadcast each with vmovd + vpbroadcastd, 2 vector ops a dword where a
        // broadcast load costs none. Zen 4, AVX2 tier, old and new kernels in one process, the
        // same bits: 256 rows x 2048 columns from L2 18.3 -> 21.4-21.6 GB/s (1.17x), 64000 rows
        // from DRAM 1.15-1.25x. (Holding isum in order as well: 1.13x.)
        const BlockQ8_K* xr = xb;
        asm("" : "+r"(xr));
        Sums sums;
        superblock_sums<1>(sb, r, &xr, &pb, ctl, &sums);
        acc[s][r] = accumulate(sb, r, sums, xb->d, acc[s][r]);
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
void gemm_group(int64_t nb, const std::byte* grp, const BlockQ8_K* const* x,
                const MinPairs* const* pairs, const Controls& ctl, float* out, int64_t out_stride) {
  for (int r = 0; r < 2; ++r) {
    __m256 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const std::byte* sb = grp + b * kX16Q2KBlockBytes;
      const BlockQ8_K* xb[T];
      const MinPairs* pb[T];
      for (int t = 0; t < T; ++t) {
        xb[t] = x[t] + b;
        pb[t] = pairs[t] + b;
      }
      Sums sums[T];
      superblock_sums<T>(sb, r, xb, pb, ctl, sums);
      for (int t = 0; t < T; ++t) acc[t] = accumulate(sb, r, sums[t], xb[t]->d, acc[t]);
    }
    for (int t = 0; t < T; ++t) _mm256_storeu_ps(out + t * out_stride + 8 * r, acc[t]);
  }
}

// Which token an activation row of a GEMM call is (a call of one token may pass stride 0).
inline int64_t token_index(const std::byte* row, const std::byte* first, int64_t stride) {
  return stride == 0 ? 0 : (row - first) / stride;
}

}  // namespace

void gemv_q2_Kx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out) {
  const int64_t nb = n / 256;
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  const Controls ctl = controls();
  // Rows up to 16384 columns pack their pairs on the stack.
  constexpr int64_t kStackBlocks = 64;
  MinPairs stack_pairs[kStackBlocks];
  std::unique_ptr<MinPairs[]> heap_pairs;
  MinPairs* pairs = stack_pairs;
  if (nb > kStackBlocks) {
    heap_pairs = std::make_unique<MinPairs[]>(static_cast<size_t>(nb));
    pairs = heap_pairs.get();
  }
  for (int64_t b = 0; b < nb; ++b) pairs[b] = min_pairs(x[b]);
  x16_gemv_stream_groups<kX16Avx2GemvStreams>(
      groups, n_groups, nb * kX16Q2KBlockBytes, out,
      [&](auto streams, const std::byte* const* group, float* const* outs) {
        gemv_groups<decltype(streams)::value>(nb, group, x, pairs, ctl, outs,
                                              gemv_software_prefetch(GemvKernelClass::Unpacking));
      });
}

void gemm_q2_Kx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride) {
  const int64_t nb = n / 256;
  const Controls ctl = controls();
  std::vector<MinPairs> pairs(static_cast<size_t>(nt * nb));  // once per call, as the GEMV's
  for (int64_t t = 0; t < nt; ++t) {
    const auto* x = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride);
    for (int64_t b = 0; b < nb; ++b) pairs[t * nb + b] = min_pairs(x[b]);
  }
  x16_gemm_token_quads(
      groups, n_groups, nb * kX16Q2KBlockBytes, act, act_stride, nt, out, out_stride,
      [&](auto tokens, const std::byte* grp, const std::byte* const* acts, float* o) {
        constexpr int T = decltype(tokens)::value;
        const BlockQ8_K* x[T];
        const MinPairs* xp[T];
        for (int t = 0; t < T; ++t) {
          x[t] = reinterpret_cast<const BlockQ8_K*>(acts[t]);
          xp[t] = pairs.data() + token_index(acts[t], act, act_stride) * nb;
        }
        gemm_group<T>(nb, grp, x, xp, ctl, o, out_stride);
      });
}

}  // namespace pacer::ops
