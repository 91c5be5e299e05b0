// BF16 weights interleaved by 16 rows (column pairs, interleaved.h) x activations rounded to
// bf16: the prefill GEMM on AVX512_BF16's vdpbf16ps, which multiplies a pair of bf16 columns of
// 16 rows by a pair of bf16 activations and adds both products to fp32 sums in one instruction:
// twice the multiply-adds per instruction of the exact fp32 GEMM, which is what llama.cpp runs
// for BF16 weights on such CPUs (its activation type for BF16 is BF16: rounded to nearest even,
// products summed in fp32). Decode keeps fp32 activations (interleaved_float_avx512.cpp), where
// the bytes, not the arithmetic, set the speed.
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own `__Y = __Y` placeholder (GCC
// bug 105593, fixed in 13; here from _mm512_srli_epi32 and _mm512_cvtepi32_epi16), attributed to
// header lines: silenced for the header alone, as in ops/matmul_simd_avx512.h.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ops/interleaved.h"
#include "ops/parallel.h"

namespace pacer::ops {
namespace {

// A register tile: S groups (16 rows each, one vector per column pair) x T tokens, S * T
// vdpbf16ps chains. Per column pair S weight loads and T activation broadcasts feed S * T
// instructions: 3 x 8 makes 11 loads per 24, where one group x 8 tokens made 9 per 8 and the
// loads, not the vdpbf16ps, set the pace. One Zen 5 core, TinyLlama BF16 pp64: 1.10-1.29x the
// 1 x 8 tile; 3 x 8 ran 1.01-1.08x 4 x 6 and 1.06-1.21x 2 x 12.
constexpr int kGroupsPerTile = 3;
constexpr int kTokensPerTile = 8;

// uint32 pairs per token in the prepared activations, padded to whole 64-byte lines.
int64_t prepared_pairs(int64_t n) {
  return ((n + 1) / 2 + 15) / 16 * 16;
}

// out[t * out_stride + 16 s + i] for T tokens (token t's bf16 pairs at xb + t * xb_stride) and
// the 16 rows i of S groups (group s at group + s * group_bytes): each (row, token) one chain
// over the pairs in order.
template <int S, int T>
void tile(int64_t pairs, const std::byte* group, int64_t group_bytes, const uint32_t* xb,
          int64_t xb_stride, float* out, int64_t out_stride) {
  __m512 acc[S][T];
  for (int s = 0; s < S; ++s) {
    for (int t = 0; t < T; ++t) acc[s][t] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh w[S];
    for (int s = 0; s < S; ++s) {
      w[s] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(group + s * group_bytes + 64 * p));
    }
    for (int t = 0; t < T; ++t) {
      const auto x =
          reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(xb[t * xb_stride + p])));
      for (int s = 0; s < S; ++s) acc[s][t] = _mm512_dpbf16_ps(acc[s][t], w[s], x);
    }
  }
  for (int s = 0; s < S; ++s) {
    for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + t * out_stride + 16 * s, acc[s][t]);
  }
}

// Tiles of S groups over every token: kTokensPerTile at a time, then 4 and 1 for the rest.
template <int S>
void group_tiles(int64_t pairs, const std::byte* group, int64_t group_bytes, const uint32_t* xb,
                 int64_t xb_stride, int64_t nt, float* out, int64_t out_stride) {
  int64_t t = 0;
  auto run = [&](auto tokens) {
    constexpr int kT = decltype(tokens)::value;
    for (; t + kT <= nt; t += kT) {
      tile<S, kT>(pairs, group, group_bytes, xb + t * xb_stride, xb_stride, out + t * out_stride,
                  out_stride);
    }
  };
  run(std::integral_constant<int, kTokensPerTile>{});
  run(std::integral_constant<int, 4>{});
  run(std::integral_constant<int, 1>{});
}

}  // namespace

int64_t gemm_prepare_bf16_pairs_avx512bf16(int64_t n, const std::byte* act, int64_t act_stride,
                                           int64_t nt, std::byte* dst, int64_t part,
                                           int64_t parts) {
  if (nt < kX16Bf16DotMinTokens) return 0;
  const int64_t stride = prepared_pairs(n);
  const int64_t bytes = nt * stride * static_cast<int64_t>(sizeof(uint32_t));
  if (dst == nullptr) return bytes;
  // Share `part` of `parts`: a range of tokens. fp32_to_bf16 (fp16.h) 16 floats at a time, in
  // integer arithmetic: round to nearest even, NaN made quiet, denormals kept (vcvtne2ps2bf16
  // would flush them to zero, which the scalar conversion does not).
  const auto [t0, t1] = static_chunk(nt, 1, static_cast<int>(parts), static_cast<int>(part));
  const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff),
                quiet = _mm512_set1_epi32(0x40);
  for (int64_t t = t0; t < t1; ++t) {
    const auto* x = reinterpret_cast<const float*>(act + t * act_stride);
    auto* xb = reinterpret_cast<uint16_t*>(dst) + 2 * t * stride;
    for (int64_t c = 0; c < 2 * stride; c += 16) {  // past n: zeros, to the padded end
      const __mmask16 m =
          c >= n ? 0 : static_cast<__mmask16>(n - c >= 16 ? 0xffff : (1u << (n - c)) - 1);
      const __m512 v = _mm512_maskz_loadu_ps(m, x + c);
      const __m512i xi = _mm512_castps_si512(v);
      const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(xi, 16), one);
      __m512i r = _mm512_srli_epi32(_mm512_add_epi32(xi, _mm512_add_epi32(half, lsb)), 16);
      const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(xi, 16), quiet);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(xb + c), _mm512_cvtepi32_epi16(r));
    }
  }
  return bytes;
}

void gemm_prepared_bf16x16_bf16_avx512bf16(int64_t n, const std::byte* groups, int64_t n_groups,
                                           const std::byte* act, int64_t act_stride,
                                           const std::byte* prepared, int64_t nt, float* out,
                                           int64_t out_stride) {
  if (prepared == nullptr) {  // too few tokens: the exact fp32 path
    gemm_prepared_bf16x16_f32_avx512(n, groups, n_groups, act, act_stride, nullptr, nt, out,
                                     out_stride);
    return;
  }
  const int64_t pairs = (n + 1) / 2, stride = prepared_pairs(n);
  const auto* xb = reinterpret_cast<const uint32_t*>(prepared);
  const int64_t group_bytes = x16_group_bytes(WeightType::BF16, n);
  // Tiles of 3 groups, then the rest as tiles of 2 (a lone group only for 1 group in all: 4 is
  // 2 + 2, not 3 + 1, since a lone group's tile is the slow one).
  const int64_t triples = n_groups % kGroupsPerTile == 1 && n_groups > 1
                              ? n_groups / kGroupsPerTile - 1
                              : n_groups / kGroupsPerTile;
  int64_t g = 0;
  auto run = [&](auto groups_per_tile) {
    constexpr int kS = decltype(groups_per_tile)::value;
    group_tiles<kS>(pairs, groups + g * group_bytes, group_bytes, xb, stride, nt,
                    out + g * kX16Rows, out_stride);
    g += kS;
  };
  while (g < triples * kGroupsPerTile) run(std::integral_constant<int, kGroupsPerTile>{});
  while (n_groups - g >= 2) run(std::integral_constant<int, 2>{});
  if (g < n_groups) run(std::integral_constant<int, 1>{});
}

void gemm_bf16x16_bf16_avx512bf16(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride) {
  const int64_t bytes = gemm_prepare_bf16_pairs_avx512bf16(n, act, act_stride, nt, nullptr, 0, 1);
  std::vector<uint32_t> buf(static_cast<size_t>(bytes / 4));
  auto* xb = reinterpret_cast<std::byte*>(buf.data());
  if (bytes > 0) gemm_prepare_bf16_pairs_avx512bf16(n, act, act_stride, nt, xb, 0, 1);
  gemm_prepared_bf16x16_bf16_avx512bf16(n, groups, n_groups, act, act_stride,
                                        bytes > 0 ? xb : nullptr, nt, out, out_stride);
}

}  // namespace pacer::ops
