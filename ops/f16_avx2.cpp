// F16 x F32 dot, AVX2 + F16C + FMA: weights widen exactly with vcvtph2ps, 4 rows per pass.
#include <cstring>

#include "ops/f16.h"
#include "ops/float_rows_avx2.h"

namespace pacer::ops {
namespace {

struct WidenF16 {
  static constexpr int64_t kBytes = 2;  // bytes per weight
  static __m256 load8(const std::byte* w, int64_t j) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * j)));
  }
  static float load1(const std::byte* w, int64_t j) {
    uint16_t h;
    std::memcpy(&h, w + 2 * j, 2);
    return avx2::fp32_from_fp16(h);
  }
};

}  // namespace

void dot_rows_f16_f32_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, float* out) {
  avx2::float_dot_rows<WidenF16>(n, w, w_stride, nr, act, out);
}

float dot_f16_f32_avx2(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  avx2::float_rows_tile<WidenF16, 1>(n, w_row, 0, 0, reinterpret_cast<const float*>(act), &out, 1);
  return out;
}

}  // namespace pacer::ops
