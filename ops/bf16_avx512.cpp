// BF16 x F32 dot, AVX-512: zero-extend 16 bf16 to 32 bits and shift left by 16 (exact), 4 rows
// per pass, masked tail. Activations stay fp32 (no vdpbf16ps, which would round them to bf16).
#include "ops/bf16.h"
#include "ops/float_rows_avx512.h"
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>

namespace pacer::ops {
namespace {

struct WidenBF16 {
  static constexpr int64_t kBytes = 2;  // bytes per weight
  static __m512 load16(const std::byte* w, int64_t j) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 2 * j));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 load16_masked(const std::byte* w, int64_t j, __mmask16 m) {
    const __m256i h = _mm256_maskz_loadu_epi16(m, w + 2 * j);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};

}  // namespace

void dot_rows_bf16_f32_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                              const std::byte* act, float* out) {
  avx512::float_dot_rows<WidenBF16>(n, w, w_stride, nr, act, out);
}

float dot_bf16_f32_avx512(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  avx512::float_dot_rows<WidenBF16>(n, w_row, 0, 1, act, &out);
  return out;
}

void gemm_bf16_f32_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                          const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                          int64_t out_stride) {
  avx512::float_gemm_packed<WidenBF16>(n, w, w_stride, nr, act, act_stride, nt, out, out_stride);
}

void gemm_prepared_bf16_f32_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                   const std::byte* act, int64_t act_stride,
                                   const std::byte* prepared, int64_t nt, float* out,
                                   int64_t out_stride) {
  avx512::float_gemm_prepared<WidenBF16>(n, w, w_stride, nr, act, act_stride, prepared, nt, out,
                                         out_stride);
}

}  // namespace pacer::ops
