// F32 reference dot.
#include "ops/f32.h"

#include <cstring>

namespace pacer::ops {

float dot_f32_f32_ref(int64_t n, const std::byte* w_row, const std::byte* act) {
  float acc = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    float w, x;
    std::memcpy(&w, w_row + 4 * j, 4);
    std::memcpy(&x, act + 4 * j, 4);
    acc += w * x;
  }
  return acc;
}

}  // namespace pacer::ops
