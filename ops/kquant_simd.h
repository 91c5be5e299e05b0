#pragma once
// Helpers shared by the K-quant kernels (q4_k_avx2.cpp, q4_k_avx512.cpp, q6_k_avx2.cpp,
// q6_k_avx512.cpp, and the q5_k / q3_k / q2_k / iq4_xs ones). Include ONLY from files built with
// AVX2 or AVX-512 flags; everything here has internal linkage.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ops/isa.h"

#include "ops/q4_k.h"

namespace pacer::ops {
namespace {

// Super-blocks ahead of the one being dotted that each row prefetches. With the hardware
// prefetcher alone the K-quant kernels reached ~55-60% of a plain read stream from DRAM on one
// core; 8 blocks ahead (1.1 KiB for Q4_K, 1.6 KiB for Q6_K per row) brought them to ~70-75%
// (4 and 16 were no better). Measured on the 2-core dev VM under load: see the kquant report.
constexpr int64_t kPrefetchBlocks = 8;

// Prefetches (into L1) every cache line of the block kPrefetchBlocks after `blk` in its row.
// The address may lie past the end of the matrix: prefetches never fault, and it is formed as
// an integer so no out-of-range pointer is created.
// Nothing where gemv_software_prefetch(Unpacking) is off (isa.h: AMD Zen 4's hardware
// prefetchers cover these streams).
template <class Block>
inline void prefetch_ahead(const Block* blk) {
  if (!gemv_software_prefetch(GemvKernelClass::Unpacking)) return;
  const uintptr_t ahead = reinterpret_cast<uintptr_t>(blk) + kPrefetchBlocks * sizeof(Block);
  for (size_t off = 0; off < sizeof(Block); off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(ahead + off), _MM_HINT_T0);
  }
}

// The 6-bit scales and mins of a block, unpacked: bytes 0-7 = sc_0..sc_7, bytes 8-15 =
// m_0..m_7 (each in [0, 63]). With u0, u1, u2 the three little-endian words of the 12 scale
// bytes, the layout (q4_k.h) reads word-wise as
//   sc_0..3 = u0 & 0x3f..          sc_4..7 = (u2 & 0x0f..)      | (u0 >> 2 & 0x30..)
//   m_0..3  = u1 & 0x3f..          m_4..7  = (u2 >> 4 & 0x0f..) | (u1 >> 2 & 0x30..)
// which is two dword shuffles, a variable shift, a shift and three logic ops on one xmm.
// `scales` must have 16 readable bytes (the 12 scale bytes and 4 more of the same block); Q5_K
// packs its scales and mins the same way (q5_k.h).
inline __m128i unpack_6bit_scales_mins(const uint8_t* scales) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales));
  const __m128i a = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0));  // u0, u2, u1, u2
  const __m128i b = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0));  // u0, u0, u1, u1
  const __m128i low = _mm_and_si128(_mm_srlv_epi32(a, _mm_setr_epi32(0, 0, 0, 4)),
                                    _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
  const __m128i top =
      _mm_and_si128(_mm_srli_epi32(b, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  return _mm_or_si128(low, top);
}

inline __m128i unpack_q4_K_scales_mins(const BlockQ4_K* blk) {
  // Loads the 12 scale bytes and the first 4 quant bytes (lane 3, unused): within the block.
  return unpack_6bit_scales_mins(blk->scales);
}

// {fl(d * dx), fl(dmin * dx), 0, 0}: a block's two adjacent fp16 factors d, dmin (at
// d_dmin_ptr: bytes 0-3 of Q4_K and Q5_K, bytes 80-83 of Q2_K) times the activation scale,
// rounded once each as the reference rounds them.
inline __m128 fp16_pair_times(const void* d_dmin_ptr, __m128 dx) {
  int32_t d_dmin;
  std::memcpy(&d_dmin, d_dmin_ptr, sizeof d_dmin);
  return _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(d_dmin)), dx);
}

inline __m128 q4_K_factors(const BlockQ4_K* blk, __m128 dx) {
  return fp16_pair_times(blk, dx);
}

// Q3_K's 16 group scales as int8 sc_0..sc_15 in [-32, 31] (q3_k.h): the low nibbles of scale
// bytes 0-7 are groups 0-7's low 4 bits and their high nibbles groups 8-15's; byte 8 + g%4
// holds the top 2 bits of group g at bits 2(g/4), +1. `block` is the 110-byte block: the
// 16-byte load takes bytes 92-107 (the last 4 qs bytes and the 12 scale bytes at 96-107), so it
// stays inside the block.
inline __m128i unpack_q3_K_scales(const void* block) {
  const __m128i v = _mm_srli_si128(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(block) + 92)),
      4);  // bytes 0-11
  const __m128i nib = _mm_set1_epi8(0x0F);
  const __m128i low4 =
      _mm_unpacklo_epi64(_mm_and_si128(v, nib), _mm_and_si128(_mm_srli_epi16(v, 4), nib));
  // Bytes 8-11 to every dword; dword k shifted by 2k leaves group 4k + i's top bits in byte i.
  const __m128i top = _mm_shuffle_epi8(v, _mm_set1_epi32(0x0B0A0908));
  const __m128i top2 =
      _mm_and_si128(_mm_srlv_epi32(top, _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(0x03));
  return _mm_sub_epi8(_mm_or_si128(low4, _mm_slli_epi16(top2, 4)), _mm_set1_epi8(32));
}

}  // namespace
// The K-quant GEMMs' loop: every row of a tile against the tokens, four at a time, then one at a
// time: kernel(std::integral_constant<int, T>{}, row, first_token) for T = 4 or 1.
template <class Kernel>
inline void gemm_rows_four_tokens(int64_t nr, int64_t nt, const Kernel& kernel) {
  for (int64_t r = 0; r < nr; ++r) {
    int64_t t = 0;
    for (; t + 4 <= nt; t += 4) kernel(std::integral_constant<int, 4>{}, r, t);
    for (; t < nt; ++t) kernel(std::integral_constant<int, 1>{}, r, t);
  }
}

}  // namespace pacer::ops
