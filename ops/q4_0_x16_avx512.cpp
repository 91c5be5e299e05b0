// q4_0x16 (q4_0_x16.h) x act-Q8 on AVX-512 VNNI: the decode GEMV, and the prefill GEMM through
// the hex tiles of repacked_gemm_avx512.h.
//
// GEMV, per group of 16 rows and block b: the 4 quant chunks (64 bytes each, dword i = row i)
// split into 8 vectors of nibbles (AND; shift and AND), and vector j is dotted with dword j of
// the activation block broadcast (vpdpbusd: unsigned nibbles x signed quants; sums of 4 products
// <= 4 * 15 * 127, exact). The accumulator starts at -8 * sum_b(x), which takes the nibble offset
// off exactly, so its 16 dwords end as the 16 rows' integer block dots; one conversion, one
// multiply (d_w of the 16 rows times d_x) and one FMA then serve all 16 rows. Per row: the same
// sum_b d_w * d_x * isum_b in block order as the scalar reference.
#include "ops/gemv_streams.h"
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>
#include "ops/q4_0_x16.h"
#include "ops/q8_0.h"
#include "ops/repacked_gemm_avx512.h"

#include <cstring>

namespace pacer::ops {
namespace {

// Groups the GEMV runs at once, each from its own far-apart stretch of the matrix: one
// sequential stream per core leaves DRAM bandwidth unused on Sapphire Rapids (5632x2048 cold,
// one core: 2 streams ~1.05x, 4 streams ~1.2x the row-major quad kernel; 8 no better than 4).
constexpr int kStreams = 4;
// Block pairs each stream prefetches ahead (2.3 KiB; 8 pairs was no better).
constexpr int64_t kPrefetchPairs = 4;

inline int32_t act_dword(const int8_t* q, int j) {
  int32_t v;
  std::memcpy(&v, q + 4 * j, 4);
  return v;
}

// S groups (16 rows each) at once, block by block: the activation block is broadcast once for
// all S, and the S groups are S sequential streams (see below).
template <int S>
void gemv_groups(int64_t nb, const std::byte* const* group, const ActQ8Row& x, float* const* out) {
  const __m512i mask = _mm512_set1_epi8(0x0F);
  __m512 acc[S];
  for (int s = 0; s < S; ++s) acc[s] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t pair_off = b / 2 * kX16PairBytes;
    if (b % 2 == 0) {
      for (int s = 0; s < S; ++s) {
        const char* ahead =
            reinterpret_cast<const char*>(group[s]) + pair_off + kPrefetchPairs * kX16PairBytes;
        for (int line = 0; line < 9; ++line) _mm_prefetch(ahead + 64 * line, _MM_HINT_T0);
      }
    }
    __m512i xb[8];
    for (int j = 0; j < 8; ++j) xb[j] = _mm512_set1_epi32(act_dword(x.q + 32 * b, j));
    const __m512 dx = _mm512_set1_ps(x.d[b]);
    const __m512i bias = _mm512_set1_epi32(-8 * x.sum[b]);
    for (int s = 0; s < S; ++s) {
      const std::byte* pair = group[s] + pair_off;
      const std::byte* qs = pair + 64 + 256 * (b % 2);
      // Two chains (vpdpbusd latency ~5), joined at the end.
      __m512i even = bias, odd = _mm512_setzero_si512();
      for (int m = 0; m < 4; m += 2) {
        const __m512i q0 = _mm512_load_si512(qs + 64 * m);
        const __m512i q1 = _mm512_load_si512(qs + 64 * (m + 1));
        even = _mm512_dpbusd_epi32(even, _mm512_and_si512(q0, mask), xb[m]);
        odd = _mm512_dpbusd_epi32(odd, _mm512_and_si512(q1, mask), xb[m + 1]);
        even =
            _mm512_dpbusd_epi32(even, _mm512_and_si512(_mm512_srli_epi16(q0, 4), mask), xb[m + 4]);
        odd = _mm512_dpbusd_epi32(odd, _mm512_and_si512(_mm512_srli_epi16(q1, 4), mask), xb[m + 5]);
      }
      const __m512 dw =
          _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(pair + 32 * (b % 2))));
      acc[s] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(even, odd)),
                               _mm512_mul_ps(dw, dx), acc[s]);
    }
  }
  for (int s = 0; s < S; ++s) _mm512_storeu_ps(out[s], acc[s]);
}

}  // namespace

void gemv_q4_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out) {
  const int64_t nb = n / 32;
  const int64_t group_bytes = x16_group_bytes(n);
  const ActQ8Row x = act_q8_row(act, n);
  // Groups from S far-apart stretches at a time: one sequential stream per core does not keep
  // enough reads in flight (ops/gemv_streams.h).
  const std::byte* group[kStreams];
  float* outs[kStreams];
  const int64_t g0 = gemv_stream_tiles(n_groups, kStreams, [&](int64_t j, int64_t per_stream) {
    for (int s = 0; s < kStreams; ++s) {
      group[s] = groups + (s * per_stream + j) * group_bytes;
      outs[s] = out + (s * per_stream + j) * kX16Rows;
    }
    gemv_groups<kStreams>(nb, group, x, outs);
  });
  for (int64_t g = g0; g < n_groups; ++g) {
    group[0] = groups + g * group_bytes;
    outs[0] = out + g * kX16Rows;
    gemv_groups<1>(nb, group, x, outs);
  }
}

void gemm_q4_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride) {
  avx512::X16Tiles<false> src{groups, x16_group_bytes(n)};
  avx512::hex_gemm<8>(n, src, n_groups * kX16Rows, act, act_stride, nt, out, out_stride);
}

}  // namespace pacer::ops
