// Q3_K x Q8_K on AVX-512 (F/BW/VL/DQ only; no VNNI instruction).
//
// Per half t of a super-block (elements 128t .. 128t+127) and row, two zmm of 64 quants each:
// zmm k holds runs 2k and 2k+1 (elements 128t + 64k + 0..63, in order, matching one plain
// 64-byte activation load). The 32 qs bytes of the half, broadcast to both 256-bit halves, give
// the low 2 bits through one per-half variable 16-bit shift (by 4k / 4k+2) and an AND with 3;
// the 32 hmask bytes, broadcast likewise, give the high bit through one vptestmb against a
// per-half bit selector (bit 4t+2k / 4t+2k+1) and a masked add of 4. Each 128-bit lane of zmm k
// is one group (8t + 4k + lane), its int16 scale spread by one vpermw. Then
//   vpmaddubsw(u, x): u in [0, 7], x in [-127, 127]: pair sums |.| <= 1778;
//   vpmaddwd(p, sc):  |sc| <= 32: |lane| <= 113,792; 4 per lane and super-block;
// and the offset of 4 comes off once per super-block through the activation group sums (one
// vpmaddwd of the 16 scales with the 16 bsums): all exact in int32 and in float. Rows run 4 at a
// time sharing the activation loads, each prefetching its own stream (kquant_simd.h). The prefill
// GEMM unpacks each weight block once for four tokens.
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>

#include "ops/gemv_streams.h"
#include "ops/kquant_runs_avx512.h"
#include "ops/kquant_simd.h"
#include "ops/q3_k.h"

// GCC 12 reports the `__Y = __Y` placeholders of its own AVX-512 headers (bug 105593, fixed in
// 13) at the call sites where they are inlined. No variable of this file is uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace pacer::ops {
namespace {

// Constants of the unpacking, built once per tile or GEMM call.
struct Q3KConsts {
  __m512i two_bits = _mm512_set1_epi8(0x03);
  __m512i shift[2] = {halves16(0, 2), halves16(4, 6)};  // [k]: runs 2k, 2k+1
  __m512i hbit[2][2], scale_index[2][2];                // [t][k]
  Q3KConsts() {
    for (int t = 0; t < 2; ++t) {
      for (int k = 0; k < 2; ++k) {
        hbit[t][k] = halves8(1 << (4 * t + 2 * k), 1 << (4 * t + 2 * k + 1));
        scale_index[t][k] = lane_scale_index(8 * t + 4 * k);
      }
    }
  }
};

// One weight block unpacked: u[t][k] the unsigned quants (u = q + 4) of zmm k of half t, s[t][k]
// their int16 scales, sc16 the 16 scales for the offset term.
struct Q3KUnpacked {
  __m512i u[2][2], s[2][2];
  __m256i sc16;
};

inline Q3KUnpacked unpack_block(const BlockQ3_K* blk, const Q3KConsts& c) {
  Q3KUnpacked w;
  w.sc16 = _mm256_cvtepi8_epi16(unpack_q3_K_scales(blk));
  const __m512i sc16z = _mm512_castsi256_si512(w.sc16);
  const __m512i hm =
      _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->hmask)));
  const __m512i four = _mm512_set1_epi8(4);
  for (int t = 0; t < 2; ++t) {
    const __m512i qs = _mm512_broadcast_i64x4(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs + 32 * t)));
    for (int k = 0; k < 2; ++k) {
      const __m512i u = _mm512_and_si512(_mm512_srlv_epi16(qs, c.shift[k]), c.two_bits);
      w.u[t][k] = _mm512_mask_add_epi8(u, _mm512_test_epi8_mask(hm, c.hbit[t][k]), u, four);
      w.s[t][k] = _mm512_permutexvar_epi16(c.scale_index[t][k], sc16z);
    }
  }
  return w;
}

// The block's integer sum (header comment of q3_k.h), spread over 16 lanes; exact in int32.
inline __m512i block_isum(const Q3KUnpacked& w, const Q8KRuns& a) {
  // -4 * sum_g sc_g * bsums[g], in the low 8 lanes.
  const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(a.bsums, w.sc16), 2);
  __m512i isum = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(offset));
  for (int t = 0; t < 2; ++t) {
    for (int k = 0; k < 2; ++k) {
      isum = _mm512_add_epi32(
          isum, _mm512_madd_epi16(_mm512_maddubs_epi16(w.u[t][k], a.xs[t][k]), w.s[t][k]));
    }
  }
  return isum;
}

// R rows of n elements (row r at w + r*stride) dotted with one Q8_K row: out[r * out_step].
template <int R>
void q3_K_rows_tile(int64_t n, const std::byte* w, int64_t stride, const std::byte* act, float* out,
                    int64_t out_step = 1) {
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  const Q3KConsts c;
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const Q8KRuns a = load_runs(x[b]);
    for (int r = 0; r < R; ++r) {
      const BlockQ3_K* blk = reinterpret_cast<const BlockQ3_K*>(w + r * stride) + b;
      prefetch_ahead(blk);
      const __m512i isum = block_isum(unpack_block(blk, c), a);
      const float d = avx512::fp32_from_fp16(blk->d) * x[b].d;
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r * out_step] = _mm512_reduce_add_ps(acc[r]);
}

// One row dotted with T tokens (token t's Q8_K row at act + t * act_stride; result to
// out[t * out_stride]): each weight block is unpacked once for all T tokens, and per (row, token)
// the sums run exactly as in q3_K_rows_tile, so the GEMM equals dot_rows bit for bit.
template <int T>
void q3_K_gemm_row(int64_t n, const std::byte* w_row, const std::byte* act, int64_t act_stride,
                   float* out, int64_t out_stride, const Q3KConsts& c) {
  const BlockQ8_K* x[T];
  __m512 acc[T];
  for (int t = 0; t < T; ++t) {
    x[t] = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride);
    acc[t] = _mm512_setzero_ps();
  }
  const auto* blocks = reinterpret_cast<const BlockQ3_K*>(w_row);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const Q3KUnpacked wb = unpack_block(blocks + b, c);
    const float dw = avx512::fp32_from_fp16(blocks[b].d);
    for (int t = 0; t < T; ++t) {
      const __m512i isum = block_isum(wb, load_runs(x[t][b]));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(dw * x[t][b].d), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) out[t * out_stride] = _mm512_reduce_add_ps(acc[t]);
}

}  // namespace

void dot_rows_q3_K_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out) {
  constexpr int kRows = 4;
  int64_t r = gemv_stream_tiles(nr, kRows, [&](int64_t j, int64_t per_stream) {
    q3_K_rows_tile<kRows>(n, w + j * w_stride, per_stream * w_stride, act, out + j, per_stream);
  });
  for (; r + kRows <= nr; r += kRows)
    q3_K_rows_tile<kRows>(n, w + r * w_stride, w_stride, act, out + r);
  for (; r < nr; ++r) q3_K_rows_tile<1>(n, w + r * w_stride, w_stride, act, out + r);
}

void gemm_q3_K_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride) {
  const Q3KConsts c;
  gemm_rows_four_tokens(nr, nt, [&](auto tokens, int64_t r, int64_t t) {
    q3_K_gemm_row<decltype(tokens)::value>(n, w + r * w_stride, act + t * act_stride, act_stride,
                                           out + t * out_stride + r, out_stride, c);
  });
}

float dot_q3_K_q8_K_avx512(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  q3_K_rows_tile<1>(n, w_row, 0, act, &out);
  return out;
}

}  // namespace pacer::ops
