// The per-type kernel table (see type_traits.h). One entry per weight type; SIMD slots are filled
// once, on first use, from what this CPU and OS support, so the hot path only indexes an array.
#include "ops/type_traits.h"

#include <string>

#include "ops/bf16.h"
#include "ops/f16.h"
#include "ops/f32.h"
#include "ops/iq4_nl.h"
#include "ops/iq4_xs.h"
#include "ops/matmul.h"
#include "ops/q2_k.h"
#include "ops/q3_k.h"
#include "ops/q4_0.h"
#include "ops/q4_1.h"
#include "ops/q4_k.h"
#include "ops/q5_0.h"
#include "ops/q5_1.h"
#include "ops/q5_k.h"
#include "ops/q6_k.h"
#include "ops/q8_0.h"
#include "ops/q8_k.h"

namespace pacer::ops {
namespace {

constexpr size_t kScalar = static_cast<size_t>(Isa::Scalar);
constexpr size_t kAvx2 = static_cast<size_t>(Isa::Avx2);
constexpr size_t kAvx512 = static_cast<size_t>(Isa::Avx512);

struct TraitsTable {
  TypeTraits f32, f16, bf16, q8_0, q4_0;
  TypeTraits q4_1, q5_0, q5_1, iq4_nl;  // the other 32-element types, activations act-Q8 too
  // K-quants (q4_k*.cpp, ...), activations Q8_K (q8_k*.cpp)
  TypeTraits q2_k, q3_k, q4_k, q5_k, q6_k, iq4_xs;
};

TraitsTable build_table(const CpuFeatures& cpu) {
  TraitsTable t;
  t.f32.type = WeightType::F32;
  t.f32.act_type = WeightType::F32;
  t.f32.dot[kScalar] = dot_f32_f32_ref;
  t.f32.dot[kAvx2] = dot_f32_f32_avx2;
  t.f32.dot_rows[kAvx2] = dot_rows_f32_f32_avx2;
  t.f32.gemm[kAvx2] = gemm_f32_f32_avx2;
  t.f32.gemm_whole_range[kAvx2] = true;  // blocks its row tiles itself (float_rows_simd.h)
  t.f32.dot[kAvx512] = dot_f32_f32_avx512;
  t.f32.dot_rows[kAvx512] = dot_rows_f32_f32_avx512;
  t.f32.gemm[kAvx512] = gemm_f32_f32_avx512;
  t.f32.gemm_whole_range[kAvx512] = true;  // transposes the activations once per call
  t.f32.gemm_prepare[kAvx512] = gemm_prepare_f32_avx512;  // the same transposition for all three
  t.f32.gemm_prepared[kAvx512] = gemm_prepared_f32_f32_avx512;

  t.f16.type = WeightType::F16;
  t.f16.act_type = WeightType::F32;
  t.f16.dot[kScalar] = dot_f16_f32_ref;
  t.f16.dot[kAvx2] = dot_f16_f32_avx2;
  t.f16.dot_rows[kAvx2] = dot_rows_f16_f32_avx2;
  t.f16.gemm[kAvx2] = gemm_f16_f32_avx2;
  t.f16.gemm_whole_range[kAvx2] = true;  // blocks its row tiles itself (float_rows_simd.h)
  t.f16.dot[kAvx512] = dot_f16_f32_avx512;
  t.f16.dot_rows[kAvx512] = dot_rows_f16_f32_avx512;
  t.f16.gemm[kAvx512] = gemm_f16_f32_avx512;
  t.f16.gemm_whole_range[kAvx512] = true;  // transposes the activations once per call
  t.f16.gemm_prepare[kAvx512] = gemm_prepare_f32_avx512;  // the same transposition for all three
  t.f16.gemm_prepared[kAvx512] = gemm_prepared_f16_f32_avx512;

  t.bf16.type = WeightType::BF16;
  t.bf16.act_type = WeightType::F32;
  t.bf16.dot[kScalar] = dot_bf16_f32_ref;
  t.bf16.dot[kAvx2] = dot_bf16_f32_avx2;
  t.bf16.dot_rows[kAvx2] = dot_rows_bf16_f32_avx2;
  t.bf16.gemm[kAvx2] = gemm_bf16_f32_avx2;
  t.bf16.gemm_whole_range[kAvx2] = true;  // blocks its row tiles itself (float_rows_simd.h)
  t.bf16.dot[kAvx512] = dot_bf16_f32_avx512;
  t.bf16.dot_rows[kAvx512] = dot_rows_bf16_f32_avx512;
  t.bf16.gemm[kAvx512] = gemm_bf16_f32_avx512;
  t.bf16.gemm_whole_range[kAvx512] = true;  // transposes the activations once per call
  t.bf16.gemm_prepare[kAvx512] = gemm_prepare_f32_avx512;  // the same transposition for all three
  t.bf16.gemm_prepared[kAvx512] = gemm_prepared_bf16_f32_avx512;

  // Q8_0 / Q4_0 dot with act-Q8 rows (q8_0.h). AVX-512 uses VNNI vpdpbusd where the CPU has it.
  const bool vnni = cpu.avx512_vnni;
  t.q8_0.type = WeightType::Q8_0;
  t.q8_0.act_type = WeightType::Q8_0;
  t.q8_0.quantize_act[kScalar] = quantize_act_q8_ref;
  t.q8_0.quantize_act[kAvx2] = quantize_act_q8_avx2;
  t.q8_0.quantize_act[kAvx512] = quantize_act_q8_avx512;
  t.q8_0.dot[kScalar] = dot_q8_0_q8_0_ref;
  t.q8_0.dot[kAvx2] = dot_q8_0_q8_0_avx2;
  t.q8_0.dot_rows[kAvx2] = dot_rows_q8_0_q8_0_avx2;
  t.q8_0.gemm[kAvx2] = gemm_q8_0_q8_0_avx2;
  t.q8_0.dot[kAvx512] = vnni ? dot_q8_0_q8_0_avx512vnni : dot_q8_0_q8_0_avx512;
  t.q8_0.dot_rows[kAvx512] = vnni ? dot_rows_q8_0_q8_0_avx512vnni : dot_rows_q8_0_q8_0_avx512;
  // Prefill: AMX tiles where granted, else the repacked VNNI GEMM (both tile rows themselves).
  const bool amx = cpu.amx_int8;
  t.q8_0.gemm[kAvx512] = amx    ? gemm_q8_0_q8_0_amx
                         : vnni ? gemm_q8_0_q8_0_avx512vnni
                                : gemm_q8_0_q8_0_avx512;
  t.q8_0.gemm_whole_range[kAvx512] = amx || vnni;
  if (vnni && !amx) {  // the repacked VNNI GEMM regroups the activations: once per call
    t.q8_0.gemm_prepare[kAvx512] = gemm_prepare_q8_0_q8_0_avx512vnni;
    t.q8_0.gemm_prepared[kAvx512] = gemm_prepared_q8_0_q8_0_avx512vnni;
  }

  t.q4_0.type = WeightType::Q4_0;
  t.q4_0.act_type = WeightType::Q8_0;
  t.q4_0.quantize_act = t.q8_0.quantize_act;
  t.q4_0.dot[kScalar] = dot_q4_0_q8_0_ref;
  t.q4_0.dot[kAvx2] = dot_q4_0_q8_0_avx2;
  t.q4_0.dot_rows[kAvx2] = dot_rows_q4_0_q8_0_avx2;
  t.q4_0.gemm[kAvx2] = gemm_q4_0_q8_0_avx2;
  t.q4_0.dot[kAvx512] = vnni ? dot_q4_0_q8_0_avx512vnni : dot_q4_0_q8_0_avx512;
  t.q4_0.dot_rows[kAvx512] = vnni ? dot_rows_q4_0_q8_0_avx512vnni : dot_rows_q4_0_q8_0_avx512;
  t.q4_0.gemm[kAvx512] = amx    ? gemm_q4_0_q8_0_amx
                         : vnni ? gemm_q4_0_q8_0_avx512vnni
                                : gemm_q4_0_q8_0_avx512;
  t.q4_0.gemm_whole_range[kAvx512] = amx || vnni;
  if (vnni && !amx) {  // the repacked VNNI GEMM regroups the activations: once per call
    t.q4_0.gemm_prepare[kAvx512] = gemm_prepare_q4_0_q8_0_avx512vnni;
    t.q4_0.gemm_prepared[kAvx512] = gemm_prepared_q4_0_q8_0_avx512vnni;
  }

  // Q4_1 / Q5_0 / Q5_1 / IQ4_NL dot with act-Q8 rows too (q4_1.h, q5_0.h, q5_1.h, iq4_nl.h).
  // Prefill: on AVX-512 the same quad kernels serve 4 tokens per weight load (row tiles from
  // matmul_rows), on AVX2 the 2-row x 4-token tiles of quant_rows_avx2.h.
  auto act_q8_type = [&](TypeTraits& tt, WeightType type, DotFn ref, DotFn avx2,
                         DotRowsFn rows_avx2, GemmFn gemm_avx2, DotFn avx512, DotRowsFn rows_avx512,
                         GemmFn gemm_avx512) {
    tt.type = type;
    tt.act_type = WeightType::Q8_0;
    tt.quantize_act = t.q8_0.quantize_act;
    tt.dot[kScalar] = ref;
    tt.dot[kAvx2] = avx2;
    tt.dot_rows[kAvx2] = rows_avx2;
    tt.gemm[kAvx2] = gemm_avx2;
    tt.dot[kAvx512] = avx512;
    tt.dot_rows[kAvx512] = rows_avx512;
    tt.gemm[kAvx512] = gemm_avx512;
  };
  act_q8_type(t.q4_1, WeightType::Q4_1, dot_q4_1_q8_0_ref, dot_q4_1_q8_0_avx2,
              dot_rows_q4_1_q8_0_avx2, gemm_q4_1_q8_0_avx2,
              vnni ? dot_q4_1_q8_0_avx512vnni : dot_q4_1_q8_0_avx512,
              vnni ? dot_rows_q4_1_q8_0_avx512vnni : dot_rows_q4_1_q8_0_avx512,
              vnni ? gemm_q4_1_q8_0_avx512vnni : gemm_q4_1_q8_0_avx512);
  act_q8_type(t.q5_0, WeightType::Q5_0, dot_q5_0_q8_0_ref, dot_q5_0_q8_0_avx2,
              dot_rows_q5_0_q8_0_avx2, gemm_q5_0_q8_0_avx2,
              vnni ? dot_q5_0_q8_0_avx512vnni : dot_q5_0_q8_0_avx512,
              vnni ? dot_rows_q5_0_q8_0_avx512vnni : dot_rows_q5_0_q8_0_avx512,
              vnni ? gemm_q5_0_q8_0_avx512vnni : gemm_q5_0_q8_0_avx512);
  act_q8_type(t.q5_1, WeightType::Q5_1, dot_q5_1_q8_0_ref, dot_q5_1_q8_0_avx2,
              dot_rows_q5_1_q8_0_avx2, gemm_q5_1_q8_0_avx2,
              vnni ? dot_q5_1_q8_0_avx512vnni : dot_q5_1_q8_0_avx512,
              vnni ? dot_rows_q5_1_q8_0_avx512vnni : dot_rows_q5_1_q8_0_avx512,
              vnni ? gemm_q5_1_q8_0_avx512vnni : gemm_q5_1_q8_0_avx512);
  act_q8_type(t.iq4_nl, WeightType::IQ4_NL, dot_iq4_nl_q8_0_ref, dot_iq4_nl_q8_0_avx2,
              dot_rows_iq4_nl_q8_0_avx2, gemm_iq4_nl_q8_0_avx2,
              vnni ? dot_iq4_nl_q8_0_avx512vnni : dot_iq4_nl_q8_0_avx512,
              vnni ? dot_rows_iq4_nl_q8_0_avx512vnni : dot_rows_iq4_nl_q8_0_avx512,
              vnni ? gemm_iq4_nl_q8_0_avx512vnni : gemm_iq4_nl_q8_0_avx512);

  // --- K-quants (kquant: q4_k*.cpp, q6_k*.cpp, q8_k*.cpp) ---------------------------------
  // Q4_K / Q6_K dot with Q8_K activation blocks (q8_k.h). AVX-512 VNNI fuses each scale multiply
  // and its accumulation (vpdpwssd).
  t.q4_k.type = WeightType::Q4_K;
  t.q4_k.act_type = WeightType::Q8_K;
  t.q4_k.quantize_act[kScalar] = quantize_row_q8_K_ref;
  t.q4_k.quantize_act[kAvx2] = quantize_row_q8_K_avx2;
  t.q4_k.quantize_act[kAvx512] = quantize_row_q8_K_avx512;
  t.q4_k.dot[kScalar] = dot_q4_K_q8_K_ref;
  t.q4_k.dot[kAvx2] = dot_q4_K_q8_K_avx2;
  t.q4_k.dot_rows[kAvx2] = dot_rows_q4_K_q8_K_avx2;
  t.q4_k.dot[kAvx512] = vnni ? dot_q4_K_q8_K_avx512vnni : dot_q4_K_q8_K_avx512;
  t.q4_k.dot_rows[kAvx512] = vnni ? dot_rows_q4_K_q8_K_avx512vnni : dot_rows_q4_K_q8_K_avx512;
  t.q4_k.gemm[kAvx512] = vnni ? gemm_q4_K_q8_K_avx512vnni : gemm_q4_K_q8_K_avx512;

  t.q6_k.type = WeightType::Q6_K;
  t.q6_k.act_type = WeightType::Q8_K;
  t.q6_k.quantize_act = t.q4_k.quantize_act;
  t.q6_k.dot[kScalar] = dot_q6_K_q8_K_ref;
  t.q6_k.dot[kAvx2] = dot_q6_K_q8_K_avx2;
  t.q6_k.dot_rows[kAvx2] = dot_rows_q6_K_q8_K_avx2;
  t.q6_k.dot[kAvx512] = vnni ? dot_q6_K_q8_K_avx512vnni : dot_q6_K_q8_K_avx512;
  t.q6_k.dot_rows[kAvx512] = vnni ? dot_rows_q6_K_q8_K_avx512vnni : dot_rows_q6_K_q8_K_avx512;
  t.q6_k.gemm[kAvx512] = vnni ? gemm_q6_K_q8_K_avx512vnni : gemm_q6_K_q8_K_avx512;
  // Q5_K (q5_k*.cpp): AVX-512 plain and VNNI kernels and GEMMs.
  t.q5_k.type = WeightType::Q5_K;
  t.q5_k.act_type = WeightType::Q8_K;
  t.q5_k.quantize_act = t.q4_k.quantize_act;
  t.q5_k.dot[kScalar] = dot_q5_K_q8_K_ref;
  t.q5_k.dot[kAvx2] = dot_q5_K_q8_K_avx2;
  t.q5_k.dot_rows[kAvx2] = dot_rows_q5_K_q8_K_avx2;
  t.q5_k.dot[kAvx512] = vnni ? dot_q5_K_q8_K_avx512vnni : dot_q5_K_q8_K_avx512;
  t.q5_k.dot_rows[kAvx512] = vnni ? dot_rows_q5_K_q8_K_avx512vnni : dot_rows_q5_K_q8_K_avx512;
  t.q5_k.gemm[kAvx512] = vnni ? gemm_q5_K_q8_K_avx512vnni : gemm_q5_K_q8_K_avx512;
  // Q3_K (q3_k*.cpp): one AVX-512 kernel and GEMM (no VNNI variant).
  t.q3_k.type = WeightType::Q3_K;
  t.q3_k.act_type = WeightType::Q8_K;
  t.q3_k.quantize_act = t.q4_k.quantize_act;
  t.q3_k.dot[kScalar] = dot_q3_K_q8_K_ref;
  t.q3_k.dot[kAvx2] = dot_q3_K_q8_K_avx2;
  t.q3_k.dot_rows[kAvx2] = dot_rows_q3_K_q8_K_avx2;
  t.q3_k.dot[kAvx512] = dot_q3_K_q8_K_avx512;
  t.q3_k.dot_rows[kAvx512] = dot_rows_q3_K_q8_K_avx512;
  t.q3_k.gemm[kAvx512] = gemm_q3_K_q8_K_avx512;
  // Q2_K (q2_k*.cpp): one AVX-512 kernel and GEMM (no VNNI variant).
  t.q2_k.type = WeightType::Q2_K;
  t.q2_k.act_type = WeightType::Q8_K;
  t.q2_k.quantize_act = t.q4_k.quantize_act;
  t.q2_k.dot[kScalar] = dot_q2_K_q8_K_ref;
  t.q2_k.dot[kAvx2] = dot_q2_K_q8_K_avx2;
  t.q2_k.dot_rows[kAvx2] = dot_rows_q2_K_q8_K_avx2;
  t.q2_k.dot[kAvx512] = dot_q2_K_q8_K_avx512;
  t.q2_k.dot_rows[kAvx512] = dot_rows_q2_K_q8_K_avx512;
  t.q2_k.gemm[kAvx512] = gemm_q2_K_q8_K_avx512;
  // IQ4_XS (iq4_xs*.cpp): super-blocks of 256 like the K-quants, so it dots with Q8_K too; one
  // AVX-512 kernel and GEMM (no VNNI variant).
  t.iq4_xs.type = WeightType::IQ4_XS;
  t.iq4_xs.act_type = WeightType::Q8_K;
  t.iq4_xs.quantize_act = t.q4_k.quantize_act;
  t.iq4_xs.dot[kScalar] = dot_iq4_xs_q8_K_ref;
  t.iq4_xs.dot[kAvx2] = dot_iq4_xs_q8_K_avx2;
  t.iq4_xs.dot_rows[kAvx2] = dot_rows_iq4_xs_q8_K_avx2;
  t.iq4_xs.dot[kAvx512] = dot_iq4_xs_q8_K_avx512;
  t.iq4_xs.dot_rows[kAvx512] = dot_rows_iq4_xs_q8_K_avx512;
  t.iq4_xs.gemm[kAvx512] = gemm_iq4_xs_q8_K_avx512;
  // --- end K-quants ----------------------------------------------------------------------------
  return t;
}

const TraitsTable& table() {
  static const TraitsTable t = build_table(detect_cpu_features());  // filled once, then read-only
  return t;
}

}  // namespace

const TypeTraits& type_traits(WeightType t) {
  const TraitsTable& tab = table();
  switch (t) {
    case WeightType::F32:
      return tab.f32;
    case WeightType::F16:
      return tab.f16;
    case WeightType::BF16:
      return tab.bf16;
    case WeightType::Q8_0:
      return tab.q8_0;
    case WeightType::Q4_0:
      return tab.q4_0;
    case WeightType::Q4_1:
      return tab.q4_1;
    case WeightType::Q5_0:
      return tab.q5_0;
    case WeightType::Q5_1:
      return tab.q5_1;
    case WeightType::IQ4_NL:
      return tab.iq4_nl;
    case WeightType::Q4_K:
      return tab.q4_k;
    case WeightType::Q5_K:
      return tab.q5_k;
    case WeightType::Q6_K:
      return tab.q6_k;
    case WeightType::Q3_K:
      return tab.q3_k;
    case WeightType::Q2_K:
      return tab.q2_k;
    case WeightType::IQ4_XS:
      return tab.iq4_xs;
    case WeightType::Q8_K:
      break;
  }
  throw MatmulError("type " + std::string(type_name(t)) + " is not a weight type of any matmul");
}

}  // namespace pacer::ops
