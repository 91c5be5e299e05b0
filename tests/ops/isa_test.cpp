// Run-time ISA selection: the list of supported ISAs, the PACER_ISA override, and the names.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <tuple>

#include "ops/interleaved.h"
#include "ops/isa.h"

namespace pacer::ops {
namespace {

TEST(Isa, SupportedListStartsWithScalarAndIsConsistent) {
  const std::vector<Isa> isas = supported_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), Isa::Scalar);
  for (Isa isa : isas) EXPECT_TRUE(isa_supported(isa)) << isa_name(isa);
  const CpuFeatures f = detect_cpu_features();
  EXPECT_EQ(isa_supported(Isa::Avx2), f.avx2);
  EXPECT_EQ(isa_supported(Isa::Avx512), f.avx512);
  if (f.avx512) {
    EXPECT_TRUE(f.avx2);  // AVX-512 is only claimed on top of AVX2
  }
  if (f.avx512_vnni) {
    EXPECT_TRUE(f.avx512);
  }
}

TEST(Isa, SelectionHonoursARequestThisMachineRuns) {
  const Isa best = supported_isas().back();
  EXPECT_EQ(select_isa(nullptr), best);
  EXPECT_EQ(select_isa("no-such-isa"), best);  // unknown: the best supported
  EXPECT_EQ(select_isa("scalar"), Isa::Scalar);
  for (Isa isa : supported_isas()) EXPECT_EQ(select_isa(std::string(isa_name(isa)).c_str()), isa);
  if (!isa_supported(Isa::Avx512)) {
    EXPECT_EQ(select_isa("avx512"), best);  // an unsupported request falls back
  }
  EXPECT_TRUE(isa_supported(detect_isa()));
  EXPECT_EQ(detect_isa(), detect_isa());  // chosen once per process
}

TEST(Isa, Names) {
  EXPECT_EQ(isa_name(Isa::Scalar), "scalar");
  EXPECT_EQ(isa_name(Isa::Avx2), "avx2");
  EXPECT_EQ(isa_name(Isa::Avx512), "avx512");
}

}  // namespace
}  // namespace pacer::ops

namespace pacer::ops {
namespace {

// The GEMVs' runs (how long one stream is read before the next one's turn): long on AMD
// (measured on Zen 4), short elsewhere; PACER_GEMV_RUNS=short/long overrides, anything else
// leaves the table.
TEST(X16GemvRuns, RuleFollowsVendorAndEnvironment) {
  CpuFeatures zen4, intel;
  zen4.amd = true;
  zen4.family = 0x19;
  intel.family = 6;
  EXPECT_TRUE(x16_gemv_long_runs_rule(zen4, nullptr));
  EXPECT_FALSE(x16_gemv_long_runs_rule(intel, nullptr));
  EXPECT_FALSE(x16_gemv_long_runs_rule(zen4, "short"));
  EXPECT_TRUE(x16_gemv_long_runs_rule(intel, "long"));
  EXPECT_FALSE(x16_gemv_long_runs_rule(intel, "8"));
  EXPECT_TRUE(x16_gemv_long_runs_rule(zen4, ""));
  // The AVX2 GEMVs in place of the AVX-512 ones: Q4_K and Q8_0, with long runs, on AMD before
  // Zen 5 only.
  CpuFeatures zen5 = zen4;
  zen5.family = 0x1a;
  for (X16Gemv k : kX16GemvKinds) {
    const bool measured_kind = k == X16Gemv::Q4_K || k == X16Gemv::Q8_0;
    EXPECT_EQ(x16_gemv_avx2_kernel_rule(zen4, k, true), measured_kind);
    EXPECT_FALSE(x16_gemv_avx2_kernel_rule(zen4, k, false));
    EXPECT_FALSE(x16_gemv_avx2_kernel_rule(zen5, k, true));
    EXPECT_FALSE(x16_gemv_avx2_kernel_rule(intel, k, true));
  }
  // And the bytes of a 16-row group a turn reads, as the event log records them, per tier.
  const int64_t runs = x16_gemv_long_runs() ? 8 : 1;
  const int64_t avx2_columns = x16_gemv_long_runs() ? 64 : 128;
  const int64_t avx512_columns = x16_gemv_long_runs() ? 64 : 8;
  EXPECT_EQ(x16_gemv_run_bytes(WeightType::Q4_0, Isa::Avx2), 16 * 18 * runs);
  // (Q8_0 by its own plan: short runs on Zen 1.)
  EXPECT_EQ(x16_gemv_run_bytes(WeightType::Q8_0, Isa::Avx2),
            16 * 34 * (x16_gemv_long_runs(X16Gemv::Q8_0) ? 8 : 1));
  EXPECT_EQ(x16_gemv_run_bytes(WeightType::IQ4_NL, Isa::Avx2), 16 * 18);  // always a block
  EXPECT_EQ(x16_gemv_run_bytes(WeightType::Q4_K, Isa::Avx2), 16 * 144);   // a super-block
  EXPECT_EQ(x16_gemv_run_bytes(WeightType::Q6_K, Isa::Avx2), 16 * 210);
  EXPECT_EQ(x16_gemv_run_bytes(WeightType::F16, Isa::Avx2), 16 * 2 * avx2_columns);
  EXPECT_EQ(x16_gemv_run_bytes(WeightType::Q4_0, Isa::Avx512), 16 * 18 * runs);
  EXPECT_EQ(x16_gemv_run_bytes(WeightType::IQ4_NL, Isa::Avx512), 16 * 18 * runs);
  EXPECT_EQ(x16_gemv_run_bytes(WeightType::Q5_1, Isa::Avx512), 16 * 24 * runs);
  EXPECT_EQ(x16_gemv_run_bytes(WeightType::BF16, Isa::Avx512), 16 * 2 * avx512_columns);
  // K-quants: a quarter super-block, or with long runs a whole one (Q6_K, Q2_K, IQ4_XS, Q3_K) or
  // half of one (Q5_K); Q4_K a quarter either way.
  EXPECT_EQ(x16_gemv_run_bytes(WeightType::Q4_K, Isa::Avx512), 16 * 144 / 4);
  EXPECT_EQ(x16_gemv_run_bytes(WeightType::Q3_K, Isa::Avx512), 16 * 110 / (runs > 1 ? 1 : 4));
  EXPECT_EQ(x16_gemv_run_bytes(WeightType::Q5_K, Isa::Avx512), 16 * 176 / (runs > 1 ? 2 : 4));
  EXPECT_EQ(x16_gemv_run_bytes(WeightType::Q6_K, Isa::Avx512), 16 * 210 / (runs > 1 ? 1 : 4));
  EXPECT_EQ(x16_gemv_run_bytes(WeightType::Q2_K, Isa::Avx512), 16 * 84 / (runs > 1 ? 1 : 4));
  EXPECT_EQ(x16_gemv_run_bytes(WeightType::IQ4_XS, Isa::Avx512), 16 * 136 / (runs > 1 ? 1 : 4));
}

// The software-prefetch table: on unless the vendor is AMD; on AMD Zen 5 (family 0x1a) and later
// for the unpacking kernels (Q4_0, K-quants) only; PACER_PREFETCH=0/1 sets both classes.
TEST(GemvPrefetch, RuleFollowsVendorFamilyClassAndEnvironment) {
  constexpr auto kStream = GemvKernelClass::Streaming, kUnpack = GemvKernelClass::Unpacking;
  CpuFeatures zen4, zen5, intel;
  zen4.amd = zen5.amd = true;
  zen4.family = 0x19;
  zen5.family = 0x1a;
  intel.family = 6;
  EXPECT_FALSE(gemv_software_prefetch_rule(zen4, nullptr, kStream));
  EXPECT_FALSE(gemv_software_prefetch_rule(zen4, nullptr, kUnpack));
  EXPECT_FALSE(gemv_software_prefetch_rule(zen5, nullptr, kStream));
  EXPECT_TRUE(gemv_software_prefetch_rule(zen5, nullptr, kUnpack));
  EXPECT_TRUE(gemv_software_prefetch_rule(zen4, "1", kStream));
  EXPECT_TRUE(gemv_software_prefetch_rule(zen5, "1", kStream));
  EXPECT_FALSE(gemv_software_prefetch_rule(zen5, "0", kUnpack));
  EXPECT_TRUE(gemv_software_prefetch_rule(intel, nullptr, kStream));
  EXPECT_TRUE(gemv_software_prefetch_rule(intel, nullptr, kUnpack));
  EXPECT_FALSE(gemv_software_prefetch_rule(intel, "0", kUnpack));
  EXPECT_TRUE(gemv_software_prefetch_rule(intel, "yes", kStream));  // anything else: the table
  // The line of the table that decided, as bench's footer names it.
  EXPECT_EQ(gemv_software_prefetch_reason(zen4, nullptr), "AMD before Zen 5");
  EXPECT_EQ(gemv_software_prefetch_reason(zen5, nullptr), "AMD Zen 5 and later");
  EXPECT_EQ(gemv_software_prefetch_reason(intel, nullptr), "not AMD");
  EXPECT_EQ(gemv_software_prefetch_reason(intel, "0"), "PACER_PREFETCH=0");
  EXPECT_EQ(gemv_software_prefetch_reason(zen4, "1"), "PACER_PREFETCH=1");
  EXPECT_EQ(gemv_software_prefetch_reason(zen5, "yes"), "AMD Zen 5 and later");
  // The cached choices are the rule applied to this CPU (and PACER_PREFETCH if set).
  for (const GemvKernelClass cls : {kStream, kUnpack}) {
    EXPECT_EQ(
        gemv_software_prefetch(cls),
        gemv_software_prefetch_rule(detect_cpu_features(), std::getenv("PACER_PREFETCH"), cls));
  }
}

// The display family against the kernel's own decoding of CPUID (/proc/cpuinfo's "cpu family":
// 26 on Zen 5, 25 on Zen 3/4, 6 on Intel's P-core lines).
TEST(CpuFeatures, FamilyIsTheKernelsCpuFamily) {
  std::ifstream in("/proc/cpuinfo");
  if (!in) GTEST_SKIP() << "no /proc/cpuinfo";
  std::string line;
  int kernel_family = -1;
  while (std::getline(in, line)) {
    if (line.rfind("cpu family", 0) == 0) {
      kernel_family = std::stoi(line.substr(line.find(':') + 1));
      break;
    }
  }
  if (kernel_family < 0) GTEST_SKIP() << "/proc/cpuinfo has no cpu family line";
  EXPECT_EQ(detect_cpu_features().family, kernel_family);
}

// The BF16 prefill dot: only with AVX512_BF16; then on for AMD, off elsewhere, unless asked.
TEST(Bf16DotPrefill, RuleFollowsFeatureVendorAndEnvironment) {
  CpuFeatures amd, intel, old_amd;
  amd.amd = old_amd.amd = true;
  amd.avx512_bf16 = intel.avx512_bf16 = true;
  EXPECT_TRUE(bf16_dot_prefill_rule(amd, nullptr));
  EXPECT_FALSE(bf16_dot_prefill_rule(amd, "0"));
  EXPECT_FALSE(bf16_dot_prefill_rule(intel, nullptr));
  EXPECT_TRUE(bf16_dot_prefill_rule(intel, "1"));
  EXPECT_FALSE(bf16_dot_prefill_rule(intel, "yes"));      // anything else: the table
  EXPECT_FALSE(bf16_dot_prefill_rule(old_amd, nullptr));  // no vdpbf16ps: never
  EXPECT_FALSE(bf16_dot_prefill_rule(old_amd, "1"));
  EXPECT_EQ(bf16_dot_prefill(),
            bf16_dot_prefill_rule(detect_cpu_features(), std::getenv("PACER_BF16_DOT")));
}

// The AVX2 attention takes all of a KV head's query heads in one pass on Zen 1 / Zen+ (split
// 256-bit FMAs) and at most 4 a pass elsewhere (Zen 2, Zen 4, Intel); PACER_ATTENTION_PASS=all/4
// overrides, anything else leaves the table.
TEST(AttentionOnePass, RuleIsZen1OrTheEnvironment) {
  CpuFeatures zen1, zen2, zen4, intel;
  zen1.amd = zen2.amd = zen4.amd = true;
  zen1.family = zen2.family = 0x17;
  zen1.model = 0x08;  // Zen+ (Ryzen 2000)
  zen2.model = 0x31;
  zen4.family = 0x19;
  zen4.model = 0x11;
  intel.family = 6;
  intel.model = 0x55;
  EXPECT_TRUE(attention_one_pass_rule(zen1, nullptr));
  EXPECT_FALSE(attention_one_pass_rule(zen2, nullptr));
  EXPECT_FALSE(attention_one_pass_rule(zen4, nullptr));
  EXPECT_FALSE(attention_one_pass_rule(intel, nullptr));
  EXPECT_FALSE(attention_one_pass_rule(zen1, "4"));
  EXPECT_TRUE(attention_one_pass_rule(zen4, "all"));
  EXPECT_TRUE(attention_one_pass_rule(intel, "all"));
  EXPECT_FALSE(attention_one_pass_rule(intel, "8"));  // not a value it takes: the table
  EXPECT_TRUE(attention_one_pass_rule(zen1, ""));
  EXPECT_EQ(attention_one_pass(),
            attention_one_pass_rule(detect_cpu_features(), std::getenv("PACER_ATTENTION_PASS")));
}

// PACER_VNNI=0 runs an AVX-512 VNNI machine as one without (Skylake-SP): no VNNI, BF16 or AMX.
TEST(Vnni, EnvironmentCanTurnItOff) {
  EXPECT_TRUE(vnni_allowed_rule(nullptr));
  EXPECT_TRUE(vnni_allowed_rule("1"));
  EXPECT_FALSE(vnni_allowed_rule("0"));
  const CpuFeatures cpu = detect_cpu_features();
  if (!vnni_allowed_rule(std::getenv("PACER_VNNI"))) {
    EXPECT_FALSE(cpu.avx512_vnni);
    EXPECT_FALSE(cpu.avx512_bf16);
    EXPECT_FALSE(cpu.amx_int8);
  }
  // No CPU has AVX512_BF16 or AMX without AVX-512 VNNI, so neither may appear without it.
  if (!cpu.avx512_vnni) {
    EXPECT_FALSE(cpu.avx512_bf16);
    EXPECT_FALSE(cpu.amx_int8);
  }
}

// The x16 GEMV table (isa.h): not AMD 4 streams, prefetch, no touch; AMD before Zen 5 2 streams
// for the quantized kernels but 1 for Q8_0, and 4 for F16/BF16, no prefetch, no touch; Zen 5 and
// later one stream and an 8 KiB page touch, but Q4_K and Q5_K 2 streams and no touch, prefetch for
// Q4_0 and the K-quants.
TEST(X16GemvPlan, RuleFollowsVendorFamilyKernelAndEnvironment) {
  CpuFeatures zen4, zen5, intel;
  zen4.amd = zen5.amd = true;
  zen4.family = 0x19;
  zen5.family = 0x1a;
  intel.family = 6;
  auto plan = [](const CpuFeatures& cpu, X16Gemv k, X16GemvEnv env = {}) {
    const X16GemvPlan p = x16_gemv_plan_rule(cpu, k, env);
    return std::tuple(p.streams, p.prefetch, p.page_touch);
  };
  for (X16Gemv k : kX16GemvKinds) {
    SCOPED_TRACE(static_cast<int>(k));
    const bool is_float = k == X16Gemv::F16 || k == X16Gemv::BF16;
    EXPECT_EQ(plan(intel, k), std::tuple(4, true, int64_t{0}));
    const int zen4_streams = is_float ? 4 : (k == X16Gemv::Q8_0 ? 1 : 2);
    EXPECT_EQ(plan(zen4, k), std::tuple(zen4_streams, false, int64_t{0}));
    const bool unpacks = !is_float && k != X16Gemv::Q8_0;
    const bool two_streams = k == X16Gemv::Q4_K || k == X16Gemv::Q5_K;
    EXPECT_EQ(plan(zen5, k), two_streams ? std::tuple(2, true, int64_t{0})
                                         : std::tuple(1, unpacks, int64_t{8192}));
    // Each override sets its part for every kernel; anything but the listed values is ignored.
    EXPECT_EQ(std::get<0>(plan(zen5, k, {.streams = "4"})), 4);
    EXPECT_EQ(std::get<0>(plan(intel, k, {.streams = "1"})), 1);
    EXPECT_EQ(std::get<0>(plan(intel, k, {.streams = "3"})), 4);
    EXPECT_EQ(std::get<0>(plan(zen5, k, {.streams = "8"})), std::get<0>(plan(zen5, k)));
    EXPECT_EQ(std::get<1>(plan(zen5, k, {.prefetch = "0"})), false);
    EXPECT_EQ(std::get<1>(plan(zen4, k, {.prefetch = "1"})), true);
    EXPECT_EQ(std::get<2>(plan(zen5, k, {.page_touch = "0"})), 0);
    EXPECT_EQ(std::get<2>(plan(intel, k, {.page_touch = "16384"})), 16384);
    const int64_t zen5_touch = std::get<2>(plan(zen5, k));
    EXPECT_EQ(std::get<2>(plan(zen5, k, {.page_touch = "16k"})), zen5_touch);
    EXPECT_EQ(std::get<2>(plan(zen5, k, {.page_touch = "-4096"})), zen5_touch);
    EXPECT_EQ(std::get<2>(plan(zen5, k, {.page_touch = "4194304"})), zen5_touch);  // over 1 MiB
  }
  // The process's plans: the rule's for this CPU and environment.
  const X16GemvEnv process_env{std::getenv("PACER_GEMV_STREAMS"), std::getenv("PACER_PREFETCH"),
                               std::getenv("PACER_PAGE_TOUCH"), std::getenv("PACER_GEMV_RUNS")};
  for (X16Gemv k : kX16GemvKinds) {
    EXPECT_EQ(std::tuple(x16_gemv_plan(k).streams, x16_gemv_plan(k).prefetch,
                         x16_gemv_plan(k).page_touch),
              plan(detect_cpu_features(), k, process_env));
    EXPECT_EQ(x16_gemv_long_runs(k),
              x16_gemv_plan_rule(detect_cpu_features(), k, process_env).long_runs);
  }
}

// Zen 1 / Zen+ (family 0x17 below model 0x30): Zen 4's plan, but the Q4_0 kind and the K-quants
// (Q4_K, Q5_K, Q6_K) prefetch and Q8_0 reads short runs; Zen 2 (model 0x31) and everything else
// keep their tables, and the environment still overrides.
TEST(X16GemvPlan, Zen1PrefetchesTheUnpackingKindsAndReadsQ8_0InShortRuns) {
  CpuFeatures zen1, zen2, zen4, intel;
  zen1.amd = zen2.amd = zen4.amd = true;
  zen1.family = zen2.family = 0x17;
  zen1.model = 0x01;
  zen2.model = 0x31;
  zen4.family = 0x19;
  zen4.model = 0x11;
  intel.family = 6;
  intel.model = 0x8f;
  EXPECT_TRUE(amd_zen1(zen1));
  EXPECT_FALSE(amd_zen1(zen2));
  EXPECT_FALSE(amd_zen1(zen4));
  EXPECT_FALSE(amd_zen1(intel));
  for (X16Gemv k : kX16GemvKinds) {
    SCOPED_TRACE(static_cast<int>(k));
    const X16GemvPlan z1 = x16_gemv_plan_rule(zen1, k, {});
    const X16GemvPlan z2 = x16_gemv_plan_rule(zen2, k, {});
    const X16GemvPlan z4 = x16_gemv_plan_rule(zen4, k, {});
    EXPECT_EQ(z1.streams, z4.streams);
    EXPECT_EQ(z1.page_touch, 0);
    const bool unpacking =
        k == X16Gemv::Q4_0 || k == X16Gemv::Q4_K || k == X16Gemv::Q5_K || k == X16Gemv::Q6_K;
    EXPECT_EQ(z1.prefetch, unpacking);
    EXPECT_FALSE(z4.prefetch);
    EXPECT_EQ(z1.long_runs, k != X16Gemv::Q8_0);
    EXPECT_EQ(std::tuple(z2.streams, z2.prefetch, z2.long_runs),
              std::tuple(z4.streams, z4.prefetch, z4.long_runs));
    EXPECT_TRUE(z4.long_runs);
    EXPECT_FALSE(x16_gemv_plan_rule(intel, k, {}).long_runs);
    EXPECT_FALSE(x16_gemv_plan_rule(zen1, k, {.prefetch = "0"}).prefetch);
    EXPECT_TRUE(x16_gemv_plan_rule(zen1, k, {.runs = "long"}).long_runs);
    EXPECT_FALSE(x16_gemv_plan_rule(zen1, k, {.runs = "short"}).long_runs);
    EXPECT_EQ(x16_gemv_plan_rule(zen1, k, {.runs = "8"}).long_runs, z1.long_runs);
  }
}

// CPUID leaf 1's signature as the vendors' manuals decode it (family 0xf adds the extended family;
// families 6 and 0xf take the extended model as the high nibble).
TEST(CpuSignature, DisplayFamilyAndModel) {
  const std::tuple<unsigned, int, int> known[] = {
      {0x00800F12u, 0x17, 0x01},  // EPYC 7601 (Zen 1)
      {0x00800F82u, 0x17, 0x08},  // Ryzen 7 2700X (Zen+)
      {0x00830F10u, 0x17, 0x31},  // EPYC 7742 (Zen 2)
      {0x00A10F11u, 0x19, 0x11},  // EPYC 9654 (Zen 4)
      {0x00B00F21u, 0x1a, 0x02},  // EPYC 9005 (Zen 5)
      {0x000806F8u, 6, 0x8f},     // Xeon Sapphire Rapids
      {0x00050654u, 6, 0x55},     // Xeon Skylake-SP
      {0x00000F29u, 0xf, 0x02},   // Pentium 4 (family 0xf, no extension)
      {0x00000633u, 6, 0x03},     // Pentium II
  };
  for (const auto& [eax, family, model] : known) {
    SCOPED_TRACE(eax);
    EXPECT_EQ(cpuid_display_family(eax), family);
    EXPECT_EQ(cpuid_display_model(eax), model);
  }
}

}  // namespace
}  // namespace pacer::ops
