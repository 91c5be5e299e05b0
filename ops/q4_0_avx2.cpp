// Q4_0 x act-Q8 on AVX2 (+FMA, F16C).
//
// Per weight block: the 16 bytes unpack to 32 nibbles in element order (low nibbles = elements
// 0..15, high = 16..31), already unsigned, so vpmaddubsw takes them as is:
//   nib (u8, 0..15) * x (s8, |x| <= 127): pair sums |.| <= 2 * 15 * 127 = 3810, no saturation;
// vpmaddwd with ones widens to 8 int32 lanes, and adding -8 * sum_b(x) in lane 0 removes the
// nibble offset: sum_j (nib_j - 8) * x_j. One cvt + FMA per block applies d_w * d_x.
#include <immintrin.h>

#include "ops/q4_0.h"
#include "ops/q8_0.h"
#include "ops/matmul_simd_avx2.h"

namespace pacer::ops {
namespace {

// The 32 nibbles of one block as bytes 0..15 in element order (low nibbles, then high).
inline __m256i unpack_nibbles_32(const uint8_t* qs) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(packed),
                                               _mm_srli_epi16(packed, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

template <int R>
void q4_0_rows_tile(int64_t n, const std::byte* w, int64_t stride, const std::byte* act,
                    float* out) {
  const ActQ8Row a = act_q8_row(act, n);
  const int64_t nb = n / kQ4_0BlockElems;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i x = _mm256_load_si256(reinterpret_cast<const __m256i*>(a.q + 32 * b));
    const __m256 dx = _mm256_set1_ps(a.d[b]);
    // lane 0 = -8 * sum(x): |.| <= 8 * 4064, other lanes 0
    const __m256i offset = _mm256_zextsi128_si256(_mm_cvtsi32_si128(-8 * a.sum[b]));
    for (int r = 0; r < R; ++r) {
      const auto* blk = reinterpret_cast<const BlockQ4_0*>(w + r * stride) + b;
      const __m256i pairs = _mm256_maddubs_epi16(unpack_nibbles_32(blk->qs), x);
      const __m256i dot = _mm256_add_epi32(_mm256_madd_epi16(pairs, ones), offset);
      const __m256 s = avx2::broadcast_fp16_times(&blk->d, dx);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), s, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = avx2::hsum8(acc[r]);
}

}  // namespace

void dot_rows_q4_0_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out) {
  int64_t r = 0;
  for (; r + 4 <= nr; r += 4) q4_0_rows_tile<4>(n, w + r * w_stride, w_stride, act, out + r);
  switch (nr - r) {
    case 3: q4_0_rows_tile<3>(n, w + r * w_stride, w_stride, act, out + r); break;
    case 2: q4_0_rows_tile<2>(n, w + r * w_stride, w_stride, act, out + r); break;
    case 1: q4_0_rows_tile<1>(n, w + r * w_stride, w_stride, act, out + r); break;
    default: break;
  }
}

float dot_q4_0_q8_0_avx2(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  q4_0_rows_tile<1>(n, w_row, 0, act, &out);
  return out;
}

}  // namespace pacer::ops
