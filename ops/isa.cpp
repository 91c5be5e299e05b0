#include "ops/isa.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace pacer::ops {
namespace {

uint64_t xgetbv0() noexcept {
  uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

}  // namespace

int cpuid_display_family(unsigned eax) noexcept {
  // The base family, plus the extended family where the base reads 0xf.
  const unsigned base = (eax >> 8) & 0xfu;
  return static_cast<int>(base == 0xfu ? base + ((eax >> 20) & 0xffu) : base);
}

int cpuid_display_model(unsigned eax) noexcept {
  // The base model, with the extended model as its high nibble where the base family reads 6 or
  // 0xf.
  const unsigned base_family = (eax >> 8) & 0xfu, base = (eax >> 4) & 0xfu;
  const bool extended = base_family == 0xfu || base_family == 6u;
  return static_cast<int>(extended ? base | (((eax >> 16) & 0xfu) << 4) : base);
}

bool vnni_allowed_rule(const char* env) noexcept {
  return env == nullptr || std::strcmp(env, "0") != 0;
}

namespace {
CpuFeatures read_cpu_features() noexcept {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    char vendor[13] = {};
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    f.amd = std::strcmp(vendor, "AuthenticAMD") == 0;
  }
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  f.family = cpuid_display_family(a);
  f.model = cpuid_display_model(a);
  const bool osxsave = (c >> 27) & 1u;
  const bool fma = (c >> 12) & 1u;
  const bool f16c = (c >> 29) & 1u;
  const bool avx = (c >> 28) & 1u;
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool os_ymm = (xcr0 & 0x6u) == 0x6u;    // SSE + AVX state
  const bool os_zmm = (xcr0 & 0xe6u) == 0xe6u;  // + opmask, ZMM_Hi256, Hi16_ZMM
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  const bool avx2 = (b >> 5) & 1u;
  const bool avx512f = (b >> 16) & 1u, avx512dq = (b >> 17) & 1u;
  const bool avx512bw = (b >> 30) & 1u, avx512vl = (b >> 31) & 1u;
  const bool vnni512 = (c >> 11) & 1u;
  f.avx2 = os_ymm && avx2 && fma && f16c;
  f.avx512 = f.avx2 && os_zmm && avx512f && avx512dq && avx512bw && avx512vl;
  f.avx512_vnni = f.avx512 && vnni512;
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  __cpuid_count(7, 1, a1, b1, c1, d1);
  f.avx512_bf16 = f.avx512 && ((a1 >> 5) & 1u);
  f.avx_vnni = f.avx2 && ((a1 >> 4) & 1u);
  if (!vnni_allowed_rule(std::getenv("PACER_VNNI"))) {
    // As a CPU with AVX-512 F/BW/VL/DQ and nothing later (Skylake-SP): no VNNI, and so neither
    // AVX512_BF16 nor AMX, which only CPUs with VNNI have.
    f.avx512_vnni = f.avx512_bf16 = false;
    return f;
  }
  const bool amx_tile = (d >> 24) & 1u, amx_int8 = (d >> 25) & 1u;
  const bool os_tiles = (xcr0 & (3ull << 17)) == (3ull << 17);  // XTILECFG + XTILEDATA
  const char* env = std::getenv("PACER_AMX");
  const bool allowed = env == nullptr || std::strcmp(env, "0") != 0;
  if (f.avx512 && amx_tile && amx_int8 && os_tiles && allowed) {
    // Linux hands out the 8 KiB tile state only on request (once per process, all threads).
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    f.amx_int8 = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }
  return f;
}

}  // namespace

Isa select_isa(const char* requested) noexcept {
  if (requested) {
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
      if (isa_name(isa) == requested && isa_supported(isa)) return isa;
    }
  }
  if (isa_supported(Isa::Avx512)) return Isa::Avx512;
  if (isa_supported(Isa::Avx2)) return Isa::Avx2;
  return Isa::Scalar;
}

// CPUID traps to the hypervisor in a VM (tens of microseconds), and several places ask (the
// kernel table, KernelSet::for_isa, the event log header): read the CPU once per process. The
// values never change while the process runs, so these are constants, not mutable state.
CpuFeatures detect_cpu_features() noexcept {
  static const CpuFeatures features = read_cpu_features();
  return features;
}

bool isa_supported(Isa isa) noexcept {
  const CpuFeatures f = detect_cpu_features();
  switch (isa) {
    case Isa::Scalar:
      return true;
    case Isa::Avx2:
      return f.avx2;
    case Isa::Avx512:
      return f.avx512;
  }
  return false;
}

bool gemv_software_prefetch_rule(const CpuFeatures& cpu, const char* env,
                                 GemvKernelClass cls) noexcept {
  if (env && std::strcmp(env, "0") == 0) return false;
  if (env && std::strcmp(env, "1") == 0) return true;
  if (!cpu.amd) return true;
  return cls == GemvKernelClass::Unpacking && cpu.family >= kAmdZen5Family;
}

std::string_view gemv_software_prefetch_reason(const CpuFeatures& cpu, const char* env) noexcept {
  if (env && std::strcmp(env, "0") == 0) return "PACER_PREFETCH=0";
  if (env && std::strcmp(env, "1") == 0) return "PACER_PREFETCH=1";
  if (!cpu.amd) return "not AMD";
  return cpu.family >= kAmdZen5Family ? "AMD Zen 5 and later" : "AMD before Zen 5";
}

X16GemvPlan x16_gemv_plan_rule(const CpuFeatures& cpu, X16Gemv k, const X16GemvEnv& env) noexcept {
  const bool is_float = k == X16Gemv::F16 || k == X16Gemv::BF16;
  const GemvKernelClass cls =
      is_float || k == X16Gemv::Q8_0 ? GemvKernelClass::Streaming : GemvKernelClass::Unpacking;
  X16GemvPlan plan;
  plan.prefetch = gemv_software_prefetch_rule(cpu, nullptr, cls);
  if (cpu.amd && cpu.family >= kAmdZen5Family) {
    const bool two_streams = k == X16Gemv::Q4_K || k == X16Gemv::Q5_K;
    plan.streams = two_streams ? 2 : 1;
    plan.page_touch = two_streams ? 0 : kZen5PageTouchBytes;
  } else if (cpu.amd) {
    plan.streams = is_float ? 4 : k == X16Gemv::Q8_0 ? 1 : 2;
  } else {
    plan.streams = 4;
  }
  plan.long_runs = x16_gemv_long_runs_rule(cpu, env.runs);
  if (amd_zen1(cpu)) {
    if (k == X16Gemv::Q4_0 || k == X16Gemv::Q4_K || k == X16Gemv::Q5_K || k == X16Gemv::Q6_K) {
      plan.prefetch = true;
    }
    const bool runs_set =
        env.runs && (std::strcmp(env.runs, "short") == 0 || std::strcmp(env.runs, "long") == 0);
    if (k == X16Gemv::Q8_0 && !runs_set) plan.long_runs = false;
  }
  if (env.streams && std::strcmp(env.streams, "1") == 0) plan.streams = 1;
  if (env.streams && std::strcmp(env.streams, "2") == 0) plan.streams = 2;
  if (env.streams && std::strcmp(env.streams, "4") == 0) plan.streams = 4;
  if (env.prefetch && std::strcmp(env.prefetch, "0") == 0) plan.prefetch = false;
  if (env.prefetch && std::strcmp(env.prefetch, "1") == 0) plan.prefetch = true;
  if (env.page_touch) {
    char* end = nullptr;
    const long long bytes = std::strtoll(env.page_touch, &end, 10);
    if (end != env.page_touch && *end == '\0' && bytes >= 0 && bytes <= (1 << 20)) {
      plan.page_touch = bytes;
    }
  }
  return plan;
}

X16GemvPlan x16_gemv_plan(X16Gemv k) noexcept {
  static const auto plans = [] {
    const X16GemvEnv env{std::getenv("PACER_GEMV_STREAMS"), std::getenv("PACER_PREFETCH"),
                         std::getenv("PACER_PAGE_TOUCH"), std::getenv("PACER_GEMV_RUNS")};
    std::array<X16GemvPlan, std::size(kX16GemvKinds)> p{};
    for (X16Gemv g : kX16GemvKinds) {
      p[static_cast<size_t>(g)] = x16_gemv_plan_rule(detect_cpu_features(), g, env);
    }
    return p;
  }();
  return plans[static_cast<size_t>(k)];
}

bool gemv_software_prefetch(GemvKernelClass cls) noexcept {
  static const bool streaming = gemv_software_prefetch_rule(
      detect_cpu_features(), std::getenv("PACER_PREFETCH"), GemvKernelClass::Streaming);
  static const bool unpacking = gemv_software_prefetch_rule(
      detect_cpu_features(), std::getenv("PACER_PREFETCH"), GemvKernelClass::Unpacking);
  return cls == GemvKernelClass::Unpacking ? unpacking : streaming;
}

bool x16_gemv_long_runs_rule(const CpuFeatures& cpu, const char* env) noexcept {
  if (env && std::strcmp(env, "short") == 0) return false;
  if (env && std::strcmp(env, "long") == 0) return true;
  return cpu.amd;
}

bool x16_gemv_long_runs() noexcept {
  static const bool long_runs =
      x16_gemv_long_runs_rule(detect_cpu_features(), std::getenv("PACER_GEMV_RUNS"));
  return long_runs;
}

bool x16_gemv_long_runs(X16Gemv k) noexcept {
  return x16_gemv_plan(k).long_runs;
}

bool x16_gemv_avx2_kernel_rule(const CpuFeatures& cpu, X16Gemv k, bool long_runs) noexcept {
  const bool measured = cpu.amd && cpu.family < kAmdZen5Family;
  return long_runs && measured && (k == X16Gemv::Q4_K || k == X16Gemv::Q8_0);
}

bool x16_gemv_avx2_kernel(X16Gemv k) noexcept {
  return x16_gemv_avx2_kernel_rule(detect_cpu_features(), k, x16_gemv_long_runs());
}

bool bf16_dot_prefill_rule(const CpuFeatures& cpu, const char* env) noexcept {
  if (!cpu.avx512_bf16) return false;
  if (env && std::strcmp(env, "0") == 0) return false;
  if (env && std::strcmp(env, "1") == 0) return true;
  return cpu.amd;
}

bool attention_one_pass_rule(const CpuFeatures& cpu, const char* env) noexcept {
  if (env && std::strcmp(env, "all") == 0) return true;
  if (env && std::strcmp(env, "4") == 0) return false;
  return amd_zen1(cpu);
}

bool attention_one_pass() noexcept {
  static const bool on =
      attention_one_pass_rule(detect_cpu_features(), std::getenv("PACER_ATTENTION_PASS"));
  return on;
}

bool bf16_dot_prefill() noexcept {
  static const bool on =
      bf16_dot_prefill_rule(detect_cpu_features(), std::getenv("PACER_BF16_DOT"));
  return on;
}

Isa detect_isa() noexcept {
  static const Isa isa = select_isa(std::getenv("PACER_ISA"));
  return isa;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

std::string_view isa_name(Isa isa) noexcept {
  switch (isa) {
    case Isa::Scalar:
      return "scalar";
    case Isa::Avx2:
      return "avx2";
    case Isa::Avx512:
      return "avx512";
  }
  return "?";
}

}  // namespace pacer::ops
