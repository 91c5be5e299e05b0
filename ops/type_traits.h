#pragma once
// Per weight type: what its activations are quantized to and which kernels run it, per Isa.
// Filled once (first use) from detect_cpu_features(); the matmul entry points only index this
// table, so no kernel body contains an ISA ladder. Internal to ops/ (not a public header).
//
// Kernel naming: <op>_<wtype>_<atype>_<isa>, e.g. dot_q4_0_q8_0_avx2; the scalar `_ref` of each is
// written straight from the block layout and is what tests hold the SIMD versions to.
#include <array>
#include <cstddef>
#include <cstdint>

#include "ops/isa.h"
#include "ops/types.h"

namespace pacer::ops {

// Quantizes n floats (n % block == 0) of one activation row into the activation type's layout.
using QuantizeActFn = void (*)(const float* x, std::byte* dst, int64_t n);
// Dot product of one weight row (n elements) with one packed activation row.
using DotFn = float (*)(int64_t n, const std::byte* w_row, const std::byte* act);
// Optional: dot of `nr` consecutive weight rows (row stride `w_stride` bytes) with one activation
// row, results to out[0..nr). Lets a kernel reuse activation registers across rows. May be null.
using DotRowsFn = void (*)(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                           const std::byte* act, float* out);

// Optional GEMM (prefill): out[t * out_stride + r] = dot of row r with token t, for nr rows and
// nt tokens (token t's packed row at act + t * act_stride). The same products as the same Isa's
// dot_rows (the same quantized activations, exact integer block dots), but the float sums may
// run in another order, so results equal nt GEMV calls within float reassociation; it reorders
// the work so each weight block, once loaded and unpacked, serves several tokens.
using GemmFn = void (*)(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                        const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                        int64_t out_stride);

constexpr int kIsaCount = 3;

struct TypeTraits {
  WeightType type = WeightType::F32;
  WeightType act_type = WeightType::F32;  // F32 means: activations stay fp32 (no packing)
  std::array<QuantizeActFn, kIsaCount> quantize_act{};  // indexed by Isa; null = use Scalar's
  std::array<DotFn, kIsaCount> dot{};                   // indexed by Isa; null = not on that Isa
  std::array<DotRowsFn, kIsaCount> dot_rows{};          // optional
  std::array<GemmFn, kIsaCount> gemm{};                 // optional; needs dot_rows of that Isa
  // The GEMM tiles rows itself (it repacks weights and regroups activations once per call), so
  // the caller passes a worker's whole row range in one call instead of L1-sized row tiles.
  std::array<bool, kIsaCount> gemm_whole_range{};
};

// The traits of t; for an Isa whose entry is null, callers fall back to the best lower Isa.
const TypeTraits& type_traits(WeightType t);
// The kernel actually used for (t, isa) after fallback (never null).
DotFn resolve_dot(WeightType t, Isa isa);
QuantizeActFn resolve_quantize_act(WeightType t, Isa isa);
DotRowsFn resolve_dot_rows(WeightType t, Isa isa);     // may be null
GemmFn resolve_gemm(WeightType t, Isa isa);            // may be null; the resolved dot's Isa only
bool resolve_gemm_whole_range(WeightType t, Isa isa);  // the resolved GEMM's gemm_whole_range

}  // namespace pacer::ops
