#pragma once
// Run-time instruction-set selection. Chosen from CPUID *and* the register state the OS enabled
// (XGETBV), so a kernel never runs where the OS would fault on its registers.
#include <string_view>
#include <vector>

namespace pacer::ops {

enum class Isa {
  Scalar = 0,  // the reference: plain C++ straight from the math
  Avx2 = 1,    // AVX2 + FMA + F16C
  Avx512 = 2,  // AVX-512 F/BW/VL (+ VNNI where present, see CpuFeatures::avx512_vnni)
};

struct CpuFeatures {
  bool avx2 = false;    // avx2 + fma + f16c, OS saves ymm
  bool avx512 = false;  // avx512f + bw + vl + dq, OS saves zmm/opmask
  bool avx512_vnni = false;
  // AVX512_BF16 (vdpbf16ps) in the CPU and a zmm-saving OS. Whether the BF16 prefill GEMMs use
  // it is bf16_dot_prefill()'s choice.
  bool avx512_bf16 = false;
  bool avx_vnni = false;
  // AMX-TILE + AMX-INT8, tile state enabled by the OS (XCR0) and granted to this process
  // (arch_prctl ARCH_REQ_XCOMP_PERM, requested once at detection). PACER_AMX=0 turns it off.
  bool amx_int8 = false;
  bool amd = false;  // CPUID vendor "AuthenticAMD" (kernel tuning choices, see below)
  int family = 0;    // CPUID display family (AMD: 0x17 Zen 1-2, 0x19 Zen 3-4, 0x1a Zen 5)
};
inline constexpr int kAmdZen5Family = 0x1a;

// Whether AVX512_VNNI may be used: PACER_VNNI=0 (`env`) says no, and the process then runs the
// kernels of an AVX-512 CPU without VNNI (Skylake-SP, Cascade Lake's predecessor): no VNNI, no
// AVX512_BF16, no AMX. The rule detect_cpu_features() applies.
bool vnni_allowed_rule(const char* env) noexcept;
// Reads CPUID/XGETBV once per process (CPUID traps in a VM) and returns the cached answer.
CpuFeatures detect_cpu_features() noexcept;
// Best Isa this CPU and OS support, or the one named by PACER_ISA (scalar|avx2|avx512) if it is
// supported (lets users pin a path; an unsupported request falls back). Decided once per process;
// tests that compare paths pass an explicit Isa instead.
Isa detect_isa() noexcept;
// The rule detect_isa() applies, as a pure function: `requested` (an isa_name, or null) if this
// machine supports it, else the best supported Isa.
Isa select_isa(const char* requested) noexcept;
bool isa_supported(Isa isa) noexcept;
// Whether the streaming GEMV kernels issue software prefetches ahead of their weight streams.
// They help where the hardware prefetchers stop short of DRAM latency (Intel Sapphire Rapids:
// the interleaved Q4_0/Q8_0 GEMVs reach the bandwidth with them), and hurt where the hardware
// prefetchers already cover the streams and the extra loads only take fill buffers (AMD Zen 4:
// the F16 GEMV 5632x2048 on one core streams ~26 GB/s without them, ~19 with them). On Zen 5 it
// depends on the kernel: those that spend many instructions per byte unpacking (Q4_0 and the
// K-quants) fall behind the hardware prefetcher without them (TinyLlama decode on one core of
// the Turin-like dev VM, on / off: Q4_K_M 1.30x, Q5_K_M 1.12-1.15x, Q4_0 1.06-1.14x), while
// plain streams (Q8_0, F16/BF16) lose with them (0.89-0.95x, 0.95-0.98x). Chosen once per
// process by that table: on unless the vendor is AMD; on AMD family 0x1a (Zen 5) and later for
// the Unpacking class only. PACER_PREFETCH=0/1 overrides both classes. The event log header's
// run.gemv_prefetch (Streaming) and run.gemv_prefetch_unpacking record the choice.
enum class GemvKernelClass {
  Streaming,  // Q8_0, F16, BF16, F32: a few instructions per weight byte
  Unpacking,  // Q4_0 and the K-quants (Q4_K, Q5_K, Q6_K): nibbles, high bits, sub-block scales
};
bool gemv_software_prefetch(GemvKernelClass cls = GemvKernelClass::Streaming) noexcept;
bool gemv_software_prefetch_rule(const CpuFeatures& cpu, const char* env,
                                 GemvKernelClass cls) noexcept;  // the rule
// Which line of that rule decided, for reports: "PACER_PREFETCH=0", "AMD before Zen 5", "AMD Zen 5
// and later" or "not AMD".
std::string_view gemv_software_prefetch_reason(const CpuFeatures& cpu, const char* env) noexcept;
// How many far-apart streams of 16-row groups one worker of the interleaved GEMVs (Q4_0, Q8_0,
// Q4_K, Q5_K, Q6_K; ops/interleaved.h) reads at once: 2 on AMD, 4 elsewhere. One Zen 4 core streams
// a cold 32000x2048 Q6_K at ~33 GB/s with 2 and ~27 with 4 (Q5_K ~33 vs ~31; Q4_K and Q4_0 the
// same), and TinyLlama Q8_0 decodes 6-10 % faster with 2, while on Sapphire Rapids the interleaved
// Q4_0 GEMV gained from 2 to 4 (1.05x -> 1.2x the row-major kernel). Chosen once per process by
// that table; PACER_GEMV_STREAMS=2/4 overrides. The event log header's run.gemv_streams records the
// choice.
int x16_gemv_streams() noexcept;
int x16_gemv_streams_rule(const CpuFeatures& cpu, const char* env) noexcept;  // the rule
// Whether the prefill GEMMs of repacked BF16 weights (8 tokens or more) round the activations to
// bf16 and multiply on vdpbf16ps, as llama.cpp does, rather than in exact fp32. Needs
// AVX512_BF16; then a table: on for AMD (one Zen 4 core, TinyLlama BF16 pp64 47.5 -> 99 tok/s),
// off elsewhere (one Sapphire Rapids core: 42-49 tok/s exact against 35 rounded, 2 cores 70-79
// against 59-66: vdpbf16ps does no more multiplies per cycle there than the fp32 FMAs, and the
// rounding pass costs extra). PACER_BF16_DOT=0/1 overrides (1 only where AVX512_BF16 exists). The
// event log header's run.bf16_dot records the choice.
bool bf16_dot_prefill() noexcept;
bool bf16_dot_prefill_rule(const CpuFeatures& cpu, const char* env) noexcept;  // the rule
std::vector<Isa> supported_isas();  // every Isa this machine can run, Scalar first
std::string_view isa_name(Isa isa) noexcept;

}  // namespace pacer::ops
