// q4_k entry points, AVX-512 F/BW/VL/DQ tier (no VNNI). The kernels: q4_k_avx512_kernels.h.
#include "ops/q4_k_avx512_kernels.h"

namespace pacer::ops {

void dot_rows_q4_K_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out) {
  q4_K_dot_rows<false>(n, w, w_stride, nr, act, out);
}

float dot_q4_K_q8_K_avx512(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  q4_K_rows_tile<false, 1>(n, w_row, 0, act, &out);
  return out;
}

void gemm_q4_K_q8_K_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride) {
  q4_K_gemm<false>(n, w, w_stride, nr, act, act_stride, nt, out, out_stride);
}

}  // namespace pacer::ops
