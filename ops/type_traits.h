#pragma once
// Per weight type: what its activations are quantized to and which kernels run it, per Isa.
// Filled once (first use) from detect_cpu_features(); KernelSet (kernel_set.h) picks each type's
// kernels from it once per session, so no kernel body contains an ISA ladder. Internal to ops/ (not
// a public header).
//
// Kernel naming: <op>_<wtype>_<atype>_<isa>, e.g. dot_q4_0_q8_0_avx2; the scalar `_ref` of each is
// written straight from the block layout and is what tests hold the SIMD versions to.
#include <array>
#include <cstddef>
#include <cstdint>

#include "ops/isa.h"
#include "ops/matmul.h"
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

// Optional companion of a GEMM that regroups its activations before use (the AVX-512 float GEMMs
// transpose them, tokens into vector lanes; the repacked VNNI GEMMs regroup them by 8 tokens):
// the regrouping alone. matmul() runs it once per call, before the workers start, into a buffer
// (64-byte aligned) that every worker's GemmPreparedFn reads, where each worker's GemmFn would
// make its own copy. Writes the regrouped copy of nt tokens to dst and returns its bytes; with
// dst null only returns the bytes (0: nothing to regroup at this nt). Declared in matmul.h
// (PackedActivations keeps the copies): GemmPrepareFn.
//
// The GEMM on prepared activations: GemmFn's contract, `prepared` being what the paired
// GemmPrepareFn wrote for these act rows (null where it returned 0).
using GemmPreparedFn = void (*)(int64_t n, const std::byte* w, int64_t w_stride, int64_t nr,
                                const std::byte* act, int64_t act_stride,
                                const std::byte* prepared, int64_t nt, float* out,
                                int64_t out_stride);

constexpr int kIsaCount = 3;

struct TypeTraits {
  WeightType type = WeightType::F32;
  WeightType act_type = WeightType::F32;  // F32 means: activations stay fp32 (no packing)
  std::array<QuantizeActFn, kIsaCount> quantize_act{};  // indexed by Isa; null = use Scalar's
  std::array<DotFn, kIsaCount> dot{};                   // indexed by Isa; null = not on that Isa
  std::array<DotRowsFn, kIsaCount> dot_rows{};          // optional
  std::array<GemmFn, kIsaCount> gemm{};                 // optional; needs dot_rows of that Isa
  // Optional, with gemm: the same GEMM split into a shared regrouping and the GEMM proper.
  std::array<GemmPrepareFn, kIsaCount> gemm_prepare{};
  std::array<GemmPreparedFn, kIsaCount> gemm_prepared{};
  // The GEMM tiles rows itself (it repacks weights and regroups activations once per call), so
  // the caller passes a worker's whole row range in one call instead of L1-sized row tiles.
  std::array<bool, kIsaCount> gemm_whole_range{};
};

// The traits of t (MatmulError for q8_K, which no matmul runs). For an Isa whose entry is null,
// the kernels fall back to the best lower Isa: KernelSet::for_isa (kernel_set.h) resolves that
// once per session, so callers run kernels from a KernelSet, not from here.
const TypeTraits& type_traits(WeightType t);

}  // namespace pacer::ops
