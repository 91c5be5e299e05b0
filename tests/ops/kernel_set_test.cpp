// KernelSet: an Isa resolved once into kernel pointers. Checked against the per-type table
// (type_traits.h) walked here by hand, and against the elementwise / attention tables.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/attention_kernels.h"
#include "ops/elementwise_kernels.h"
#include "ops/f32.h"
#include "ops/gemv_streams.h"
#include "ops/interleaved.h"
#include "ops/isa.h"
#include "ops/kernel_set.h"
#include "ops/matmul.h"
#include "ops/type_traits.h"

namespace pacer::ops {
namespace {

const std::vector<WeightType> kWeightTypes = {
    WeightType::F32,  WeightType::F16,  WeightType::BF16, WeightType::Q8_0,   WeightType::Q4_0,
    WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1, WeightType::IQ4_NL, WeightType::Q2_K,
    WeightType::Q3_K, WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K,   WeightType::IQ4_XS,
};

class KernelSetIsa : public ::testing::TestWithParam<Isa> {};

TEST_P(KernelSetIsa, MatmulKernelsAreTheHighestSlotAtOrBelowTheIsa) {
  const Isa isa = GetParam();
  const KernelSet ks = KernelSet::for_isa(isa);
  EXPECT_EQ(ks.isa(), isa);
  for (WeightType t : kWeightTypes) {
    const TypeTraits& tt = type_traits(t);
    // The Isa whose dot runs: the highest one at or below `isa` with a dot.
    int slot = static_cast<int>(isa);
    while (slot > 0 && tt.dot[static_cast<size_t>(slot)] == nullptr) --slot;
    const auto s = static_cast<size_t>(slot);
    const MatmulKernels& k = ks.matmul(t);
    SCOPED_TRACE(std::string(type_name(t)) + " on " + std::string(isa_name(isa)));
    EXPECT_EQ(k.type, t);
    EXPECT_EQ(k.act_type, tt.act_type);
    ASSERT_NE(k.dot, nullptr);
    EXPECT_EQ(k.dot, tt.dot[s]);
    EXPECT_EQ(k.dot_rows, tt.dot_rows[s]);  // never another Isa's
    EXPECT_EQ(k.gemm, tt.gemm[s]);
    EXPECT_EQ(k.gemm_whole_range, tt.gemm_whole_range[s]);
    if (tt.act_type == WeightType::F32) {
      EXPECT_EQ(k.quantize_act, nullptr);  // fp32 activations are copied, not quantized
    } else {
      int q = static_cast<int>(isa);
      while (q > 0 && tt.quantize_act[static_cast<size_t>(q)] == nullptr) --q;
      EXPECT_EQ(k.quantize_act, tt.quantize_act[static_cast<size_t>(q)]);
      EXPECT_NE(k.quantize_act, nullptr);
    }
  }
}

TEST_P(KernelSetIsa, OneWorkersQ4_0GemvPrefetchesTwiceAsFarWhereItReadsOneStreamWithPrefetch) {
  const KernelSet ks = KernelSet::for_isa(GetParam());
  const X16Kernels& q4 = ks.x16(WeightType::Q4_0);
  // The lone-worker GEMV only replaces the VNNI one, and only under a one-stream plan that
  // prefetches (AMD Zen 5 and later, unless the environment overrides the plan).
  const bool swaps =
      q4.gemv == gemv_q4_0x16_q8_0_avx512vnni && q4.gemv_streams == 1 && q4.gemv_prefetch;
  const KernelSet one = ks.for_workers(1);
  EXPECT_EQ(one.x16(WeightType::Q4_0).gemv, swaps ? gemv_q4_0x16_q8_0_avx512vnni_lone : q4.gemv);
  EXPECT_EQ(one.x16(WeightType::Q4_0).gemv_prefetch_far, swaps);
  // Its page touch reaches twice as far too (the choices report the distance it runs).
  EXPECT_EQ(one.x16(WeightType::Q4_0).gemv_page_touch, (swaps ? 2 : 1) * q4.gemv_page_touch);
  for (int workers : {2, 4, 16}) {
    const KernelSet many = ks.for_workers(workers);
    EXPECT_EQ(many.x16(WeightType::Q4_0).gemv, q4.gemv) << workers << " workers";
    EXPECT_FALSE(many.x16(WeightType::Q4_0).gemv_prefetch_far);
  }
  // Nothing else changes, and the choices say which GEMV prefetches further.
  for (WeightType t : {WeightType::Q8_0, WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K}) {
    EXPECT_EQ(one.x16(t).gemv, ks.x16(t).gemv) << type_name(t);
  }
  for (const X16GemvChoice& c : one.x16_gemv_choices()) {
    EXPECT_EQ(c.prefetch_far, swaps && c.type == WeightType::Q4_0) << type_name(c.type);
  }
}

// Each 16-row GEMV records how much of one stream it reads before the next one's turn: the run
// of its own tier (AVX-512 VNNI for the quantized types where the CPU has VNNI, else the AVX2
// kernels; F16/BF16 the Isa's own), and nothing where it reads one stream or runs the scalar
// reference.
TEST_P(KernelSetIsa, GemvRunBytesAreTheirTiersRuns) {
  const Isa isa = GetParam();
  const KernelSet ks = KernelSet::for_isa(isa);
  const bool vnni = isa == Isa::Avx512 && detect_cpu_features().avx512_vnni;
  for (const X16GemvChoice& c : ks.x16_gemv_choices()) {
    SCOPED_TRACE(type_name(c.type));
    const bool is_float = c.type == WeightType::F16 || c.type == WeightType::BF16;
    const Isa tier = (is_float || vnni) && !c.avx2_kernel ? isa : Isa::Avx2;
    // Only the Q4_K and Q8_0 GEMVs are ever the AVX2 ones on an AVX-512 VNNI CPU, where the
    // rule says (long runs, AMD before Zen 5).
    const bool avx2_type = c.type == WeightType::Q4_K || c.type == WeightType::Q8_0;
    EXPECT_EQ(c.avx2_kernel, vnni && avx2_type && x16_gemv_avx2_kernel(x16_gemv_kind(c.type)));
    const int64_t want =
        isa == Isa::Scalar || c.streams == 1 ? 0 : x16_gemv_run_bytes(c.type, tier);
    EXPECT_EQ(c.run_bytes, want);
    // The AVX2 quantized GEMVs record the prefetch they do: their kind's plan (which on Zen 1
    // turns it on for the Q4_0 kind and the K-quants against the class rule), or for Q2_K, Q3_K
    // and IQ4_XS the class rule.
    if (!is_float && tier == Isa::Avx2 && isa != Isa::Scalar) {
      const bool plan = avx2_gemv_follows_plan_prefetch(c.type);
      EXPECT_EQ(plan, c.type != WeightType::Q2_K && c.type != WeightType::Q3_K &&
                          c.type != WeightType::IQ4_XS);
      EXPECT_EQ(c.prefetch, plan ? x16_gemv_plan(x16_gemv_kind(c.type)).prefetch
                                 : gemv_software_prefetch(gemv_kernel_class(c.type)));
    }
  }
}

TEST_P(KernelSetIsa, ElementwiseAttentionAndInterleavedKernelsFollowTheIsa) {
  const Isa isa = GetParam();
  const KernelSet ks = KernelSet::for_isa(isa);
  EXPECT_EQ(&ks.elementwise(), &elementwise_kernels(isa));
  const bool vnni = isa == Isa::Avx512 && detect_cpu_features().avx512_vnni;
  // On the AVX2 tier, the one-pass table where this CPU's rule says so (AMD Zen 1 / Zen+).
  const bool one_pass = isa == Isa::Avx2 && attention_one_pass();
  EXPECT_EQ(&ks.attention(), vnni       ? &attention_kernels_avx512vnni()
                             : one_pass ? &attention_kernels_avx2_one_pass()
                                        : &attention_kernels(isa));
  EXPECT_EQ(ks.attention_one_pass(), one_pass);
  // The quantized types below VNNI (AVX2, or AVX-512 without VNNI): the AVX2 kernels.
  const bool avx2 = !vnni && isa != Isa::Scalar;
  EXPECT_EQ(ks.x16(WeightType::Q4_0).gemv, vnni   ? gemv_q4_0x16_q8_0_avx512vnni
                                           : avx2 ? gemv_q4_0x16_q8_0_avx2
                                                  : gemv_q4_0x16_q8_0_ref);
  // The Q4_K and Q8_0 GEMVs are the AVX2 ones on a VNNI CPU where the rule says (long runs, AMD
  // before Zen 5; kernel_set.cpp).
  const bool long_runs_avx2 = vnni && x16_gemv_avx2_kernel(X16Gemv::Q4_K);
  EXPECT_EQ(x16_gemv_avx2_kernel(X16Gemv::Q8_0), x16_gemv_avx2_kernel(X16Gemv::Q4_K));
  EXPECT_EQ(ks.x16(WeightType::Q8_0).gemv, long_runs_avx2 ? gemv_q8_0x16_q8_0_avx2
                                           : vnni         ? gemv_q8_0x16_q8_0_avx512vnni
                                           : avx2         ? gemv_q8_0x16_q8_0_avx2
                                                          : gemv_q8_0x16_q8_0_ref);
  EXPECT_EQ(ks.x16(WeightType::Q4_K).gemv, long_runs_avx2 ? gemv_q4_Kx16_q8_K_avx2
                                           : vnni         ? gemv_q4_Kx16_q8_K_avx512vnni
                                           : avx2         ? gemv_q4_Kx16_q8_K_avx2
                                                          : gemv_q4_Kx16_q8_K_ref);
  EXPECT_EQ(ks.x16(WeightType::Q4_K).gemv_avx2, long_runs_avx2);
  EXPECT_EQ(ks.x16(WeightType::Q8_0).gemv_avx2, long_runs_avx2);
  if (vnni) {
    EXPECT_EQ(ks.x16(WeightType::Q4_K).gemm, gemm_q4_Kx16_q8_K_avx512vnni);
  }
  EXPECT_EQ(ks.x16(WeightType::Q4_0).gemm != nullptr, vnni || avx2);
  EXPECT_EQ(ks.x16(WeightType::Q8_0).gemm != nullptr, vnni || avx2);
  if (avx2) {
    EXPECT_EQ(ks.x16(WeightType::Q4_0).gemm, gemm_q4_0x16_q8_0_avx2);
    EXPECT_EQ(ks.x16(WeightType::Q8_0).gemm, gemm_q8_0x16_q8_0_avx2);
  }
  EXPECT_EQ(ks.x16(WeightType::Q4_K).gemm, vnni   ? gemm_q4_Kx16_q8_K_avx512vnni
                                           : avx2 ? gemm_q4_Kx16_q8_K_avx2
                                                  : nullptr);
  EXPECT_EQ(ks.x16(WeightType::Q5_K).gemv, vnni   ? gemv_q5_Kx16_q8_K_avx512vnni
                                           : avx2 ? gemv_q5_Kx16_q8_K_avx2
                                                  : gemv_q5_Kx16_q8_K_ref);
  EXPECT_EQ(ks.x16(WeightType::Q5_K).gemm, vnni   ? gemm_q5_Kx16_q8_K_avx512vnni
                                           : avx2 ? gemm_q5_Kx16_q8_K_avx2
                                                  : nullptr);
  EXPECT_EQ(ks.x16(WeightType::Q6_K).gemv, vnni   ? gemv_q6_Kx16_q8_K_avx512vnni
                                           : avx2 ? gemv_q6_Kx16_q8_K_avx2
                                                  : gemv_q6_Kx16_q8_K_ref);
  EXPECT_EQ(ks.x16(WeightType::Q6_K).gemm, vnni   ? gemm_q6_Kx16_q8_K_avx512vnni
                                           : avx2 ? gemm_q6_Kx16_q8_K_avx2
                                                  : nullptr);
  // Q4_1 / Q5_0 / Q5_1 / IQ4_NL: VNNI's GEMV (its passes of up to 4 tokens the GEMM) or AVX2's.
  struct Block32 {
    WeightType type;
    X16GemvFn vnni_gemv, avx2_gemv, ref_gemv;
    X16GemmFn vnni_gemm, avx2_gemm;
  };
  for (const Block32& b :
       {Block32{WeightType::Q4_1, gemv_q4_1x16_q8_0_avx512vnni, gemv_q4_1x16_q8_0_avx2,
                gemv_q4_1x16_q8_0_ref, gemm_few_q4_1x16_q8_0_avx512vnni, gemm_q4_1x16_q8_0_avx2},
        Block32{WeightType::Q5_0, gemv_q5_0x16_q8_0_avx512vnni, gemv_q5_0x16_q8_0_avx2,
                gemv_q5_0x16_q8_0_ref, gemm_few_q5_0x16_q8_0_avx512vnni, gemm_q5_0x16_q8_0_avx2},
        Block32{WeightType::Q5_1, gemv_q5_1x16_q8_0_avx512vnni, gemv_q5_1x16_q8_0_avx2,
                gemv_q5_1x16_q8_0_ref, gemm_few_q5_1x16_q8_0_avx512vnni, gemm_q5_1x16_q8_0_avx2},
        Block32{WeightType::IQ4_NL, gemv_iq4_nlx16_q8_0_avx512vnni, gemv_iq4_nlx16_q8_0_avx2,
                gemv_iq4_nlx16_q8_0_ref, gemm_few_iq4_nlx16_q8_0_avx512vnni,
                gemm_iq4_nlx16_q8_0_avx2}}) {
    SCOPED_TRACE(type_name(b.type));
    const X16Kernels& k = ks.x16(b.type);
    EXPECT_EQ(k.gemv, vnni ? b.vnni_gemv : avx2 ? b.avx2_gemv : b.ref_gemv);
    EXPECT_EQ(k.gemm, vnni ? b.vnni_gemm : avx2 ? b.avx2_gemm : nullptr);
    EXPECT_EQ(k.gemm_few, vnni ? b.vnni_gemm : nullptr);
    // The AVX2 GEMVs read 2 stretches at a time; the reference 1.
    if (avx2) {
      EXPECT_EQ(k.gemv_streams, kX16Avx2GemvStreams);
    } else if (!vnni) {
      EXPECT_EQ(k.gemv_streams, 1);
    }
  }
  EXPECT_EQ(ks.x16(WeightType::Q3_K).gemv, vnni   ? gemv_q3_Kx16_q8_K_avx512vnni
                                           : avx2 ? gemv_q3_Kx16_q8_K_avx2
                                                  : gemv_q3_Kx16_q8_K_ref);
  EXPECT_EQ(ks.x16(WeightType::Q3_K).gemm, vnni   ? gemm_q3_Kx16_q8_K_avx512vnni
                                           : avx2 ? gemm_q3_Kx16_q8_K_avx2
                                                  : nullptr);
  EXPECT_EQ(ks.x16(WeightType::Q2_K).gemv, vnni   ? gemv_q2_Kx16_q8_K_avx512vnni
                                           : avx2 ? gemv_q2_Kx16_q8_K_avx2
                                                  : gemv_q2_Kx16_q8_K_ref);
  EXPECT_EQ(ks.x16(WeightType::Q2_K).gemm, vnni   ? gemm_q2_Kx16_q8_K_avx512vnni
                                           : avx2 ? gemm_q2_Kx16_q8_K_avx2
                                                  : nullptr);
  EXPECT_EQ(ks.x16(WeightType::IQ4_XS).gemv, vnni   ? gemv_iq4_xsx16_q8_K_avx512vnni
                                             : avx2 ? gemv_iq4_xsx16_q8_K_avx2
                                                    : gemv_iq4_xsx16_q8_K_ref);
  EXPECT_EQ(ks.x16(WeightType::IQ4_XS).gemm, vnni   ? gemm_iq4_xsx16_q8_K_avx512vnni
                                             : avx2 ? gemm_iq4_xsx16_q8_K_avx2
                                                    : nullptr);
  // F16 / BF16: each tier's own kernels (AVX-512 F/BW or AVX2), reading the stretches of this
  // CPU's plan; the scalar reference GEMV below them.
  for (const WeightType t : {WeightType::F16, WeightType::BF16}) {
    SCOPED_TRACE(type_name(t));
    const bool f16 = t == WeightType::F16;
    const X16Kernels& k = ks.x16(t);
    if (isa == Isa::Avx512) {
      EXPECT_EQ(k.gemv, f16 ? gemv_f16x16_f32_avx512 : gemv_bf16x16_f32_avx512);
      EXPECT_EQ(k.gemm_few, f16 ? gemm_few_f16x16_f32_avx512 : gemm_few_bf16x16_f32_avx512);
    } else if (isa == Isa::Avx2) {
      EXPECT_EQ(k.gemv, f16 ? gemv_f16x16_f32_avx2 : gemv_bf16x16_f32_avx2);
      EXPECT_EQ(k.gemm, f16 ? gemm_f16x16_f32_avx2 : gemm_bf16x16_f32_avx2);
      EXPECT_EQ(k.gemm_prepare, gemm_prepare_f32_avx2);
      EXPECT_EQ(k.gemm_prepared,
                f16 ? gemm_prepared_f16x16_f32_avx2 : gemm_prepared_bf16x16_f32_avx2);
      EXPECT_EQ(k.gemm_few, f16 ? gemm_few_f16x16_f32_avx2 : gemm_few_bf16x16_f32_avx2);
      EXPECT_EQ(k.few_tokens_max, kX16FewTokensMax);
    } else {
      EXPECT_EQ(k.gemv, f16 ? gemv_f16x16_f32_ref : gemv_bf16x16_f32_ref);
      EXPECT_EQ(k.gemm, nullptr);
    }
    const X16GemvPlan plan = x16_gemv_plan(f16 ? X16Gemv::F16 : X16Gemv::BF16);
    EXPECT_EQ(k.gemv_streams, isa == Isa::Scalar ? 1 : plan.streams);
    EXPECT_EQ(k.gemv_prefetch, isa == Isa::Scalar ? false : plan.prefetch);
  }
}

std::string IsaParamName(const ::testing::TestParamInfo<Isa>& info) {
  return std::string(isa_name(info.param));
}

INSTANTIATE_TEST_SUITE_P(Isas, KernelSetIsa, ::testing::ValuesIn(supported_isas()), IsaParamName);

TEST(KernelSet, AnIsaThisMachineLacksIsLoweredToTheBestItRuns) {
  const Isa best = supported_isas().back();
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    const Isa want = static_cast<int>(isa) <= static_cast<int>(best) ? isa : best;
    EXPECT_EQ(KernelSet::for_isa(isa).isa(), want) << isa_name(isa);
  }
}

TEST(KernelSet, TypesWithoutAMatmulThrow) {
  const KernelSet ks = KernelSet::for_isa(detect_isa());
  EXPECT_THROW(ks.matmul(WeightType::Q8_K), MatmulError);  // activation-only
  // F32 does not interleave, nor the activation-only Q8_K.
  EXPECT_THROW(ks.x16(WeightType::F32), MatmulError);
  EXPECT_THROW(ks.x16(WeightType::Q8_K), MatmulError);
}

}  // namespace
}  // namespace pacer::ops
