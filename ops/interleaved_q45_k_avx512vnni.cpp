// Q4_K and Q5_K interleaved by 16 rows (interleaved.h) x Q8_K activations on AVX-512 VNNI: the
// decode GEMVs and the prefill GEMMs. Q5_K is Q4_K with a fifth bit per quant (q5_k.h): the same
// kernel, with the qh bit OR-ed into bit 4 of each unpacked nibble.
//
// Per super-block of a group (16 rows x 256 weights): the 12 packed scale bytes of the 16 rows sit
// in 3 vectors (dword i = row i), and 6 logic ops unpack them to sc_0..3, sc_4..7, m_0..3, m_4..7
// (one byte per sub-block in each row's dword). Per 64-element chunk c: 8 quant vectors, each
// split into low nibbles (sub-block 2c) and high nibbles (2c+1) and dotted by vpdpbusd with one
// broadcast activation dword (4 quants of all 16 rows, exact; Q4_K leaves the high nibbles in
// place, 16 x their value, see kHighTimes16), giving the 16 rows' sub-block sums;
// each is multiplied by its sub-block scale (vpshufb spreads byte j of every dword; vpmulld) and
// added to the super-block's integer sum. The mins term sum_j m_j * (bsum_j) is 4 vpdpwssd on
// (m_2k, m_2k+1) word pairs against the activation's sub-block sums. Then for all 16 rows one
// conversion and FMA per term. Integer bounds as in q4_k.h / q5_k.h: |sub-block sum| <= 32 * 31 *
// 128, |sum_j sc_j * .| <= 8 * 63 * 126,976 < 2^31, |mins term| <= 8 * 63 * 4064.
//
// Q5_K: each quad of quant vectors (4k..4k+3 of a chunk) follows a vector of their fifth bits,
// bits 2J and 2J + 1 of each byte for quant vector 4k + J (low and high nibble); one 16-bit shift
// brings a bit to bit 4 and one vpternlogd ORs it in: 4 more ops per quant vector. The fifth bits
// sit next to their quants rather than in one 512-byte block (the file's qh) because one Zen 4
// core streamed a cold 32000x2048 Q5_K at ~21 GB/s with the block, ~29 GB/s with the quads: the
// hardware prefetchers want each stream read strictly in order.
//
// Against the row-major AVX-512 kernel (q4_k_avx512_kernels.h: vpmaddubsw + scale vpermw +
// vpmaddwd per 64 quants of one row, ~8 weights per cycle on one Zen 4 core) this does ~3x less
// work per weight, so one core keeps up with DRAM.
#include "ops/interleaved.h"
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>

#include <cstring>
#include <memory>
#include <vector>

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

// The activation side of one Q8_K super-block: its quants, fp32 scale and the sub-block sums as
// broadcast (bsum_2k, bsum_2k+1) int16 pairs.
struct ActBlock {
  const int8_t* q;
  __m512 dx;
  __m512i bsum_pairs[4];
};

// The scalars of one activation super-block that every group's mins term and FMA take: the
// (bsum_2k, bsum_2k+1) int16 pairs as dwords and d. The GEMV packs them once per call (act_sums)
// rather than once per group and super-block, so each group's super-block takes 5 broadcast
// loads for them instead of ~30 scalar and 5 register-to-vector ops. One Zen 5 core (dev VM,
// alternating builds, best call): Q4_K 2048x2048 in cache ~60 -> ~74 GB/s, cold TinyLlama shapes
// ~35 -> ~37.5 GB/s; TinyLlama Q4_K_M tg32 1.04-1.09x at 1 thread, 1.06x at 2. Bit-identical:
// the same integers reach the same float steps.
struct alignas(32) ActSums {
  int32_t bsum_pairs[4];
  float d;
};

inline ActSums act_sums(const BlockQ8_K& x) {
  ActSums a{};
  for (int k = 0; k < 4; ++k) {
    const auto lo = static_cast<uint16_t>(x.bsums[4 * k] + x.bsums[4 * k + 1]);
    const auto hi = static_cast<uint16_t>(x.bsums[4 * k + 2] + x.bsums[4 * k + 3]);
    a.bsum_pairs[k] = static_cast<int32_t>(lo | static_cast<uint32_t>(hi) << 16);
  }
  a.d = x.d;
  return a;
}

inline ActBlock act_block(const ActSums& s, const int8_t* q) {
  ActBlock a;
  a.q = q;
  a.dx = _mm512_set1_ps(s.d);
  for (int k = 0; k < 4; ++k) a.bsum_pairs[k] = _mm512_set1_epi32(s.bsum_pairs[k]);
  return a;
}

inline __m512i act_dword(const int8_t* q, int64_t at) {
  int32_t v;
  std::memcpy(&v, q + at, 4);
  return _mm512_set1_epi32(v);
}

// The scales and mins of one super-block of 16 rows: byte j of dword i is row i's sc_j (sc_lo:
// j < 4, sc_hi: j - 4) or m_j (m_lo, m_hi), each in [0, 63].
struct Scales16 {
  __m512i sc_lo, sc_hi, m_lo, m_hi;
};

inline Scales16 unpack_scales(const std::byte* sb) {
  const __m512i u0 = _mm512_load_si512(sb + 64);
  const __m512i u1 = _mm512_load_si512(sb + 128);
  const __m512i u2 = _mm512_load_si512(sb + 192);
  const __m512i c3f = _mm512_set1_epi8(0x3F), c0f = _mm512_set1_epi8(0x0F),
                c30 = _mm512_set1_epi8(0x30);
  Scales16 s;
  s.sc_lo = _mm512_and_si512(u0, c3f);
  s.m_lo = _mm512_and_si512(u1, c3f);
  s.sc_hi =
      _mm512_or_si512(_mm512_and_si512(u2, c0f), _mm512_and_si512(_mm512_srli_epi32(u0, 2), c30));
  s.m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), c0f),
                           _mm512_and_si512(_mm512_srli_epi32(u1, 2), c30));
  return s;
}

// vpshufb controls (the same in every 128-bit lane), built once per call.
struct Controls {
  __m512i scale[4];  // byte j of each dword -> the dword (zero-extended)
  __m512i mins[2];   // bytes (2k, 2k+1) of each dword -> its low and high word (zero-extended)
};

inline Controls controls() {
  Controls c;
  for (int j = 0; j < 4; ++j) {
    c.scale[j] = _mm512_set4_epi32(
        static_cast<int32_t>(0x8080800Cu + j), static_cast<int32_t>(0x80808008u + j),
        static_cast<int32_t>(0x80808004u + j), static_cast<int32_t>(0x80808000u + j));
  }
  for (int k = 0; k < 2; ++k) {
    const auto pair = [k](uint32_t base) {
      return static_cast<int32_t>(0x80008000u | (base + 2 * k) | (base + 2 * k + 1) << 16);
    };
    c.mins[k] = _mm512_set4_epi32(pair(12), pair(8), pair(4), pair(0));
  }
  return c;
}

// sum_j m_j * bsum_j for the 16 rows (int32 lanes).
inline __m512i mins_sum(const Scales16& s, const Controls& ctl, const ActBlock& a) {
  __m512i m = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_shuffle_epi8(s.m_lo, ctl.mins[0]),
                                  a.bsum_pairs[0]);
  m = _mm512_dpwssd_epi32(m, _mm512_shuffle_epi8(s.m_lo, ctl.mins[1]), a.bsum_pairs[1]);
  m = _mm512_dpwssd_epi32(m, _mm512_shuffle_epi8(s.m_hi, ctl.mins[0]), a.bsum_pairs[2]);
  return _mm512_dpwssd_epi32(m, _mm512_shuffle_epi8(s.m_hi, ctl.mins[1]), a.bsum_pairs[3]);
}

// The scale of sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles) as int32 per row.
inline void chunk_scales(const Scales16& s, const Controls& ctl, int c, __m512i* lo, __m512i* hi) {
  const __m512i src = c < 2 ? s.sc_lo : s.sc_hi;
  *lo = _mm512_shuffle_epi8(src, ctl.scale[(2 * c) % 4]);
  *hi = _mm512_shuffle_epi8(src, ctl.scale[(2 * c + 1) % 4]);
}

// d * d_x and dmin * d_x of the 16 rows of super-block sb: its first line, read before the rest
// of the super-block (load_line_here), so each stream is read strictly in address order. Read
// at the end, where the FMAs take it, the line cost one Zen 4 core ~10 % of its cold streaming
// (alternating calls, cold 5632x2048 Q4_K, 1 thread: 29.5 -> 32.1 GB/s, a plain read 31.8).
struct Factors {
  __m512 d, dmin;
};

inline Factors factors(const std::byte* sb, __m512 dx) {
  const __m512i line = avx512::load_line_here(sb);
  return {_mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(line)), dx),
          _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(line, 1)), dx)};
}

// acc += d * d_x * isum - dmin * d_x * msum for the 16 rows of a super-block.
inline __m512 accumulate(const Factors& f, __m512i isum, __m512i msum, __m512 acc) {
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), f.d, acc);
  return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), f.dmin, acc);
}

template <int Bits>
constexpr int64_t kBlockBytes = Bits == 4 ? kX16Q4KBlockBytes : kX16Q5KBlockBytes;

// Q4_K leaves each high nibble in place (one AND where the shift took two ops), so its
// odd-sub-block sums come out 16 times too large, exactly; they are summed apart from the even
// ones and divided by 16 (an exact arithmetic shift) once per super-block. Bound: 16 * 4 * 63 *
// 61,440 < 2^31 (Q4_K quants <= 15: |sub-block sum| <= 32 * 15 * 128 = 61,440). Q5_K's fifth bit
// would land in bit 8, so Q5_K shifts as before.
template <int Bits>
constexpr bool kHighTimes16 = Bits == 4;

// The super-block's integer sum from its even- and odd-sub-block parts.
template <int Bits>
inline __m512i join_halves(__m512i even, __m512i odd) {
  if constexpr (kHighTimes16<Bits>) odd = _mm512_srai_epi32(odd, 4);
  return _mm512_add_epi32(even, odd);
}

// Quant vectors 4k..4k+3 of chunk c of super-block sb (Q5_K: each quad after its vector of fifth
// bits, so a super-block is read strictly in order).
template <int Bits>
inline const std::byte* quad_at(const std::byte* sb, int c, int k) {
  if constexpr (Bits == 4) return sb + 256 + 512 * c + 256 * k;
  return sb + 256 + 640 * c + 320 * k + 64;
}
// The quad's fifth bits (Q5_K; zero for Q4_K).
template <int Bits>
inline __m512i quad_high_bits(const std::byte* sb, int c, int k) {
  if constexpr (Bits == 5) return _mm512_load_si512(sb + 256 + 640 * c + 320 * k);
  return _mm512_setzero_si512();
}

// h with bit `Bit` of every byte moved to bit 4 (other bits: anything; the caller masks).
template <int Bit>
inline __m512i bit_to_4(__m512i h) {
  if constexpr (Bit < 4) return _mm512_slli_epi16(h, 4 - Bit);
  if constexpr (Bit > 4) return _mm512_srli_epi16(h, Bit - 4);
  return h;
}

// Quant vector J of a quad as the unsigned quants of sub-blocks 2c (lo) and 2c + 1 (hi); Q5_K
// ORs in their fifth bits, bits 2J and 2J + 1 of the quad's h.
template <int Bits, int J>
inline void unpack_quants(__m512i q, __m512i h, __m512i* lo, __m512i* hi) {
  const __m512i c0f = _mm512_set1_epi8(0x0F);
  *lo = _mm512_and_si512(q, c0f);
  if constexpr (Bits == 4) {
    *hi = _mm512_andnot_si512(c0f, q);  // 16 x the high nibble (kHighTimes16)
  } else {
    *hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), c0f);
  }
  if constexpr (Bits == 5) {
    const __m512i c10 = _mm512_set1_epi8(0x10);
    // 0xF8: a | (b & c)
    *lo = _mm512_ternarylogic_epi32(*lo, bit_to_4<2 * J>(h), c10, 0xF8);
    *hi = _mm512_ternarylogic_epi32(*hi, bit_to_4<2 * J + 1>(h), c10, 0xF8);
  }
}

// Chunk C (sub-blocks 2C, 2C + 1) of one super-block of one group against one activation block:
// adds sc_2C * isum_2C to *even and sc_2C+1 * isum_2C+1 to *odd (Q4_K: 16 times that), while
// prefetching the matching quarter of the super-block at `ahead` (nullptr: none).
template <int Bits, int C>
inline void chunk_isum(const std::byte* sb, const Scales16& s, const Controls& ctl,
                       const int8_t* xq, __m512i* even, __m512i* odd, const std::byte* ahead) {
  // Spread over the chunks rather than one burst per super-block, so the prefetches do not take
  // every line fill buffer at once (one Sapphire Rapids core, cold 5632x2048 Q4_K: +5-12 %).
  if (ahead) prefetch_lines(ahead + C * (kBlockBytes<Bits> / 4), kBlockBytes<Bits> / 4);
  // Two chains per nibble half (vpdpbusd latency ~5), joined before the scale multiply.
  __m512i lo[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  __m512i hi[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  for (int k = 0; k < 2; ++k) {
    const std::byte* quad = quad_at<Bits>(sb, C, k);
    const __m512i h = quad_high_bits<Bits>(sb, C, k);
    unroll<4>([&](auto j) {
      constexpr int J = decltype(j)::value;
      const int m = 4 * k + J;
      __m512i wl, wh;
      // Once (load_line_here): GCC folded the line into both the AND and the ANDN.
      unpack_quants<Bits, J>(avx512::load_line_here(quad + 64 * J), h, &wl, &wh);
      lo[J % 2] = _mm512_dpbusd_epi32(lo[J % 2], wl, act_dword(xq, 64 * C + 4 * m));
      hi[J % 2] = _mm512_dpbusd_epi32(hi[J % 2], wh, act_dword(xq, 64 * C + 32 + 4 * m));
    });
  }
  __m512i sc_lo, sc_hi;
  chunk_scales(s, ctl, C, &sc_lo, &sc_hi);
  *even = _mm512_add_epi32(*even, _mm512_mullo_epi32(_mm512_add_epi32(lo[0], lo[1]), sc_lo));
  *odd = _mm512_add_epi32(*odd, _mm512_mullo_epi32(_mm512_add_epi32(hi[0], hi[1]), sc_hi));
}

// S groups at once (S far-apart streams), super-block by super-block and within one chunk by
// chunk: chunk C of every stream, then chunk C + 1, so the loads in flight come from all S streams
// at once rather than from one stream's super-block (one Sapphire Rapids core, cold 5632x2048 and
// 2048x5632 Q4_K / Q5_K, 4 streams: 1.14-1.20x the super-block-at-a-time order; with the matrix
// in L2, 1.05x). Each stream's super-block prefetch_blocks further on is prefetched (0: none):
// one Sapphire Rapids core read cold Q4_K / Q5_K x16 matrices (TinyLlama's shapes, BM_gemv cold:1)
// at 9-10 / 8-9.5 GB/s without and 13-14.5 / 10-13 GB/s with one super-block; 2, or 4-8 more into
// L2, gave no more. The prefetch runs on past the group's last super-block into the next group
// of the stretch, which follows it in memory and is this stream's next tile
// (x16_gemv_stream_groups; the last stream's last prefetch lands past the matrix, and a prefetch
// does not fault): stopping at the group's end left each tile's first super-block to the hardware,
// 1/nb of the reads (cold, one core: 5632x2048 1.06x, 2048x5632 1.03x with it). (Q6_K's GEMV gained
// nothing from the same interleave while its unpack held it at ~24 GB/s in L2; with a cheaper
// unpack it now goes quarter super-block by quarter, 1.34-1.42x cold:
// interleaved_q6_k_avx512vnni.cpp. Half-chunks here, with the prefetch spread likewise: 1.03-1.05x,
// within the noise of that test, not taken.) kTurn: chunks of one stream per turn. Q5_K takes 2
// (half a super-block, 1408 bytes) where this CPU takes long runs (ops/isa.h): one Zen 4 core,
// 448000 x 2048 weights (1 GB) 1.10-1.12x from DRAM, 0.96x from L2; a whole super-block 1.07-1.08x.
// Q4_K stays at 1 there: halves 1.01-1.02x from DRAM and 0.94x from L2, whole super-blocks 1.02x
// and 0.80x.
template <int Bits, int S, int kTurn = 1>
void gemv_groups(int64_t nb, const std::byte* const* group, const BlockQ8_K* x, const ActSums* sums,
                 const Controls& ctl, float* const* out, int64_t prefetch_blocks,
                 int64_t page_touch) {
  // Every per-stream index is a compile-time constant (ops/unroll.h): with rolled loops over S,
  // GCC 12 kept the per-stream arrays on the stack (S = 2: 134 zmm stack references in the loop,
  // now 45). One Zen 5 core, BM_gemv q4_kx16 threads:1, 3 alternating rounds, best call: with
  // PACER_GEMV_STREAMS=4 (the Intel table's choice) cold 28.2-29.7 -> 34.7-41.4 GB/s and in cache
  // 66-72 -> 69-78; at 2 streams (AMD's) level.
  __m512 acc[S];
  unroll<S>([&](auto s) { acc[s] = _mm512_setzero_ps(); });
  for (int64_t b = 0; b < nb; ++b) {
    const ActBlock a = act_block(sums[b], x[b].qs);
    if (page_touch > 0) {
      unroll<S>([&](auto s) {
        touch_pages_ahead(group[s] + b * kBlockBytes<Bits>, kBlockBytes<Bits>, page_touch);
      });
    }
    const std::byte* sb[S];
    const std::byte* ahead[S];
    Factors fac[S];
    Scales16 sc[S];
    __m512i even[S], odd[S], msum[S];
    unroll<S>([&](auto s) {
      sb[s] = group[s] + b * kBlockBytes<Bits>;
      fac[s] = factors(sb[s], a.dx);
      ahead[s] = prefetch_blocks > 0 ? sb[s] + prefetch_blocks * kBlockBytes<Bits> : nullptr;
      sc[s] = unpack_scales(sb[s]);
      msum[s] = mins_sum(sc[s], ctl, a);
      even[s] = odd[s] = _mm512_setzero_si512();
    });
    // Chunks [kTurn * u, kTurn * (u + 1)) of every stream, then the next kTurn.
    unroll<4 / kTurn>([&](auto u) {
      unroll<S>([&](auto s) {
        unroll<kTurn>([&](auto c) {
          constexpr int C = kTurn * decltype(u)::value + decltype(c)::value;
          chunk_isum<Bits, C>(sb[s], sc[s], ctl, a.q, &even[s], &odd[s], ahead[s]);
        });
      });
    });
    unroll<S>([&](auto s) {
      acc[s] = accumulate(fac[s], join_halves<Bits>(even[s], odd[s]), msum[s], acc[s]);
    });
  }
  unroll<S>([&](auto s) { _mm512_storeu_ps(out[s], acc[s]); });
}

// T tokens against one group, chunk C of super-block sb: the quants are unpacked once for all T.
template <int Bits, int T, int C>
inline void gemm_chunk(const std::byte* sb, const Scales16& sc, const Controls& ctl,
                       const BlockQ8_K* const* x, int64_t b, __m512i* even, __m512i* odd) {
  __m512i lo[T], hi[T];
  for (int t = 0; t < T; ++t) lo[t] = hi[t] = _mm512_setzero_si512();
  for (int k = 0; k < 2; ++k) {
    const std::byte* quad = quad_at<Bits>(sb, C, k);
    const __m512i h = quad_high_bits<Bits>(sb, C, k);
    __m512i wl[4], wh[4];
    unroll<4>([&](auto j) {
      constexpr int J = decltype(j)::value;
      unpack_quants<Bits, J>(_mm512_load_si512(quad + 64 * J), h, &wl[J], &wh[J]);
    });
    for (int t = 0; t < T; ++t) {
      const int8_t* xq = x[t][b].qs + 64 * C + 16 * k;
      for (int m = 0; m < 4; ++m) {
        lo[t] = _mm512_dpbusd_epi32(lo[t], wl[m], act_dword(xq, 4 * m));
        hi[t] = _mm512_dpbusd_epi32(hi[t], wh[m], act_dword(xq, 32 + 4 * m));
      }
    }
  }
  __m512i sc_lo, sc_hi;
  chunk_scales(sc, ctl, C, &sc_lo, &sc_hi);
  for (int t = 0; t < T; ++t) {
    even[t] = _mm512_add_epi32(even[t], _mm512_mullo_epi32(lo[t], sc_lo));
    odd[t] = _mm512_add_epi32(odd[t], _mm512_mullo_epi32(hi[t], sc_hi));
  }
}

template <int Bits, int T>
void gemm_group(int64_t nb, const std::byte* grp, const BlockQ8_K* const* x,
                const ActSums* const* sums, const Controls& ctl, float* out, int64_t out_stride) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* sb = grp + b * kBlockBytes<Bits>;
    const Scales16 sc = unpack_scales(sb);
    __m512i even[T], odd[T];
    for (int t = 0; t < T; ++t) even[t] = odd[t] = _mm512_setzero_si512();
    gemm_chunk<Bits, T, 0>(sb, sc, ctl, x, b, even, odd);
    gemm_chunk<Bits, T, 1>(sb, sc, ctl, x, b, even, odd);
    gemm_chunk<Bits, T, 2>(sb, sc, ctl, x, b, even, odd);
    gemm_chunk<Bits, T, 3>(sb, sc, ctl, x, b, even, odd);
    for (int t = 0; t < T; ++t) {
      const ActBlock a = act_block(sums[t][b], x[t][b].qs);
      acc[t] = accumulate(factors(sb, a.dx), join_halves<Bits>(even[t], odd[t]),
                          mins_sum(sc, ctl, a), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + t * out_stride, acc[t]);
}

// The entry points of one type: its group size, the activation cast and the shared drivers.
template <int Bits>
void gemv_x16(int64_t n, const std::byte* groups, int64_t n_groups, const std::byte* act,
              float* out) {
  const int64_t nb = n / 256;
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  const Controls ctl = controls();
  // Rows up to 16384 columns pack their activation sums on the stack.
  constexpr int64_t kStackBlocks = 64;
  ActSums stack_sums[kStackBlocks];
  std::unique_ptr<ActSums[]> heap_sums;
  ActSums* sums = stack_sums;
  if (nb > kStackBlocks) {
    heap_sums = std::make_unique<ActSums[]>(static_cast<size_t>(nb));
    sums = heap_sums.get();
  }
  for (int64_t b = 0; b < nb; ++b) sums[b] = act_sums(x[b]);
  const X16GemvPlan plan = x16_gemv_plan(Bits == 4 ? X16Gemv::Q4_K : X16Gemv::Q5_K);
  // Q5_K in halves of a super-block where this CPU takes long runs (ops/isa.h
  // x16_gemv_long_runs); Q4_K by chunks either way.
  const bool long_runs = x16_gemv_long_runs();
  x16_gemv_stream_groups(
      plan.streams, groups, n_groups, nb * kBlockBytes<Bits>, out,
      [&](auto streams, const std::byte* const* group, float* const* outs) {
        constexpr int kS = decltype(streams)::value;
        const int64_t ahead = plan.prefetch ? 1 : 0;
        if (Bits == 5 && long_runs) {
          gemv_groups<Bits, kS, 2>(nb, group, x, sums, ctl, outs, ahead, plan.page_touch);
        } else {
          gemv_groups<Bits, kS>(nb, group, x, sums, ctl, outs, ahead, plan.page_touch);
        }
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
  // Every token's activation sums once per call, as the GEMV's (not once per group): TinyLlama
  // Q4_K_M pp64 on the Zen 5 VM, alternating builds, 3 rounds: 1.20-1.24x at 1 thread,
  // 1.10-1.16x at 2. (Q6_K's group offsets the same way were level: not taken.)
  std::vector<ActSums> sums(static_cast<size_t>(nt * nb));
  for (int64_t t = 0; t < nt; ++t) {
    const auto* x = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride);
    for (int64_t b = 0; b < nb; ++b) sums[t * nb + b] = act_sums(x[b]);
  }
  x16_gemm_token_quads(
      groups, n_groups, nb * kBlockBytes<Bits>, act, act_stride, nt, out, out_stride,
      [&](auto tokens, const std::byte* grp, const std::byte* const* acts, float* o) {
        constexpr int T = decltype(tokens)::value;
        const BlockQ8_K* x[T];
        const ActSums* xs[T];
        for (int t = 0; t < T; ++t) {
          x[t] = reinterpret_cast<const BlockQ8_K*>(acts[t]);
          xs[t] = sums.data() + token_index(acts[t], act, act_stride) * nb;
        }
        gemm_group<Bits, T>(nb, grp, x, xs, ctl, o, out_stride);
      });
}

}  // namespace

void gemv_q4_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out) {
  gemv_x16<4>(n, groups, n_groups, act, out);
}

void gemv_q5_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out) {
  gemv_x16<5>(n, groups, n_groups, act, out);
}

void gemm_q4_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride) {
  gemm_x16<4>(n, groups, n_groups, act, act_stride, nt, out, out_stride);
}

void gemm_q5_Kx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride) {
  gemm_x16<5>(n, groups, n_groups, act, act_stride, nt, out, out_stride);
}

}  // namespace pacer::ops
