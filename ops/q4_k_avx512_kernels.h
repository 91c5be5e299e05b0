#pragma once
// Q4_K x Q8_K on AVX-512 (BW/VL/DQ).
//
// One zmm holds 64 qs bytes = chunks 2k and 2k+1 of a super-block (k = 0, 1). Its low nibbles
// are sub-blocks 4k (bytes 0-31) and 4k+2 (bytes 32-63), its high nibbles 4k+1 and 4k+3, each in
// element order; the matching activations are two 32-byte runs joined into one zmm, built once
// per super-block for all rows of the tile. Then, as on AVX2 (q4_k_avx2.cpp):
//   vpmaddubsw(q, x): q in [0, 15], x in [-127, 127]: pair sums |.| <= 3810, no saturation;
//   vpmaddwd(p, sc):  int16 sub-block scales, one per 256-bit half: lane |.| <= 480,060;
// 4 such per lane and super-block are exact in int32 and in float (VNNI: vpdpwssd fuses each
// vpmaddwd with its accumulation). The mins term is one vpmaddwd of the 8 mins with the 8
// activation pair sums, as on AVX2. Rows run 4 at a time, each prefetching its own stream
// kPrefetchBlocks super-blocks ahead (kquant_simd.h).
//
// The kernels shared by q4_k_avx512.cpp (AVX-512 F/BW/VL/DQ) and q4_k_avx512vnni.cpp
// (+VNNI): each includes this header and is compiled with exactly its own tier's flags, so the
// plain AVX-512 entry points can hold no VNNI instruction (tests/check_isa_tiers.sh). The
// anonymous namespace gives each of the two TUs its own copy, built for that TU's tier.
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>

#include "ops/gemv_streams.h"
#include "ops/kquant_simd.h"
#include "ops/q4_k.h"

// GCC 12 reports the `__Y = __Y` placeholders of its own AVX-512 headers (bug 105593, fixed in
// 13) at the call sites where they are inlined, i.e. in this file, so matmul_simd_avx512.h's
// header-only silencing does not reach them here. No variable of this file is uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace pacer::ops {
namespace {

// Activation quants of one super-block arranged like the nibbles of the two qs zmm (see the
// file comment): lo[k] matches the low nibbles of zmm k, hi[k] its high nibbles.
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

// int16 scale vectors of one block: lo[k] = [sc_{4k} x16 | sc_{4k+2} x16], hi[k] = [sc_{4k+1} x16
// | sc_{4k+3} x16] (the sub-blocks of zmm k's low / high nibbles); mins16 = m_0..m_7 as int16.
struct Q4KScaleVectors {
  __m512i lo[2], hi[2];
  __m128i mins16;
};

// vpermw indices that spread int16 sc_0..sc_7 into Q4KScaleVectors' layout; built once per tile
// (kept in registers: rebuilt per block they cost a mask move and two broadcasts each).
struct Q4KScaleIndex {
  __m512i lo[2], hi[2];
};

inline Q4KScaleIndex scale_index() {
  // Word i of the result takes scale `first` if i < 16, else `second`.
  const auto index = [](int first, int second) {
    return _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(static_cast<short>(first)),
                                   _mm512_set1_epi16(static_cast<short>(second)));
  };
  Q4KScaleIndex idx;
  for (int k = 0; k < 2; ++k) {
    idx.lo[k] = index(4 * k, 4 * k + 2);
    idx.hi[k] = index(4 * k + 1, 4 * k + 3);
  }
  return idx;
}

inline Q4KScaleVectors scale_vectors(const BlockQ4_K* blk, const Q4KScaleIndex& idx) {
  const __m128i sc_m = unpack_q4_K_scales_mins(blk);
  const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sc_m));  // int16 sc_0..sc_7
  Q4KScaleVectors v;
  for (int k = 0; k < 2; ++k) {
    v.lo[k] = _mm512_permutexvar_epi16(idx.lo[k], sc16);
    v.hi[k] = _mm512_permutexvar_epi16(idx.hi[k], sc16);
  }
  v.mins16 = _mm_cvtepu8_epi16(_mm_srli_si128(sc_m, 8));
  return v;
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
void q4_K_rows_tile(int64_t n, const std::byte* w, int64_t stride, const std::byte* act, float* out,
                    int64_t out_step = 1) {
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
  const Q4KScaleIndex idx = scale_index();
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
      const BlockQ4_K* blk = reinterpret_cast<const BlockQ4_K*>(w + r * stride) + b;
      prefetch_ahead(blk);
      const Q4KScaleVectors sv = scale_vectors(blk, idx);
      __m512i isum;
      for (int k = 0; k < 2; ++k) {
        const __m512i q = _mm512_loadu_si512(blk->qs + 64 * k);
        const __m512i q_lo = _mm512_and_si512(q, low_nibbles);
        const __m512i q_hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low_nibbles);
        const __m512i p_lo = _mm512_maddubs_epi16(q_lo, xa.lo[k]);
        isum = k == 0 ? _mm512_madd_epi16(p_lo, sv.lo[k])
                      : madd_accumulate<kVnni>(isum, p_lo, sv.lo[k]);
        isum = madd_accumulate<kVnni>(isum, _mm512_maddubs_epi16(q_hi, xa.hi[k]), sv.hi[k]);
      }
      const __m128i msum = _mm_madd_epi16(sv.mins16, pair_sums);  // |lane| <= 2 * 63 * 4064
      const __m128 f = q4_K_factors(blk, dx);                     // d*dx, dmin*dx
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
// out[t * out_stride]). Each weight block is loaded, split into nibbles and its scales spread
// once for all T tokens; per (row, token) the integer sums and the float accumulation run exactly
// as in q4_K_rows_tile, so the GEMM equals dot_rows bit for bit.
template <bool kVnni, int T>
void q4_K_gemm_row(int64_t n, const std::byte* w_row, const std::byte* act, int64_t act_stride,
                   float* out, int64_t out_stride, const Q4KScaleIndex& idx) {
  const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
  const BlockQ8_K* x[T];
  __m512 acc[T];
  __m128 acc_min[T];
  for (int t = 0; t < T; ++t) {
    x[t] = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride);
    acc[t] = _mm512_setzero_ps(), acc_min[t] = _mm_setzero_ps();
  }
  const auto* blocks = reinterpret_cast<const BlockQ4_K*>(w_row);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ4_K* blk = blocks + b;
    const Q4KScaleVectors sv = scale_vectors(blk, idx);
    __m512i q_lo[2], q_hi[2];
    for (int k = 0; k < 2; ++k) {
      const __m512i q = _mm512_loadu_si512(blk->qs + 64 * k);
      q_lo[k] = _mm512_and_si512(q, low_nibbles);
      q_hi[k] = _mm512_and_si512(_mm512_srli_epi16(q, 4), low_nibbles);
    }
    for (int t = 0; t < T; ++t) {
      const BlockQ8_K& xb = x[t][b];
      const Q8KNibbleOrder xa = arrange_activations(xb.qs);
      const __m128i pair_sums =
          _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums)),
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums + 8)));
      __m512i isum;
      for (int k = 0; k < 2; ++k) {
        const __m512i p_lo = _mm512_maddubs_epi16(q_lo[k], xa.lo[k]);
        isum = k == 0 ? _mm512_madd_epi16(p_lo, sv.lo[k])
                      : madd_accumulate<kVnni>(isum, p_lo, sv.lo[k]);
        isum = madd_accumulate<kVnni>(isum, _mm512_maddubs_epi16(q_hi[k], xa.hi[k]), sv.hi[k]);
      }
      const __m128i msum = _mm_madd_epi16(sv.mins16, pair_sums);  // |lane| <= 2 * 63 * 4064
      const __m128 f = q4_K_factors(blk, _mm_set1_ps(xb.d));      // d*dx, dmin*dx
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_broadcastss_ps(f), acc[t]);
      acc_min[t] = _mm_fnmadd_ps(_mm_cvtepi32_ps(msum), _mm_permute_ps(f, 0x55), acc_min[t]);
    }
  }
  for (int t = 0; t < T; ++t) {
    out[t * out_stride] =
        _mm512_reduce_add_ps(_mm512_add_ps(acc[t], _mm512_zextps128_ps512(acc_min[t])));
  }
}

// The GemmFn: every row of the (L1-sized) tile against the tokens, four at a time.
template <bool kVnni>
void q4_K_gemm(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const std::byte* act,
               int64_t act_stride, int64_t nt, float* out, int64_t out_stride) {
  const Q4KScaleIndex idx = scale_index();
  gemm_rows_four_tokens(nr, nt, [&](auto tokens, int64_t r, int64_t t) {
    q4_K_gemm_row<kVnni, decltype(tokens)::value>(n, w + r * stride, act + t * act_stride,
                                                  act_stride, out + t * out_stride + r, out_stride,
                                                  idx);
  });
}

template <bool kVnni>
void q4_K_dot_rows(int64_t n, const std::byte* w, int64_t stride, int64_t nr, const std::byte* act,
                   float* out) {
  constexpr int kRows = 4;
  int64_t r = gemv_stream_tiles(nr, kRows, [&](int64_t j, int64_t per_stream) {
    q4_K_rows_tile<kVnni, kRows>(n, w + j * stride, per_stream * stride, act, out + j, per_stream);
  });
  for (; r + kRows <= nr; r += kRows)
    q4_K_rows_tile<kVnni, kRows>(n, w + r * stride, stride, act, out + r);
  for (; r < nr; ++r) q4_K_rows_tile<kVnni, 1>(n, w + r * stride, stride, act, out + r);
}

}  // namespace

}  // namespace pacer::ops
