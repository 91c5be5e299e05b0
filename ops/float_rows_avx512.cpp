// F32, F16 and BF16 x F32 kernels, AVX-512: ops/float_rows_simd.h's rows tile on 16 lanes for
// decode and small batches, float_rows_avx512.h's tokens-in-lanes GEMM for prefill; weights
// widened exactly in registers (vmovups, vcvtph2ps, or a 16-bit shift for bf16).
#include "ops/vec_avx512.h"  // first: wraps <immintrin.h>

#include "ops/bf16.h"
#include "ops/f16.h"
#include "ops/f32.h"
#include "ops/float_rows_avx512.h"

namespace pacer::ops {

using avx512::VecF32;

// The DotFn, DotRowsFn, GemmFn and GemmPreparedFn entries of one weight type.
#define PACER_FLOAT_ROWS_AVX512(name, Widen)                                                       \
  float dot_##name##_f32_avx512(int64_t n, const std::byte* w_row, const std::byte* act) {         \
    return float_rows::dot<VecF32, Widen<VecF32>>(n, w_row, act);                                  \
  }                                                                                                \
  void dot_rows_##name##_f32_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,   \
                                    const std::byte* act, float* out) {                            \
    float_rows::dot_rows<VecF32, Widen<VecF32>>(n, w, w_stride, nr, act, out);                     \
  }                                                                                                \
  void gemm_##name##_f32_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,       \
                                const std::byte* act, int64_t act_stride, int64_t nt, float* out,  \
                                int64_t out_stride) {                                              \
    float_rows::gemm_packed<Widen<VecF32>>(n, w, w_stride, nr, act, act_stride, nt, out,           \
                                           out_stride);                                            \
  }                                                                                                \
  void gemm_prepared_##name##_f32_avx512(                                                          \
      int64_t n, const std::byte* w, int64_t w_stride, int64_t nr, const std::byte* act,           \
      int64_t act_stride, const std::byte* prepared, int64_t nt, float* out, int64_t out_stride) { \
    float_rows::gemm_prepared<Widen<VecF32>>(n, w, w_stride, nr, act, act_stride, prepared, nt,    \
                                             out, out_stride);                                     \
  }
PACER_FLOAT_ROWS_AVX512(f32, WidenF32)
PACER_FLOAT_ROWS_AVX512(f16, WidenF16)
PACER_FLOAT_ROWS_AVX512(bf16, WidenBF16)
#undef PACER_FLOAT_ROWS_AVX512

// The activations transposed once per matmul call, shared by all three types.
int64_t gemm_prepare_f32_avx512(int64_t n, const std::byte* act, int64_t act_stride, int64_t nt,
                                std::byte* dst, int64_t part, int64_t parts) {
  return float_rows::gemm_prepare(n, act, act_stride, nt, dst, part, parts);
}

}  // namespace pacer::ops
