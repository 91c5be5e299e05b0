// KernelSet::for_isa: the one place where an Isa turns into kernel pointers (see kernel_set.h).
#include "ops/kernel_set.h"

#include <algorithm>
#include <string>
#include <utility>

#include "ops/f32.h"
#include "ops/gemv_streams.h"
#include "ops/matmul.h"

namespace pacer::ops {
namespace {

// Every weight type some matmul runs (q8_K is activation-only).
constexpr WeightType kWeightTypes[] = {
    WeightType::F32,  WeightType::F16,  WeightType::BF16, WeightType::Q8_0,   WeightType::Q4_0,
    WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1, WeightType::IQ4_NL, WeightType::Q2_K,
    WeightType::Q3_K, WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K,   WeightType::IQ4_XS,
};

// `isa`, lowered to the best Isa this machine runs.
Isa lower_to_supported(Isa isa) {
  int i = static_cast<int>(isa);
  while (i > 0 && !isa_supported(static_cast<Isa>(i))) --i;
  return static_cast<Isa>(std::max(i, 0));
}

// t's kernels on `isa`: the highest Isa at or below it with a dot, and that Isa's dot_rows and
// gemm (never mixed with another Isa's); the activation quantizer falls back on its own.
MatmulKernels resolve(const TypeTraits& tt, Isa isa) {
  MatmulKernels k;
  k.type = tt.type;
  k.act_type = tt.act_type;
  for (int i = static_cast<int>(isa); i >= 0; --i) {
    const auto s = static_cast<size_t>(i);
    if (tt.dot[s] == nullptr) continue;
    k.dot = tt.dot[s];
    k.dot_rows = tt.dot_rows[s];
    k.gemm = tt.gemm[s];
    k.gemm_whole_range = tt.gemm_whole_range[s];
    k.gemm_prepare = tt.gemm_prepare[s];
    k.gemm_prepared = tt.gemm_prepared[s];
    break;
  }
  if (tt.act_type != WeightType::F32) {
    for (int i = static_cast<int>(isa); i >= 0 && k.quantize_act == nullptr; --i) {
      k.quantize_act = tt.quantize_act[static_cast<size_t>(i)];
    }
    if (k.quantize_act == nullptr) k.dot = nullptr;  // cannot pack its activations
  }
  return k;
}

// The AVX2 tier's GEMV that an AVX-512 VNNI CPU runs for `t` where the rule says so
// (x16_gemv_avx2_kernel in isa.h: Q4_K and Q8_0 with long runs on AMD before Zen 5), or null.
// Both give the same bits; on one Zen 4 core, from DRAM (448000 x 2048 weights in one process,
// call by call):
// - Q4_K: the AVX2 GEMV reads a super-block of a stream a turn with 256-bit loads, 1.07-1.12x the
//   AVX-512 one (30.6-31.9 -> 33.1-34.5 GB/s, at the probe's best loop), where the AVX-512 one
//   read a whole super-block a turn at only 1.02x and with 256-bit loads at 0.97-0.99x. From L2
//   it computes at ~0.63x (50 against 80 GB/s), still above what two streams of DRAM give a core.
// - Q8_0: the AVX2 GEMV reads two streams in runs of 8 blocks, 1.08-1.12x the AVX-512 one (one
//   stream of 512-bit loads; 31.6-32.5 -> 34.9-35.6 GB/s), and TinyLlama / Qwen2.5-0.5B Q8_0
//   decode at 1 thread 1.00-1.12x. The AVX-512 GEMV on two streams in runs of 4 or 8 had read
//   1.11-1.15x in the same harness but decoded at 0.92-0.99x (Session 51).
// The other types' AVX2 GEMVs read 0.64x (Q3_K) to 1.01x (F16/BF16) of the AVX-512 ones there
// (docs/fidelity.md, Session 52).
X16GemvFn avx2_gemv_in_place_of_avx512(WeightType t) {
  if (t == WeightType::Q4_K) return gemv_q4_Kx16_q8_K_avx2;
  if (t == WeightType::Q8_0) return gemv_q8_0x16_q8_0_avx2;
  return nullptr;
}

// Whether the AVX2 16-row GEMV of t prefetches: its kind's plan or the class rule
// (avx2_gemv_follows_plan_prefetch in gemv_streams.h).
bool avx2_gemv_prefetch(WeightType t) {
  return avx2_gemv_follows_plan_prefetch(t) ? x16_gemv_plan(x16_gemv_kind(t)).prefetch
                                            : gemv_software_prefetch(gemv_kernel_class(t));
}

}  // namespace

KernelSet KernelSet::for_isa(Isa requested) {
  KernelSet ks;
  ks.isa_ = lower_to_supported(requested);
  for (WeightType t : kWeightTypes) {
    ks.matmul_[static_cast<size_t>(t)] = resolve(type_traits(t), ks.isa_);
  }
  const CpuFeatures cpu = detect_cpu_features();
  const bool vnni = ks.isa_ == Isa::Avx512 && cpu.avx512_vnni;
  const bool amx = vnni && cpu.amx_int8;
  // The quantized types below VNNI: the AVX2 kernels (vpmaddubsw), the same bits as VNNI's.
  const bool avx2 = !vnni && ks.isa_ >= Isa::Avx2;
  // A quantized type's GEMV: VNNI's, else AVX2's, else the scalar reference.
  const auto gemv = [&](X16GemvFn on_vnni, X16GemvFn on_avx2, X16GemvFn reference) {
    return vnni ? on_vnni : avx2 ? on_avx2 : reference;
  };
  ks.x16_q4_0_.gemv =
      gemv(gemv_q4_0x16_q8_0_avx512vnni, gemv_q4_0x16_q8_0_avx2, gemv_q4_0x16_q8_0_ref);
  ks.x16_q8_0_.gemv =
      gemv(gemv_q8_0x16_q8_0_avx512vnni, gemv_q8_0x16_q8_0_avx2, gemv_q8_0x16_q8_0_ref);
  ks.x16_q4_K_.gemv =
      gemv(gemv_q4_Kx16_q8_K_avx512vnni, gemv_q4_Kx16_q8_K_avx2, gemv_q4_Kx16_q8_K_ref);
  ks.x16_q5_K_.gemv =
      gemv(gemv_q5_Kx16_q8_K_avx512vnni, gemv_q5_Kx16_q8_K_avx2, gemv_q5_Kx16_q8_K_ref);
  ks.x16_q6_K_.gemv =
      gemv(gemv_q6_Kx16_q8_K_avx512vnni, gemv_q6_Kx16_q8_K_avx2, gemv_q6_Kx16_q8_K_ref);
  ks.x16_q5_0_.gemv =
      gemv(gemv_q5_0x16_q8_0_avx512vnni, gemv_q5_0x16_q8_0_avx2, gemv_q5_0x16_q8_0_ref);
  ks.x16_q5_1_.gemv =
      gemv(gemv_q5_1x16_q8_0_avx512vnni, gemv_q5_1x16_q8_0_avx2, gemv_q5_1x16_q8_0_ref);
  ks.x16_iq4_nl_.gemv =
      gemv(gemv_iq4_nlx16_q8_0_avx512vnni, gemv_iq4_nlx16_q8_0_avx2, gemv_iq4_nlx16_q8_0_ref);
  ks.x16_q4_1_.gemv =
      gemv(gemv_q4_1x16_q8_0_avx512vnni, gemv_q4_1x16_q8_0_avx2, gemv_q4_1x16_q8_0_ref);
  ks.x16_q2_K_.gemv =
      gemv(gemv_q2_Kx16_q8_K_avx512vnni, gemv_q2_Kx16_q8_K_avx2, gemv_q2_Kx16_q8_K_ref);
  ks.x16_q3_K_.gemv =
      gemv(gemv_q3_Kx16_q8_K_avx512vnni, gemv_q3_Kx16_q8_K_avx2, gemv_q3_Kx16_q8_K_ref);
  ks.x16_iq4_xs_.gemv =
      gemv(gemv_iq4_xsx16_q8_K_avx512vnni, gemv_iq4_xsx16_q8_K_avx2, gemv_iq4_xsx16_q8_K_ref);
  if (avx2) {
    ks.x16_q4_0_.gemm = gemm_q4_0x16_q8_0_avx2;
    ks.x16_q8_0_.gemm = gemm_q8_0x16_q8_0_avx2;
    ks.x16_q4_K_.gemm = gemm_q4_Kx16_q8_K_avx2;
    ks.x16_q5_K_.gemm = gemm_q5_Kx16_q8_K_avx2;
    ks.x16_q6_K_.gemm = gemm_q6_Kx16_q8_K_avx2;
    ks.x16_q4_1_.gemm = gemm_q4_1x16_q8_0_avx2;
    ks.x16_q5_0_.gemm = gemm_q5_0x16_q8_0_avx2;
    ks.x16_q5_1_.gemm = gemm_q5_1x16_q8_0_avx2;
    ks.x16_iq4_nl_.gemm = gemm_iq4_nlx16_q8_0_avx2;
    ks.x16_iq4_xs_.gemm = gemm_iq4_xsx16_q8_K_avx2;
    ks.x16_q3_K_.gemm = gemm_q3_Kx16_q8_K_avx2;
    ks.x16_q2_K_.gemm = gemm_q2_Kx16_q8_K_avx2;
  }
  if (ks.isa_ == Isa::Avx512) {  // F16 / BF16: AVX-512 F/BW is enough
    ks.x16_f16_ = {gemv_f16x16_f32_avx512,     gemm_f16x16_f32_avx512,
                   gemm_prepare_f32_avx512,    gemm_prepared_f16x16_f32_avx512,
                   gemm_few_f16x16_f32_avx512, kX16FewTokensMax};
    if (bf16_dot_prefill()) {  // vdpbf16ps: activations rounded to bf16, as llama.cpp does
      ks.x16_bf16_ = {gemv_bf16x16_f32_avx512,
                      gemm_bf16x16_bf16_avx512bf16,
                      gemm_prepare_bf16_pairs_avx512bf16,
                      gemm_prepared_bf16x16_bf16_avx512bf16,
                      gemm_few_bf16x16_f32_avx512,
                      kX16Bf16DotMinTokens};  // from there on vdpbf16ps
    } else {
      ks.x16_bf16_ = {gemv_bf16x16_f32_avx512,     gemm_bf16x16_f32_avx512,
                      gemm_prepare_f32_avx512,     gemm_prepared_bf16x16_f32_avx512,
                      gemm_few_bf16x16_f32_avx512, kX16FewTokensMax};
    }
  } else if (ks.isa_ == Isa::Avx2) {  // the same steps on 8 lanes (interleaved_float_avx2.cpp)
    ks.x16_f16_ = {gemv_f16x16_f32_avx2,          gemm_f16x16_f32_avx2,     gemm_prepare_f32_avx2,
                   gemm_prepared_f16x16_f32_avx2, gemm_few_f16x16_f32_avx2, kX16FewTokensMax};
    ks.x16_bf16_ = {gemv_bf16x16_f32_avx2,     gemm_bf16x16_f32_avx2,
                    gemm_prepare_f32_avx2,     gemm_prepared_bf16x16_f32_avx2,
                    gemm_few_bf16x16_f32_avx2, kX16FewTokensMax};
  } else {
    ks.x16_f16_.gemv = gemv_f16x16_f32_ref;
    ks.x16_bf16_.gemv = gemv_bf16x16_f32_ref;
  }
  if (vnni) {
    // No AMX variant of the K-quant GEMMs: VNNI on AMX machines too.
    ks.x16_q4_K_.gemm = gemm_q4_Kx16_q8_K_avx512vnni;
    ks.x16_q5_K_.gemm = gemm_q5_Kx16_q8_K_avx512vnni;
    ks.x16_q6_K_.gemm = gemm_q6_Kx16_q8_K_avx512vnni;
    ks.x16_q2_K_.gemm = gemm_q2_Kx16_q8_K_avx512vnni;
    ks.x16_q3_K_.gemm = gemm_q3_Kx16_q8_K_avx512vnni;
    ks.x16_iq4_xs_.gemm = gemm_iq4_xsx16_q8_K_avx512vnni;
    ks.x16_q4_0_.gemm = amx ? gemm_q4_0x16_q8_0_amx : gemm_q4_0x16_q8_0_avx512vnni;
    ks.x16_q8_0_.gemm = amx ? gemm_q8_0x16_q8_0_amx : gemm_q8_0x16_q8_0_avx512vnni;
    // Short prompts: the GEMV over a few tokens (memory-bound, like decode), on AMX machines too.
    // For Q4_1 / Q5_0 / Q5_1 / IQ4_NL the GEMV over up to 4 tokens a pass is the prefill GEMM
    // as well.
    ks.x16_q4_0_.gemm_few = gemm_few_q4_0x16_q8_0_avx512vnni;
    ks.x16_q8_0_.gemm_few = gemm_few_q8_0x16_q8_0_avx512vnni;
    ks.x16_q4_0_.few_tokens_max = ks.x16_q8_0_.few_tokens_max = kX16FewTokensMax;
    const std::pair<X16Kernels*, X16GemmFn> token_passes[] = {
        {&ks.x16_q4_1_, gemm_few_q4_1x16_q8_0_avx512vnni},
        {&ks.x16_q5_0_, gemm_few_q5_0x16_q8_0_avx512vnni},
        {&ks.x16_q5_1_, gemm_few_q5_1x16_q8_0_avx512vnni},
        {&ks.x16_iq4_nl_, gemm_few_iq4_nlx16_q8_0_avx512vnni}};
    for (const auto& [k, passes] : token_passes) {
      k->gemm = k->gemm_few = passes;
      k->few_tokens_max = kX16FewTokensMax;
    }
    if (!amx) {  // the VNNI GEMMs regroup the activations: once per call
      ks.x16_q4_0_.gemm_prepare = gemm_prepare_q4_0x16_q8_0_avx512vnni;
      ks.x16_q4_0_.gemm_prepared = gemm_prepared_q4_0x16_q8_0_avx512vnni;
      ks.x16_q8_0_.gemm_prepare = gemm_prepare_q8_0x16_q8_0_avx512vnni;
      ks.x16_q8_0_.gemm_prepared = gemm_prepared_q8_0x16_q8_0_avx512vnni;
    }
  }
  // (Set last: the F16/BF16 assignments above replace whole structs.) The AVX-512 GEMVs and the
  // AVX2 F16/BF16 ones read the stretches of this CPU's plan (x16_gemv_plan() in isa.h), the
  // AVX2 quantized ones always 2 (kX16Avx2GemvStreams), the scalar references 1.
  auto follow = [](X16Kernels& k, WeightType t) {
    const X16GemvPlan plan = x16_gemv_plan(x16_gemv_kind(t));
    k.gemv_streams = plan.streams;
    k.gemv_prefetch = plan.prefetch;
    k.gemv_page_touch = plan.page_touch;
  };
  const std::pair<X16Kernels*, WeightType> quant[] = {
      {&ks.x16_q4_0_, WeightType::Q4_0},     {&ks.x16_q8_0_, WeightType::Q8_0},
      {&ks.x16_q5_0_, WeightType::Q5_0},     {&ks.x16_q5_1_, WeightType::Q5_1},
      {&ks.x16_iq4_nl_, WeightType::IQ4_NL}, {&ks.x16_q4_1_, WeightType::Q4_1},
      {&ks.x16_q2_K_, WeightType::Q2_K},     {&ks.x16_q3_K_, WeightType::Q3_K},
      {&ks.x16_q4_K_, WeightType::Q4_K},     {&ks.x16_q5_K_, WeightType::Q5_K},
      {&ks.x16_q6_K_, WeightType::Q6_K},     {&ks.x16_iq4_xs_, WeightType::IQ4_XS}};
  for (const auto& [kp, t] : quant) {
    X16Kernels& k = *kp;
    const X16GemvFn avx2_gemv =
        vnni && x16_gemv_avx2_kernel(x16_gemv_kind(t)) ? avx2_gemv_in_place_of_avx512(t) : nullptr;
    if (avx2_gemv != nullptr) {
      k.gemv = avx2_gemv;
      k.gemv_avx2 = true;
      k.gemv_streams = kX16Avx2GemvStreams;
      k.gemv_prefetch = avx2_gemv_prefetch(t);
      k.gemv_page_touch = 0;
      k.gemv_run_bytes = x16_gemv_run_bytes(t, Isa::Avx2);
    } else if (vnni) {
      follow(k, t);
      if (k.gemv_streams > 1) k.gemv_run_bytes = x16_gemv_run_bytes(t, Isa::Avx512);
    } else if (avx2) {  // the AVX2 x16 ones: prefetch as avx2_gemv_follows_plan_prefetch says
      k.gemv_streams = kX16Avx2GemvStreams;
      k.gemv_prefetch = avx2_gemv_prefetch(t);
      k.gemv_run_bytes = x16_gemv_run_bytes(t, Isa::Avx2);
    }
  }
  if (ks.isa_ >= Isa::Avx2) {
    follow(ks.x16_f16_, WeightType::F16);
    follow(ks.x16_bf16_, WeightType::BF16);
    // Turns only where there are streams to take them.
    for (auto [k, t] :
         {std::pair{&ks.x16_f16_, WeightType::F16}, std::pair{&ks.x16_bf16_, WeightType::BF16}}) {
      if (k->gemv_streams > 1) k->gemv_run_bytes = x16_gemv_run_bytes(t, ks.isa_);
    }
  }
  ks.elementwise_ = &elementwise_kernels(ks.isa_);
  // On the AVX2 tier, all of a KV head's query heads a pass where this CPU's rule says so.
  ks.attention_ = ks.isa_ == Isa::Avx2 && ops::attention_one_pass()
                      ? &attention_kernels_avx2_one_pass()
                      : &attention_kernels(ks.isa_, vnni);
  return ks;
}

KernelSet KernelSet::for_workers(int workers) const {
  KernelSet ks = *this;
  X16Kernels& q4 = ks.x16_q4_0_;
  if (workers == 1 && q4.gemv == gemv_q4_0x16_q8_0_avx512vnni && q4.gemv_streams == 1 &&
      q4.gemv_prefetch) {
    q4.gemv = gemv_q4_0x16_q8_0_avx512vnni_lone;
    q4.gemv_prefetch_far = true;
    q4.gemv_page_touch *= 2;  // that GEMV's touch reaches twice as far too
  }
  return ks;
}

const MatmulKernels& KernelSet::matmul(WeightType t) const {
  const auto slot = static_cast<size_t>(t);
  if (t == WeightType::Q8_K) {
    throw MatmulError("type " + std::string(type_name(t)) + " is not a weight type of any matmul");
  }
  if (slot >= matmul_.size() || matmul_[slot].dot == nullptr) {
    throw MatmulError("matmul: type " + std::string(type_name(t)) + " not supported yet");
  }
  return matmul_[slot];
}

const X16Kernels& KernelSet::x16(WeightType t) const {
  if (t == WeightType::Q4_0) return x16_q4_0_;
  if (t == WeightType::Q8_0) return x16_q8_0_;
  if (t == WeightType::Q5_0) return x16_q5_0_;
  if (t == WeightType::Q5_1) return x16_q5_1_;
  if (t == WeightType::IQ4_NL) return x16_iq4_nl_;
  if (t == WeightType::Q4_1) return x16_q4_1_;
  if (t == WeightType::Q2_K) return x16_q2_K_;
  if (t == WeightType::Q3_K) return x16_q3_K_;
  if (t == WeightType::Q4_K) return x16_q4_K_;
  if (t == WeightType::Q5_K) return x16_q5_K_;
  if (t == WeightType::Q6_K) return x16_q6_K_;
  if (t == WeightType::IQ4_XS) return x16_iq4_xs_;
  if (t == WeightType::F16) return x16_f16_;
  if (t == WeightType::BF16) return x16_bf16_;
  throw MatmulError("matmul: no interleaved kernels for type " + std::string(type_name(t)));
}

std::vector<X16GemvChoice> KernelSet::x16_gemv_choices() const {
  std::vector<X16GemvChoice> out;
  for (WeightType t :
       {WeightType::Q4_0, WeightType::Q8_0, WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1,
        WeightType::IQ4_NL, WeightType::Q2_K, WeightType::Q3_K, WeightType::Q4_K, WeightType::Q5_K,
        WeightType::Q6_K, WeightType::IQ4_XS, WeightType::F16, WeightType::BF16}) {
    // Only the types a model repacks on this Isa: the others' matrices keep the file's layout,
    // and a plan of theirs would describe a GEMV that never runs.
    if (!InterleavedMatrix::pays(WeightMatrix{t, nullptr, kX16Rows, 256}, isa_)) continue;
    const X16Kernels& k = x16(t);
    out.push_back({t, k.gemv_streams, k.gemv_prefetch, k.gemv_page_touch, k.gemv_prefetch_far,
                   k.gemv_run_bytes, k.gemv_avx2});
  }
  return out;
}

}  // namespace pacer::ops
