// q5_1 entry points, AVX-512 F/BW/VL/DQ tier (no VNNI). The kernels: q5_1_avx512_kernels.h.
#include "ops/q5_1_avx512_kernels.h"

namespace pacer::ops {

void dot_rows_q5_1_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out) {
  avx512::quad32_gemm<Kernel, false>(n, w, w_stride, nr, act, 0, 1, out, 0);
}

float dot_q5_1_q8_0_avx512(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  avx512::quad32_gemm<Kernel, false>(n, w_row, 0, 1, act, 0, 1, &out, 0);
  return out;
}

void gemm_q5_1_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride) {
  avx512::quad32_gemm<Kernel, false>(n, w, w_stride, nr, act, act_stride, nt, out, out_stride);
}

}  // namespace pacer::ops
