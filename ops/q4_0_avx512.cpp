// Q4_0 x act-Q8 on AVX-512 (BW/VL/DQ), with and without VNNI.
//
// Two weight rows share one zmm. The 16 quant bytes of row r's block b fill 128-bit lanes 0 and
// 1, row r+1's lanes 2 and 3; lanes 1 and 3 shift right by 4, and the AND with 0x0F leaves
//   [nib 0..15 | nib 16..31] of row r, then the same for row r+1,
// i.e. each 256-bit half is the block in element order, matching the activation block broadcast
// to both halves. Nibbles are unsigned bytes (0..15) and activations signed (|x| <= 127), which
// is vpdpbusd's form as is (VNNI) or vpmaddubsw's (pair sums <= 2 * 15 * 127 = 3810, no
// saturation). The nibble offset of 8 comes off exactly by adding -8 * sum_b(x) in lanes 0 and 8.
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>
#include "ops/q4_0.h"
#include "ops/q8_0.h"
#include "ops/quant_rows_avx512.h"

namespace pacer::ops {
namespace {

// Nibbles of block b of two rows, each 256-bit half in element order (see the file comment).
inline __m512i unpack_nibbles_pair(const uint8_t* qs0, const uint8_t* qs1) {
  __m512i q = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs0)));
  q = _mm512_mask_broadcast_i32x4(q, 0xFF00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs1)));
  q = _mm512_mask_srli_epi16(q, 0xFF00FF00u, q, 4);  // 16-bit words of lanes 1 and 3
  return _mm512_and_si512(q, _mm512_set1_epi8(0x0F));
}

// Block dot of two Q4_0 rows against x, nibble offset removed through `bias`.
template <bool kVnni>
struct Q4_0Pair {
  using Block = BlockQ4_0;
  static constexpr int32_t kSumFactor = -8;
  static __m512i pair_dot(const Block* b0, const Block* b1, __m512i x, __m512i bias) {
    const __m512i nib = unpack_nibbles_pair(b0->qs, b1->qs);
    if constexpr (kVnni) {
      return _mm512_dpbusd_epi32(bias, nib, x);
    } else {
      const __m512i pairs = _mm512_maddubs_epi16(nib, x);
      return _mm512_add_epi32(_mm512_madd_epi16(pairs, _mm512_set1_epi16(1)), bias);
    }
  }
};

}  // namespace

void dot_rows_q4_0_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out) {
  avx512::quant_dot_rows<Q4_0Pair<false>, avx512::kPairsPerTile>(n, w, w_stride, nr, act, out);
}
float dot_q4_0_q8_0_avx512(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  avx512::quant_dot_rows<Q4_0Pair<false>, avx512::kPairsPerTile>(n, w_row, 0, 1, act, &out);
  return out;
}
void dot_rows_q4_0_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                   const std::byte* act, float* out) {
  avx512::quant_dot_rows<Q4_0Pair<true>, avx512::kPairsPerTile>(n, w, w_stride, nr, act, out);
}
float dot_q4_0_q8_0_avx512vnni(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  avx512::quant_dot_rows<Q4_0Pair<true>, avx512::kPairsPerTile>(n, w_row, 0, 1, act, &out);
  return out;
}

}  // namespace pacer::ops
