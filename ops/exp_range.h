#pragma once
// Where pacer's SIMD exp (softmax_math_avx2.h, softmax_math_avx512.h) stops: e^x for x below this
// is 0, not the subnormal float it would be (e^-87.3 = 1.22e-38 is still normal, the smallest
// normal float being 1.18e-38). A subnormal result costs a microcode assist on Intel cores, and a
// peaked softmax puts many weights there; the scalar code that weighs softmax terms (the Scalar
// tier's softmax and attention, attention.cpp's merge of key segments) follows the same rule.
#include <cmath>

namespace pacer::ops {

inline constexpr float kExpFlushBelow = -87.3f;

// e^x as the SIMD exp has it: 0 below kExpFlushBelow; NaN stays NaN. For the generic (Scalar)
// translation units only: an inline function that an ISA translation unit also emitted could be
// the copy the linker keeps, with that tier's instructions in it.
inline float exp_flushed(float x) {
  return x < kExpFlushBelow ? 0.0f : std::exp(x);
}

}  // namespace pacer::ops
