// F16 x F32 dot, AVX-512: 16 weights widen exactly per vcvtph2ps, 4 rows per pass, masked tail.
#include "ops/f16.h"
#include "ops/float_rows_avx512.h"
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>

namespace pacer::ops {
namespace {

struct WidenF16 {
  static constexpr int64_t kBytes = 2;  // bytes per weight
  static __m512 load16(const std::byte* w, int64_t j) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 2 * j)));
  }
  static __m512 load16_masked(const std::byte* w, int64_t j, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w + 2 * j));
  }
};

}  // namespace

void dot_rows_f16_f32_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out) {
  avx512::float_dot_rows<WidenF16>(n, w, w_stride, nr, act, out);
}

float dot_f16_f32_avx512(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  avx512::float_dot_rows<WidenF16>(n, w_row, 0, 1, act, &out);
  return out;
}

void gemm_f16_f32_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                         const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                         int64_t out_stride) {
  avx512::float_gemm_packed<WidenF16>(n, w, w_stride, nr, act, act_stride, nt, out, out_stride);
}

void gemm_prepared_f16_f32_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                  const std::byte* act, int64_t act_stride,
                                  const std::byte* prepared, int64_t nt, float* out,
                                  int64_t out_stride) {
  avx512::float_gemm_prepared<WidenF16>(n, w, w_stride, nr, act, act_stride, prepared, nt, out,
                                        out_stride);
}

}  // namespace pacer::ops
