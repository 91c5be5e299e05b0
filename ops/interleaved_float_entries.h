#pragma once
// The entries of a tier's interleaved F16 / BF16 kernels (interleaved.h), written once for
// interleaved_float_avx2.cpp and interleaved_float_avx512.cpp: include ONLY from those, after
// their templates gemv<Columns>, gemm_prepared<Columns> and gemm_few_tokens<Columns>.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace pacer::ops {

// A buffer of `bytes` starting on a 64-byte boundary inside buf (grown to fit).
inline std::byte* x16_float_aligned_buffer(std::vector<float>& buf, int64_t bytes) {
  buf.resize(static_cast<size_t>(bytes / 4 + 16));
  return reinterpret_cast<std::byte*>(buf.data() +
                                      (16 - reinterpret_cast<uintptr_t>(buf.data()) % 64 / 4) % 16);
}

}  // namespace pacer::ops

// gemv_<name>x16_f32_<tier>, gemm_prepared_..., gemm_few_... and gemm_... (the GemmFn entry of a
// call on its own: the activations transposed by `prepare` into its own buffer first).
#define PACER_X16_FLOAT_ENTRIES(name, Columns, tier, prepare)                                      \
  void gemv_##name##x16_f32_##tier(int64_t n, const std::byte* groups, int64_t n_groups,           \
                                   const std::byte* act, float* out) {                             \
    gemv<Columns>(n, groups, n_groups, act, out);                                                  \
  }                                                                                                \
  void gemm_prepared_##name##x16_f32_##tier(                                                       \
      int64_t n, const std::byte* groups, int64_t n_groups, const std::byte* act,                  \
      int64_t act_stride, const std::byte* prepared, int64_t nt, float* out, int64_t out_stride) { \
    gemm_prepared<Columns>(n, groups, n_groups, act, act_stride, prepared, nt, out, out_stride);   \
  }                                                                                                \
  void gemm_few_##name##x16_f32_##tier(int64_t n, const std::byte* groups, int64_t n_groups,       \
                                       const std::byte* act, int64_t act_stride, int64_t nt,       \
                                       float* out, int64_t out_stride) {                           \
    gemm_few_tokens<Columns>(n, groups, n_groups, reinterpret_cast<const float*>(act),             \
                             act_stride / static_cast<int64_t>(sizeof(float)), nt, out,            \
                             out_stride);                                                          \
  }                                                                                                \
  void gemm_##name##x16_f32_##tier(int64_t n, const std::byte* groups, int64_t n_groups,           \
                                   const std::byte* act, int64_t act_stride, int64_t nt,           \
                                   float* out, int64_t out_stride) {                               \
    const int64_t bytes = prepare(n, act, act_stride, nt, nullptr, 0, 1);                          \
    std::vector<float> buf;                                                                        \
    std::byte* xt = x16_float_aligned_buffer(buf, bytes);                                          \
    if (bytes > 0) prepare(n, act, act_stride, nt, xt, 0, 1);                                      \
    gemm_prepared<Columns>(n, groups, n_groups, act, act_stride, bytes > 0 ? xt : nullptr, nt,     \
                           out, out_stride);                                                       \
  }
