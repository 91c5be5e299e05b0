#pragma once
// Prefill GEMM for Q8_0 and Q4_0 weights x act-Q8 activations on AVX-512 VNNI, on repacked
// weight tiles. Include ONLY from *_avx512.cpp files, after ops/matmul_simd_avx512.h.
//
// Prefill is compute-bound: every weight block serves every prompt token, so what counts is the
// vector work per (row, token, block), not the bytes. The decode kernels (pairs of rows for Q8_0,
// see quant_rows_avx512.h) spend ~5 port-0/5 uops per two row-blocks per token on unpacking,
// scale merging and bias. Here a tile of 16 rows x 32 blocks is first repacked into L1, once for
// all tokens, in the form vpdpbusd wants:
//   * 16 rows per zmm: dword i of vector j holds bytes 4j..4j+3 of row i's block, as unsigned
//     bytes w + offset (Q8_0: w ^ 0x80 = w + 128; Q4_0: the nibble itself, w + 8). Eight
//     vpdpbusd, each against one dword of the activation block broadcast from memory, give all
//     16 rows' block dots in the 16 dwords of one accumulator (each dword sums 32 products,
//     |.| <= 32 * 255 * 127, exact);
//   * the accumulator of each block starts at -offset * sum_b(x), which removes the offset
//     exactly (sum_b(x) comes with the packed activations);
//   * the fp16 row scales become fp32, one per dword, so d_w * d_x is one multiply by the
//     broadcast activation scale.
// Per (16 rows, token, block): 8 vpdpbusd, then one conversion, one multiply and one FMA for all
// 16 rows: ~0.7 vector uops per row-block against ~2.5 for the decode kernel, and vpdpbusd (64
// multiply-adds each) is most of them. Each row is one float accumulation over the blocks, in
// block order like the GEMV's, but in 32-block chunks: results agree with the GEMV within float
// reassociation (not bit for bit).
//
// Kernel must provide:
//   using Block = ...;                    // BlockQ8_0 or BlockQ4_0 (fp16 scale `d` first)
//   static constexpr int32_t kOffset;     // the unsigned quants are w + kOffset
//   static __m512i load_two(const Block& a, const Block& b);
//       // a's 32 unsigned quants in bytes 0-31, b's in bytes 32-63
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/parallel.h"
#include "ops/q4_0.h"
#include "ops/q8_0.h"

namespace pacer::ops::avx512 {
namespace {

// Two Q4_0 blocks' 32 nibbles each as bytes 0..15 (w + 8): a's in bytes 0-31 (low nibbles =
// elements 0-15, then high nibbles = 16-31), b's in bytes 32-63. a's 16 bytes go to lane 0 and
// b's to lane 2; the nibble halves then interleave by lane: [a lo, a hi, b lo, b hi].
inline __m512i q4_0_nibbles_two(const BlockQ4_0& a, const BlockQ4_0& b) {
  const __m512i mask = _mm512_set1_epi8(0x0F);
  const __m512i v = _mm512_inserti32x4(
      _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)), 2);
  const __m512i lo = _mm512_and_si512(v, mask);
  const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
  return _mm512_permutex2var_epi64(lo, _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), hi);
}

constexpr int kHexRows = 16;
constexpr int64_t kGemmChunkBlocks = 32;  // blocks per repacked tile: 16 x 1024 cols, 18 KiB

// 16 rows x one block, repacked. 576 bytes, cache-line aligned.
struct alignas(64) HexBlock {
  uint8_t q[8][64];  // q[j][4i..4i+3] = unsigned quants 4j..4j+3 of row i
  float dw[16];      // d_w of row i
};
static_assert(sizeof(HexBlock) == 576);

// The running sums of one token for the 16 rows of a tile.
struct alignas(64) HexAcc {
  float rows[16];
};

// Blocks [b0, b0 + count) of the 16 rows into dst[k]: an 8x8 dword transpose in each 256-bit
// half of eight zmm (rows i and i + 8 side by side), ~32 shuffles per block of 16 rows.
template <class Kernel>
void repack_hex(const std::byte* const* rows, int64_t b0, int64_t count, HexBlock* dst) {
  using Block = typename Kernel::Block;
  const __m512i lo_cols = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i hi_cols = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  for (int64_t k = 0; k < count; ++k) {
    HexBlock& out = dst[k];
    __m512i z[8];  // dwords 0-7: row i's quants (unsigned), dwords 8-15: row i + 8's
    for (int i = 0; i < 8; ++i) {
      z[i] = Kernel::load_two(reinterpret_cast<const Block*>(rows[i])[b0 + k],
                              reinterpret_cast<const Block*>(rows[i + 8])[b0 + k]);
    }
    __m512i t[8], s[8];
    for (int i = 0; i < 4; ++i) {
      t[2 * i] = _mm512_unpacklo_epi32(z[2 * i], z[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_epi32(z[2 * i], z[2 * i + 1]);
    }
    for (int h = 0; h < 2; ++h) {  // rows 0-3 (h = 0) and 4-7 (h = 1) of each half
      const __m512i* u = t + 4 * h;
      s[4 * h + 0] = _mm512_unpacklo_epi64(u[0], u[2]);  // cols 0 | 4
      s[4 * h + 1] = _mm512_unpackhi_epi64(u[0], u[2]);  // cols 1 | 5
      s[4 * h + 2] = _mm512_unpacklo_epi64(u[1], u[3]);  // cols 2 | 6
      s[4 * h + 3] = _mm512_unpackhi_epi64(u[1], u[3]);  // cols 3 | 7
    }
    for (int c = 0; c < 4; ++c) {
      _mm512_store_si512(out.q[c], _mm512_permutex2var_epi64(s[c], lo_cols, s[4 + c]));
      _mm512_store_si512(out.q[c + 4], _mm512_permutex2var_epi64(s[c], hi_cols, s[4 + c]));
    }
    alignas(32) uint16_t d16[16];
    for (int i = 0; i < kHexRows; ++i) {
      d16[i] = reinterpret_cast<const Block*>(rows[i])[b0 + k].d;
    }
    _mm512_store_ps(out.dw,
                    _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d16))));
  }
}

// Eight tokens' activations for one block, interleaved so the inner loop addresses all of them
// from one pointer with constant offsets (eight separate token pointers would not fit in the
// general registers next to everything else).
constexpr int kGroupTokens = 8;
struct alignas(64) ActGroupBlock {
  int8_t q[kGroupTokens][32];  // the tokens' quants of this block
  float d[kGroupTokens];       // their scales
  int32_t bias[kGroupTokens];  // -offset * sum_b(q): the accumulators' start
};
static_assert(sizeof(ActGroupBlock) == 320);

// 16 rows x 8 tokens over `count` repacked blocks: acc_mem[t] is loaded, accumulated and stored
// back, so the sums carry across chunks. Eight independent vpdpbusd chains (latency ~5) keep
// port 0 busy.
inline void hex_tile(const HexBlock* tile, int64_t count, const ActGroupBlock* g, HexAcc* acc_mem) {
  constexpr int T = kGroupTokens;
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_load_ps(acc_mem[t].rows);
  for (int64_t k = 0; k < count; ++k) {
    __m512i w[8];
    for (int j = 0; j < 8; ++j) w[j] = _mm512_load_si512(tile[k].q[j]);
    const __m512 dw = _mm512_load_ps(tile[k].dw);
    const ActGroupBlock& x = g[k];
    for (int t = 0; t < T; ++t) {
      // Two chains of four (vpdpbusd latency ~5): one chain of eight per token would leave
      // port 0 idle waiting.
      __m512i even = _mm512_set1_epi32(x.bias[t]), odd = _mm512_setzero_si512();
      for (int j = 0; j < 8; j += 2) {
        int32_t x0, x1;
        std::memcpy(&x0, &x.q[t][4 * j], 4);
        std::memcpy(&x1, &x.q[t][4 * j + 4], 4);
        even = _mm512_dpbusd_epi32(even, w[j], _mm512_set1_epi32(x0));
        odd = _mm512_dpbusd_epi32(odd, w[j + 1], _mm512_set1_epi32(x1));
      }
      const __m512i dot = _mm512_add_epi32(even, odd);
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(x.d[t]));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_store_ps(acc_mem[t].rows, acc[t]);
}

// Where a GEMM's 16-row tiles come from: row-major weights (16 row pointers, repacked by the
// shuffle transpose above) ...
template <class Kernel>
struct RowMajorTiles {
  using Block = typename Kernel::Block;
  const std::byte* w;
  int64_t stride, nr;
  const std::byte* rows[kHexRows] = {};
  // Rows [r, r + 16), clamped to nr (the last row repeats; its outputs are dropped).
  void bind(int64_t r) {
    for (int i = 0; i < kHexRows; ++i) rows[i] = w + std::min<int64_t>(r + i, nr - 1) * stride;
  }
  void fill(int64_t b0, int64_t count, HexBlock* tile) const {
    repack_hex<Kernel>(rows, b0, count, tile);
  }
  // Into L2 while the current chunk is multiplied: the repack reads 16 rows at once, too many
  // streams for the hardware prefetcher.
  void prefetch(int64_t r, int64_t b0, int64_t count) const {
    const int64_t bytes = count * static_cast<int64_t>(sizeof(Block));
    for (int i = 0; i < kHexRows && r + i < nr; ++i) {
      const char* p = reinterpret_cast<const char*>(w + (r + i) * stride) +
                      b0 * static_cast<int64_t>(sizeof(Block));
      for (int64_t off = 0; off < bytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T1);
    }
  }
};

// ... or Q4_0/Q8_0 already interleaved by 16 rows at load (interleaved.h): a tile is unpacked,
// not transposed (Q4_0: and, shift, and per 64 quant bytes; Q8_0: a copy), its quants unsigned
// (the stored nibble or q + 128, for VNNI) or signed (for AMX).
template <WeightType kType, bool kSigned>
struct X16Tiles {
  static constexpr int64_t kQsBytes = kType == WeightType::Q4_0 ? 256 : 512;
  static constexpr int64_t kPairBytes = 64 + 2 * kQsBytes;
  const std::byte* groups;
  int64_t group_bytes;
  const std::byte* group = nullptr;
  void bind(int64_t r) { group = groups + r / kHexRows * group_bytes; }
  void fill(int64_t b0, int64_t count, HexBlock* tile) const {
    for (int64_t k = 0; k < count; ++k) {
      const int64_t b = b0 + k;
      const std::byte* pair = group + b / 2 * kPairBytes;
      const std::byte* qs = pair + 64 + kQsBytes * (b % 2);
      if constexpr (kType == WeightType::Q4_0) {
        const __m512i mask = _mm512_set1_epi8(0x0F);
        const __m512i offset = _mm512_set1_epi8(kSigned ? 8 : 0);
        for (int m = 0; m < 4; ++m) {
          const __m512i q = _mm512_load_si512(qs + 64 * m);
          const __m512i lo = _mm512_and_si512(q, mask);
          const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), mask);
          _mm512_store_si512(tile[k].q[m], _mm512_sub_epi8(lo, offset));
          _mm512_store_si512(tile[k].q[m + 4], _mm512_sub_epi8(hi, offset));
        }
      } else {
        const __m512i flip = _mm512_set1_epi8(kSigned ? static_cast<char>(0x80) : 0);
        for (int j = 0; j < 8; ++j) {
          _mm512_store_si512(tile[k].q[j], _mm512_xor_si512(_mm512_load_si512(qs + 64 * j), flip));
        }
      }
      _mm512_store_ps(tile[k].dw, _mm512_cvtph_ps(_mm256_load_si256(
                                      reinterpret_cast<const __m256i*>(pair + 32 * (b % 2)))));
    }
  }
  void prefetch(int64_t r, int64_t b0, int64_t count) const {
    const char* p =
        reinterpret_cast<const char*>(groups + r / kHexRows * group_bytes) + b0 / 2 * kPairBytes;
    for (int64_t off = 0; off < (count + 1) / 2 * kPairBytes; off += 64) {
      _mm_prefetch(p + off, _MM_HINT_T1);
    }
  }
};

// Rows [r, r + 16) (outputs past nr dropped) x tokens [0, nt), filled chunk by chunk from `src`
// and run over every token while the chunk sits in L1.
template <class Source>
void hex_gemm_rows(int64_t n, Source& src, int64_t r, int64_t nr, const ActGroupBlock* groups,
                   int64_t nt, float* out, int64_t out_stride, HexBlock* tile, HexAcc* acc) {
  src.bind(r);
  const int64_t nb = n / 32;
  const int64_t n_groups = (nt + kGroupTokens - 1) / kGroupTokens;
  for (int64_t t = 0; t < n_groups * kGroupTokens; ++t) {
    _mm512_store_ps(acc[t].rows, _mm512_setzero_ps());
  }
  for (int64_t b0 = 0; b0 < nb; b0 += kGemmChunkBlocks) {
    const int64_t count = std::min(kGemmChunkBlocks, nb - b0);
    src.fill(b0, count, tile);
    // While this chunk is multiplied (tens of microseconds), bring the next one into L2.
    const int64_t next_b0 = b0 + count < nb ? b0 + count : 0;
    const int64_t next_r = b0 + count < nb ? r : r + kHexRows;
    if (next_r < nr) src.prefetch(next_r, next_b0, std::min(kGemmChunkBlocks, nb - next_b0));
    for (int64_t grp = 0; grp < n_groups; ++grp) {
      hex_tile(tile, count, groups + grp * nb + b0, acc + grp * kGroupTokens);
    }
  }
  const __mmask16 live = static_cast<__mmask16>((1u << std::min<int64_t>(kHexRows, nr - r)) - 1);
  for (int64_t t = 0; t < nt; ++t) {
    _mm512_mask_storeu_ps(out + t * out_stride + r, live, _mm512_load_ps(acc[t].rows));
  }
}

// The activations regrouped by kGroupTokens tokens (GemmPrepareFn): group g's blocks at
// ActGroupBlock index g * n/32, a last partial group padded with zeros (whose sums are dropped).
// The bias folds in kOffset, so the copy is per weight type's offset. Share `part` of `parts` is
// a range of blocks (columns), in every group.
template <int32_t kOffset>
int64_t hex_prepare(int64_t n, const std::byte* act, int64_t act_stride, int64_t nt, std::byte* dst,
                    int64_t part, int64_t parts) {
  const int64_t nb = n / 32;
  const int64_t n_groups = (nt + kGroupTokens - 1) / kGroupTokens;
  const int64_t bytes = n_groups * nb * static_cast<int64_t>(sizeof(ActGroupBlock));
  if (dst == nullptr) return bytes;
  const auto [b0, b1] = static_chunk(nb, 1, static_cast<int>(parts), static_cast<int>(part));
  auto* groups = reinterpret_cast<ActGroupBlock*>(dst);
  for (int64_t g = 0; g < n_groups; ++g) {  // a partial group's missing tokens stay zero
    std::memset(static_cast<void*>(groups + g * nb + b0), 0,
                static_cast<size_t>(b1 - b0) * sizeof(ActGroupBlock));
  }
  for (int64_t t = 0; t < nt; ++t) {
    const ActQ8Row a = act_q8_row(act + t * act_stride, n);
    ActGroupBlock* g = groups + (t / kGroupTokens) * nb;
    const int64_t slot = t % kGroupTokens;
    for (int64_t b = b0; b < b1; ++b) {
      std::memcpy(g[b].q[slot], a.q + 32 * b, 32);
      g[b].d[slot] = a.d[b];
      g[b].bias[slot] = -kOffset * a.sum[b];
    }
  }
  return bytes;
}

// Rows [0, nr) x tokens [0, nt) from `src` over hex_prepare's groups. Scratch for one call (a
// worker's row range): one repacked tile (18 KiB) and the running sums of every token for one
// row tile (64 bytes per token).
template <class Source>
void hex_gemm_prepared(int64_t n, Source& src, int64_t nr, const std::byte* prepared, int64_t nt,
                       float* out, int64_t out_stride) {
  const auto* groups = reinterpret_cast<const ActGroupBlock*>(prepared);
  const int64_t n_groups = (nt + kGroupTokens - 1) / kGroupTokens;
  std::vector<HexBlock> tile(static_cast<size_t>(kGemmChunkBlocks));
  std::vector<HexAcc> acc(static_cast<size_t>(n_groups * kGroupTokens));
  for (int64_t r = 0; r < nr; r += kHexRows) {
    hex_gemm_rows(n, src, r, nr, groups, nt, out, out_stride, tile.data(), acc.data());
  }
}

// The same in one call: the activations regrouped into a buffer of its own first.
template <int32_t kOffset, class Source>
void hex_gemm(int64_t n, Source& src, int64_t nr, const std::byte* act, int64_t act_stride,
              int64_t nt, float* out, int64_t out_stride) {
  const int64_t bytes = hex_prepare<kOffset>(n, act, act_stride, nt, nullptr, 0, 1);
  std::vector<ActGroupBlock> groups(static_cast<size_t>(bytes) / sizeof(ActGroupBlock));
  auto* dst = reinterpret_cast<std::byte*>(groups.data());
  hex_prepare<kOffset>(n, act, act_stride, nt, dst, 0, 1);
  hex_gemm_prepared(n, src, nr, dst, nt, out, out_stride);
}

// The GemmFn of a row-major type: rows [0, nr) x tokens [0, nt).
template <class Kernel>
void repacked_gemm(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const std::byte* act,
                   int64_t act_stride, int64_t nt, float* out, int64_t out_stride) {
  RowMajorTiles<Kernel> src{w, stride, nr};
  hex_gemm<Kernel::kOffset>(n, src, nr, act, act_stride, nt, out, out_stride);
}

// Its GemmPreparedFn: `prepared` from hex_prepare<Kernel::kOffset>.
template <class Kernel>
void repacked_gemm_prepared(int64_t n, const std::byte* w, int64_t stride, int64_t nr,
                            const std::byte* prepared, int64_t nt, float* out, int64_t out_stride) {
  RowMajorTiles<Kernel> src{w, stride, nr};
  hex_gemm_prepared(n, src, nr, prepared, nt, out, out_stride);
}

}  // namespace
}  // namespace pacer::ops::avx512
