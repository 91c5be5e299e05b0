#pragma once
// Every kernel a forward pass runs, resolved once from an Isa: the matmul kernels per weight type
// (after the fallback to the best lower Isa, see type_traits.h), the interleaved Q4_0/Q8_0
// kernels, the elementwise table and the attention table. A Session builds one (from
// detect_isa(), so PACER_ISA still pins the path) and passes it to every op; tests that compare
// paths build one per Isa. The ops themselves never look at the CPU or the environment, and no
// call re-resolves a kernel.
//
// Immutable after for_isa(); cheap to copy (a few kilobytes of pointers), safe to share between
// threads.
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ops/attention_kernels.h"
#include "ops/elementwise_kernels.h"
#include "ops/interleaved.h"
#include "ops/isa.h"
#include "ops/type_traits.h"
#include "ops/types.h"

namespace pacer::ops {

// One weight type's matmul kernels on one Isa. dot and dot_rows (and gemm) always come from the
// same Isa, so a GEMV and a GEMM over the same packed activations never mix kernels.
struct MatmulKernels {
  WeightType type = WeightType::F32;
  WeightType act_type = WeightType::F32;  // F32: activations stay fp32 (quantize_act null)
  QuantizeActFn quantize_act = nullptr;
  DotFn dot = nullptr;            // null: no matmul for this type
  DotRowsFn dot_rows = nullptr;   // optional
  GemmFn gemm = nullptr;          // optional
  bool gemm_whole_range = false;  // the GEMM tiles rows itself (see TypeTraits)
  // Optional, with gemm: its activation regrouping as a step of its own (type_traits.h).
  GemmPrepareFn gemm_prepare = nullptr;
  GemmPreparedFn gemm_prepared = nullptr;
};

// Kernels of a matrix interleaved by 16 rows (interleaved.h: every type of x16_supported()). Below
// AVX-512 VNNI, every quantized type runs the AVX2 GEMV and GEMM, and F16/BF16 on the AVX2 tier
// their AVX2 ones; below AVX2 the scalar reference GEMV (models repack only where the fast kernels
// run: InterleavedMatrix::pays), which prefill then calls once per token.
struct X16Kernels {
  X16GemvFn gemv = nullptr;  // never null
  X16GemmFn gemm = nullptr;  // null: gemv once per token
  // Optional, with gemm: the activations regrouped once per matmul call, then read by every worker.
  GemmPrepareFn gemm_prepare = nullptr;
  X16GemmPreparedFn gemm_prepared = nullptr;
  // Optional: for 2 <= tokens < few_tokens_max, instead of the GEMM (and without its prepare).
  X16GemmFn gemm_few = nullptr;
  int64_t few_tokens_max = 0;
  // Far-apart stretches the GEMV reads its groups from at a time (gemv_streams.h), for the plan
  // of the workers' prefetch (matmul_prefetch_plan) to walk them in the GEMV's order.
  int gemv_streams = 1;
  // What else the GEMV does ahead of its streams (X16GemvPlan in isa.h), for the event log
  // header and bench: software prefetch, and the page touch's distance in bytes (0: none).
  bool gemv_prefetch = false;
  int64_t gemv_page_touch = 0;
  // The GEMV is the one whose prefetch and page touch reach twice as far
  // (KernelSet::for_workers(1); gemv_page_touch is then its doubled distance).
  bool gemv_prefetch_far = false;
  // Bytes of a 16-row group the GEMV reads from one stream before the next one's turn, where the
  // kernel says (x16_gemv_run_bytes in interleaved.h); 0: not recorded (one stream).
  int64_t gemv_run_bytes = 0;
  // The GEMV is the AVX2 tier's, on an AVX-512 VNNI CPU: Q4_K and Q8_0 where the rule says so
  // (ops/isa.h x16_gemv_avx2_kernel: long runs, AMD before Zen 5; why in kernel_set.cpp).
  bool gemv_avx2 = false;
  bool few_tokens(int64_t tokens) const noexcept {
    return gemm_few != nullptr && tokens > 1 && tokens < few_tokens_max;
  }
};

// How one interleaved GEMV reads its weights, as KernelSet::x16_gemv_choices() reports it.
struct X16GemvChoice {
  WeightType type = WeightType::Q4_0;
  int streams = 1;
  bool prefetch = false;
  int64_t page_touch = 0;
  bool prefetch_far = false;  // twice as far ahead (one worker: KernelSet::for_workers)
  int64_t run_bytes = 0;      // X16Kernels::gemv_run_bytes (0: not recorded)
  bool avx2_kernel = false;   // X16Kernels::gemv_avx2
};

class KernelSet {
 public:
  // The kernels of `isa`, lowered to the best Isa this machine runs (a request for AVX-512 on an
  // AVX2 machine gets the AVX2 kernels instead of faulting).
  static KernelSet for_isa(Isa isa);
  // These kernels for matmuls run by `workers` workers: with one, the Q4_0 GEMV whose prefetch
  // and page touch reach twice as far (gemv_q4_0x16_q8_0_avx512vnni_lone), where this CPU's plan
  // has it read one stream with software prefetch (x16_gemv_plan: AMD Zen 5 and later); else
  // unchanged.
  KernelSet for_workers(int workers) const;

  // The Isa the kernels were resolved for (after lowering).
  Isa isa() const noexcept { return isa_; }
  // t's kernels; MatmulError for a type no matmul runs (q8_K, or one without kernels).
  const MatmulKernels& matmul(WeightType t) const;
  // Q4_0, Q8_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, F16 or BF16
  // interleaved by 16 rows; MatmulError for others.
  const X16Kernels& x16(WeightType t) const;
  // Each interleaved GEMV's streams, prefetch and page touch (Q4_0, Q8_0, Q4_1, Q5_0, Q5_1,
  // IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, F16, BF16 in that order), for the event log
  // header and bench: those of the types repacked on this Isa (InterleavedMatrix::pays).
  std::vector<X16GemvChoice> x16_gemv_choices() const;
  const ElementwiseKernels& elementwise() const noexcept { return *elementwise_; }
  const AttentionKernels& attention() const noexcept { return *attention_; }
  // Whether attention() is the AVX2 table that takes all of a KV head's query heads in one pass
  // (isa.h attention_one_pass), for the event log header and bench.
  bool attention_one_pass() const noexcept {
    return attention_ == &attention_kernels_avx2_one_pass();
  }

 private:
  KernelSet() = default;
  // Indexed by the WeightType's value (GGUF ids, at most 30).
  static constexpr size_t kTypeSlots = 31;
  Isa isa_ = Isa::Scalar;
  std::array<MatmulKernels, kTypeSlots> matmul_{};
  X16Kernels x16_q4_0_, x16_q8_0_, x16_q4_1_, x16_q5_0_, x16_q5_1_, x16_iq4_nl_, x16_q2_K_,
      x16_q3_K_, x16_q4_K_, x16_q5_K_, x16_q6_K_, x16_iq4_xs_, x16_f16_, x16_bf16_;
  const ElementwiseKernels* elementwise_ = nullptr;
  const AttentionKernels* attention_ = nullptr;
};

}  // namespace pacer::ops
