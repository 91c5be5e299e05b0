// BF16 x F32 dot, AVX2 + FMA: a bf16 is the high half of an fp32, so zero-extend to 32 bits and
// shift left by 16 (exact), 4 rows per pass.
#include <cstring>

#include "ops/bf16.h"
#include "ops/float_rows_avx2.h"

namespace pacer::ops {
namespace {

struct WidenBF16 {
  static constexpr int64_t kBytes = 2;  // bytes per weight
  static __m256 load8(const std::byte* w, int64_t j) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * j));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static float load1(const std::byte* w, int64_t j) {
    uint16_t h;
    std::memcpy(&h, w + 2 * j, 2);
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
};

}  // namespace

void dot_rows_bf16_f32_avx2(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                            const std::byte* act, float* out) {
  avx2::float_dot_rows<WidenBF16>(n, w, w_stride, nr, act, out);
}

float dot_bf16_f32_avx2(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  avx2::float_rows_tile<WidenBF16, 1>(n, w_row, 0, 0, reinterpret_cast<const float*>(act), &out, 1);
  return out;
}

}  // namespace pacer::ops
