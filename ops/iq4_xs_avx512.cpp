// IQ4_XS x Q8_K on AVX-512 (F/BW/VL/DQ only; no VNNI instruction).
//
// One zmm holds 64 qs bytes = sub-blocks 4k .. 4k+3 (k = 0, 1), one per 128-bit lane: lane i's
// low nibbles are elements 128k + 32i + 0..15 and its high nibbles 128k + 32i + 16..31. The
// activations are arranged to match once per super-block for all rows of the tile (two
// vpermt2q of plain loads). A vpshufb of the |level| table turns nibbles into magnitudes, and
// since a level is negative exactly when its index is below 8, one vptestnmb gives the lanes
// whose activation is negated (masked vpsubb from 0) so that
//   vpmaddubsw(|level|, +-x): |level| <= 127, |x| <= 127: pair sums |.| <= 32,258 < 2^15;
//   vpmaddwd(p, sc):          the lane's sub-block scale as int16 (|sc| <= 32): |lane| <=
//                             2,064,512; 4 per lane and super-block;
// exact in int32 and in float. Rows run 4 at a time, each prefetching its own stream
// kPrefetchBlocks super-blocks ahead (kquant_simd.h). The prefill GEMM unpacks each weight block
// once for four tokens.
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>

#include "ops/gemv_streams.h"
#include "ops/iq4_xs.h"
#include "ops/kquant_runs_avx512.h"
#include "ops/kquant_simd.h"

// GCC 12 reports the `__Y = __Y` placeholders of its own AVX-512 headers (bug 105593, fixed in
// 13) at the call sites where they are inlined. No variable of this file is uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace pacer::ops {
namespace {

// int16 sc_0..sc_7 (in [-32, 31]) of a block, in the low 128 bits.
inline __m512i unpack_scales16(const BlockIQ4_XS* blk) {
  uint32_t sl;
  std::memcpy(&sl, blk->scales_l, sizeof sl);
  const __m128i v = _mm_cvtsi32_si128(static_cast<int>(sl));
  const __m128i nib = _mm_set1_epi8(0x0F);
  const __m128i low = _mm_unpacklo_epi8(_mm_and_si128(v, nib),  // nibble j%2 of byte j/2
                                        _mm_and_si128(_mm_srli_epi16(v, 4), nib));
  const __m128i high =
      _mm_and_si128(_mm_srlv_epi16(_mm_set1_epi16(static_cast<short>(blk->scales_h)),
                                   _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14)),
                    _mm_set1_epi16(3));
  const __m128i sc = _mm_sub_epi16(_mm_or_si128(_mm_cvtepu8_epi16(low), _mm_slli_epi16(high, 4)),
                                   _mm_set1_epi16(32));
  return _mm512_castsi128_si512(sc);
}

// Constants of the unpacking, built once per tile or GEMM call.
struct IQ4XSConsts {
  __m512i nib = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
  __m512i abs_table;  // |level| of each 4-bit index, in every 128-bit lane
  // Qwords of the first halves (lo) / second halves (hi) of the four 32-element sub-blocks of
  // two consecutive 64-byte activation loads.
  __m512i lo_index = _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13);
  __m512i hi_index = _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15);
  __m512i scale_index[2] = {lane_scale_index(0), lane_scale_index(4)};
  IQ4XSConsts() {
    alignas(16) int8_t abs_levels[16];
    for (int k = 0; k < 16; ++k) {
      abs_levels[k] = static_cast<int8_t>(kIq4NlLevels[k] < 0 ? -kIq4NlLevels[k] : kIq4NlLevels[k]);
    }
    abs_table =
        _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(abs_levels)));
  }
};

// One weight block unpacked: per zmm k, the |level| bytes of its low and high nibbles, the lanes
// whose level is negative (index < 8: the activation is negated there), and the int16 scales.
struct IQ4XSUnpacked {
  __m512i abs_lo[2], abs_hi[2], s[2];
  __mmask64 neg_lo[2], neg_hi[2];
};

inline IQ4XSUnpacked unpack_block(const BlockIQ4_XS* blk, const IQ4XSConsts& c) {
  const __m512i sc16 = unpack_scales16(blk);
  IQ4XSUnpacked w;
  for (int k = 0; k < 2; ++k) {
    const __m512i q = _mm512_loadu_si512(blk->qs + 64 * k);
    const __m512i i_lo = _mm512_and_si512(q, c.nib);
    const __m512i i_hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), c.nib);
    w.neg_lo[k] = _mm512_testn_epi8_mask(i_lo, c.eight);
    w.neg_hi[k] = _mm512_testn_epi8_mask(i_hi, c.eight);
    w.abs_lo[k] = _mm512_shuffle_epi8(c.abs_table, i_lo);
    w.abs_hi[k] = _mm512_shuffle_epi8(c.abs_table, i_hi);
    w.s[k] = _mm512_permutexvar_epi16(c.scale_index[k], sc16);
  }
  return w;
}

// One token's activations of a super-block, arranged like the nibbles (see the file comment).
struct Q8KNibbleRuns {
  __m512i lo[2], hi[2];
};

inline Q8KNibbleRuns arrange_runs(const BlockQ8_K& x, const IQ4XSConsts& c) {
  Q8KNibbleRuns a;
  for (int k = 0; k < 2; ++k) {
    const __m512i v0 = _mm512_loadu_si512(x.qs + 128 * k);
    const __m512i v1 = _mm512_loadu_si512(x.qs + 128 * k + 64);
    a.lo[k] = _mm512_permutex2var_epi64(v0, c.lo_index, v1);
    a.hi[k] = _mm512_permutex2var_epi64(v0, c.hi_index, v1);
  }
  return a;
}

// The block's integer sum over 16 lanes; exact in int32 (file comment).
inline __m512i block_isum(const IQ4XSUnpacked& w, const Q8KNibbleRuns& a) {
  const __m512i zero = _mm512_setzero_si512();
  __m512i isum = zero;
  for (int k = 0; k < 2; ++k) {
    const __m512i xs_lo = _mm512_mask_sub_epi8(a.lo[k], w.neg_lo[k], zero, a.lo[k]);
    const __m512i xs_hi = _mm512_mask_sub_epi8(a.hi[k], w.neg_hi[k], zero, a.hi[k]);
    const __m512i p_lo = _mm512_maddubs_epi16(w.abs_lo[k], xs_lo);
    const __m512i p_hi = _mm512_maddubs_epi16(w.abs_hi[k], xs_hi);
    isum = _mm512_add_epi32(
        isum, _mm512_add_epi32(_mm512_madd_epi16(p_lo, w.s[k]), _mm512_madd_epi16(p_hi, w.s[k])));
  }
  return isum;
}

// R rows of n elements (row r at w + r*stride) dotted with one Q8_K row: out[r * out_step].
template <int R>
void iq4_xs_rows_tile(int64_t n, const std::byte* w, int64_t stride, const std::byte* act,
                      float* out, int64_t out_step = 1) {
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  const IQ4XSConsts c;
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const Q8KNibbleRuns a = arrange_runs(x[b], c);
    for (int r = 0; r < R; ++r) {
      const BlockIQ4_XS* blk = reinterpret_cast<const BlockIQ4_XS*>(w + r * stride) + b;
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
// the sums run exactly as in iq4_xs_rows_tile, so the GEMM equals dot_rows bit for bit.
template <int T>
void iq4_xs_gemm_row(int64_t n, const std::byte* w_row, const std::byte* act, int64_t act_stride,
                     float* out, int64_t out_stride, const IQ4XSConsts& c) {
  const BlockQ8_K* x[T];
  __m512 acc[T];
  for (int t = 0; t < T; ++t) {
    x[t] = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride);
    acc[t] = _mm512_setzero_ps();
  }
  const auto* blocks = reinterpret_cast<const BlockIQ4_XS*>(w_row);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const IQ4XSUnpacked wb = unpack_block(blocks + b, c);
    const float dw = avx512::fp32_from_fp16(blocks[b].d);
    for (int t = 0; t < T; ++t) {
      const __m512i isum = block_isum(wb, arrange_runs(x[t][b], c));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(dw * x[t][b].d), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) out[t * out_stride] = _mm512_reduce_add_ps(acc[t]);
}

}  // namespace

void dot_rows_iq4_xs_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                 const std::byte* act, float* out) {
  constexpr int kRows = 4;
  int64_t r = gemv_stream_tiles(nr, kRows, [&](int64_t j, int64_t per_stream) {
    iq4_xs_rows_tile<kRows>(n, w + j * w_stride, per_stream * w_stride, act, out + j, per_stream);
  });
  for (; r + kRows <= nr; r += kRows)
    iq4_xs_rows_tile<kRows>(n, w + r * w_stride, w_stride, act, out + r);
  for (; r < nr; ++r) iq4_xs_rows_tile<1>(n, w + r * w_stride, w_stride, act, out + r);
}

void gemm_iq4_xs_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                             int64_t out_stride) {
  const IQ4XSConsts c;
  gemm_rows_four_tokens(nr, nt, [&](auto tokens, int64_t r, int64_t t) {
    iq4_xs_gemm_row<decltype(tokens)::value>(n, w + r * w_stride, act + t * act_stride, act_stride,
                                             out + t * out_stride + r, out_stride, c);
  });
}

float dot_iq4_xs_q8_K_avx512(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  iq4_xs_rows_tile<1>(n, w_row, 0, act, &out);
  return out;
}

}  // namespace pacer::ops
