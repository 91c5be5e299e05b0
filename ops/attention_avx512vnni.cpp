// AVX-512 VNNI attention: the AVX-512 kernels (ops/attention_simd.h on 16 lanes), except that a
// Q8_0 K's block sums are vpdpbusd dot products of 4 dimensions at a time instead of int8
// widened to fp32 one dimension at a time: a quarter of the score instructions (q as Q8_0, the
// QueryQ8 of ops/attention_kernels.h; the sums are the same integers as the other tiers').
#include "ops/vec_avx512.h"  // first: wraps <immintrin.h>

#include "ops/attention_simd.h"

namespace pacer::ops {
namespace {

// A Q8_0 K's rows for attention_simd: values and V rows as WidenQ8_0Blocks; K block sums by VNNI.
struct Q8_0BlocksVnni : WidenQ8_0Blocks<avx512::VecF32> {
  static constexpr bool kInt8Dot = true;

  // sum[b][g] = sum over the block's 32 dimensions of q_g's int8 x key (16 keys of chunk[b]) as
  // floats. The K block holds each dimension's 16 keys as 16 consecutive bytes; 4 dimensions
  // (64 bytes) are regrouped so that lane i holds key i's 4 bytes (a dword permute, then a byte
  // shuffle within each 128-bit lane) and offset by 128 (vpdpbusd multiplies unsigned by signed
  // bytes: sum((k + 128) q) = sum(k q) + 128 sum(q), whose last term `bias` takes back).
  template <int G, int KB>
  static void block_sums(const std::byte* const* chunk, const int8_t* qi, int64_t q_row,
                         const int32_t* bias, int64_t bias_row, __m512 (&sum)[KB][G]) {
    const __m512i dwords = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i bytes =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512i acc[KB][G];
    for (int g = 0; g < G; ++g) {
      const __m512i start = _mm512_set1_epi32(-bias[g * bias_row]);
      for (int b = 0; b < KB; ++b) acc[b][g] = start;
    }
    for (int e = 0; e < kQ8_0BlockElems; e += 4) {
      __m512i keys[KB];
      for (int b = 0; b < KB; ++b) {
        const __m512i raw = _mm512_loadu_si512(chunk[b] + kQ8KeyScaleBytes + e * kKvBlock);
        keys[b] = _mm512_xor_si512(
            _mm512_shuffle_epi8(_mm512_permutexvar_epi32(dwords, raw), bytes), offset);
      }
      for (int g = 0; g < G; ++g) {
        int32_t q4;
        std::memcpy(&q4, qi + g * q_row + e, 4);
        const __m512i qv = _mm512_set1_epi32(q4);
        for (int b = 0; b < KB; ++b) acc[b][g] = _mm512_dpbusd_epi32(acc[b][g], keys[b], qv);
      }
    }
    for (int b = 0; b < KB; ++b) {
      for (int g = 0; g < G; ++g) sum[b][g] = _mm512_cvtepi32_ps(acc[b][g]);
    }
  }
};
static_assert(kKvBlock == avx512::VecF32::kLanes, "a key group is one whole K block");

// The AVX-512 table with this Q8_0 kernel: F16 and F32 caches run attention_avx512.cpp's code.
AttentionKernels vnni_table() noexcept {
  AttentionKernels table = attention_kernels_avx512();
  table.attend_q8_0 = attention_simd::attend_any<avx512::VecF32, Q8_0BlocksVnni>;
  return table;
}

}  // namespace

const AttentionKernels& attention_kernels_avx512vnni() noexcept {
  static const AttentionKernels table = vnni_table();  // immutable once made
  return table;
}

}  // namespace pacer::ops
