// F32 x F32 dot, AVX2 + FMA: 4 rows per pass, 16 elements per step.
#include <cstring>

#include "ops/f32.h"
#include "ops/float_rows_avx2.h"

namespace pacer::ops {
namespace {

struct WidenF32 {
  static constexpr int64_t kBytes = 4;  // bytes per weight
  static __m256 load8(const std::byte* w, int64_t j) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(w) + j);
  }
  static float load1(const std::byte* w, int64_t j) {
    float v;
    std::memcpy(&v, w + 4 * j, 4);
    return v;
  }
};

}  // namespace

void dot_rows_f32_f32_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, float* out) {
  avx2::float_dot_rows<WidenF32>(n, w, w_stride, nr, act, out);
}

float dot_f32_f32_avx2(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  avx2::float_rows_tile<WidenF32, 1>(n, w_row, 0, 0, reinterpret_cast<const float*>(act), &out, 1);
  return out;
}

}  // namespace pacer::ops
