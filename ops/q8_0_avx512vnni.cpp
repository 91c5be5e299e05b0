// q8_0 entry points, AVX-512 VNNI tier. The kernels: q8_0_avx512_kernels.h.
#include "ops/q8_0_avx512_kernels.h"

namespace pacer::ops {

void dot_rows_q8_0_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                   const std::byte* act, float* out) {
  avx512::quant_gemm<Q8_0Pair<true>, avx512::kPairsPerTile>(n, w, w_stride, nr, act, 0, 1, out, 0);
}

float dot_q8_0_q8_0_avx512vnni(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  avx512::quant_gemm<Q8_0Pair<true>, avx512::kPairsPerTile>(n, w_row, 0, 1, act, 0, 1, &out, 0);
  return out;
}

void gemm_q8_0_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                               int64_t out_stride) {
  avx512::repacked_gemm<Q8_0Unsigned>(n, w, w_stride, nr, act, act_stride, nt, out, out_stride);
}

int64_t gemm_prepare_q8_0_q8_0_avx512vnni(int64_t n, const std::byte* act, int64_t act_stride,
                                          int64_t nt, std::byte* dst, int64_t part, int64_t parts) {
  return avx512::hex_prepare<Q8_0Unsigned::kOffset>(n, act, act_stride, nt, dst, part, parts);
}

void gemm_prepared_q8_0_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                        const std::byte*, int64_t, const std::byte* prepared,
                                        int64_t nt, float* out, int64_t out_stride) {
  avx512::repacked_gemm_prepared<Q8_0Unsigned>(n, w, w_stride, nr, prepared, nt, out, out_stride);
}

}  // namespace pacer::ops
