#pragma once
// Q5_K x Q8_K on AVX-512 (F/BW/VL/DQ; the VNNI variant adds vpdpwssd).
//
// The Q4_K kernel (q4_k_avx512.cpp) with the fifth bit. One zmm holds 64 qs bytes = chunks 2k
// and 2k+1 (k = 0, 1): its low nibbles are sub-blocks 4k (bytes 0-31) and 4k+2 (bytes 32-63),
// its high nibbles 4k+1 and 4k+3, each in element order. The 32 qh bytes, broadcast to both
// 256-bit halves, give bit 4 of element 32j + l as bit j of byte l, so one vptestmb against a
// per-half bit selector ([1 << 4k | 1 << (4k+2)] for the low nibbles, [1 << (4k+1) | 1 << (4k+3)]
// for the high ones) yields the mask of quants that gain 16, added with one masked vpaddb. Then:
//   vpmaddubsw(q, x): q in [0, 31], x in [-127, 127]: pair sums |.| <= 7874, no saturation;
//   vpmaddwd(p, sc):  int16 sub-block scales, one per 256-bit half: lane |.| <= 992,124;
// 4 such per lane and super-block are exact in int32 and in float. The mins term is one vpmaddwd
// of the 8 mins with the 8 activation pair sums. Rows run 4 at a time: the activations are
// arranged once per super-block and serve all 4 rows; each row prefetches its own stream
// kPrefetchBlocks super-blocks ahead (kquant_simd.h).
//
// The kernels shared by q5_k_avx512.cpp (AVX-512 F/BW/VL/DQ) and q5_k_avx512vnni.cpp
// (+VNNI): each includes this header and is compiled with exactly its own tier's flags, so the
// plain AVX-512 entry points can hold no VNNI instruction (tests/check_isa_tiers.sh). The
// anonymous namespace gives each of the two TUs its own copy, built for that TU's tier.
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>

#include "ops/gemv_streams.h"
#include "ops/kquant_simd.h"
#include "ops/q5_k.h"

// GCC 12 reports the `__Y = __Y` placeholders of its own AVX-512 headers (bug 105593, fixed in
// 13) at the call sites where they are inlined. No variable of this file is uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace pacer::ops {
namespace {

// Activation quants of one super-block arranged like the nibbles of the two qs zmm: lo[k]
// matches the low nibbles of zmm k, hi[k] its high nibbles.
struct Q8KNibbleOrder {
  __m512i lo[2], hi[2];
};

inline Q8KNibbleOrder arrange_activations(const int8_t* xq) {
  Q8KNibbleOrder a;
  for (int k = 0; k < 2; ++k) {
    const int8_t* base = xq + 128 * k;
    a.lo[k] = avx512::load_pair_256(base, base + 64);
    a.hi[k] = avx512::load_pair_256(base + 32, base + 96);
  }
  return a;
}

// Per-tile constants: vpermw indices spreading int16 sc_0..sc_7 over the sub-blocks of the
// nibbles of zmm k (lo / hi as in Q8KNibbleOrder), and the qh bit selectors of the same.
struct Q5KTileConstants {
  __m512i scale_lo[2], scale_hi[2];
  __m512i bit_lo[2], bit_hi[2];
};

inline Q5KTileConstants tile_constants() {
  // Word i of the result is `first` if i < 16, else `second`.
  const auto halves16 = [](int first, int second) {
    return _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(static_cast<short>(first)),
                                   _mm512_set1_epi16(static_cast<short>(second)));
  };
  const auto halves8 = [](int first, int second) {
    return _mm512_mask_blend_epi64(0xF0, _mm512_set1_epi8(static_cast<char>(first)),
                                   _mm512_set1_epi8(static_cast<char>(second)));
  };
  Q5KTileConstants t;
  for (int k = 0; k < 2; ++k) {
    t.scale_lo[k] = halves16(4 * k, 4 * k + 2);
    t.scale_hi[k] = halves16(4 * k + 1, 4 * k + 3);
    t.bit_lo[k] = halves8(1 << (4 * k), 1 << (4 * k + 2));
    t.bit_hi[k] = halves8(1 << (4 * k + 1), 1 << (4 * k + 3));
  }
  return t;
}

// acc + vpmaddwd(p, s): with VNNI one vpdpwssd, else vpmaddwd + vpaddd (same exact result).
template <bool kVnni>
inline __m512i madd_accumulate(__m512i acc, __m512i p, __m512i s) {
  if constexpr (kVnni) {
    return _mm512_dpwssd_epi32(acc, p, s);
  } else {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p, s));
  }
}

// R rows of n elements (row r at w + r*stride) dotted with one Q8_K row: out[r * out_step].
template <bool kVnni, int R>
void q5_K_rows_tile(int64_t n, const std::byte* w, int64_t stride, const std::byte* act, float* out,
                    int64_t out_step = 1) {
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  const __m512i low_nibbles = _mm512_set1_epi8(0x0F), sixteen = _mm512_set1_epi8(16);
  const Q5KTileConstants tc = tile_constants();
  __m512 acc[R];      // the scale part, 16 lanes per row
  __m128 acc_min[R];  // the mins part, 4 lanes per row
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps(), acc_min[r] = _mm_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const Q8KNibbleOrder xa = arrange_activations(x[b].qs);
    const __m128i pair_sums =
        _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].bsums)),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].bsums + 8)));
    const __m128 dx = _mm_set1_ps(x[b].d);
    for (int r = 0; r < R; ++r) {
      const BlockQ5_K* blk = reinterpret_cast<const BlockQ5_K*>(w + r * stride) + b;
      prefetch_ahead(blk);
      const __m128i sc_m = unpack_6bit_scales_mins(blk->scales);  // scales + qh[0..3]
      const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sc_m));
      const __m512i qh =
          _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qh)));
      __m512i isum = _mm512_setzero_si512();
      for (int k = 0; k < 2; ++k) {
        const __m512i q = _mm512_loadu_si512(blk->qs + 64 * k);
        __m512i q_lo = _mm512_and_si512(q, low_nibbles);
        __m512i q_hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low_nibbles);
        q_lo = _mm512_mask_add_epi8(q_lo, _mm512_test_epi8_mask(qh, tc.bit_lo[k]), q_lo, sixteen);
        q_hi = _mm512_mask_add_epi8(q_hi, _mm512_test_epi8_mask(qh, tc.bit_hi[k]), q_hi, sixteen);
        const __m512i s_lo = _mm512_permutexvar_epi16(tc.scale_lo[k], sc16);
        const __m512i s_hi = _mm512_permutexvar_epi16(tc.scale_hi[k], sc16);
        isum = madd_accumulate<kVnni>(isum, _mm512_maddubs_epi16(q_lo, xa.lo[k]), s_lo);
        isum = madd_accumulate<kVnni>(isum, _mm512_maddubs_epi16(q_hi, xa.hi[k]), s_hi);
      }
      const __m128i mins16 = _mm_cvtepu8_epi16(_mm_srli_si128(sc_m, 8));
      const __m128i msum = _mm_madd_epi16(mins16, pair_sums);  // |lane| <= 2 * 63 * 4064
      const __m128 f = fp16_pair_times(blk, dx);               // d*dx, dmin*dx
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_broadcastss_ps(f), acc[r]);
      acc_min[r] = _mm_fnmadd_ps(_mm_cvtepi32_ps(msum), _mm_permute_ps(f, 0x55), acc_min[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    out[r * out_step] =
        _mm512_reduce_add_ps(_mm512_add_ps(acc[r], _mm512_zextps128_ps512(acc_min[r])));
  }
}

// One row dotted with T tokens (token t's Q8_K row at act + t * act_stride; result to
// out[t * out_stride]): each weight block's 5-bit quants and scale vectors are built once for all
// T tokens; per (row, token) the sums run exactly as in q5_K_rows_tile (bit-identical GEMM).
template <bool kVnni, int T>
void q5_K_gemm_row(int64_t n, const std::byte* w_row, const std::byte* act, int64_t act_stride,
                   float* out, int64_t out_stride, const Q5KTileConstants& tc) {
  const __m512i low_nibbles = _mm512_set1_epi8(0x0F), sixteen = _mm512_set1_epi8(16);
  const BlockQ8_K* x[T];
  __m512 acc[T];
  __m128 acc_min[T];
  for (int t = 0; t < T; ++t) {
    x[t] = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride);
    acc[t] = _mm512_setzero_ps(), acc_min[t] = _mm_setzero_ps();
  }
  const auto* blocks = reinterpret_cast<const BlockQ5_K*>(w_row);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ5_K* blk = blocks + b;
    const __m128i sc_m = unpack_6bit_scales_mins(blk->scales);
    const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sc_m));
    const __m512i qh =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qh)));
    __m512i q_lo[2], q_hi[2], s_lo[2], s_hi[2];
    for (int k = 0; k < 2; ++k) {
      const __m512i q = _mm512_loadu_si512(blk->qs + 64 * k);
      q_lo[k] = _mm512_and_si512(q, low_nibbles);
      q_hi[k] = _mm512_and_si512(_mm512_srli_epi16(q, 4), low_nibbles);
      q_lo[k] =
          _mm512_mask_add_epi8(q_lo[k], _mm512_test_epi8_mask(qh, tc.bit_lo[k]), q_lo[k], sixteen);
      q_hi[k] =
          _mm512_mask_add_epi8(q_hi[k], _mm512_test_epi8_mask(qh, tc.bit_hi[k]), q_hi[k], sixteen);
      s_lo[k] = _mm512_permutexvar_epi16(tc.scale_lo[k], sc16);
      s_hi[k] = _mm512_permutexvar_epi16(tc.scale_hi[k], sc16);
    }
    const __m128i mins16 = _mm_cvtepu8_epi16(_mm_srli_si128(sc_m, 8));
    for (int t = 0; t < T; ++t) {
      const BlockQ8_K& xb = x[t][b];
      const Q8KNibbleOrder xa = arrange_activations(xb.qs);
      const __m128i pair_sums =
          _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums)),
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums + 8)));
      __m512i isum = _mm512_setzero_si512();
      for (int k = 0; k < 2; ++k) {
        isum = madd_accumulate<kVnni>(isum, _mm512_maddubs_epi16(q_lo[k], xa.lo[k]), s_lo[k]);
        isum = madd_accumulate<kVnni>(isum, _mm512_maddubs_epi16(q_hi[k], xa.hi[k]), s_hi[k]);
      }
      const __m128i msum = _mm_madd_epi16(mins16, pair_sums);    // |lane| <= 2 * 63 * 4064
      const __m128 f = fp16_pair_times(blk, _mm_set1_ps(xb.d));  // d*dx, dmin*dx
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_broadcastss_ps(f), acc[t]);
      acc_min[t] = _mm_fnmadd_ps(_mm_cvtepi32_ps(msum), _mm_permute_ps(f, 0x55), acc_min[t]);
    }
  }
  for (int t = 0; t < T; ++t) {
    out[t * out_stride] =
        _mm512_reduce_add_ps(_mm512_add_ps(acc[t], _mm512_zextps128_ps512(acc_min[t])));
  }
}

template <bool kVnni>
void q5_K_gemm(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const std::byte* act,
               int64_t act_stride, int64_t nt, float* out, int64_t out_stride) {
  const Q5KTileConstants tc = tile_constants();
  gemm_rows_four_tokens(nr, nt, [&](auto tokens, int64_t r, int64_t t) {
    q5_K_gemm_row<kVnni, decltype(tokens)::value>(n, w + r * stride, act + t * act_stride,
                                                  act_stride, out + t * out_stride + r, out_stride,
                                                  tc);
  });
}

template <bool kVnni>
void q5_K_dot_rows(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const std::byte* act,
                   float* out) {
  constexpr int kRows = 4;
  int64_t r = gemv_stream_tiles(nr, kRows, [&](int64_t j, int64_t per_stream) {
    q5_K_rows_tile<kVnni, kRows>(n, w + j * stride, per_stream * stride, act, out + j, per_stream);
  });
  for (; r + kRows <= nr; r += kRows)
    q5_K_rows_tile<kVnni, kRows>(n, w + r * stride, stride, act, out + r);
  for (; r < nr; ++r) q5_K_rows_tile<kVnni, 1>(n, w + r * stride, stride, act, out + r);
}

}  // namespace

}  // namespace pacer::ops
