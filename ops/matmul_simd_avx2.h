#pragma once
// Small AVX2 helpers shared by the *_avx2.cpp kernels. Include ONLY from files built with the
// AVX2 flags (ops/CMakeLists.txt); everything here has internal linkage so no copy compiled with
// these flags can be picked by the linker for a baseline file.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "ops/gemv_streams.h"

namespace pacer::ops::avx2 {
namespace {

// The 4 bytes at q + at (4 activation quants) broadcast to every dword, as vpmaddubsw's signed
// operand against 8 rows' interleaved quants.
inline __m256i act_dword(const int8_t* q, int64_t at) {
  int32_t v;
  __builtin_memcpy(&v, q + at, 4);
  return _mm256_set1_epi32(v);
}

// The 32 bytes at p (32-byte aligned), loaded at this point of the program and once: the AVX2
// twin of avx512::load_line_here (matmul_simd_avx512.h, why there).
inline __m256i load_here(const void* p) {
  __m256i v = _mm256_load_si256(static_cast<const __m256i*>(p));
  asm volatile("" : "+x"(v));
  return v;
}

// Sum of the 8 lanes.
inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Sum of the 8 int32 lanes (exact while the true sum fits in int32).
inline int32_t hsum8_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// fp16 (raw bits) -> fp32 with F16C; exact.
inline float fp32_from_fp16(uint16_t h) {
  return _cvtsh_ss(h);
}

// 8 lanes of the fp32 value of the fp16 at p (unaligned), times `scale`.
inline __m256 broadcast_fp16_times(const void* p, __m256 scale) {
  const __m128i h = _mm_set1_epi16(*static_cast<const int16_t*>(p));
  return _mm256_mul_ps(_mm256_cvtph_ps(h), scale);
}

// Blocks per scale strip of the quantized kernels (see strip_scales).
constexpr int64_t kScaleStrip = 16;

// d16[k] = block(b0 + k).d (raw fp16) for k < count, for one weight row of Block structs whose
// first member is the fp16 scale. Plain 16-bit moves; the caller reads d16 back as a vector one
// strip later, once these stores have drained (a wide load over pending narrow stores stalls).
template <class Block>
inline void gather_strip_d16(const std::byte* row, int64_t b0, int64_t count, uint16_t* d16) {
  // Volatile reads keep these plain moves: vectorized, GCC builds the strided gather from
  // vpinsrw and shuffles that compete with the dot loop for port 5. A full strip has a constant
  // trip count, so it unrolls into 2 instructions per block.
  const volatile Block* blk = reinterpret_cast<const volatile Block*>(row) + b0;
  if (count == kScaleStrip) {
    for (int64_t k = 0; k < kScaleStrip; ++k) d16[k] = blk[k].d;
  } else {
    for (int64_t k = 0; k < count; ++k) d16[k] = blk[k].d;
  }
}

// scales[k] = fp32(d16[k]) * dx[k] for k < count (<= kScaleStrip); lanes >= count are 0.
// Converting 8 scales per vcvtph2ps leaves one broadcast load per row-block in the dot loop.
inline void strip_scales(const uint16_t* d16, const float* dx, int64_t count, float* scales) {
  for (int h = 0; h < 2; ++h) {
    const int64_t left = count - 8 * h;
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left)), lanes);
    const __m256 d = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(d16 + 8 * h)));
    const __m256 x = _mm256_maskload_ps(dx + 8 * h, mask);  // masked-off lanes read as 0
    _mm256_store_ps(scales + 8 * h, _mm256_mul_ps(d, x));
  }
}

// vpshufb controls that spread a K-quant's per-group byte scales (or mins) of 8 rows, one byte
// per group in each row's dword, into 16-bit words for vpmaddwd (the same in both 128-bit lanes;
// the Q4_K, Q5_K and Q2_K GEMVs build them once per call).
struct Controls {
  __m256i scale[4];  // byte j of each dword -> both words of the dword (zero-extended)
  __m256i mins[2];   // bytes (2k, 2k + 1) of each dword -> its low and high word (zero-extended)
};

inline Controls controls() {
  Controls c;
  const auto lanes = [](auto word_pair) {
    return _mm256_setr_epi32(word_pair(0), word_pair(4), word_pair(8), word_pair(12), word_pair(0),
                             word_pair(4), word_pair(8), word_pair(12));
  };
  for (int j = 0; j < 4; ++j) {
    c.scale[j] = lanes([j](uint32_t base) {
      return static_cast<int32_t>(0x80008000u | (base + j) | (base + j) << 16);
    });
  }
  for (int k = 0; k < 2; ++k) {
    c.mins[k] = lanes([k](uint32_t base) {
      return static_cast<int32_t>(0x80008000u | (base + 2 * k) | (base + 2 * k + 1) << 16);
    });
  }
  return c;
}

// 32 quants of 16 rows in IQ4_NL's levels (an IQ4_XS sub-block, an IQ4_NL block: quants, 4
// vectors of level indices 64 bytes apart, each 32-byte half h holding rows 8h..8h + 7, low
// nibbles quants 4M.., high ones 16 + 4M..) against one token's 32 quants xq and their magnitudes
// xa: dot_h = the 8 rows' exact integer dots, each product as |x| x sign(level, x) (|pair| <=
// 2 x 127 x 127, one vpmaddwd per vector; table: the levels in both lanes). In assembly for the
// Q4_K GEMV's reason (interleaved_q45_k_avx2.cpp, q4_k_chunk_isums): GCC 12 spilled. Zen 4 guest
// without AVX-512, the IQ4_XS GEMV of 16 groups x 2048 columns from L2 (1024 groups from L3),
// old and new alternating in one process, 3 rounds: 18.9 -> 21.2 GB/s (1.12-1.13x), IQ4_NL's
// 20.2-20.5 -> 22.0-22.3 (1.09x); the same bits.
inline void iq4_level_dots_16(const std::byte* quants, const int8_t* xq, const int8_t* xa,
                              __m256i table, __m256i& dot0, __m256i& dot1) {
  __m256i xl, xh, al, ah, q, wl, wh;
  // clang-format off
  // Activation dwords M (quants 4M.., 16 + 4M..) and their magnitudes.
#define PACER_IQ4_ACT(M)                                    \
  "vpbroadcastd 4*" #M "(%[xq]), %[xl]\n\t"                \
  "vpbroadcastd 16+4*" #M "(%[xq]), %[xh]\n\t"             \
  "vpbroadcastd 4*" #M "(%[xa]), %[al]\n\t"                \
  "vpbroadcastd 16+4*" #M "(%[xa]), %[ah]\n\t"
  // Vector M of half H: its low and high nibbles' levels, signed by the activations, dotted with
  // the magnitudes, widened and added to dot_H (ADD: PACER_IQ4_ADD, or PACER_IQ4_FIRST, which
  // starts dot_H, for vector 0).
#define PACER_IQ4_VEC(M, H, ADD)                            \
  "vmovdqa 64*" #M "+32*" #H "(%[quants]), %[q]\n\t"       \
  "vpsrlw $4, %[q], %[wh]\n\t"                             \
  "vpand %[c0f], %[q], %[wl]\n\t"                          \
  "vpand %[c0f], %[wh], %[wh]\n\t"                         \
  "vpshufb %[wl], %[table], %[wl]\n\t"                     \
  "vpshufb %[wh], %[table], %[wh]\n\t"                     \
  "vpsignb %[xl], %[wl], %[wl]\n\t"                        \
  "vpsignb %[xh], %[wh], %[wh]\n\t"                        \
  "vpmaddubsw %[wl], %[al], %[wl]\n\t"                     \
  "vpmaddubsw %[wh], %[ah], %[wh]\n\t"                     \
  "vpmaddwd %[ones], %[wl], %[wl]\n\t"                     \
  "vpmaddwd %[ones], %[wh], %[wh]\n\t"                     \
  ADD(H)
#define PACER_IQ4_FIRST(H)                                  \
  "vpaddd %[wl], %[wh], %[d" #H "]\n\t"
#define PACER_IQ4_ADD(H)                                    \
  "vpaddd %[wl], %[d" #H "], %[d" #H "]\n\t"               \
  "vpaddd %[wh], %[d" #H "], %[d" #H "]\n\t"
  asm(PACER_IQ4_ACT(0) PACER_IQ4_VEC(0, 0, PACER_IQ4_FIRST) PACER_IQ4_VEC(0, 1, PACER_IQ4_FIRST)
      PACER_IQ4_ACT(1) PACER_IQ4_VEC(1, 0, PACER_IQ4_ADD) PACER_IQ4_VEC(1, 1, PACER_IQ4_ADD)
      PACER_IQ4_ACT(2) PACER_IQ4_VEC(2, 0, PACER_IQ4_ADD) PACER_IQ4_VEC(2, 1, PACER_IQ4_ADD)
      PACER_IQ4_ACT(3) PACER_IQ4_VEC(3, 0, PACER_IQ4_ADD) PACER_IQ4_VEC(3, 1, PACER_IQ4_ADD)
      : [d0] "=&x"(dot0), [d1] "=&x"(dot1), [xl] "=&x"(xl), [xh] "=&x"(xh), [al] "=&x"(al),
        [ah] "=&x"(ah), [q] "=&x"(q), [wl] "=&x"(wl), [wh] "=&x"(wh)
      : [quants] "r"(quants), [xq] "r"(xq), [xa] "r"(xa), [table] "x"(table),
        [c0f] "x"(_mm256_set1_epi8(0x0F)), [ones] "x"(_mm256_set1_epi16(1)),
        "m"(*reinterpret_cast<const std::byte(*)[256]>(quants)),
        "m"(*reinterpret_cast<const int8_t(*)[32]>(xq)),
        "m"(*reinterpret_cast<const int8_t(*)[32]>(xa)));
#undef PACER_IQ4_ADD
#undef PACER_IQ4_FIRST
#undef PACER_IQ4_VEC
#undef PACER_IQ4_ACT
  // clang-format on
}

}  // namespace
}  // namespace pacer::ops::avx2
