#pragma once
// How a row of stored elements widens to fp32 vectors, written once over a vector wrapper V
// (ops/vec_avx2.h or ops/vec_avx512.h): the float dot-rows (ops/float_rows_simd.h) and the
// attention kernels (ops/attention_simd.h) read F32, F16, BF16 and Q8_0 rows through these.
// Include ONLY from files built with the flags of V's tier, after V's header.
//
// A policy gives kBytes (bytes per element; 0 for block formats) and, for a row `w` and element
// index j (a multiple of V::kLanes):
//   load(w, j)             V::kLanes elements w[j..) as fp32
//   load_first(w, j, rem)  the first rem (in [1, V::kLanes]) of them, 0 elsewhere
//   bytes(n)               bytes that n elements take
#include <cstddef>
#include <cstdint>

#include "ops/fp16.h"
#include "ops/q8_0.h"

namespace pacer::ops {

template <class V>
struct WidenF32 {
  using Reg = typename V::Reg;
  static constexpr int64_t kBytes = 4;
  static constexpr int64_t bytes(int64_t n) { return 4 * n; }
  static Reg load(const std::byte* w, int64_t j) {
    return V::load(reinterpret_cast<const float*>(w) + j);
  }
  static Reg load_first(const std::byte* w, int64_t j, int64_t rem) {
    return V::load_first(reinterpret_cast<const float*>(w) + j, rem);
  }
};

// IEEE half: exact widening (vcvtph2ps).
template <class V>
struct WidenF16 {
  using Reg = typename V::Reg;
  static constexpr int64_t kBytes = 2;
  static constexpr int64_t bytes(int64_t n) { return 2 * n; }
  static Reg load(const std::byte* w, int64_t j) {
    return V::load_f16(reinterpret_cast<const fp16_t*>(w) + j);
  }
  static Reg load_first(const std::byte* w, int64_t j, int64_t rem) {
    return V::load_f16_first(reinterpret_cast<const fp16_t*>(w) + j, rem);
  }
};

// bfloat16: the top half of an fp32, exact.
template <class V>
struct WidenBF16 {
  using Reg = typename V::Reg;
  static constexpr int64_t kBytes = 2;
  static constexpr int64_t bytes(int64_t n) { return 2 * n; }
  static Reg load(const std::byte* w, int64_t j) {
    return V::load_bf16(reinterpret_cast<const uint16_t*>(w) + j);
  }
  static Reg load_first(const std::byte* w, int64_t j, int64_t rem) {
    return V::load_bf16_first(reinterpret_cast<const uint16_t*>(w) + j, rem);
  }
};

// A row of Q8_0 blocks (ggml block_q8_0) whose length is a multiple of 32: element w = d * q.
// V::kLanes divides 32, so a vector never straddles two blocks and rows have no tail.
template <class V>
struct WidenQ8_0Blocks {
  using Reg = typename V::Reg;
  static constexpr int64_t kBytes = 0;
  static_assert(kQ8_0BlockElems % V::kLanes == 0, "a vector must lie within one block");
  static constexpr int64_t bytes(int64_t n) {
    return n / kQ8_0BlockElems * static_cast<int64_t>(sizeof(BlockQ8_0));
  }
  static Reg load(const std::byte* w, int64_t j) {
    const auto* block = reinterpret_cast<const BlockQ8_0*>(w) + j / kQ8_0BlockElems;
    return V::load_q8(block->qs + j % kQ8_0BlockElems, V::set1(V::f16_scalar(block->d)));
  }
  static Reg load_first(const std::byte* w, int64_t j, int64_t rem) {
    static_cast<void>(rem);  // never called with rem < kLanes (no tail)
    return load(w, j);
  }
};

}  // namespace pacer::ops
