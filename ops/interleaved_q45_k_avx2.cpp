// Q4_K and Q5_K interleaved by 16 rows (interleaved.h) x Q8_K activations on AVX2: the decode
// GEMVs and the prefill GEMMs of CPUs without AVX-512 VNNI (the VNNI kernels:
// interleaved_q45_k_avx512vnni.cpp). Q5_K is Q4_K with each quant's fifth bit OR-ed into bit 4 of
// its unpacked nibble (2 more ops per nibble vector; |pair| <= 2 x 31 x 128, 4 of them 31,744).
//
// A 32-byte half h of each 64-byte vector of the layout holds rows 8h..8h + 7 (dword i = row
// 8h + i), so each kernel step covers 8 rows. Per super-block of a half-group: the 12 packed
// scale bytes of the 8 rows unpack in 6 logic ops to sc_0..3, sc_4..7, m_0..3, m_4..7 (one byte
// per sub-block in each row's dword). Per 64-element chunk c and quad k (quant vectors 4k..4k+3):
// each vector splits into its low nibbles (sub-block 2c) and high nibbles (2c + 1), unsigned, and
// vpmaddubsw dots 4 quants of all 8 rows with one broadcast activation dword: 16-bit pair sums
// |2 x 15 x 128| = 3840, 4 of them added in int16 (15,360; the Q4_K GEMV adds both quads' 8:
// 30,720, q4_k_chunk_isums). One vpmaddwd against the sub-block's scale (spread to both words of
// each row's dword by vpshufb) then gives scale x sum in int32, and the mins term
// sum_j m_j * bsum_j is 4 vpmaddwd on (m_2k, m_2k+1) word pairs. Every integer is the VNNI
// kernel's (its Q4_K high-nibble sums come out 16x and are shifted back exactly), and the float
// steps are its steps (one conversion and FMA per term for 8 rows), so the two tiers
// give the same bits, and the GEMM (4 tokens per pass) equals the GEMV per token.
//
// Against the row-major AVX2 kernel (q4_k_avx2.cpp: per row and 64 quants a vpmaddubsw pair,
// scale shuffles, vpmaddwd, and a horizontal sum per row) it needs no horizontal sums and one
// scale multiply per 8 rows: on one dev-VM core a cold 5632x2048 Q4_K GEMV took 580-626 us
// against 716-1105, and TinyLlama Q4_K_M pp64 ran 2.0-2.4x (docs/fidelity.md, session 19).
#include "ops/matmul_simd_avx2.h"  // first: wraps <immintrin.h>

#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "ops/gemv_streams.h"
#include "ops/interleaved.h"
#include "ops/isa.h"
#include "ops/q8_k.h"
#include "ops/unroll.h"

namespace pacer::ops {
namespace {

using avx2::act_dword;

// Scales and mins of one super-block of rows 8h..8h + 7: byte j of dword i is row 8h + i's
// sc_j (sc_lo: j < 4, sc_hi: j - 4) or m_j (m_lo, m_hi), each in [0, 63].
struct Scales8 {
  __m256i sc_lo, sc_hi, m_lo, m_hi;
};

inline Scales8 unpack_scales(const std::byte* sb, int h) {
  const auto at = [&](int k) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(sb + 64 + 64 * k + 32 * h));
  };
  const __m256i u0 = at(0), u1 = at(1), u2 = at(2);
  const __m256i c3f = _mm256_set1_epi8(0x3F), c0f = _mm256_set1_epi8(0x0F),
                c30 = _mm256_set1_epi8(0x30);
  Scales8 s;
  s.sc_lo = _mm256_and_si256(u0, c3f);
  s.m_lo = _mm256_and_si256(u1, c3f);
  s.sc_hi =
      _mm256_or_si256(_mm256_and_si256(u2, c0f), _mm256_and_si256(_mm256_srli_epi32(u0, 2), c30));
  s.m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), c0f),
                           _mm256_and_si256(_mm256_srli_epi32(u1, 2), c30));
  return s;
}

using avx2::Controls;
using avx2::controls;

// The activation's sub-block sums of one super-block as (bsum_2k, bsum_2k+1) int16 pairs, one
// dword each. The GEMV packs them once per call rather than once per group and half (as the
// VNNI kernel, interleaved_q45_k_avx512vnni.cpp).
struct MinPairs {
  int32_t v[4];
};

inline MinPairs min_pairs(const BlockQ8_K& x) {
  MinPairs p{};
  for (int k = 0; k < 4; ++k) {
    const auto lo = static_cast<uint16_t>(x.bsums[4 * k] + x.bsums[4 * k + 1]);
    const auto hi = static_cast<uint16_t>(x.bsums[4 * k + 2] + x.bsums[4 * k + 3]);
    p.v[k] = static_cast<int32_t>(lo | static_cast<uint32_t>(hi) << 16);
  }
  return p;
}

// sum_j m_j * bsum_j for the 8 rows (int32 lanes), bsum_j the activation's sub-block j sum.
inline __m256i mins_sum(const Scales8& s, const Controls& ctl, const MinPairs& p) {
  __m256i m = _mm256_setzero_si256();
  for (int k = 0; k < 4; ++k) {
    const __m256i mk = _mm256_shuffle_epi8(k < 2 ? s.m_lo : s.m_hi, ctl.mins[k % 2]);
    m = _mm256_add_epi32(m, _mm256_madd_epi16(mk, _mm256_set1_epi32(p.v[k])));
  }
  return m;
}

// acc += d * d_x * isum - dmin * d_x * msum for rows 8h..8h + 7 of super-block sb.
inline __m256 accumulate(const std::byte* sb, int h, __m256i isum, __m256i msum, float dx,
                         __m256 acc) {
  const __m256 d = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sb + 16 * h)));
  const __m256 dmin =
      _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sb + 32 + 16 * h)));
  const __m256 vdx = _mm256_set1_ps(dx);
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, vdx), acc);
  return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, vdx), acc);
}

template <int Bits>
constexpr int64_t kBlockBytes = Bits == 4 ? kX16Q4KBlockBytes : kX16Q5KBlockBytes;

// Quant vectors 4k..4k + 3 of chunk c of super-block sb, half h (Q5_K: each quad after its vector
// of fifth bits), and the quad's fifth bits (zero for Q4_K).
template <int Bits>
inline const std::byte* quad_at(const std::byte* sb, int c, int k, int h) {
  if constexpr (Bits == 4) return sb + 256 + 512 * c + 256 * k + 32 * h;
  return sb + 256 + 640 * c + 320 * k + 64 + 32 * h;
}
template <int Bits>
inline __m256i quad_high_bits(const std::byte* sb, int c, int k, int h) {
  if constexpr (Bits == 5) {
    return _mm256_load_si256(
        reinterpret_cast<const __m256i*>(sb + 256 + 640 * c + 320 * k + 32 * h));
  }
  return _mm256_setzero_si256();
}

// h with bit `Bit` of every byte moved to bit 4 (other bits: anything; the caller masks).
template <int Bit>
inline __m256i bit_to_4(__m256i h) {
  if constexpr (Bit < 4) return _mm256_slli_epi16(h, 4 - Bit);
  if constexpr (Bit > 4) return _mm256_srli_epi16(h, Bit - 4);
  return h;
}

// Quant vector J of a quad as the unsigned quants of sub-blocks 2c (lo) and 2c + 1 (hi); Q5_K
// ORs in their fifth bits, bits 2J and 2J + 1 of the quad's h.
template <int Bits, int J>
inline void unpack_quants(__m256i q, __m256i h, __m256i* lo, __m256i* hi) {
  const __m256i c0f = _mm256_set1_epi8(0x0F);
  *lo = _mm256_and_si256(q, c0f);
  *hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), c0f);
  if constexpr (Bits == 5) {
    const __m256i c10 = _mm256_set1_epi8(0x10);
    *lo = _mm256_or_si256(*lo, _mm256_and_si256(bit_to_4<2 * J>(h), c10));
    *hi = _mm256_or_si256(*hi, _mm256_and_si256(bit_to_4<2 * J + 1>(h), c10));
  }
}

// The prefill GEMM's Q4_K step for 4 tokens: one 64-element chunk (sub-blocks 2c and 2c + 1,
// quads k = 0 and 1 at quads and quads + 256) of one half (8 rows), against the chunk's
// activations of tokens 0..3 (x0..x3: each token's 64 quants): isum[t] += sc_2c x (low-nibble
// dots) + sc_2c+1 x (high-nibble dots), sc: the half's 2 spread scale vectors. Each quant vector
// is unpacked once for the 4 tokens; the 8 vpmaddubsw pair sums of a sub-block add in int16 as in
// q4_k_chunk_isums (8 x 3840 = 30,720), in 8 registers for the 4 tokens. In assembly for the same
// reason (from intrinsics GCC spilled the unpacked vectors and the sums). Zen 4 guest without
// AVX-512, the GEMM of 16 groups x 2048 columns x 64 tokens (352 groups: from L3), old and new
// alternating in one process: 88.3-90.5 -> 98.1-101.2 GMAC/s (1.11-1.12x), the same outputs;
// TinyLlama Q4_K_M pp64 at 1 thread, the quieter 2 of 3 alternating rounds: 69-74 -> 82-84 t/s.
inline void q4_k_chunk_isums_4(const std::byte* quads, const int8_t* x0, const int8_t* x1,
                               const int8_t* x2, const int8_t* x3, const __m256i* sc,
                               __m256i* isum) {
  __m256i lo0, hi0, lo1, hi1, lo2, hi2, lo3, hi3, xl, xh, v, t1, t2;
  // clang-format off
  // Vector J of quad Q: its low nibbles in t1, its high ones in t2 (unsigned).
#define PACER_Q4K4_UNPACK(Q, J)                              \
  "vmovdqa " #Q "*256+" #J "*64(%[quads]), %[v]\n\t"         \
  "vpsrlw $4, %[v], %[t2]\n\t"                               \
  "vpand %[mask], %[v], %[t1]\n\t"                           \
  "vpand %[mask], %[t2], %[t2]\n\t"
  // Token T's activation dwords (quants 16Q + 4J.. and 32 + 16Q + 4J..) against them, added to its
  // int16 sums (FIRST: the chunk's first step, which starts them).
#define PACER_Q4K4_TOKEN(Q, J, T)                            \
  "vpbroadcastd " #Q "*16+" #J "*4(%[x" #T "]), %[xl]\n\t"   \
  "vpbroadcastd 32+" #Q "*16+" #J "*4(%[x" #T "]), %[xh]\n\t" \
  "vpmaddubsw %[xl], %[t1], %[v]\n\t"                        \
  "vpaddw %[v], %[lo" #T "], %[lo" #T "]\n\t"                \
  "vpmaddubsw %[xh], %[t2], %[v]\n\t"                        \
  "vpaddw %[v], %[hi" #T "], %[hi" #T "]\n\t"
#define PACER_Q4K4_FIRST(T)                                  \
  "vpbroadcastd 0(%[x" #T "]), %[xl]\n\t"                    \
  "vpbroadcastd 32(%[x" #T "]), %[xh]\n\t"                   \
  "vpmaddubsw %[xl], %[t1], %[lo" #T "]\n\t"                 \
  "vpmaddubsw %[xh], %[t2], %[hi" #T "]\n\t"
#define PACER_Q4K4_STEP(Q, J)                                \
  PACER_Q4K4_UNPACK(Q, J)                                    \
  PACER_Q4K4_TOKEN(Q, J, 0) PACER_Q4K4_TOKEN(Q, J, 1)        \
  PACER_Q4K4_TOKEN(Q, J, 2) PACER_Q4K4_TOKEN(Q, J, 3)
  // Token T's sums times the scales, added to isum[T].
#define PACER_Q4K4_SCALE(T)                                  \
  "vpmaddwd 0(%[sc]), %[lo" #T "], %[lo" #T "]\n\t"          \
  "vpmaddwd 32(%[sc]), %[hi" #T "], %[hi" #T "]\n\t"         \
  "vpaddd %[hi" #T "], %[lo" #T "], %[lo" #T "]\n\t"         \
  "vpaddd " #T "*32(%[isum]), %[lo" #T "], %[lo" #T "]\n\t"  \
  "vmovdqa %[lo" #T "], " #T "*32(%[isum])\n\t"
  asm volatile(PACER_Q4K4_UNPACK(0, 0)
      PACER_Q4K4_FIRST(0) PACER_Q4K4_FIRST(1) PACER_Q4K4_FIRST(2) PACER_Q4K4_FIRST(3)
      PACER_Q4K4_STEP(0, 1) PACER_Q4K4_STEP(0, 2) PACER_Q4K4_STEP(0, 3)
      PACER_Q4K4_STEP(1, 0) PACER_Q4K4_STEP(1, 1) PACER_Q4K4_STEP(1, 2) PACER_Q4K4_STEP(1, 3)
      PACER_Q4K4_SCALE(0) PACER_Q4K4_SCALE(1) PACER_Q4K4_SCALE(2) PACER_Q4K4_SCALE(3)
      : [lo0] "=&x"(lo0), [hi0] "=&x"(hi0), [lo1] "=&x"(lo1), [hi1] "=&x"(hi1),
        [lo2] "=&x"(lo2), [hi2] "=&x"(hi2), [lo3] "=&x"(lo3), [hi3] "=&x"(hi3),
        [xl] "=&x"(xl), [xh] "=&x"(xh), [v] "=&x"(v), [t1] "=&x"(t1), [t2] "=&x"(t2)
      : [quads] "r"(quads), [x0] "r"(x0), [x1] "r"(x1), [x2] "r"(x2), [x3] "r"(x3),
        [sc] "r"(sc), [isum] "r"(isum), [mask] "x"(_mm256_set1_epi8(0x0F))
      // What it reads (quads, x0..x3, sc) and writes (isum) as one clobber, and volatile as its
      // only effect is on memory: an "m" operand for each needs its own address register at -O0,
      // where GCC then has too few for this asm.
      : "memory");
#undef PACER_Q4K4_SCALE
#undef PACER_Q4K4_STEP
#undef PACER_Q4K4_FIRST
#undef PACER_Q4K4_TOKEN
#undef PACER_Q4K4_UNPACK
  // clang-format on
}

// Rows 8h..8h + 7 of super-block sb (x16 Q4_K / Q5_K layout) against tokens x[0..T) (their
// super-block b): isum[t] = sum_j sc_j * (sub-block j's integer dot). T == 1 unpacks each vector as
// it is used (the GEMV: no 8 weight vectors live next to its accumulators); T > 1 unpacks each quad
// once for all T tokens.
template <int Bits, int T>
inline void superblock_isum(const std::byte* sb, int h, const Scales8& s, const Controls& ctl,
                            const BlockQ8_K* const* x, int64_t b, __m256i* isum) {
  for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
  if constexpr (Bits == 4 && T == 4) {
    alignas(32) __m256i scale[8];  // sub-block j's spread scales
    for (int j = 0; j < 8; ++j) {
      scale[j] = _mm256_shuffle_epi8(j < 4 ? s.sc_lo : s.sc_hi, ctl.scale[j % 4]);
    }
    for (int c = 0; c < 4; ++c) {
      q4_k_chunk_isums_4(quad_at<4>(sb, c, 0, h), x[0][b].qs + 64 * c, x[1][b].qs + 64 * c,
                         x[2][b].qs + 64 * c, x[3][b].qs + 64 * c, scale + 2 * c, isum);
    }
    return;
  }
  for (int c = 0; c < 4; ++c) {
    const __m256i src = c < 2 ? s.sc_lo : s.sc_hi;
    const __m256i sc_lo = _mm256_shuffle_epi8(src, ctl.scale[(2 * c) % 4]);
    const __m256i sc_hi = _mm256_shuffle_epi8(src, ctl.scale[(2 * c + 1) % 4]);
    for (int k = 0; k < 2; ++k) {
      const std::byte* quad = quad_at<Bits>(sb, c, k, h);
      const __m256i hb = quad_high_bits<Bits>(sb, c, k, h);
      auto vec = [&](int j) {
        return _mm256_load_si256(reinterpret_cast<const __m256i*>(quad + 64 * j));
      };
      if constexpr (T == 1) {
        const int8_t* xq = x[0][b].qs + 64 * c + 16 * k;
        __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
        unroll<4>([&](auto j) {
          constexpr int J = decltype(j)::value;
          __m256i wl, wh;
          unpack_quants<Bits, J>(vec(J), hb, &wl, &wh);
          lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(wl, act_dword(xq, 4 * J)));
          hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(wh, act_dword(xq, 32 + 4 * J)));
        });
        isum[0] = _mm256_add_epi32(
            isum[0], _mm256_add_epi32(_mm256_madd_epi16(lo, sc_lo), _mm256_madd_epi16(hi, sc_hi)));
      } else {
        __m256i wl[4], wh[4];
        unroll<4>([&](auto j) {
          constexpr int J = decltype(j)::value;
          unpack_quants<Bits, J>(vec(J), hb, &wl[J], &wh[J]);
        });
        for (int t = 0; t < T; ++t) {
          const int8_t* xq = x[t][b].qs + 64 * c + 16 * k;
          __m256i lo = _mm256_maddubs_epi16(wl[0], act_dword(xq, 0));
          __m256i hi = _mm256_maddubs_epi16(wh[0], act_dword(xq, 32));
          for (int j = 1; j < 4; ++j) {
            lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(wl[j], act_dword(xq, 4 * j)));
            hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(wh[j], act_dword(xq, 32 + 4 * j)));
          }
          isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(lo, sc_lo),
                                                               _mm256_madd_epi16(hi, sc_hi)));
        }
      }
    }
  }
}

// Q4_K's step of superblock_isums_16 for one 64-element chunk (sub-blocks 2c and 2c + 1, quads
// k = 0 and 1 at quads and quads + 256, activations xq = the chunk's 64 quants) of both halves:
// acc_h += sc_2c x (low-nibble dots) + sc_2c+1 x (high-nibble dots), sc: the 4 spread scale
// vectors in the order (2c, h0), (2c, h1), (2c + 1, h0), (2c + 1, h1). The 8 vpmaddubsw pair sums
// of a sub-block (both quads) add in int16: 8 x 2 x 15 x 128 = 30,720 fits, so one vpmaddwd per
// sub-block and half. Written in assembly because GCC 12 reassociates these int16 sums into a
// wide tree from the same intrinsics (whatever their order), keeps ~20 partial sums live and
// spills them: that loop took ~2.8 cycles per 32-byte quant vector where these instructions in
// this order take ~2.0 (7.5 vector ops a vector at 4 a cycle). Zen 4 guest without AVX-512, the
// GEMV of 16 groups x 2048 columns from L2 (1024 groups from L3), old and new alternating in one
// process, 3 rounds: 32.2-32.5 -> 40.6-41.0 GB/s (1.25-1.27x), the same outputs bit for bit.
// Each step's 4 products (both halves) are added to the sums only after the next step's are
// issued, as Q4_0's GEMV step (interleaved_avx2.cpp: on Zen 1 a sum right behind its product took
// the one vpmaddubsw pipe's cycles), and the scale vpmaddwd and int32 adds follow in intrinsics
// (16 ymm registers hold the asm's operands). Zen 1 (EPYC 7001 guest), 64 rows x 2048 columns
// from L2, the same bits: 476 -> 441 cycles per 16 x 256 super-block (1.08x).
// (Q5_K's quad in assembly gained 3 %: its fifth bits add 6 ops a vector, and it is bound by
// their count, so it stays in intrinsics.)
template <bool kPrefetch>
inline void q4_k_chunk_isums(const std::byte* quads, const int8_t* xq, const __m256i* sc,
                             __m256i& acc0, __m256i& acc1, const std::byte* ahead) {
  __m256i lo0, hi0, lo1, hi1, xl, xh, v, p0, p1, p2, p3, p4, p5, p6, p7;
  // clang-format off
  // Activation dword J of quad Q for both sub-blocks (quants 16Q + 4J.. and 32 + 16Q + 4J..).
#define PACER_Q4K_ACT(Q, J)                                  \
  "vpbroadcastd " #Q "*16+" #J "*4(%[xq]), %[xl]\n\t"        \
  "vpbroadcastd 32+" #Q "*16+" #J "*4(%[xq]), %[xh]\n\t"
  // Vector J of quad Q, half H: its low nibbles x xl into PL, its high ones x xh into PH.
#define PACER_Q4K_PROD(Q, J, H, PL, PH)                      \
  "vmovdqa " #Q "*256+" #J "*64+" #H "*32(%[quads]), %[v]\n\t" \
  "vpsrlw $4, %[v], %[" #PH "]\n\t"                          \
  "vpand %[mask], %[v], %[" #PL "]\n\t"                      \
  "vpand %[mask], %[" #PH "], %[" #PH "]\n\t"                \
  "vpmaddubsw %[xl], %[" #PL "], %[" #PL "]\n\t"             \
  "vpmaddubsw %[xh], %[" #PH "], %[" #PH "]\n\t"
#define PACER_Q4K_STEP(Q, J, A, B, C, D)                     \
  PACER_Q4K_ACT(Q, J)                                        \
  PACER_Q4K_PROD(Q, J, 0, A, B) PACER_Q4K_PROD(Q, J, 1, C, D)
#define PACER_Q4K_SUM(A, B, C, D)                            \
  "vpaddw %[" #A "], %[lo0], %[lo0]\n\t"                     \
  "vpaddw %[" #B "], %[hi0], %[hi0]\n\t"                     \
  "vpaddw %[" #C "], %[lo1], %[lo1]\n\t"                     \
  "vpaddw %[" #D "], %[hi1], %[hi1]\n\t"
  // With kPrefetch, the 9 lines of the next super-block's chunk at `ahead`: 2 in the first step,
  // then one a step (a burst of a super-block's 36 at once cost more than it won on Zen 1).
#define PACER_Q4K_PF(N) "prefetcht0 " #N "*64(%[ahead])\n\t"
#define PACER_Q4K_NOPF(N) ""
#define PACER_Q4K_BODY(PF)                                                   \
  PACER_Q4K_STEP(0, 0, lo0, hi0, lo1, hi1) PF(0) PF(1)                       \
  PACER_Q4K_STEP(0, 1, p0, p1, p2, p3) PF(2)                                 \
  PACER_Q4K_STEP(0, 2, p4, p5, p6, p7) PACER_Q4K_SUM(p0, p1, p2, p3) PF(3)   \
  PACER_Q4K_STEP(0, 3, p0, p1, p2, p3) PACER_Q4K_SUM(p4, p5, p6, p7) PF(4)   \
  PACER_Q4K_STEP(1, 0, p4, p5, p6, p7) PACER_Q4K_SUM(p0, p1, p2, p3) PF(5)   \
  PACER_Q4K_STEP(1, 1, p0, p1, p2, p3) PACER_Q4K_SUM(p4, p5, p6, p7) PF(6)   \
  PACER_Q4K_STEP(1, 2, p4, p5, p6, p7) PACER_Q4K_SUM(p0, p1, p2, p3) PF(7)   \
  PACER_Q4K_STEP(1, 3, p0, p1, p2, p3) PACER_Q4K_SUM(p4, p5, p6, p7) PF(8)   \
  PACER_Q4K_SUM(p0, p1, p2, p3)
#define PACER_Q4K_OPERANDS                                                   \
      : [lo0] "=&x"(lo0), [hi0] "=&x"(hi0), [lo1] "=&x"(lo1), [hi1] "=&x"(hi1), \
        [xl] "=&x"(xl), [xh] "=&x"(xh), [v] "=&x"(v), [p0] "=&x"(p0), [p1] "=&x"(p1), \
        [p2] "=&x"(p2), [p3] "=&x"(p3), [p4] "=&x"(p4), [p5] "=&x"(p5), [p6] "=&x"(p6), \
        [p7] "=&x"(p7)                                                       \
      : [quads] "r"(quads), [xq] "r"(xq), [mask] "x"(_mm256_set1_epi8(0x0F)), \
        [ahead] "r"(ahead),                                                  \
        "m"(*reinterpret_cast<const std::byte(*)[512]>(quads)),             \
        "m"(*reinterpret_cast<const int8_t(*)[64]>(xq))
  if constexpr (kPrefetch) {
    asm(PACER_Q4K_BODY(PACER_Q4K_PF) PACER_Q4K_OPERANDS);
  } else {
    asm(PACER_Q4K_BODY(PACER_Q4K_NOPF) PACER_Q4K_OPERANDS);
  }
#undef PACER_Q4K_OPERANDS
#undef PACER_Q4K_BODY
#undef PACER_Q4K_NOPF
#undef PACER_Q4K_PF
#undef PACER_Q4K_SUM
#undef PACER_Q4K_STEP
#undef PACER_Q4K_PROD
#undef PACER_Q4K_ACT
  // clang-format on
  acc0 = _mm256_add_epi32(
      acc0, _mm256_add_epi32(_mm256_madd_epi16(lo0, sc[0]), _mm256_madd_epi16(hi0, sc[2])));
  acc1 = _mm256_add_epi32(
      acc1, _mm256_add_epi32(_mm256_madd_epi16(lo1, sc[1]), _mm256_madd_epi16(hi1, sc[3])));
}

// Both halves of super-block sb against one token's quants xqs (its super-block): isum[h] for rows
// 8h..8h + 7, the same integers as superblock_isum<Bits, 1> per half (exact sums, any order).
// Each 64-byte line is used whole, so each activation broadcast (and Q5_K's fifth-bit vector
// load) serves 16 rows, and the super-block is read once, in address order.
template <int Bits>
[[gnu::noinline, gnu::flatten]] void superblock_isums_16(const std::byte* sb, const Scales8* s,
                                                         const Controls& ctl, const int8_t* xqs,
                                                         __m256i* isum, const std::byte* ahead) {
  // Sub-block j's scale vector for half h at scale[j][h], spread once for the 4 chunks.
  alignas(32) __m256i scale[8][2];
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 8; ++j) {
      scale[j][h] = _mm256_shuffle_epi8(j < 4 ? s[h].sc_lo : s[h].sc_hi, ctl.scale[j % 4]);
    }
  }
  __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
  if constexpr (Bits == 4) {
    static_assert(kBlockBytes<4> == 4 * 9 * 64);  // 9 lines a chunk
    for (int c = 0; c < 4; ++c) {
      if (ahead) {
        q4_k_chunk_isums<true>(quad_at<4>(sb, c, 0, 0), xqs + 64 * c, scale[2 * c], acc0, acc1,
                               ahead + 9 * 64 * c);
      } else {
        q4_k_chunk_isums<false>(quad_at<4>(sb, c, 0, 0), xqs + 64 * c, scale[2 * c], acc0, acc1,
                                nullptr);
      }
    }
    isum[0] = acc0;
    isum[1] = acc1;
    return;
  }
  for (int c = 0; c < 4; ++c) {
    for (int k = 0; k < 2; ++k) {
      const std::byte* quad = quad_at<Bits>(sb, c, k, 0);
      const __m256i hb0 = quad_high_bits<Bits>(sb, c, k, 0);
      const __m256i hb1 = quad_high_bits<Bits>(sb, c, k, 1);
      const int8_t* xq = xqs + 64 * c + 16 * k;
      __m256i lo0 = _mm256_setzero_si256(), hi0 = lo0, lo1 = lo0, hi1 = lo0;
      unroll<4>([&](auto j) {
        constexpr int J = decltype(j)::value;
        // A sixteenth of the next super-block's lines every other step (2-3 lines).
        if (ahead && J % 2 == 0) prefetch_part(ahead, kBlockBytes<Bits>, 4 * c + 2 * k + J / 2, 16);
        const __m256i xl = act_dword(xq, 4 * J), xh = act_dword(xq, 32 + 4 * J);
        __m256i wl, wh;
        unpack_quants<Bits, J>(_mm256_load_si256(reinterpret_cast<const __m256i*>(quad + 64 * J)),
                               hb0, &wl, &wh);
        // Each sum held in order by an empty asm (in a flattened function, so the lambdas inline
        // and the sums stay in registers): GCC 12 otherwise regrouped them into a tree with
        // products on the stack. Zen 4, AVX2 tier, 256 rows x 2048 columns from L2, old and new
        // kernels in one process: 29.7-29.9 -> 30.4-30.6 GB/s (1.02-1.03x), the same bits.
        lo0 = _mm256_add_epi16(lo0, _mm256_maddubs_epi16(wl, xl));
        asm("" : "+x"(lo0));
        hi0 = _mm256_add_epi16(hi0, _mm256_maddubs_epi16(wh, xh));
        asm("" : "+x"(hi0));
        unpack_quants<Bits, J>(
            _mm256_load_si256(reinterpret_cast<const __m256i*>(quad + 64 * J + 32)), hb1, &wl, &wh);
        lo1 = _mm256_add_epi16(lo1, _mm256_maddubs_epi16(wl, xl));
        asm("" : "+x"(lo1));
        hi1 = _mm256_add_epi16(hi1, _mm256_maddubs_epi16(wh, xh));
        asm("" : "+x"(hi1));
      });
      acc0 = _mm256_add_epi32(acc0, _mm256_add_epi32(_mm256_madd_epi16(lo0, scale[2 * c][0]),
                                                     _mm256_madd_epi16(hi0, scale[2 * c + 1][0])));
      acc1 = _mm256_add_epi32(acc1, _mm256_add_epi32(_mm256_madd_epi16(lo1, scale[2 * c][1]),
                                                     _mm256_madd_epi16(hi1, scale[2 * c + 1][1])));
    }
  }
  isum[0] = acc0;
  isum[1] = acc1;
}

// The GEMV: S groups (far-apart streams) super-block by super-block, both halves of each in one
// pass (superblock_isums_16); the super-block one further on in each stream is prefetched when
// `prefetch`, spread over the super-block's steps: Q4_K a line a step of its assembly (2 in a
// chunk's first), Q5_K a 16th of the lines (2-3) every other step. Until session 59 the whole
// super-block went at once before its first step; on one Zen 1 core that burst of 36-44 lines
// cost more than the lines gained (the plan kept it off there: Q4_K_M 0.73x, Q5_K_M 0.69x).
// Spread, TinyLlama decode, old and new builds alternating (docs/fidelity.md, Session 59), against
// no prefetch: Q4_K_M 1.10-1.12x at 1 thread and 1.15-1.16x at 2 (a quarter per chunk: 1.04-1.09x
// and 1.04-1.07x), Q5_K_M 1.03-1.04x and 1.07-1.08x. Until session 43 one pass per half
// (superblock_isum<Bits, 1>); the one pass, on a Zen 4 guest without AVX-512, 128 rows x 2048
// columns from L2 (a harness calling the kernel alone, best of 3000 calls, old and new alternating,
// 3 rounds): Q5_K 24.0-28.7 -> 25.9-29.6 GB/s, Q4_K level (27.0-32.6 -> 28.4-32.4); TinyLlama
// Q4_K_M decode at 1 thread 1.05-1.06x (with the Q6_K GEMV's change, interleaved_q6_k_avx2.cpp).
template <int Bits, int S>
void gemv_groups(int64_t nb, const std::byte* const* group, const BlockQ8_K* x,
                 const MinPairs* pairs, const Controls& ctl, float* const* out, bool prefetch) {
  __m256 acc[S][2];
  for (int s = 0; s < S; ++s) acc[s][0] = acc[s][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    for (int s = 0; s < S; ++s) {
      const std::byte* sb = group[s] + b * kBlockBytes<Bits>;
      // The line of the factors first, so the stream is read in address order (the AVX-512
      // GEMV's factors(), why there); accumulate() finds it in L1.
      avx2::load_here(sb);
      const Scales8 sc[2] = {unpack_scales(sb, 0), unpack_scales(sb, 1)};
      __m256i isum[2];
      superblock_isums_16<Bits>(sb, sc, ctl, x[b].qs, isum,
                                prefetch ? sb + kBlockBytes<Bits> : nullptr);
      for (int h = 0; h < 2; ++h) {
        acc[s][h] = accumulate(sb, h, isum[h], mins_sum(sc[h], ctl, pairs[b]), x[b].d, acc[s][h]);
      }
    }
  }
  for (int s = 0; s < S; ++s) {
    _mm256_storeu_ps(out[s], acc[s][0]);
    _mm256_storeu_ps(out[s] + 8, acc[s][1]);
  }
}

// T tokens against both halves of one group; out: token 0's 16 outputs.
template <int Bits, int T>
void gemm_group(int64_t nb, const std::byte* grp, const BlockQ8_K* const* x,
                const MinPairs* const* pairs, const Controls& ctl, float* out, int64_t out_stride) {
  for (int h = 0; h < 2; ++h) {
    __m256 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const std::byte* sb = grp + b * kBlockBytes<Bits>;
      const Scales8 sc = unpack_scales(sb, h);
      __m256i isum[T];
      superblock_isum<Bits, T>(sb, h, sc, ctl, x, b, isum);
      for (int t = 0; t < T; ++t) {
        acc[t] = accumulate(sb, h, isum[t], mins_sum(sc, ctl, pairs[t][b]), x[t][b].d, acc[t]);
      }
    }
    for (int t = 0; t < T; ++t) _mm256_storeu_ps(out + t * out_stride + 8 * h, acc[t]);
  }
}

template <int Bits>
void gemv_x16(int64_t n, const std::byte* groups, int64_t n_groups, const std::byte* act,
              float* out) {
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
      groups, n_groups, nb * kBlockBytes<Bits>, out,
      [&](auto streams, const std::byte* const* group, float* const* outs) {
        gemv_groups<Bits, decltype(streams)::value>(
            nb, group, x, pairs, ctl, outs,
            x16_gemv_plan(Bits == 4 ? X16Gemv::Q4_K : X16Gemv::Q5_K).prefetch);
      });
}

// Which token an activation row of a GEMM call is (a call of one token may pass stride 0).
inline int64_t token_index(const std::byte* row, const std::byte* first, int64_t stride) {
  return stride == 0 ? 0 : (row - first) / stride;
}

template <int Bits>
void gemm_x16(int64_t n, const std::byte* groups, int64_t n_groups, const std::byte* act,
              int64_t act_stride, int64_t nt, float* out, int64_t out_stride) {
  const int64_t nb = n / 256;
  const Controls ctl = controls();
  // Every token's min pairs once per call, as the GEMV's (not once per group and half):
  // TinyLlama Q4_K_M pp64 with PACER_ISA=avx2 on one Zen 5 core, alternating builds, 3 rounds:
  // 1.26-1.28x.
  std::vector<MinPairs> pairs(static_cast<size_t>(nt * nb));
  for (int64_t t = 0; t < nt; ++t) {
    const auto* x = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride);
    for (int64_t b = 0; b < nb; ++b) pairs[t * nb + b] = min_pairs(x[b]);
  }
  x16_gemm_token_quads(
      groups, n_groups, nb * kBlockBytes<Bits>, act, act_stride, nt, out, out_stride,
      [&](auto tokens, const std::byte* grp, const std::byte* const* acts, float* o) {
        constexpr int T = decltype(tokens)::value;
        const BlockQ8_K* x[T];
        const MinPairs* xp[T];
        for (int t = 0; t < T; ++t) {
          x[t] = reinterpret_cast<const BlockQ8_K*>(acts[t]);
          xp[t] = pairs.data() + token_index(acts[t], act, act_stride) * nb;
        }
        gemm_group<Bits, T>(nb, grp, x, xp, ctl, o, out_stride);
      });
}

}  // namespace

void gemv_q4_Kx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out) {
  gemv_x16<4>(n, groups, n_groups, act, out);
}

void gemv_q5_Kx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, float* out) {
  gemv_x16<5>(n, groups, n_groups, act, out);
}

void gemm_q4_Kx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride) {
  gemm_x16<4>(n, groups, n_groups, act, act_stride, nt, out, out_stride);
}

void gemm_q5_Kx16_q8_K_avx2(int64_t n, const std::byte* groups, int64_t n_groups,
                            const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                            int64_t out_stride) {
  gemm_x16<5>(n, groups, n_groups, act, act_stride, nt, out, out_stride);
}

}  // namespace pacer::ops
