#pragma once
// Small AVX-512 helpers shared by the *_avx512.cpp kernels. Include ONLY from files built with
// the AVX-512 flags (ops/CMakeLists.txt); everything here has internal linkage.
//
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own `__Y = __Y` placeholder
// (GCC bug 105593, fixed in 13); the warning is attributed to header lines, so it is silenced for
// the header alone. Include this file before anything that includes <immintrin.h>.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstddef>
#include <cstdint>

#include "ops/gemv_streams.h"

namespace pacer::ops::avx512 {
namespace {

// Mask of the first `count` of 16 lanes (count in [0, 16]).
inline __mmask16 first_lanes16(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1u);
}

// fp16 (raw bits) -> fp32; exact.
inline float fp32_from_fp16(uint16_t h) {
  return _cvtsh_ss(h);
}

// The 64-byte line at p (64-byte aligned), loaded at this point of the program and once. Left to
// itself GCC 12 sinks a load to its first use and folds a vector used twice into both users as
// memory operands: a 16-row K-quant super-block's leading line (its fp16 factors) was read after
// its ~2 KiB of quants, a step back that one Zen 4 core's hardware prefetchers follow badly, and
// each Q4_K quant line was loaded twice. The empty asm takes the value in a register, so the load
// can be neither moved past it nor duplicated (the asm emits nothing).
inline __m512i load_line_here(const void* p) {
  __m512i v = _mm512_load_si512(p);
  asm volatile("" : "+v"(v));
  return v;
}

// Two 32-byte rows side by side: lanes 0-31 from p0, lanes 32-63 from p1 (unaligned).
inline __m512i load_pair_256(const void* p0, const void* p1) {
  const __m256i lo = _mm256_loadu_si256(static_cast<const __m256i*>(p0));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo),
                            _mm256_loadu_si256(static_cast<const __m256i*>(p1)), 1);
}

// Sum of the 8 lanes.
inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Sum of lanes 0-7 and of lanes 8-15 of v, as {low, high}.
inline void hsum_halves(__m512 v, float* low, float* high) {
  *low = hsum8(_mm512_castps512_ps256(v));
  *high = hsum8(_mm512_extractf32x8_ps(v, 1));
}

// Blocks per scale strip of the quantized kernels: the fp16 scales of a strip are converted
// and multiplied by the activation scales once, 16 at a time, before the strip's dot products.
constexpr int64_t kScaleStrip = 16;

// d16[k * step] = block(b0 + k).d (raw fp16) for k < count, for one weight row of Block structs
// whose first member is the fp16 scale. Plain 16-bit moves on the load/store ports; the caller
// reads d16 back as a vector only a strip later, after these stores have left the store buffer
// (a vector load that spans several pending narrow stores cannot be forwarded and stalls).
template <class Block>
inline void gather_strip_d16(const std::byte* row, int64_t b0, int64_t count, uint16_t* d16,
                             int64_t step = 1) {
  // Volatile reads keep these plain moves: vectorized, GCC builds the strided gather from
  // vpinsrw and shuffles that compete with the dot loop for port 5. A full strip has a constant
  // trip count, so it unrolls into 2 instructions per block.
  const volatile Block* blk = reinterpret_cast<const volatile Block*>(row) + b0;
  if (count == kScaleStrip) {
    for (int64_t k = 0; k < kScaleStrip; ++k) d16[k * step] = blk[k].d;
  } else {
    for (int64_t k = 0; k < count; ++k) d16[k * step] = blk[k].d;
  }
}

// scales[k] = fp32(d16[k]) * dx[k] for k < count (<= kScaleStrip); lanes >= count are 0.
inline void strip_scales(const uint16_t* d16, const float* dx, int64_t count, float* scales) {
  const __mmask16 m = first_lanes16(count);
  const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d16)));
  _mm512_store_ps(scales, _mm512_maskz_mul_ps(m, d, _mm512_maskz_loadu_ps(m, dx)));
}

// 16 lanes: lanes 0-7 = *s0, lanes 8-15 = *s1 (two row scales side by side).
inline __m512 pair_scales(const float* s0, const float* s1) {
  return _mm512_mask_broadcastss_ps(_mm512_set1_ps(*s0), 0xFF00, _mm_load_ss(s1));
}

}  // namespace
}  // namespace pacer::ops::avx512
