#pragma once
// Scalar conversion between floats and every weight type's bytes (pacer_ops_types: no SIMD, no
// TBB, so the loader's quantizer and synthetic models use it without linking the kernels).
#include <cstddef>
#include <cstdint>

#include "ops/types.h"

namespace pacer::ops {

// Scalar dequantization of n elements (n a multiple of the block) starting at `src`: the
// embedding lookup, tests and the quantizer's round-trip use it. MatmulError
// (ops/weight_matrix.h) when n is not a multiple of the block.
void dequantize_row(WeightType t, const std::byte* src, float* dst, int64_t n);
// Quantizes n floats into type t's blocks (F32/F16/BF16/Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL/Q4_K/
// Q6_K), byte-identical to ggml's reference quantizers for Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1.
void quantize_row(WeightType t, const float* src, std::byte* dst, int64_t n);

}  // namespace pacer::ops
