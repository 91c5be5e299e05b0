#pragma once
// Where pacer's SIMD exp (softmax_math_avx2.h, softmax_math_avx512.h) stops: e^x for x below this
// is 0, not the subnormal float it would be (e^-87.3 = 1.22e-38 is still normal, the smallest
// normal float being 1.18e-38). A subnormal result costs a microcode assist on Intel cores, and a
// peaked softmax puts many weights there; the scalar code that weighs softmax terms
// (attention.cpp's merge of key segments) follows the same rule.
namespace pacer::ops {

inline constexpr float kExpFlushBelow = -87.3f;

}  // namespace pacer::ops
