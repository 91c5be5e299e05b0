// IQ4_XS interleaved by 16 rows (interleaved.h) x Q8_K activations on AVX2: the decode GEMV and
// the prefill GEMM of CPUs without AVX-512 VNNI (the VNNI kernels:
// interleaved_iq4_xs_avx512vnni.cpp).
//
// Why: the row-major AVX2 kernel (iq4_xs_avx2.cpp) looks up, dots and sums one row at a time; on
// the Zen 5 dev VM with PACER_ISA=avx2 TinyLlama IQ4_XS decoded at 37 % of the roofline on one
// thread. Here a 32-byte half h of each 64-byte vector of the layout holds rows 8h..8h + 7 (dword
// i = row 8h + i), so one vpshufb turns 64 nibbles of 8 rows into their signed levels (-127..113)
// and one vpmaddubsw dots 4 of them per row with one broadcast activation dword, as |level| x
// sign(x, level): |pair| <= 2 x 127 x 127 = 32,258, exact in int16 because pacer's Q8_K quants are
// in [-127, 127] (q8_k.h; a -128 would lose its sign flip). The table + 128 that vpdpbusd reads on
// VNNI would reach pair sums of 2 x 241 x 127 and saturate. One vpmaddwd per vector widens to
// int32, and one vpmulld per sub-block scales its exact dot by sc_j (unpacked from scales_l and
// scales_h in 6 ops for 8 rows): the VNNI kernel's integers (|isum| < 2^31, iq4_xs.h), then its
// one conversion and FMA per super-block, so the two tiers give the same bits and the GEMM (4
// tokens per pass) equals the GEMV per token.
#include "ops/matmul_simd_avx2.h"  // first: wraps <immintrin.h>

#include <cstring>
#include <memory>

#include "ops/gemv_streams.h"
#include "ops/interleaved.h"
#include "ops/iq4_xs.h"
#include "ops/isa.h"
#include "ops/q8_k.h"
#include "ops/unroll.h"

namespace pacer::ops {
namespace {

using avx2::act_dword;

// The 16 levels, signed, in both 128-bit lanes (vpshufb indexes within a lane).
inline __m256i level_table() {
  return _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlLevels)));
}

// Row i's 4 dot terms of vector w (signed levels) against activation dword xj, summed in int32.
inline __m256i signed_quad_dot(__m256i w, __m256i xj) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(xj, w)),
                           _mm256_set1_epi16(1));
}

// The packed scales of rows 8h..8h + 7 of one super-block: scales_l (4 bytes) and scales_h
// (widened to 32 bits) in each row's dword.
struct Scales8 {
  __m256i l, h;
};

inline Scales8 load_scales(const std::byte* sb, int h) {
  return {
      _mm256_load_si256(reinterpret_cast<const __m256i*>(sb + 64 + 32 * h)),
      _mm256_cvtepu16_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(sb + 32 + 16 * h)))};
}

// sc_J = (nibble J of scales_l | bits 2J, 2J + 1 of scales_h << 4) - 32 of the 8 rows.
template <int J>
inline __m256i sub_block_scale(const Scales8& s) {
  const __m256i low = _mm256_and_si256(_mm256_srli_epi32(s.l, 4 * J), _mm256_set1_epi32(0x0F));
  __m256i top = s.h;  // bits 2J, 2J + 1 to bits 4, 5
  if constexpr (2 * J < 4) top = _mm256_slli_epi32(s.h, 4 - 2 * J);
  if constexpr (2 * J > 4) top = _mm256_srli_epi32(s.h, 2 * J - 4);
  return _mm256_sub_epi32(_mm256_or_si256(low, _mm256_and_si256(top, _mm256_set1_epi32(0x30))),
                          _mm256_set1_epi32(32));
}

// isum[t] = sum_j sc_j * (sub-block j's integer dot) of rows 8h..8h + 7 of the super-block at sb
// against tokens x[0..T) (their super-block b): each vector of level indices looked up once for
// all T tokens.
template <int T>
inline void superblock_isum(const std::byte* sb, int h, const BlockQ8_K* const* x, int64_t b,
                            __m256i* isum) {
  const __m256i table = level_table(), c0f = _mm256_set1_epi8(0x0F);
  const Scales8 scales = load_scales(sb, h);
  for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
  unroll<8>([&](auto jc) {
    constexpr int J = decltype(jc)::value;
    const std::byte* quants = sb + 128 + 256 * J + 32 * h;
    __m256i dot[T];
    for (int t = 0; t < T; ++t) dot[t] = _mm256_setzero_si256();
    unroll<4>([&](auto mc) {
      constexpr int M = decltype(mc)::value;
      const __m256i q = _mm256_load_si256(reinterpret_cast<const __m256i*>(quants + 64 * M));
      const __m256i wl = _mm256_shuffle_epi8(table, _mm256_and_si256(q, c0f));
      const __m256i wh = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), c0f));
      for (int t = 0; t < T; ++t) {
        const int8_t* xq = x[t][b].qs + 32 * J;
        dot[t] = _mm256_add_epi32(dot[t],
                                  _mm256_add_epi32(signed_quad_dot(wl, act_dword(xq, 4 * M)),
                                                   signed_quad_dot(wh, act_dword(xq, 16 + 4 * M))));
        // Each token's sum held in order, in a flattened GEMM: GCC 12 otherwise regrouped the
        // sums with products on the stack. Zen 4, AVX2 tier, 16 groups x 2048 columns, one
        // process, the same bits: 64 tokens 40.6 -> 49.1 GMAC/s (1.21x), 7 tokens 1.12-1.18x,
        // one token 1.09-1.12x. The pin alone: 1.07-1.10x; the flattening alone: level.
        asm("" : "+x"(dot[t]));
      }
    });
    const __m256i sc = sub_block_scale<J>(scales);
    for (int t = 0; t < T; ++t) isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(dot[t], sc));
  });
}

// The GEMV's step: isum[h] of both halves h of super-block sb against one token, whose
// magnitudes |x| (xabs, 256 bytes) were taken once per call: each product is |x| x sign(level, x)
// (vpmaddubsw's unsigned operand is then the activation, the same for 16 rows), so a level vector
// costs a vpsignb instead of a vpabsb and a vpsignb, and each activation dword is broadcast once
// for both halves of a line. The same integers as superblock_isum<1>, so the same bits.
[[gnu::always_inline]] inline void superblock_isum_16(const std::byte* sb, const int8_t* xq,
                                                      const int8_t* xabs, __m256i (&isum)[2]) {
  const __m256i table = level_table();
  const Scales8 scales[2] = {load_scales(sb, 0), load_scales(sb, 1)};
  isum[0] = isum[1] = _mm256_setzero_si256();
  unroll<8>([&](auto jc) {
    constexpr int J = decltype(jc)::value;
    __m256i dot[2];
    avx2::iq4_level_dots_16(sb + 128 + 256 * J, xq + 32 * J, xabs + 32 * J, table, dot[0], dot[1]);
    for (int h = 0; h < 2; ++h) {
      isum[h] =
          _mm256_add_epi32(isum[h], _mm256_mullo_epi32(dot[h], sub_block_scale<J>(scales[h])));
      // In order (GCC 12 otherwise regrouped the sums, 45 -> 17 stack stores in the GEMV): Zen 4,
      // AVX2 tier, 256 rows x 2048 columns from L2, old and new kernels in one process, 21.2-21.3
      // -> 21.6-21.7 GB/s (1.02x), the same bits.
      asm("" : "+x"(isum[h]));
    }
  });
}

// acc + d * d_x * isum for rows 8h..8h + 7 of super-block sb.
inline __m256 accumulate(const std::byte* sb, int h, __m256i isum, float dx, __m256 acc) {
  const __m256 d = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sb + 16 * h)));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, _mm256_set1_ps(dx)), acc);
}

// The GEMV: S groups (far-apart streams) super-block by super-block, both halves of each in one
// pass (superblock_isum_16); the super-block one further on in each stream is prefetched when
// `prefetch`. Against one pass per half (superblock_isum<1>), 5632x2048 cold on one Zen 4 core
// (AVX2 tier, BM_gemv best rep): 16.7 -> 17.3-17.6 GB/s; from L2, 17.3 -> 18.9.
template <int S>
[[gnu::flatten]] void gemv_groups(int64_t nb, const std::byte* const* group, const BlockQ8_K* x,
                                  const int8_t* xabs, float* const* out, bool prefetch) {
  __m256 acc[S][2];
  for (int s = 0; s < S; ++s) acc[s][0] = acc[s][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    for (int s = 0; s < S; ++s) {
      const std::byte* sb = group[s] + b * kX16IQ4XSBlockBytes;
      if (prefetch) prefetch_lines(sb + kX16IQ4XSBlockBytes, kX16IQ4XSBlockBytes);
      __m256i isum[2];
      superblock_isum_16(sb, x[b].qs, xabs + 256 * b, isum);
      for (int h = 0; h < 2; ++h) acc[s][h] = accumulate(sb, h, isum[h], x[b].d, acc[s][h]);
    }
  }
  for (int s = 0; s < S; ++s) {
    _mm256_storeu_ps(out[s], acc[s][0]);
    _mm256_storeu_ps(out[s] + 8, acc[s][1]);
  }
}

// T tokens against both halves of one group; out: token 0's 16 outputs.
template <int T>
[[gnu::flatten]] void gemm_group(int64_t nb, const std::byte* grp, const BlockQ8_K* const* x,
                                 float* out, int64_t out_stride) {
  for (int h = 0; h < 2; ++h) {
    __m256 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const std::byte* sb = grp + b * kX16IQ4XSBlockBytes;
      __m256i isum[T];
      superblock_isum<T>(sb, h, x, b, isum);
      for (int t = 0; t < T; ++t) acc[t] = accumulate(sb, h, isum[t], x[t][b].d, acc[t]);
    }
    for (int t = 0; t < T; ++t) _mm256_storeu_ps(out + t * out_stride + 8 * h, acc[t]);
  }
}

}  // namespace

void gemv_iq4_xsx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                              const std::byte* act, float* out) {
  const int64_t nb = n / 256;
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  // |x| once per call (rows up to 16384 columns on the stack).
  constexpr int64_t kStackBlocks = 64;
  alignas(32) int8_t stack_abs[kStackBlocks * 256];
  std::unique_ptr<int8_t[]> heap_abs;
  int8_t* xabs = stack_abs;
  if (nb > kStackBlocks) {
    heap_abs = std::make_unique<int8_t[]>(static_cast<size_t>(nb * 256));
    xabs = heap_abs.get();
  }
  for (int64_t b = 0; b < nb; ++b) {
    for (int i = 0; i < 256; i += 32) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + i));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(xabs + 256 * b + i), _mm256_abs_epi8(q));
    }
  }
  x16_gemv_stream_groups<kX16Avx2GemvStreams>(
      groups, n_groups, nb * kX16IQ4XSBlockBytes, out,
      [&](auto streams, const std::byte* const* group, float* const* outs) {
        gemv_groups<decltype(streams)::value>(nb, group, x, xabs, outs,
                                              gemv_software_prefetch(GemvKernelClass::Unpacking));
      });
}

void gemm_iq4_xsx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                              const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                              int64_t out_stride) {
  const int64_t nb = n / 256;
  x16_gemm_token_quads(
      groups, n_groups, nb * kX16IQ4XSBlockBytes, act, act_stride, nt, out, out_stride,
      [&](auto tokens, const std::byte* grp, const std::byte* const* acts, float* o) {
        constexpr int T = decltype(tokens)::value;
        const BlockQ8_K* x[T];
        for (int t = 0; t < T; ++t) {
          x[t] = reinterpret_cast<const BlockQ8_K*>(acts[t]);
        }
        gemm_group<T>(nb, grp, x, o, out_stride);
      });
}

}  // namespace pacer::ops
