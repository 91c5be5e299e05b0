#pragma once
// Block unpacking shared by the AVX2 kernels of the 16-byte-nibble block types (Q4_1, Q5_0,
// Q5_1, IQ4_NL). Include ONLY from *_avx2.cpp files, after ops/matmul_simd_avx2.h.
#include <cstdint>
#include <cstring>

namespace pacer::ops::avx2 {
namespace {

// The 32 nibbles of one block's qs[16] as bytes in element order: bytes 0..15 the low nibbles
// (elements 0..15), bytes 16..31 the high nibbles (elements 16..31); each in [0, 15].
inline __m256i unpack_nibbles_32(const uint8_t* qs) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both =
      _mm256_inserti128_si256(_mm256_castsi128_si256(packed), _mm_srli_epi16(packed, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// The 32 fifth bits of a Q5 block (qh[4], bit j = element j) as bytes in element order: 0x10
// where the bit is set, else 0, ready to OR onto unpack_nibbles_32.
inline __m256i high_bits_32(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof bits);
  // Byte i of the result takes byte i/8 of qh (shuffles stay within each 128-bit half, and every
  // half holds all four bytes of the broadcast), then tests bit i%8 of it.
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                           2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// 8 int32 lanes summing to sum_j u_j * x_j (+ bias) for unsigned bytes u_j <= 31 and signed
// |x_j| <= 127: vpmaddubsw pair sums are <= 2 * 31 * 127 = 7874, far from saturating.
inline __m256i dot_u5_s8(__m256i u, __m256i x, __m256i bias) {
  const __m256i pairs = _mm256_maddubs_epi16(u, x);
  return _mm256_add_epi32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)), bias);
}

}  // namespace
}  // namespace pacer::ops::avx2
