// Q5_0 x act-Q8 on AVX-512 (BW/VL/DQ), with and without VNNI.
//
// Per quad-block: nibbles + 16 where the fifth bit is set give unsigned quants q in [0, 31],
// dotted with the activation quants (signed, |x| <= 127) through vpdpbusd (VNNI) or vpmaddubsw
// (pair sums <= 2 * 31 * 127 = 7874, lo + hi <= 15748, no saturation) + vpmaddwd; the bias
// -16 * sum_b(x) in the first dword of each lane removes the offset: sum_j (q_j - 16) x_j.
//
// The row/token loop is quant32_quads_avx512.h's: four rows per zmm, one per 128-bit lane, scales
// (and offsets) prepared per strip of 16 blocks. The plain _avx512 kernels use no VNNI
// instruction (they run on Skylake-SP/X, which has no VNNI).
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>
#include "ops/q5_0.h"
#include "ops/q8_0.h"
#include "ops/quant32_quads_avx512.h"

namespace pacer::ops {
namespace {

struct Kernel {
  using Block = BlockQ5_0;
  static constexpr bool kHasMin = false;
  static constexpr bool kHasHighBits = true;
  static constexpr int kQhOffset = 2;  // after d
  template <bool kVnni>
  static constexpr int32_t kSumFactor = -16;
  template <bool kVnni>
  static __m512i quad_dot(__m512i lo, __m512i hi, __m512i x_lo, __m512i x_hi, __m512i bias) {
    return avx512::quad_dot_unsigned<kVnni>(lo, hi, x_lo, x_hi, bias);
  }
};

}  // namespace

void dot_rows_q5_0_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, float* out) {
  avx512::quad32_gemm<Kernel, false>(n, w, w_stride, nr, act, 0, 1, out, 0);
}
float dot_q5_0_q8_0_avx512(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  avx512::quad32_gemm<Kernel, false>(n, w_row, 0, 1, act, 0, 1, &out, 0);
  return out;
}
void dot_rows_q5_0_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                   const std::byte* act, float* out) {
  avx512::quad32_gemm<Kernel, true>(n, w, w_stride, nr, act, 0, 1, out, 0);
}
float dot_q5_0_q8_0_avx512vnni(int64_t n, const std::byte* w_row, const std::byte* act) {
  float out;
  avx512::quad32_gemm<Kernel, true>(n, w_row, 0, 1, act, 0, 1, &out, 0);
  return out;
}

void gemm_q5_0_q8_0_avx512(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                           int64_t out_stride) {
  avx512::quad32_gemm<Kernel, false>(n, w, w_stride, nr, act, act_stride, nt, out, out_stride);
}
void gemm_q5_0_q8_0_avx512vnni(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                               const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                               int64_t out_stride) {
  avx512::quad32_gemm<Kernel, true>(n, w, w_stride, nr, act, act_stride, nt, out, out_stride);
}

}  // namespace pacer::ops
