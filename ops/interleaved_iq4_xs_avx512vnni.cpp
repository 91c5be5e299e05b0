// IQ4_XS interleaved by 16 rows (interleaved.h) x Q8_K activations on AVX-512 VNNI: the decode
// GEMV and the prefill GEMM (passes of up to 4 tokens, each token's result bit for bit the GEMV's).
//
// Why: the row-major AVX-512 kernel (iq4_xs_avx512.cpp) looks up and dots one row at a time;
// with 16 rows interleaved one vpshufb turns 64 nibbles of 16 rows into levels and one vpdpbusd
// dots 4 of them per row, as the IQ4_NL GEMV (interleaved_avx512vnni.cpp). The table holds the
// levels + 128 (unsigned, as vpdpbusd takes them), so each sub-block's accumulator starts at
// -128 * (its activation sum) and ends at its exact dot (|dot| <= 32 * 127 * 128), which one
// vpmulld scales by sc_j (unpacked from scales_l / scales_h in 5 ops per sub-block, all 16 rows)
// into the super-block's sum: |isum| <= 8 * 32 * 520,192 < 2^31, as iq4_xs.h's. Then one FMA per
// super-block for all 16 rows. The loops over super-blocks, streams and tokens are the Q6_K
// GEMV's (interleaved_kquant_loops_avx512.h), a quarter being two sub-blocks.
#include "ops/interleaved.h"
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>

#include <cstring>

#include "ops/interleaved_kquant_loops_avx512.h"
#include "ops/iq4_xs.h"
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

// Where a super-block's quants start: after d, scales_h and scales_l (interleaved.h).
constexpr int64_t kQuantsAt = 128;

// The 16 levels + 128, unsigned.
struct alignas(16) LevelTable {
  uint8_t v[16];
};
constexpr LevelTable kLevelsPlus128 = [] {
  LevelTable t{};
  for (int k = 0; k < 16; ++k) t.v[k] = static_cast<uint8_t>(kIq4NlLevels[k] + 128);
  return t;
}();

// That table in every 128-bit lane (vpshufb indexes within a lane).
inline __m512i level_table() {
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kLevelsPlus128.v)));
}

// The starting value of sub-block j's accumulator: -128 * (bsums[2j] + bsums[2j + 1]).
struct SubBlockOffsets {
  alignas(32) int32_t v[8];
};

inline void sub_block_offsets(const BlockQ8_K& x, SubBlockOffsets& o) {
  const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums));
  _mm256_store_si256(reinterpret_cast<__m256i*>(o.v),
                     _mm256_madd_epi16(bsums, _mm256_set1_epi16(-128)));
}

// sc_J = (nibble J of scales_l | bits 2J, 2J + 1 of scales_h << 4) - 32 of the 16 rows.
template <int J>
inline __m512i sub_block_scale(__m512i scales_l, __m512i scales_h) {
  const __m512i low = _mm512_srli_epi32(scales_l, 4 * J);
  __m512i top = scales_h;  // bits 2J, 2J + 1 to bits 4, 5
  if constexpr (2 * J < 4) top = _mm512_slli_epi32(scales_h, 4 - 2 * J);
  if constexpr (2 * J > 4) top = _mm512_srli_epi32(scales_h, 2 * J - 4);
  // 0xE4: (low & c) | (top & ~c) with c = 0x0F in every byte
  const __m512i both = _mm512_ternarylogic_epi32(low, top, _mm512_set1_epi8(0x0F), 0xE4);
  return _mm512_sub_epi32(_mm512_and_si512(both, _mm512_set1_epi32(0x3F)), _mm512_set1_epi32(32));
}

// sum[t] += sc_j * dot_j over sub-blocks j = 4h + 2Q, 4h + 2Q + 1 of the super-block at sb,
// against T activation blocks: each vector of level indices unpacked once for all T, two
// accumulators per sub-block and token (low and high nibbles: two dependency chains).
template <int T, int Q>
inline void quarter_sums(const std::byte* sb, int h, const BlockQ8_K* const* x,
                         const SubBlockOffsets* const* off, __m512i* sum) {
  const __m512i table = level_table();
  const __m512i c0f = _mm512_set1_epi8(0x0F);
  const __m512i scales_l = _mm512_load_si512(sb + 64);
  const __m512i scales_h =
      _mm512_cvtepu16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(sb + 32)));
  unroll<2>([&](auto jc) {
    constexpr int JQ = 2 * Q + decltype(jc)::value;  // the sub-block within half h
    const int j = 4 * h + JQ;
    const std::byte* quants = sb + kQuantsAt + 256 * j;
    __m512i lo[T], hi[T];
    for (int t = 0; t < T; ++t) {
      lo[t] = _mm512_set1_epi32(off[t]->v[j]);
      hi[t] = _mm512_setzero_si512();
    }
    unroll<4>([&](auto mc) {
      constexpr int M = decltype(mc)::value;
      const __m512i q = _mm512_load_si512(quants + 64 * M);
      const __m512i wl = _mm512_shuffle_epi8(table, _mm512_and_si512(q, c0f));
      const __m512i wh = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(q, 4), c0f));
      for (int t = 0; t < T; ++t) {
        lo[t] = _mm512_dpbusd_epi32(lo[t], wl, act_dword(x[t]->qs, 32 * j + 4 * M));
        hi[t] = _mm512_dpbusd_epi32(hi[t], wh, act_dword(x[t]->qs, 32 * j + 16 + 4 * M));
      }
    });
    const __m512i sc = h == 0 ? sub_block_scale<JQ>(scales_l, scales_h)
                              : sub_block_scale<4 + JQ>(scales_l, scales_h);
    for (int t = 0; t < T; ++t) {
      sum[t] = _mm512_add_epi32(sum[t], _mm512_mullo_epi32(_mm512_add_epi32(lo[t], hi[t]), sc));
    }
  });
}

// The super-block arithmetic above, for the shared loops (interleaved_kquant_loops_avx512.h).
struct IQ4XSLayout : kquant_x16::OneSum<IQ4XSLayout> {
  static constexpr int64_t kBlockStep = kX16IQ4XSBlockBytes;
  // With long runs, a super-block a turn: one Zen 4 core, 0.9 GB cold, 1.14-1.15x (ops/isa.h).
  static constexpr bool kWholeTurnsOnLongRuns = true;
  // d, scales_h and scales_l read in order first (kLeadBytes at interleaved_kquant_loops_avx512.h).
  static constexpr int64_t kLeadBytes = kQuantsAt;
  static const std::byte* block_at(const std::byte* grp, int64_t b) {
    return grp + b * kX16IQ4XSBlockBytes;
  }
  static const std::byte* d_at(const std::byte* grp, int64_t b) { return block_at(grp, b); }
  using Offsets = SubBlockOffsets;
  static void offsets(const BlockQ8_K& x, Offsets& o) { sub_block_offsets(x, o); }
  template <int T, int Q>
  static void quarter_isums(const std::byte* blk, int h, const BlockQ8_K* const* x,
                            const Offsets* const* off, __m512i* sum) {
    quarter_sums<T, Q>(blk, h, x, off, sum);
  }
};

}  // namespace

void gemv_iq4_xsx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                    const std::byte* act, float* out) {
  kquant_x16::gemv<IQ4XSLayout>(WeightType::IQ4_XS, n, groups, n_groups, act, out);
}

void gemm_iq4_xsx16_q8_K_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                    const std::byte* act, int64_t act_stride, int64_t nt,
                                    float* out, int64_t out_stride) {
  kquant_x16::gemm<IQ4XSLayout>(WeightType::IQ4_XS, n, groups, n_groups, act, act_stride, nt, out,
                                out_stride);
}

}  // namespace pacer::ops
