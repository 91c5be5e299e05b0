#pragma once
// Q4_0 x act-Q8 on AVX-512 (BW/VL/DQ), with and without VNNI.
//
// Four weight rows share one zmm ("quad"): 128-bit lane g holds the 16 quant bytes of row g's
// block b. AND 0x0F gives the low nibbles (elements 0..15 of each row), a 16-bit shift right by 4
// and AND the high nibbles (elements 16..31), and each is dotted with the activation half it
// multiplies, broadcast to all four lanes:
//   dot lanes of lane g = sum_j lo_j * x_j + sum_j hi_j * x_{16+j}     (row g's block dot + bias)
// Nibbles are unsigned bytes (0..15) and activations signed (|x| <= 127): vpdpbusd's form as is
// (VNNI), or vpmaddubsw's (pair sums <= 2 * 15 * 127 = 3810, two added <= 7620 < 32767, no
// saturation). The nibble offset of 8 comes off exactly: the accumulator starts at -8 * sum_b(x)
// in the first dword of each lane. One int->float conversion and one FMA then serve 4 rows, with
// d_w * d_x for the 4 rows expanded from one 16-byte load of a per-strip scale table.
//
// Against two rows per zmm (what Q8_0 does), this saves the per-pair scale merge and a shift per
// row-block: ~1.6 instead of ~2.5 core cycles per row-block in L1 on Sapphire Rapids.
//
// The kernels shared by q4_0_avx512.cpp (AVX-512 F/BW/VL/DQ) and q4_0_avx512vnni.cpp
// (+VNNI): each includes this header and is compiled with exactly its own tier's flags, so the
// plain AVX-512 entry points can hold no VNNI instruction (tests/check_isa_tiers.sh). The
// anonymous namespace gives each of the two TUs its own copy, built for that TU's tier.
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>
#include "ops/q4_0.h"
#include "ops/q8_0.h"
#include "ops/repacked_gemm_avx512.h"

#include <type_traits>

namespace pacer::ops {
namespace {

// Quads per tile (8 rows): enough rows to amortize the per-block activation loads and bias.
constexpr int kQuadsPerTile = 2;
// Tokens per GEMM tile: each unpacked weight block serves 4 tokens (8 accumulators).
constexpr int kTokensPerTile = 4;

// Lane pattern that expands 4 floats to 4 copies each: [s0 x4, s1 x4, s2 x4, s3 x4].
inline __m512i expand4_index(int first) {
  return _mm512_add_epi32(_mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0),
                          _mm512_set1_epi32(first));
}

// The quant bytes of block b of four rows, one row per 128-bit lane.
inline __m512i load_quad_qs(const std::byte* const* rows, int64_t b) {
  auto qs = [&](int g) {
    const auto* blk = reinterpret_cast<const BlockQ4_0*>(rows[g]) + b;
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs));
  };
  __m512i v = _mm512_broadcast_i32x4(qs(0));
  v = _mm512_mask_broadcast_i32x4(v, 0x00F0, qs(1));
  v = _mm512_mask_broadcast_i32x4(v, 0x0F00, qs(2));
  return _mm512_mask_broadcast_i32x4(v, 0xF000, qs(3));
}

// Block dot of four rows (see the file comment); `bias` = -8 * sum(x) in dword 0 of each lane.
template <bool kVnni>
inline __m512i quad_block_dot(__m512i qs, __m512i x_lo, __m512i x_hi, __m512i bias) {
  const __m512i mask = _mm512_set1_epi8(0x0F);
  const __m512i lo = _mm512_and_si512(qs, mask);
  const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(qs, 4), mask);
  if constexpr (kVnni) {
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(bias, lo, x_lo), hi, x_hi);
  } else {
    const __m512i pairs =
        _mm512_add_epi16(_mm512_maddubs_epi16(lo, x_lo), _mm512_maddubs_epi16(hi, x_hi));
    return _mm512_add_epi32(_mm512_madd_epi16(pairs, _mm512_set1_epi16(1)), bias);
  }
}

// 4Q rows x T tokens: outs[t * 4Q + i] = dot of rows[i] with acts[t] (duplicate rows allowed,
// the caller discards their outputs). Each (row, token) pair goes through the same operations
// whatever T is, so the GEMM (T > 1) is bit-identical to T = 1 calls; a larger T only lets one
// load and unpack of a weight block serve T tokens. Each block of each row also prefetches the
// byte `prefetch_offset` further on: the same block of the next tile's rows. Rows are only
// ~1-6 KiB, too short for the hardware prefetcher to ramp up on 8 interleaved streams; a
// whole-tile lookahead doubled the DRAM streaming rate (5.8 -> 11 GB/s on one Sapphire Rapids
// core) where a fixed 576-byte lookahead within the row gained ~25%.
template <bool kVnni, int Q, int T>
void q4_0_tile(int64_t n, const std::byte* const* rows, const std::byte* const* acts,
               float* const* outs, int64_t prefetch_offset) {
  using avx512::kScaleStrip;
  ActQ8Row a[T];
  for (int t = 0; t < T; ++t) a[t] = act_q8_row(acts[t], n);
  const int64_t nb = n / kQ4_0BlockElems;
  __m512 acc[T][Q];
  for (int t = 0; t < T; ++t) {
    for (int q = 0; q < Q; ++q) acc[t][q] = _mm512_setzero_ps();
  }
  // Per strip: scales[t][q][k][g] = d_w(row 4q+g, block b0+k) * d_x(token t, block b0+k); the
  // raw fp16 scales are gathered one strip ahead in [q][k][g] order (double-buffered, see
  // gather_strip_d16).
  alignas(64) float scales[T][Q][kScaleStrip][4];
  alignas(64) uint16_t d16[2][Q][kScaleStrip][4] = {};
  auto gather = [&](int buf, int64_t b0, int64_t count) {
    for (int q = 0; q < Q; ++q) {
      for (int g = 0; g < 4; ++g) {
        avx512::gather_strip_d16<BlockQ4_0>(rows[4 * q + g], b0, count, &d16[buf][q][0][g], 4);
      }
    }
  };
  gather(0, 0, nb < kScaleStrip ? nb : kScaleStrip);
  for (int64_t b0 = 0, s = 0; b0 < nb; b0 += kScaleStrip, s ^= 1) {
    const int64_t count = nb - b0 < kScaleStrip ? nb - b0 : kScaleStrip;
    for (int t = 0; t < T; ++t) {
      const __m512 dx = _mm512_maskz_loadu_ps(avx512::first_lanes16(count), a[t].d + b0);
      for (int k4 = 0; k4 < count; k4 += 4) {  // 4 blocks x 4 rows per vector
        const __m512 dx4 = _mm512_permutexvar_ps(expand4_index(k4), dx);
        for (int q = 0; q < Q; ++q) {
          const __m512 dw = _mm512_cvtph_ps(
              _mm256_load_si256(reinterpret_cast<const __m256i*>(&d16[s][q][k4][0])));
          _mm512_store_ps(&scales[t][q][k4][0], _mm512_mul_ps(dw, dx4));
        }
      }
    }
    const int64_t next = nb - b0 - count < kScaleStrip ? nb - b0 - count : kScaleStrip;
    gather(static_cast<int>(s ^ 1), b0 + count, next);
    for (int64_t k = 0; k < count; ++k) {
      const int64_t b = b0 + k;
      __m512i qs[Q];
      for (int q = 0; q < Q; ++q) {
        for (int g = 0; g < 4; ++g) {
          const auto* here = reinterpret_cast<const BlockQ4_0*>(rows[4 * q + g]) + b;
          _mm_prefetch(reinterpret_cast<const char*>(here) + prefetch_offset, _MM_HINT_T0);
        }
        qs[q] = load_quad_qs(rows + 4 * q, b);
      }
      for (int t = 0; t < T; ++t) {
        const __m512i x_lo = _mm512_broadcast_i32x4(
            _mm_load_si128(reinterpret_cast<const __m128i*>(a[t].q + 32 * b)));
        const __m512i x_hi = _mm512_broadcast_i32x4(
            _mm_load_si128(reinterpret_cast<const __m128i*>(a[t].q + 32 * b + 16)));
        const __m512i bias = _mm512_maskz_set1_epi32(0x1111, -8 * a[t].sum[b]);
        for (int q = 0; q < Q; ++q) {
          const __m512i dot = quad_block_dot<kVnni>(qs[q], x_lo, x_hi, bias);
          const __m512 sc = _mm512_permutexvar_ps(
              expand4_index(0), _mm512_castps128_ps512(_mm_load_ps(&scales[t][q][k][0])));
          acc[t][q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sc, acc[t][q]);
        }
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    for (int q = 0; q < Q; ++q) {
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, acc[t][q]);
      for (int g = 0; g < 4; ++g) {
        *outs[t * 4 * Q + 4 * q + g] =
            (lanes[4 * g] + lanes[4 * g + 1]) + (lanes[4 * g + 2] + lanes[4 * g + 3]);
      }
    }
  }
}

// Rows [0, nr) x tokens [0, nt): tiles of 4*kQuadsPerTile rows (then single quads whose last
// row may repeat), and within each row tile, groups of kTokensPerTile tokens (then one at a
// time), so a row tile is reused from L1 by every token before the next one is loaded.
template <bool kVnni>
void q4_0_gemm(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const std::byte* act,
               int64_t act_stride, int64_t nt, float* out, int64_t out_stride) {
  constexpr int kRows = 4 * kQuadsPerTile;
  const std::byte* rows[kRows];
  const std::byte* acts[kTokensPerTile];
  float* outs[kTokensPerTile * kRows];
  float spare[kTokensPerTile * kRows];
  int64_t r0 = 0;
  if (nt == 1) {  // GEMV: rows in far-apart sequential streams (ops/gemv_streams.h)
    acts[0] = act;
    r0 = gemv_stream_row_tables<kRows>(w, stride, nr, out, rows, outs, [&] {
      q4_0_tile<kVnni, kQuadsPerTile, 1>(n, rows, acts, outs, kGemvStreamPrefetchRows * stride);
    });
  }
  for (int64_t r = r0; r < nr; r += kRows) {
    const bool full = r + kRows <= nr;
    const int quads = full ? kQuadsPerTile : 1;
    const int tile_rows = 4 * quads;
    auto run = [&](auto tokens_tag, int64_t t0) {
      constexpr int kT = decltype(tokens_tag)::value;
      for (int t = 0; t < kT; ++t) {
        acts[t] = act + (t0 + t) * act_stride;
        for (int i = 0; i < tile_rows; ++i) {
          const bool real = r + i < nr;
          outs[t * tile_rows + i] =
              real ? out + (t0 + t) * out_stride + r + i : &spare[t * tile_rows + i];
        }
      }
      if (full) {
        q4_0_tile<kVnni, kQuadsPerTile, kT>(n, rows, acts, outs, kRows * stride);
      } else {
        q4_0_tile<kVnni, 1, kT>(n, rows, acts, outs, 4 * stride);
      }
    };
    for (int i = 0; i < tile_rows; ++i) rows[i] = w + (r + i < nr ? r + i : nr - 1) * stride;
    int64_t t = 0;
    for (; t + kTokensPerTile <= nt; t += kTokensPerTile) {
      run(std::integral_constant<int, kTokensPerTile>{}, t);
    }
    for (; t < nt; ++t) run(std::integral_constant<int, 1>{}, t);
    if (!full) r -= kRows - 4;  // a partial tile advances one quad at a time
  }
}

// Prefill GEMM repacking (repacked_gemm_avx512.h): the nibbles themselves, w + 8.
struct Q4_0Unsigned {
  using Block = BlockQ4_0;
  static constexpr int32_t kOffset = 8;
  static __m512i load_two(const Block& a, const Block& b) { return avx512::q4_0_nibbles_two(a, b); }
};

}  // namespace

}  // namespace pacer::ops
