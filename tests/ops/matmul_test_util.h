#pragma once
// Shared helpers of the matmul / quantization tests: deterministic data, weight matrices built
// through quantize_row, and the exact (double) products the error bounds are written against.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ops/isa.h"
#include "ops/matmul.h"
#include "ops/types.h"

namespace pacer::ops::testing {

// IEEE single unit roundoff (half an ulp of 1).
constexpr double kUnitRoundoff = 0x1p-24;

// n floats drawn N(0, scale^2) from a fixed seed.
inline std::vector<float> normal_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// A weight matrix that owns its bytes: fp32 values quantized row by row into `type`.
struct OwnedMatrix {
  std::vector<std::byte> bytes;
  WeightMatrix view;
  std::vector<float> dequantized;  // rows * cols, what the kernels effectively multiply by
};

inline OwnedMatrix make_matrix(WeightType type, int64_t rows, int64_t cols, uint32_t seed) {
  OwnedMatrix m;
  const std::vector<float> src = normal_floats(static_cast<size_t>(rows * cols), seed, 0.05f);
  const int64_t rb = row_bytes(type, cols);
  m.bytes.resize(static_cast<size_t>(rows * rb));
  m.dequantized.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(type, src.data() + r * cols, m.bytes.data() + r * rb, cols);
    dequantize_row(type, m.bytes.data() + r * rb, m.dequantized.data() + r * cols, cols);
  }
  m.view = WeightMatrix{type, m.bytes.data(), rows, cols};
  return m;
}

inline std::string shape_name(WeightType t, int64_t rows, int64_t cols) {
  return std::string(type_name(t)) + "_" + std::to_string(rows) + "x" + std::to_string(cols);
}

// Types with matmul kernels today (the K-quants come later).
inline std::vector<WeightType> matmul_types() {
  return {WeightType::F32, WeightType::F16, WeightType::BF16, WeightType::Q8_0, WeightType::Q4_0};
}

}  // namespace pacer::ops::testing
