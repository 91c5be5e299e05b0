// Prefill GEMM for Q8_0 and Q4_0 weights x act-Q8 activations on AMX-INT8 (Sapphire Rapids and
// later), when the CPU, the OS (XCR0 tile state) and the kernel's permission (arch_prctl) allow
// it: see CpuFeatures::amx_int8.
//
// One TDPBSSD multiplies 16 tokens x 32 bytes of activations (tile A, one block of each token,
// signed) by 8 x 64 bytes of weights (tile B: dword i of row j = quants 4j..4j+3 of weight row
// i, signed) into 16 x 16 int32 block dots (tile C: row m = token m, column i = weight row i):
// 8192 multiply-adds per instruction, against 1024 for eight vpdpbusd. The per-block scales then
// need one int->float conversion, one multiply (d_w of the 16 rows times the token's d_x) and one
// FMA per token for all 16 rows, on AVX-512, while the tile unit works on the next block (two C
// tiles alternate). Signed x signed, so no offset or bias is needed.
//
// Weight tiles are repacked into L1 16 rows x 32 blocks at a time by the same shuffle transpose
// as the VNNI GEMM (repacked_gemm_avx512.h), here with signed quants (x16 weights, already
// interleaved at load, are only unpacked); the activation quants are
// copied once per call into rows padded to a multiple of 16 tokens (zeros), so every A tile load
// stays in bounds.
#include "ops/interleaved.h"
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>
#include "ops/q4_0.h"
#include "ops/q8_0.h"
#include "ops/repacked_gemm_avx512.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace pacer::ops {
namespace {

constexpr int kTokens = 16;  // rows of tile A (and of C)

// Signed quants of two blocks side by side (row a in bytes 0-31, row b in 32-63).
struct Q8_0Signed {
  using Block = BlockQ8_0;
  static __m512i load_two(const Block& a, const Block& b) {
    return avx512::load_pair_256(a.qs, b.qs);
  }
};
struct Q4_0Signed {
  using Block = BlockQ4_0;
  static __m512i load_two(const Block& a, const Block& b) {
    return _mm512_sub_epi8(avx512::q4_0_nibbles_two(a, b), _mm512_set1_epi8(8));
  }
};

// The 64-byte LDTILECFG operand (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// tmm0: A (16 tokens x 32 bytes), tmm1: B (8 x 64 bytes), tmm2/tmm3: C (16 x 16 int32).
TileConfig tile_config() {
  TileConfig c;
  c.rows[0] = kTokens;
  c.colsb[0] = 32;
  c.rows[1] = 8;
  c.colsb[1] = 64;
  for (int t : {2, 3}) {
    c.rows[t] = kTokens;
    c.colsb[t] = 64;
  }
  return c;
}

// acc[m] += float(C[m]) * (d_w * d_x[m]) for the 16 tokens of one block.
inline void scale_block(const int32_t* c, __m512 dw, const float* dx, int64_t dx_stride,
                        __m512* acc) {
  for (int m = 0; m < kTokens; ++m) {
    const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(dx[m * dx_stride]));
    acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * m)), s, acc[m]);
  }
}

// Rows [0, nr) x tokens [0, nt), 16-row tiles from `src` (repacked_gemm_avx512.h), signed quants.
template <class Source>
void amx_gemm(int64_t n, Source& src, int64_t nr, const std::byte* act, int64_t act_stride,
              int64_t nt, float* out, int64_t out_stride) {
  const int64_t nb = n / 32;
  const int64_t n_groups = (nt + kTokens - 1) / kTokens;
  const int64_t padded = n_groups * kTokens;
  // Activations: quants [padded][n] and scales [padded][nb], zero past nt.
  std::vector<int8_t> xq(static_cast<size_t>(padded * n), 0);
  std::vector<float> xd(static_cast<size_t>(padded * nb), 0.0f);
  for (int64_t t = 0; t < nt; ++t) {
    const ActQ8Row a = act_q8_row(act + t * act_stride, n);
    std::memcpy(xq.data() + t * n, a.q, static_cast<size_t>(n));
    std::memcpy(xd.data() + t * nb, a.d, static_cast<size_t>(nb) * sizeof(float));
  }
  std::vector<avx512::HexBlock> tile(static_cast<size_t>(avx512::kGemmChunkBlocks));
  std::vector<avx512::HexAcc> acc_mem(static_cast<size_t>(padded));
  alignas(64) int32_t c0[kTokens * 16], c1[kTokens * 16];

  const TileConfig cfg = tile_config();
  _tile_loadconfig(&cfg);
  for (int64_t r = 0; r < nr; r += 16) {
    src.bind(r);
    for (auto& a : acc_mem) _mm512_store_ps(a.rows, _mm512_setzero_ps());
    for (int64_t b0 = 0; b0 < nb; b0 += avx512::kGemmChunkBlocks) {
      const int64_t count = std::min(avx512::kGemmChunkBlocks, nb - b0);
      src.fill(b0, count, tile.data());
      for (int64_t g = 0; g < n_groups; ++g) {
        const int8_t* xg = xq.data() + g * kTokens * n;
        const float* dg = xd.data() + g * kTokens * nb;
        __m512 acc[kTokens];
        for (int m = 0; m < kTokens; ++m) acc[m] = _mm512_load_ps(acc_mem[g * kTokens + m].rows);
        int64_t k = 0;
        for (; k + 2 <= count; k += 2) {
          const int64_t b = b0 + k;
          _tile_zero(2);
          _tile_loadd(0, xg + 32 * b, n);
          _tile_loadd(1, tile[k].q, 64);
          _tile_dpbssd(2, 0, 1);
          _tile_zero(3);
          _tile_loadd(0, xg + 32 * (b + 1), n);
          _tile_loadd(1, tile[k + 1].q, 64);
          _tile_dpbssd(3, 0, 1);
          _tile_stored(2, c0, 64);
          scale_block(c0, _mm512_load_ps(tile[k].dw), dg + b, nb, acc);
          _tile_stored(3, c1, 64);
          scale_block(c1, _mm512_load_ps(tile[k + 1].dw), dg + b + 1, nb, acc);
        }
        if (k < count) {
          const int64_t b = b0 + k;
          _tile_zero(2);
          _tile_loadd(0, xg + 32 * b, n);
          _tile_loadd(1, tile[k].q, 64);
          _tile_dpbssd(2, 0, 1);
          _tile_stored(2, c0, 64);
          scale_block(c0, _mm512_load_ps(tile[k].dw), dg + b, nb, acc);
        }
        for (int m = 0; m < kTokens; ++m) _mm512_store_ps(acc_mem[g * kTokens + m].rows, acc[m]);
      }
    }
    const __mmask16 live = static_cast<__mmask16>((1u << std::min<int64_t>(16, nr - r)) - 1);
    for (int64_t t = 0; t < nt; ++t) {
      _mm512_mask_storeu_ps(out + t * out_stride + r, live, _mm512_load_ps(acc_mem[t].rows));
    }
  }
  _tile_release();
}

}  // namespace

void gemm_q8_0_q8_0_amx(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                        const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                        int64_t out_stride) {
  avx512::RowMajorTiles<Q8_0Signed> src{w, w_stride, nr};
  amx_gemm(n, src, nr, act, act_stride, nt, out, out_stride);
}

void gemm_q4_0_q8_0_amx(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                        const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                        int64_t out_stride) {
  avx512::RowMajorTiles<Q4_0Signed> src{w, w_stride, nr};
  amx_gemm(n, src, nr, act, act_stride, nt, out, out_stride);
}

void gemm_q4_0x16_q8_0_amx(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride) {
  avx512::X16Tiles<WeightType::Q4_0, true> src{groups, x16_group_bytes(WeightType::Q4_0, n)};
  amx_gemm(n, src, n_groups * kX16Rows, act, act_stride, nt, out, out_stride);
}

void gemm_q8_0x16_q8_0_amx(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride) {
  avx512::X16Tiles<WeightType::Q8_0, true> src{groups, x16_group_bytes(WeightType::Q8_0, n)};
  amx_gemm(n, src, n_groups * kX16Rows, act, act_stride, nt, out, out_stride);
}

}  // namespace pacer::ops
