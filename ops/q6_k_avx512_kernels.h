#pragma once
// Q6_K x Q8_K on AVX-512 (BW/VL/DQ).
//
// Per half h of a super-block (elements 128h .. 128h+127) and row: the 64 ql bytes of the half
// are one zmm whose low nibbles are elements +0..63 and high nibbles +64..127, both in element
// order, so they line up with two plain 64-byte activation loads. The 32 qh bytes, broadcast to
// both 256-bit halves, supply bits 4-5 through per-half variable 16-bit shifts (left by 4 / 2 for
// elements +0..31 / +32..63, right by 0 / 2 for +64..95 / +96..127) and an AND with 0x30 (bits a
// shift drags in from the neighbouring byte fall outside the mask). Then, as on AVX2:
//   vpmaddubsw(q, x): q in [0, 63], x in [-127, 127]: pair sums |.| <= 16002, no saturation;
//   vpmaddwd(p, sc):  each 128-bit lane is one group of 16, its scale as int16: lane |.| <=
//                     4,096,512; 4 per lane and super-block, exact in int32;
// and the offset of 32 comes off once per super-block through the activation group sums (VNNI:
// vpdpwssd fuses each vpmaddwd with its accumulation). Rows run 4 at a time, each prefetching
// its own stream kPrefetchBlocks super-blocks ahead (kquant_simd.h).
//
// The kernels shared by q6_k_avx512.cpp (AVX-512 F/BW/VL/DQ) and q6_k_avx512vnni.cpp
// (+VNNI): each includes this header and is compiled with exactly its own tier's flags, so the
// plain AVX-512 entry points can hold no VNNI instruction (tests/check_isa_tiers.sh). The
// anonymous namespace gives each of the two TUs its own copy, built for that TU's tier.
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>

#include "ops/gemv_streams.h"
#include "ops/kquant_simd.h"
#include "ops/q6_k.h"

// GCC 12 reports the `__Y = __Y` placeholders of its own AVX-512 headers (bug 105593, fixed in
// 13) at the call sites where they are inlined, i.e. in this file, so matmul_simd_avx512.h's
// header-only silencing does not reach them here. No variable of this file is uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace pacer::ops {
namespace {

// acc + vpmaddwd(p, s): with VNNI one vpdpwssd, else vpmaddwd + vpaddd (same exact result).
template <bool kVnni>
inline __m512i madd_accumulate(__m512i acc, __m512i p, __m512i s) {
  if constexpr (kVnni) {
    return _mm512_dpwssd_epi32(acc, p, s);
  } else {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p, s));
  }
}

// vpermw index putting int16 scale `first + i` in every word of 128-bit lane i (i = 0..3).
inline __m512i lane_scale_index(int first) {
  return _mm512_setr_epi64(0x0001000100010001LL * first, 0x0001000100010001LL * first,
                           0x0001000100010001LL * (first + 1), 0x0001000100010001LL * (first + 1),
                           0x0001000100010001LL * (first + 2), 0x0001000100010001LL * (first + 2),
                           0x0001000100010001LL * (first + 3), 0x0001000100010001LL * (first + 3));
}

// R rows of n elements (row r at w + r*stride) dotted with one Q8_K row: out[r * out_step].
template <bool kVnni, int R>
void q6_K_rows_tile(int64_t n, const std::byte* w, int64_t stride, const std::byte* act, float* out,
                    int64_t out_step = 1) {
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
  // Shift counts per 16-bit word: 256-bit half 0 / half 1.
  const __m512i shl_lo =
      _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(4), _mm512_set1_epi16(2));
  const __m512i shr_hi =
      _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_setzero_si512(), _mm512_set1_epi16(2));
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].bsums));
    __m512i xs[2][2];  // [half][low / high nibbles]
    for (int h = 0; h < 2; ++h) {
      xs[h][0] = _mm512_loadu_si512(x[b].qs + 128 * h);
      xs[h][1] = _mm512_loadu_si512(x[b].qs + 128 * h + 64);
    }
    for (int r = 0; r < R; ++r) {
      const BlockQ6_K* blk = reinterpret_cast<const BlockQ6_K*>(w + r * stride) + b;
      prefetch_ahead(blk);
      const __m256i sc16 =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->scales)));
      const __m512i sc16z = _mm512_castsi256_si512(sc16);
      // -32 * sum_g sc_g * bsums[g], in the low 8 lanes.
      const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 5);
      __m512i isum = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(offset));
      for (int h = 0; h < 2; ++h) {
        const __m512i ql = _mm512_loadu_si512(blk->ql + 64 * h);
        const __m512i qh = _mm512_broadcast_i64x4(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qh + 32 * h)));
        const __m512i q_lo = _mm512_or_si512(
            _mm512_and_si512(ql, low4), _mm512_and_si512(_mm512_sllv_epi16(qh, shl_lo), bits45));
        const __m512i q_hi =
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                            _mm512_and_si512(_mm512_srlv_epi16(qh, shr_hi), bits45));
        const __m512i s_lo = _mm512_permutexvar_epi16(lane_scale_index(8 * h), sc16z);
        const __m512i s_hi = _mm512_permutexvar_epi16(lane_scale_index(8 * h + 4), sc16z);
        isum = madd_accumulate<kVnni>(isum, _mm512_maddubs_epi16(q_lo, xs[h][0]), s_lo);
        isum = madd_accumulate<kVnni>(isum, _mm512_maddubs_epi16(q_hi, xs[h][1]), s_hi);
      }
      const float d = avx512::fp32_from_fp16(blk->d) * x[b].d;
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r * out_step] = _mm512_reduce_add_ps(acc[r]);
}

// One row dotted with T tokens (token t's Q8_K row at act + t * act_stride; result to
// out[t * out_stride]): each weight block's 6-bit quants and scale vectors are built once for all
// T tokens; per (row, token) the sums run exactly as in q6_K_rows_tile (bit-identical GEMM).
template <bool kVnni, int T>
void q6_K_gemm_row(int64_t n, const std::byte* w_row, const std::byte* act, int64_t act_stride,
                   float* out, int64_t out_stride) {
  const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
  const __m512i shl_lo =
      _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(4), _mm512_set1_epi16(2));
  const __m512i shr_hi =
      _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_setzero_si512(), _mm512_set1_epi16(2));
  const BlockQ8_K* x[T];
  __m512 acc[T];
  for (int t = 0; t < T; ++t) {
    x[t] = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride);
    acc[t] = _mm512_setzero_ps();
  }
  const auto* blocks = reinterpret_cast<const BlockQ6_K*>(w_row);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ6_K* blk = blocks + b;
    const __m256i sc16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->scales)));
    const __m512i sc16z = _mm512_castsi256_si512(sc16);
    __m512i q[2][2], sv[2][2];  // [half][low / high nibbles]
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(blk->ql + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qh + 32 * h)));
      q[h][0] = _mm512_or_si512(_mm512_and_si512(ql, low4),
                                _mm512_and_si512(_mm512_sllv_epi16(qh, shl_lo), bits45));
      q[h][1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                _mm512_and_si512(_mm512_srlv_epi16(qh, shr_hi), bits45));
      sv[h][0] = _mm512_permutexvar_epi16(lane_scale_index(8 * h), sc16z);
      sv[h][1] = _mm512_permutexvar_epi16(lane_scale_index(8 * h + 4), sc16z);
    }
    const float dw = avx512::fp32_from_fp16(blk->d);
    for (int t = 0; t < T; ++t) {
      const BlockQ8_K& xb = x[t][b];
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
      const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 5);
      __m512i isum = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(offset));
      for (int h = 0; h < 2; ++h) {
        const __m512i x_lo = _mm512_loadu_si512(xb.qs + 128 * h);
        const __m512i x_hi = _mm512_loadu_si512(xb.qs + 128 * h + 64);
        isum = madd_accumulate<kVnni>(isum, _mm512_maddubs_epi16(q[h][0], x_lo), sv[h][0]);
        isum = madd_accumulate<kVnni>(isum, _mm512_maddubs_epi16(q[h][1], x_hi), sv[h][1]);
      }
      const float d = dw * xb.d;
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) out[t * out_stride] = _mm512_reduce_add_ps(acc[t]);
}

template <bool kVnni>
void q6_K_gemm(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const std::byte* act,
               int64_t act_stride, int64_t nt, float* out, int64_t out_stride) {
  gemm_rows_four_tokens(nr, nt, [&](auto tokens, int64_t r, int64_t t) {
    q6_K_gemm_row<kVnni, decltype(tokens)::value>(n, w + r * stride, act + t * act_stride,
                                                  act_stride, out + t * out_stride + r, out_stride);
  });
}

template <bool kVnni>
void q6_K_dot_rows(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const std::byte* act,
                   float* out) {
  constexpr int kRows = 4;
  int64_t r = gemv_stream_tiles(nr, kRows, [&](int64_t j, int64_t per_stream) {
    q6_K_rows_tile<kVnni, kRows>(n, w + j * stride, per_stream * stride, act, out + j, per_stream);
  });
  for (; r + kRows <= nr; r += kRows)
    q6_K_rows_tile<kVnni, kRows>(n, w + r * stride, stride, act, out + r);
  for (; r < nr; ++r) q6_K_rows_tile<kVnni, 1>(n, w + r * stride, stride, act, out + r);
}

}  // namespace

}  // namespace pacer::ops
