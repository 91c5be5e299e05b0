// F32 x F32 dot, AVX-512: 4 rows per pass, 32 elements per step, masked tail.
#include "ops/f32.h"
#include "ops/float_rows_avx512.h"
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>

namespace pacer::ops {
namespace {

struct WidenF32 {
  static constexpr int64_t kBytes = 4;  // bytes per weight
  static __m512 load16(const std::byte* w, int64_t j) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(w) + j);
  }
  static __m512 load16_masked(const std::byte* w, int64_t j, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(w) + j);
  }
};

}  // namespace

void dot_rows_f32_f32_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, float* out) {
  avx512::float_dot_rows<WidenF32>(n, w, w_stride, nr, act, out);
}

float dot_f32_f32_avx512(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  avx512::float_dot_rows<WidenF32>(n, w_row, 0, 1, act, &out);
  return out;
}

void gemm_f32_f32_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                         const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                         int64_t out_stride) {
  avx512::float_gemm_packed<WidenF32>(n, w, w_stride, nr, act, act_stride, nt, out, out_stride);
}

void gemm_prepared_f32_f32_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                  const std::byte* act, int64_t act_stride,
                                  const std::byte* prepared, int64_t nt, float* out,
                                  int64_t out_stride) {
  avx512::float_gemm_prepared<WidenF32>(n, w, w_stride, nr, act, act_stride, prepared, nt, out,
                                        out_stride);
}

int64_t gemm_prepare_f32_avx512(int64_t n, const std::byte* act, int64_t act_stride, int64_t nt,
                                std::byte* dst) {
  return avx512::float_gemm_prepare(n, act, act_stride, nt, dst);
}

}  // namespace pacer::ops
