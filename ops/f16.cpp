// F16 reference dot.
#include "ops/f16.h"

#include <cstring>

#include "ops/fp16.h"

namespace pacer::ops {

float dot_f16_f32_ref(int64_t n, const std::byte* w_row, const std::byte* act) {
  float acc = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    fp16_t w;
    float x;
    std::memcpy(&w, w_row + 2 * j, 2);
    std::memcpy(&x, act + 4 * j, 4);
    acc += fp16_to_fp32(w) * x;
  }
  return acc;
}

}  // namespace pacer::ops
