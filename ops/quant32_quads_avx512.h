#pragma once
// The AVX-512 loop of the 32-element block types whose quants are 16 bytes of nibbles with
// optional fifth bits and offset (Q4_1, Q5_0, Q5_1, IQ4_NL), with and without VNNI. Include ONLY
// from *_avx512.cpp files, after ops/matmul_simd_avx512.h. Same scheme as Q4_0's own loop
// (q4_0_avx512.cpp), which it generalizes:
//
// Four weight rows share one zmm ("quad"): 128-bit lane g holds the 16 quant bytes of row g's
// block b. AND 0x0F gives the low nibbles (elements 0..15 of each row), a 16-bit shift right by 4
// and AND the high nibbles (elements 16..31); each is dotted with the activation half it
// multiplies, broadcast to all four lanes. Types with fifth bits (Q5_0, Q5_1) add 16 to the
// bytes selected by two 64-bit masks built from the four rows' qh words (two vpmovqw + two movq
// per quad-block; the block headers holding them are gathered a strip ahead like the scales). One
// int->float conversion and one FMA then serve 4 rows, with d_w * d_x for the 4 rows expanded from
// one 16-byte load of a per-strip scale table. Types with an offset (Q4_1, Q5_1) add m_w * d_x *
// sum_b(x) per strip, 16 blocks x 4 rows in 4 FMAs, outside the integer loop.
//
// Kernel must provide:
//   using Block = ...;                 // fp16 d first; then fp16 m if kHasMin; qh[4] if
//                                      // kHasHighBits; qs[16] (ggml's nibble order)
//   static constexpr bool kHasMin, kHasHighBits;
//   static constexpr int kQhOffset;      // byte offset of qh in Block (any value without qh)
//   template <bool kVnni> static constexpr int32_t kSumFactor;  // bias = kSumFactor * sum_b(x)
//   template <bool kVnni>
//   static __m512i quad_dot(__m512i lo, __m512i hi, __m512i x_lo, __m512i x_hi, __m512i bias);
//       // lo/hi: the quants of elements 0..15 / 16..31 of four rows (one per 128-bit lane), as
//       // unsigned bytes; int32 lanes 4g..4g+3 sum to row g's block dot (bias included)
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ops/q8_0.h"

namespace pacer::ops::avx512 {
namespace {

// Quads per tile (8 rows): enough rows to amortize the per-block activation loads and bias.
constexpr int kQuad32QuadsPerTile = 2;
// Tokens per GEMM tile: each unpacked weight block serves 4 tokens.
constexpr int kQuad32TokensPerTile = 4;

// Lane pattern that expands 4 floats to 4 copies each: [s0 x4, s1 x4, s2 x4, s3 x4].
inline __m512i quad32_expand4_index(int first) {
  return _mm512_add_epi32(_mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0),
                          _mm512_set1_epi32(first));
}

// The quant bytes (qs) of block b of four rows, one row per 128-bit lane.
template <class Block>
inline __m512i load_quad_qs(const std::byte* const* rows, int64_t b) {
  auto qs = [&](int g) {
    const auto* blk = reinterpret_cast<const Block*>(rows[g]) + b;
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs));
  };
  __m512i v = _mm512_broadcast_i32x4(qs(0));
  v = _mm512_mask_broadcast_i32x4(v, 0x00F0, qs(1));
  v = _mm512_mask_broadcast_i32x4(v, 0x0F00, qs(2));
  return _mm512_mask_broadcast_i32x4(v, 0xF000, qs(3));
}

// hdr[k * step] = the first 8 bytes of block b0 + k (d, then m and/or qh, then quant bytes the
// caller ignores), for k < count: one 8-byte load and store per block, where separate gathers
// of d, m and qh would cost up to three stores, and stores are what this loop runs short of.
template <class Block>
inline void gather_strip_header(const std::byte* row, int64_t b0, int64_t count, uint64_t* hdr,
                                int64_t step) {
  static_assert(sizeof(Block) >= 8);
  const Block* blk = reinterpret_cast<const Block*>(row) + b0;
  for (int64_t k = 0; k < count; ++k) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(&hdr[k * step]),
                     _mm_loadl_epi64(reinterpret_cast<const __m128i*>(&blk[k])));
  }
}

// The 16-bit field at byte `offset` of each of 16 gathered headers (two zmm of 8), as fp32:
// headers [k][g] for k = k4..k4+3 in, 16 floats in the same [k][g] order out.
template <int kOffset>
inline __m512 header_fp16_x16(const uint64_t* hdr) {
  const __m512i h01 = _mm512_load_si512(hdr);
  const __m512i h23 = _mm512_load_si512(hdr + 8);
  const __m128i w01 = _mm512_cvtepi64_epi16(_mm512_srli_epi64(h01, 8 * kOffset));
  const __m128i w23 = _mm512_cvtepi64_epi16(_mm512_srli_epi64(h23, 8 * kOffset));
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(w01), w23, 1));
}

// From the headers of one block of a quad's four rows (hdr4[g] = row g's, qh at byte kOffset),
// the byte masks of the fifth bits: bit 16g + j of *lo is element j's of row g (j < 16), bit
// 16g + j of *hi element 16 + j's, matching the byte positions of the low and high nibbles in a
// quad. vpmovqw packs the four rows' 16-bit halves side by side.
template <int kOffset>
inline void fifth_bit_masks(const uint64_t* hdr4, __mmask64* lo, __mmask64* hi) {
  const __m256i h = _mm256_load_si256(reinterpret_cast<const __m256i*>(hdr4));
  const __m128i lo_words = _mm256_cvtepi64_epi16(_mm256_srli_epi64(h, 8 * kOffset));
  const __m128i hi_words = _mm256_cvtepi64_epi16(_mm256_srli_epi64(h, 8 * kOffset + 16));
  *lo = _cvtu64_mask64(static_cast<uint64_t>(_mm_cvtsi128_si64(lo_words)));
  *hi = _cvtu64_mask64(static_cast<uint64_t>(_mm_cvtsi128_si64(hi_words)));
}

// sum_j u_j * x_j into the int32 lanes of `bias`, for unsigned bytes u (lo: elements 0..15, hi:
// 16..31 of each lane's row) and signed |x| <= 127. VNNI: vpdpbusd, exact for any u8. Without:
// vpmaddubsw pair sums <= 2 * 31 * 127 = 7874 for u <= 31, lo and hi pairs added <= 15748 <
// 32767, so no saturation, then vpmaddwd with ones.
template <bool kVnni>
inline __m512i quad_dot_unsigned(__m512i lo, __m512i hi, __m512i x_lo, __m512i x_hi, __m512i bias) {
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
// whatever T is, so a GEMM (T > 1) is bit-identical to T = 1 calls. Each block of each row also
// prefetches the byte `prefetch_offset` further on: the same block of the next tile's rows (see
// q4_0_avx512.cpp for why a whole-tile lookahead).
template <class Kernel, bool kVnni, int Q, int T>
void quad32_tile(int64_t n, const std::byte* const* rows, const std::byte* const* acts,
                 float* const* outs, int64_t prefetch_offset) {
  using Block = typename Kernel::Block;
  constexpr bool kMin = Kernel::kHasMin;
  constexpr bool kHigh = Kernel::kHasHighBits;
  constexpr int32_t kFactor = Kernel::template kSumFactor<kVnni>;
  constexpr int kMOffset = 2;  // m follows d in both offset types
  constexpr int kQhOffset = Kernel::kQhOffset;
  ActQ8Row a[T];
  for (int t = 0; t < T; ++t) a[t] = act_q8_row(acts[t], n);
  const int64_t nb = n / 32;
  __m512 acc[T][Q], macc[T][Q];  // macc: the offset terms, lanes in [block][row] order
  for (int t = 0; t < T; ++t) {
    for (int q = 0; q < Q; ++q) acc[t][q] = macc[t][q] = _mm512_setzero_ps();
  }
  // Per strip: scales[t][q][k][g] = d_w(row 4q+g, block b0+k) * d_x(token t, block b0+k); the
  // raw fp16 scales (or the block headers: d, m, qh) are gathered one strip ahead in [q][k][g]
  // order (double-buffered, see gather_strip_d16).
  alignas(64) float scales[T][Q][kScaleStrip][4];
  // Types with only d gather the fp16 scales; types with m or qh gather 8-byte headers.
  constexpr bool kHeaders = kMin || kHigh;
  alignas(64) uint16_t d16[2][kHeaders ? 1 : Q][kScaleStrip][4] = {};
  alignas(64) uint64_t hdr[2][kHeaders ? Q : 1][kScaleStrip][4] = {};
  auto gather = [&](int buf, int64_t b0, int64_t count) {
    for (int q = 0; q < Q; ++q) {
      for (int g = 0; g < 4; ++g) {
        if constexpr (kHeaders) {
          gather_strip_header<Block>(rows[4 * q + g], b0, count, &hdr[buf][q][0][g], 4);
        } else {
          gather_strip_d16<Block>(rows[4 * q + g], b0, count, &d16[buf][q][0][g], 4);
        }
      }
    }
  };
  gather(0, 0, nb < kScaleStrip ? nb : kScaleStrip);
  const __m512i nibble_mask = _mm512_set1_epi8(0x0F);
  for (int64_t b0 = 0, s = 0; b0 < nb; b0 += kScaleStrip, s ^= 1) {
    const int64_t count = nb - b0 < kScaleStrip ? nb - b0 : kScaleStrip;
    const __mmask16 live = first_lanes16(count);
    for (int t = 0; t < T; ++t) {
      const __m512 dx = _mm512_maskz_loadu_ps(live, a[t].d + b0);
      // d_x * sum_b(x) per block (0 past `count`), for the offsets.
      const __m512 dsx =
          kMin
              ? _mm512_mul_ps(dx, _mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(live, a[t].sum + b0)))
              : _mm512_setzero_ps();
      for (int k4 = 0; k4 < count; k4 += 4) {  // 4 blocks x 4 rows per vector
        const __m512i expand = quad32_expand4_index(k4);
        const __m512 dx4 = _mm512_permutexvar_ps(expand, dx);
        for (int q = 0; q < Q; ++q) {
          __m512 dw;
          if constexpr (kHeaders) {
            dw = header_fp16_x16<0>(&hdr[s][q][k4][0]);
          } else {
            dw = _mm512_cvtph_ps(
                _mm256_load_si256(reinterpret_cast<const __m256i*>(&d16[s][q][k4][0])));
          }
          _mm512_store_ps(&scales[t][q][k4][0], _mm512_mul_ps(dw, dx4));
          if constexpr (kMin) {
            const __m512 mw = header_fp16_x16<kMOffset>(&hdr[s][q][k4][0]);
            macc[t][q] = _mm512_fmadd_ps(mw, _mm512_permutexvar_ps(expand, dsx), macc[t][q]);
          }
        }
      }
    }
    const int64_t next = nb - b0 - count < kScaleStrip ? nb - b0 - count : kScaleStrip;
    gather(static_cast<int>(s ^ 1), b0 + count, next);
    for (int64_t k = 0; k < count; ++k) {
      const int64_t b = b0 + k;
      __m512i lo[Q], hi[Q];
      for (int q = 0; q < Q; ++q) {
        for (int g = 0; g < 4; ++g) {
          const auto* here = reinterpret_cast<const Block*>(rows[4 * q + g]) + b;
          _mm_prefetch(reinterpret_cast<const char*>(here) + prefetch_offset, _MM_HINT_T0);
        }
        const __m512i qs = load_quad_qs<Block>(rows + 4 * q, b);
        lo[q] = _mm512_and_si512(qs, nibble_mask);
        hi[q] = _mm512_and_si512(_mm512_srli_epi16(qs, 4), nibble_mask);
        if constexpr (kHigh) {
          __mmask64 k_lo, k_hi;
          fifth_bit_masks<kQhOffset>(&hdr[s][q][k][0], &k_lo, &k_hi);
          const __m512i sixteen = _mm512_set1_epi8(16);
          lo[q] = _mm512_mask_add_epi8(lo[q], k_lo, lo[q], sixteen);
          hi[q] = _mm512_mask_add_epi8(hi[q], k_hi, hi[q], sixteen);
        }
      }
      for (int t = 0; t < T; ++t) {
        const __m512i x_lo = _mm512_broadcast_i32x4(
            _mm_load_si128(reinterpret_cast<const __m128i*>(a[t].q + 32 * b)));
        const __m512i x_hi = _mm512_broadcast_i32x4(
            _mm_load_si128(reinterpret_cast<const __m128i*>(a[t].q + 32 * b + 16)));
        const __m512i bias = kFactor != 0 ? _mm512_maskz_set1_epi32(0x1111, kFactor * a[t].sum[b])
                                          : _mm512_setzero_si512();
        for (int q = 0; q < Q; ++q) {
          const __m512i dot = Kernel::template quad_dot<kVnni>(lo[q], hi[q], x_lo, x_hi, bias);
          const __m512 sc = _mm512_permutexvar_ps(
              quad32_expand4_index(0), _mm512_castps128_ps512(_mm_load_ps(&scales[t][q][k][0])));
          acc[t][q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sc, acc[t][q]);
        }
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    for (int q = 0; q < Q; ++q) {
      alignas(64) float lanes[16];
      alignas(64) float mlanes[16];
      _mm512_store_ps(lanes, acc[t][q]);
      _mm512_store_ps(mlanes, macc[t][q]);
      for (int g = 0; g < 4; ++g) {
        float v = (lanes[4 * g] + lanes[4 * g + 1]) + (lanes[4 * g + 2] + lanes[4 * g + 3]);
        if constexpr (kMin) v += (mlanes[g] + mlanes[g + 4]) + (mlanes[g + 8] + mlanes[g + 12]);
        *outs[t * 4 * Q + 4 * q + g] = v;
      }
    }
  }
}

// Rows [0, nr) x tokens [0, nt): tiles of 4*kQuad32QuadsPerTile rows (then single quads whose
// last row may repeat), and within each row tile, groups of kQuad32TokensPerTile tokens (then
// one at a time), so a row tile is reused from L1 by every token before the next one is loaded.
template <class Kernel, bool kVnni>
void quad32_gemm(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const std::byte* act,
                 int64_t act_stride, int64_t nt, float* out, int64_t out_stride) {
  constexpr int kQuads = kQuad32QuadsPerTile;
  constexpr int kRows = 4 * kQuads;
  constexpr int kTokens = kQuad32TokensPerTile;
  const std::byte* rows[kRows];
  const std::byte* acts[kTokens];
  float* outs[kTokens * kRows];
  float spare[kTokens * kRows];
  int64_t r0 = 0;
  if (nt == 1) {  // GEMV: rows in far-apart sequential streams (ops/gemv_streams.h)
    acts[0] = act;
    r0 = gemv_stream_row_tables<kRows>(w, stride, nr, out, rows, outs, [&] {
      quad32_tile<Kernel, kVnni, kQuads, 1>(n, rows, acts, outs, kGemvStreamPrefetchRows * stride);
    });
  }
  for (int64_t r = r0; r < nr; r += kRows) {
    const bool full = r + kRows <= nr;
    const int tile_rows = full ? kRows : 4;
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
        quad32_tile<Kernel, kVnni, kQuads, kT>(n, rows, acts, outs, kRows * stride);
      } else {
        quad32_tile<Kernel, kVnni, 1, kT>(n, rows, acts, outs, 4 * stride);
      }
    };
    for (int i = 0; i < tile_rows; ++i) rows[i] = w + (r + i < nr ? r + i : nr - 1) * stride;
    int64_t t = 0;
    for (; t + kTokens <= nt; t += kTokens) run(std::integral_constant<int, kTokens>{}, t);
    for (; t < nt; ++t) run(std::integral_constant<int, 1>{}, t);
    if (!full) r -= kRows - 4;  // a partial tile advances one quad at a time
  }
}

}  // namespace
}  // namespace pacer::ops::avx512
