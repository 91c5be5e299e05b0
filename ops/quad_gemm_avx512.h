#pragma once
// Prefill GEMM for Q8_0 and Q4_0 weights x act-Q8 activations on AVX-512 VNNI, on repacked
// weight tiles. Include ONLY from *_avx512.cpp files, after ops/matmul_simd_avx512.h.
//
// Prefill is compute-bound: every weight block serves every prompt token, so what counts is the
// vector work per (row, token, block), not the bytes. The decode kernels (pairs of rows for Q8_0,
// see quant_rows_avx512.h) spend ~5 port-0/5 uops per two row-blocks per token on unpacking,
// scale merging and bias. Here a tile of 16 rows x 32 blocks is first repacked into L1 in the
// form the inner loop wants, once for all tokens:
//   * four rows per zmm ("quad"): 128-bit lane g holds 16 quants of row g, as unsigned bytes
//     w + offset (Q8_0: w ^ 0x80 = w + 128; Q4_0: the nibble itself, w + 8). Elements 0-15 of
//     the block go to the `lo` vector, 16-31 to `hi`, each dotted with that half of the
//     activation block broadcast to all four lanes by vpdpbusd (u8 x s8; each dword sums 8
//     products, |.| <= 8 * 255 * 127, exact);
//   * the accumulator of each block starts at -offset * sum_b(x) in the first dword of each lane,
//     which removes the offset exactly (sum_b(x) comes with the packed activations);
//   * the fp16 row scales become fp32, four copies per row, so d_w * d_x is one multiply by the
//     broadcast activation scale.
// Per (4 rows, token, block): two vpdpbusd, one int->float conversion, one multiply, one FMA:
// 1.25 uops per row-block against ~2.5 for the decode kernel. The float sums are per lane and
// only reduced to one value per row at the end, so the summation order differs from the GEMV's:
// results agree with it within float reassociation (not bit for bit).
//
// Kernel must provide:
//   using Block = ...;                    // BlockQ8_0 or BlockQ4_0 (fp16 scale `d` first)
//   static constexpr int32_t kOffset;     // the unsigned quants are w + kOffset
//   static void unpack(const Block& b, uint8_t* lo16, uint8_t* hi16);  // elements 0-15, 16-31
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "ops/q8_0.h"

namespace pacer::ops::avx512 {
namespace {

constexpr int kGemmQuads = 4;             // rows per tile: 16 (4 quads)
constexpr int kGemmTokens = 4;            // tokens per register tile: 16 accumulators
constexpr int64_t kGemmChunkBlocks = 32;  // blocks per repacked tile: 16 x 1024 cols, 24 KiB

// One quad (4 rows) x one block, repacked. 192 bytes, cache-line aligned.
struct alignas(64) QuadBlock {
  uint8_t lo[64];  // lane g: elements 0-15 of row g, unsigned (w + offset)
  uint8_t hi[64];  // lane g: elements 16-31 of row g
  float dw[16];    // lane g: d_w of row g, four times
};
static_assert(sizeof(QuadBlock) == 192);

// Blocks [b0, b0 + count) of the 4Q rows into dst[k * Q + q].
template <class Kernel, int Q>
void repack_quads(const std::byte* const* rows, int64_t b0, int64_t count, QuadBlock* dst) {
  using Block = typename Kernel::Block;
  for (int64_t k = 0; k < count; ++k) {
    for (int q = 0; q < Q; ++q) {
      QuadBlock& out = dst[k * Q + q];
      for (int g = 0; g < 4; ++g) {
        const Block& blk = reinterpret_cast<const Block*>(rows[4 * q + g])[b0 + k];
        Kernel::unpack(blk, out.lo + 16 * g, out.hi + 16 * g);
        _mm_store_ps(out.dw + 4 * g, _mm_set1_ps(fp32_from_fp16(blk.d)));
      }
    }
  }
}

// 16 float lanes (4 per row of a quad), the running sums of one (quad, token).
struct alignas(64) QuadAcc {
  float lanes[16];
};

// Q quads x T tokens over `count` repacked blocks (activation blocks b0...): acc_mem[t * Q + q]
// is loaded, accumulated and stored back, so the sums carry across chunks.
template <int Q, int T>
void quad_tile(const QuadBlock* tile, int64_t count, int32_t offset, const ActQ8Row* a, int64_t b0,
               QuadAcc* acc_mem) {
  __m512 acc[T][Q];
  for (int t = 0; t < T; ++t) {
    for (int q = 0; q < Q; ++q) acc[t][q] = _mm512_load_ps(acc_mem[t * Q + q].lanes);
  }
  for (int64_t k = 0; k < count; ++k) {
    const int64_t b = b0 + k;
    const QuadBlock* blk = tile + k * Q;
    __m512i lo[Q], hi[Q];
    for (int q = 0; q < Q; ++q) {
      lo[q] = _mm512_load_si512(blk[q].lo);
      hi[q] = _mm512_load_si512(blk[q].hi);
    }
    for (int t = 0; t < T; ++t) {
      const __m512i x_lo =
          _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(a[t].q + 32 * b)));
      const __m512i x_hi = _mm512_broadcast_i32x4(
          _mm_load_si128(reinterpret_cast<const __m128i*>(a[t].q + 32 * b + 16)));
      const __m512i bias = _mm512_maskz_set1_epi32(0x1111, -offset * a[t].sum[b]);
      const __m512 dx = _mm512_set1_ps(a[t].d[b]);
      for (int q = 0; q < Q; ++q) {
        const __m512i dot =
            _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(bias, lo[q], x_lo), hi[q], x_hi);
        const __m512 scale = _mm512_mul_ps(_mm512_load_ps(blk[q].dw), dx);
        acc[t][q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[t][q]);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    for (int q = 0; q < Q; ++q) _mm512_store_ps(acc_mem[t * Q + q].lanes, acc[t][q]);
  }
}

// Rows [0, nr) x tokens [0, nt): tiles of 4Q rows (Q = 4, then 2, then 1 with the last row
// repeated), each repacked chunk by chunk and run over every token while it sits in L1.
template <class Kernel, int Q>
void quad_gemm_rows(int64_t n, const std::byte* w, int64_t stride, int64_t r, int64_t nr,
                    const ActQ8Row* a, int64_t nt, float* out, int64_t out_stride, QuadBlock* tile,
                    QuadAcc* acc) {
  const std::byte* rows[4 * Q];
  for (int i = 0; i < 4 * Q; ++i) rows[i] = w + std::min<int64_t>(r + i, nr - 1) * stride;
  const int64_t nb = n / 32;
  for (int64_t i = 0; i < nt * Q; ++i) _mm512_store_ps(acc[i].lanes, _mm512_setzero_ps());
  for (int64_t b0 = 0; b0 < nb; b0 += kGemmChunkBlocks) {
    const int64_t count = std::min(kGemmChunkBlocks, nb - b0);
    repack_quads<Kernel, Q>(rows, b0, count, tile);
    int64_t t = 0;
    for (; t + kGemmTokens <= nt; t += kGemmTokens) {
      quad_tile<Q, kGemmTokens>(tile, count, Kernel::kOffset, a + t, b0, acc + t * Q);
    }
    for (; t < nt; ++t) quad_tile<Q, 1>(tile, count, Kernel::kOffset, a + t, b0, acc + t * Q);
  }
  // Row 4q+g of token t is the sum of lane g's four dwords of acc[t * Q + q].
  for (int64_t t = 0; t < nt; ++t) {
    for (int q = 0; q < Q; ++q) {
      const float* lanes = acc[t * Q + q].lanes;
      for (int g = 0; g < 4; ++g) {
        const int64_t row = r + 4 * q + g;
        if (row < nr) {
          out[t * out_stride + row] =
              (lanes[4 * g] + lanes[4 * g + 1]) + (lanes[4 * g + 2] + lanes[4 * g + 3]);
        }
      }
    }
  }
}

// The GemmFn: rows [0, nr) x tokens [0, nt).
template <class Kernel>
void quad_gemm(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const std::byte* act,
               int64_t act_stride, int64_t nt, float* out, int64_t out_stride) {
  // Scratch for one call (a worker's row range): one repacked tile (24 KiB) and the running
  // sums of every token for one row tile (256 bytes per token).
  std::vector<QuadBlock> tile(static_cast<size_t>(kGemmQuads * kGemmChunkBlocks));
  std::vector<QuadAcc> acc(static_cast<size_t>(kGemmQuads * nt));
  std::vector<ActQ8Row> a(static_cast<size_t>(nt));
  for (int64_t t = 0; t < nt; ++t) a[t] = act_q8_row(act + t * act_stride, n);
  int64_t r = 0;
  for (; r + 16 <= nr; r += 16) {
    quad_gemm_rows<Kernel, 4>(n, w, stride, r, nr, a.data(), nt, out, out_stride, tile.data(),
                              acc.data());
  }
  if (r + 8 <= nr) {
    quad_gemm_rows<Kernel, 2>(n, w, stride, r, nr, a.data(), nt, out, out_stride, tile.data(),
                              acc.data());
    r += 8;
  }
  for (; r < nr; r += 4) {
    quad_gemm_rows<Kernel, 1>(n, w, stride, r, nr, a.data(), nt, out, out_stride, tile.data(),
                              acc.data());
  }
}

}  // namespace
}  // namespace pacer::ops::avx512
