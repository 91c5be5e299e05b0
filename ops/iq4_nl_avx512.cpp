// iq4_nl entry points, AVX-512 F/BW/VL/DQ tier (no VNNI). The kernels: iq4_nl_avx512_kernels.h.
#include "ops/iq4_nl_avx512_kernels.h"

namespace pacer::ops {

void dot_rows_iq4_nl_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                 const std::byte* act, float* out) {
  avx512::quad32_gemm<Kernel, false>(n, w, w_stride, nr, act, 0, 1, out, 0);
}

float dot_iq4_nl_q8_0_avx512(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  avx512::quad32_gemm<Kernel, false>(n, w_row, 0, 1, act, 0, 1, &out, 0);
  return out;
}

void gemm_iq4_nl_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                             const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                             int64_t out_stride) {
  avx512::quad32_gemm<Kernel, false>(n, w, w_stride, nr, act, act_stride, nt, out, out_stride);
}

}  // namespace pacer::ops
