// Q4_0 x act-Q8 on AVX2 (+FMA, F16C).
//
// Per weight block: the 16 bytes unpack to 32 nibbles in element order (low nibbles = elements
// 0..15, high = 16..31), already unsigned, so vpmaddubsw takes them as is:
//   nib (u8, 0..15) * x (s8, |x| <= 127): pair sums |.| <= 2 * 15 * 127 = 3810, no saturation;
// vpmaddwd with ones widens to 8 int32 lanes, and adding -8 * sum_b(x) in lane 0 removes the
// nibble offset: sum_j (nib_j - 8) * x_j. One cvt + FMA per block applies d_w * d_x.
#include <immintrin.h>

#include "ops/matmul_simd_avx2.h"
#include "ops/q4_0.h"
#include "ops/q8_0.h"
#include "ops/quant_rows_avx2.h"

namespace pacer::ops {
namespace {

// The 32 nibbles of one block as bytes 0..15 in element order (low nibbles, then high).
inline __m256i unpack_nibbles_32(const uint8_t* qs) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both =
      _mm256_inserti128_si256(_mm256_castsi128_si256(packed), _mm_srli_epi16(packed, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

struct Q4_0Block {
  using Block = BlockQ4_0;
  static constexpr int32_t kSumFactor = -8;
  static __m256i block_dot(const Block* w, __m256i x, __m256i bias) {
    const __m256i pairs = _mm256_maddubs_epi16(unpack_nibbles_32(w->qs), x);
    return _mm256_add_epi32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)), bias);
  }
};

}  // namespace

void dot_rows_q4_0_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out) {
  avx2::quant_dot_rows<Q4_0Block>(n, w, w_stride, nr, act, out);
}

void gemm_q4_0_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                         const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                         int64_t out_stride) {
  avx2::quant_gemm<Q4_0Block>(n, w, w_stride, nr, act, act_stride, nt, out, out_stride);
}

float dot_q4_0_q8_0_avx2(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  avx2::quant_rows_tile<Q4_0Block, 1>(n, w_row, 0, 0, act, &out, 1);
  return out;
}

}  // namespace pacer::ops
