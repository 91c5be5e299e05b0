// F32, F16 and BF16 x F32 dots and prefill GEMMs, AVX2 + F16C + FMA: ops/float_rows_simd.h's rows
// tile on 8 lanes, weights widened exactly in registers (vmovups, vcvtph2ps, or a 16-bit shift
// for bf16).
#include "ops/vec_avx2.h"  // first: the tier's intrinsics

#include "ops/bf16.h"
#include "ops/f16.h"
#include "ops/f32.h"
#include "ops/float_rows_simd.h"

namespace pacer::ops {

using avx2::VecF32;

// The DotFn, DotRowsFn and GemmFn entries of one weight type.
#define PACER_FLOAT_ROWS_AVX2(name, Widen)                                                      \
  float dot_##name##_f32_avx2(int64_t n, const std::byte* w_row, const std::byte* act) {        \
    return float_rows::dot<VecF32, Widen<VecF32>>(n, w_row, act);                               \
  }                                                                                             \
  void dot_rows_##name##_f32_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,  \
                                  const std::byte* act, float* out) {                           \
    float_rows::dot_rows<VecF32, Widen<VecF32>>(n, w, w_stride, nr, act, out);                  \
  }                                                                                             \
  void gemm_##name##_f32_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,      \
                              const std::byte* act, int64_t act_stride, int64_t nt, float* out, \
                              int64_t out_stride) {                                             \
    float_rows::gemm<VecF32, Widen<VecF32>>(                                                    \
        n, w, w_stride, nr, reinterpret_cast<const float*>(act),                                \
        act_stride / static_cast<int64_t>(sizeof(float)), nt, out, out_stride);                 \
  }
PACER_FLOAT_ROWS_AVX2(f32, WidenF32)
PACER_FLOAT_ROWS_AVX2(f16, WidenF16)
PACER_FLOAT_ROWS_AVX2(bf16, WidenBF16)
#undef PACER_FLOAT_ROWS_AVX2

}  // namespace pacer::ops
