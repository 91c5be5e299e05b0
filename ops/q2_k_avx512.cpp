// Q2_K x Q8_K on AVX-512 (F/BW/VL/DQ only; no VNNI instruction).
//
// Per half t of a super-block (elements 128t .. 128t+127) and row, two zmm of 64 quants each:
// zmm k holds runs 2k and 2k+1 (elements 128t + 64k + 0..63, in order, matching one plain
// 64-byte activation load). The 32 qs bytes of the half, broadcast to both 256-bit halves, give
// the quants through one per-half variable 16-bit shift (by 4k / 4k+2) and an AND with 3. Each
// 128-bit lane of zmm k is one group (8t + 4k + lane), its int16 scale spread by one vpermw. Then
//   vpmaddubsw(q, x): q in [0, 3], x in [-127, 127]: pair sums |.| <= 762;
//   vpmaddwd(p, sc):  4-bit scales: |lane| <= 22,860; 4 per lane and super-block;
// all exact in int32 and in float. The mins term is one vpmaddwd of the 16 mins with the 16
// activation group sums. Rows run 4 at a time sharing the activation loads, each prefetching its
// own stream (kquant_simd.h). The prefill GEMM unpacks each weight block once for four tokens.
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>

#include "ops/gemv_streams.h"
#include "ops/kquant_runs_avx512.h"
#include "ops/kquant_simd.h"
#include "ops/q2_k.h"

// GCC 12 reports the `__Y = __Y` placeholders of its own AVX-512 headers (bug 105593, fixed in
// 13) at the call sites where they are inlined. No variable of this file is uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace pacer::ops {
namespace {

// Constants of the unpacking, built once per tile or GEMM call.
struct Q2KConsts {
  __m512i two_bits = _mm512_set1_epi8(0x03);
  __m512i shift[2] = {halves16(0, 2), halves16(4, 6)};  // [k]: runs 2k, 2k+1
  __m512i scale_index[2][2];                            // [t][k]
  Q2KConsts() {
    for (int t = 0; t < 2; ++t) {
      for (int k = 0; k < 2; ++k) scale_index[t][k] = lane_scale_index(8 * t + 4 * k);
    }
  }
};

// One weight block unpacked: q[t][k] the quants of zmm k of half t, s[t][k] their int16 scales,
// m16 the 16 mins.
struct Q2KUnpacked {
  __m512i q[2][2], s[2][2];
  __m256i m16;
};

inline Q2KUnpacked unpack_block(const BlockQ2_K* blk, const Q2KConsts& c) {
  const __m128i nibble = _mm_set1_epi8(0x0F);
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->scales));
  const __m512i sc16z = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(v, nibble)));
  Q2KUnpacked w;
  w.m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), nibble));
  for (int t = 0; t < 2; ++t) {
    const __m512i qs = _mm512_broadcast_i64x4(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs + 32 * t)));
    for (int k = 0; k < 2; ++k) {
      w.q[t][k] = _mm512_and_si512(_mm512_srlv_epi16(qs, c.shift[k]), c.two_bits);
      w.s[t][k] = _mm512_permutexvar_epi16(c.scale_index[t][k], sc16z);
    }
  }
  return w;
}

// Adds one block's scale and mins parts to the row's accumulators (f = d*dx, dmin*dx).
inline void accumulate_block(const Q2KUnpacked& w, const Q8KRuns& a, __m128 f, __m512& acc,
                             __m256& acc_min) {
  const __m256i msum = _mm256_madd_epi16(w.m16, a.bsums);  // |lane| <= 2 * 15 * 2032
  __m512i isum = _mm512_setzero_si512();
  for (int t = 0; t < 2; ++t) {
    for (int k = 0; k < 2; ++k) {
      isum = _mm512_add_epi32(
          isum, _mm512_madd_epi16(_mm512_maddubs_epi16(w.q[t][k], a.xs[t][k]), w.s[t][k]));
    }
  }
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_broadcastss_ps(f), acc);
  acc_min = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum),
                             _mm256_broadcastss_ps(_mm_permute_ps(f, 0x55)), acc_min);
}

// R rows of n elements (row r at w + r*stride) dotted with one Q8_K row: out[r * out_step].
template <int R>
void q2_K_rows_tile(int64_t n, const std::byte* w, int64_t stride, const std::byte* act, float* out,
                    int64_t out_step = 1) {
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  const Q2KConsts c;
  __m512 acc[R];
  __m256 acc_min[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps(), acc_min[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const Q8KRuns a = load_runs(x[b]);
    const __m128 dx = _mm_set1_ps(x[b].d);
    for (int r = 0; r < R; ++r) {
      const BlockQ2_K* blk = reinterpret_cast<const BlockQ2_K*>(w + r * stride) + b;
      prefetch_ahead(blk);
      accumulate_block(unpack_block(blk, c), a, fp16_pair_times(&blk->d, dx), acc[r], acc_min[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    out[r * out_step] =
        _mm512_reduce_add_ps(_mm512_add_ps(acc[r], _mm512_zextps256_ps512(acc_min[r])));
  }
}

// One row dotted with T tokens (token t's Q8_K row at act + t * act_stride; result to
// out[t * out_stride]): each weight block is unpacked once for all T tokens, and per (row, token)
// the sums run exactly as in q2_K_rows_tile, so the GEMM equals dot_rows bit for bit.
template <int T>
void q2_K_gemm_row(int64_t n, const std::byte* w_row, const std::byte* act, int64_t act_stride,
                   float* out, int64_t out_stride, const Q2KConsts& c) {
  const BlockQ8_K* x[T];
  __m512 acc[T];
  __m256 acc_min[T];
  for (int t = 0; t < T; ++t) {
    x[t] = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride);
    acc[t] = _mm512_setzero_ps(), acc_min[t] = _mm256_setzero_ps();
  }
  const auto* blocks = reinterpret_cast<const BlockQ2_K*>(w_row);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const Q2KUnpacked wb = unpack_block(blocks + b, c);
    for (int t = 0; t < T; ++t) {
      accumulate_block(wb, load_runs(x[t][b]),
                       fp16_pair_times(&blocks[b].d, _mm_set1_ps(x[t][b].d)), acc[t], acc_min[t]);
    }
  }
  for (int t = 0; t < T; ++t) {
    out[t * out_stride] =
        _mm512_reduce_add_ps(_mm512_add_ps(acc[t], _mm512_zextps256_ps512(acc_min[t])));
  }
}

}  // namespace

void dot_rows_q2_K_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out) {
  constexpr int kRows = 4;
  int64_t r = gemv_stream_tiles(nr, kRows, [&](int64_t j, int64_t per_stream) {
    q2_K_rows_tile<kRows>(n, w + j * w_stride, per_stream * w_stride, act, out + j, per_stream);
  });
  for (; r + kRows <= nr; r += kRows)
    q2_K_rows_tile<kRows>(n, w + r * w_stride, w_stride, act, out + r);
  for (; r < nr; ++r) q2_K_rows_tile<1>(n, w + r * w_stride, w_stride, act, out + r);
}

void gemm_q2_K_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride) {
  const Q2KConsts c;
  gemm_rows_four_tokens(nr, nt, [&](auto tokens, int64_t r, int64_t t) {
    q2_K_gemm_row<decltype(tokens)::value>(n, w + r * w_stride, act + t * act_stride, act_stride,
                                           out + t * out_stride + r, out_stride, c);
  });
}

float dot_q2_K_q8_K_avx512(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  q2_K_rows_tile<1>(n, w_row, 0, act, &out);
  return out;
}

}  // namespace pacer::ops
