// F32, F16 and BF16 x F32 dots, AVX2 + F16C + FMA: ops/float_rows_simd.h's rows tile on 8 lanes,
// weights widened exactly in registers (vmovups, vcvtph2ps, or a 16-bit shift for bf16).
#include "ops/vec_avx2.h"  // first: the tier's intrinsics

#include "ops/bf16.h"
#include "ops/f16.h"
#include "ops/f32.h"
#include "ops/float_rows_simd.h"

namespace pacer::ops {

using avx2::VecF32;

float dot_f32_f32_avx2(int64_t n, const std::byte* w_row, const std::byte* act) {
  return float_rows::dot<VecF32, WidenF32<VecF32>>(n, w_row, act);
}
void dot_rows_f32_f32_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, float* out) {
  float_rows::dot_rows<VecF32, WidenF32<VecF32>>(n, w, w_stride, nr, act, out);
}

float dot_f16_f32_avx2(int64_t n, const std::byte* w_row, const std::byte* act) {
  return float_rows::dot<VecF32, WidenF16<VecF32>>(n, w_row, act);
}
void dot_rows_f16_f32_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, float* out) {
  float_rows::dot_rows<VecF32, WidenF16<VecF32>>(n, w, w_stride, nr, act, out);
}

float dot_bf16_f32_avx2(int64_t n, const std::byte* w_row, const std::byte* act) {
  return float_rows::dot<VecF32, WidenBF16<VecF32>>(n, w_row, act);
}
void dot_rows_bf16_f32_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                            const std::byte* act, float* out) {
  float_rows::dot_rows<VecF32, WidenBF16<VecF32>>(n, w, w_stride, nr, act, out);
}

}  // namespace pacer::ops
