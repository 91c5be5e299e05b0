// IQ4_NL x act-Q8 on AVX2 (+FMA, F16C).
//
// Per weight block: the 32 nibbles unpack to bytes in element order and vpshufb looks each up
// in the 16-entry level table (broadcast to both 128-bit halves), giving int8 weights w in
// [-127, 113]. The sign trick turns the int8 x int8 products into vpmaddubsw's unsigned x signed
// form: |w| (u8, <= 127) * sign(x, w) (s8, |.| <= 127) = w * x, pair sums <= 2 * 127 * 127 =
// 32258 < 32767, so no saturation; vpmaddwd with ones widens to 8 int32 lanes. One cvt + FMA per
// block applies d_w * d_x.
#include <immintrin.h>

#include "ops/iq4_nl.h"
#include "ops/matmul_simd_avx2.h"
#include "ops/q8_0.h"
#include "ops/quant32_simd_avx2.h"
#include "ops/quant_rows_avx2.h"

namespace pacer::ops {
namespace {

struct Iq4NlBlock {
  using Block = BlockIQ4_NL;
  static constexpr int32_t kSumFactor = 0;  // the levels are signed already: no bias
  static __m256i block_dot(const Block* w, __m256i x, __m256i) {
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues)));
    const __m256i v = _mm256_shuffle_epi8(table, avx2::unpack_nibbles_32(w->qs));
    const __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(v), _mm256_sign_epi8(x, v));
    return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
  }
};

}  // namespace

void dot_rows_iq4_nl_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out) {
  avx2::quant_dot_rows<Iq4NlBlock>(n, w, w_stride, nr, act, out);
}

void gemm_iq4_nl_q8_0_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride) {
  avx2::quant_gemm<Iq4NlBlock>(n, w, w_stride, nr, act, act_stride, nt, out, out_stride);
}

float dot_iq4_nl_q8_0_avx2(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  avx2::quant_rows_tile<Iq4NlBlock, 1>(n, w_row, 0, 0, act, &out, 1);
  return out;
}

}  // namespace pacer::ops
