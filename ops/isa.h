#pragma once
// Run-time instruction-set selection. Chosen from CPUID *and* the register state the OS enabled
// (XGETBV), so a kernel never runs where the OS would fault on its registers.
#include <cstdint>
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
  int model = 0;     // CPUID display model (AMD family 0x17: below 0x30 Zen 1 / Zen+, Zen 2 from)
};
inline constexpr int kAmdZen5Family = 0x1a;
inline constexpr int kAmdZen1Family = 0x17;
inline constexpr int kAmdZen2FirstModel = 0x30;
// AMD Zen 1 or Zen+ (EPYC 7001, Ryzen 1000-2000): 256-bit AVX2 split into two 128-bit halves, a
// table of its own in x16_gemv_plan_rule.
constexpr bool amd_zen1(const CpuFeatures& cpu) noexcept {
  return cpu.amd && cpu.family == kAmdZen1Family && cpu.model < kAmdZen2FirstModel;
}

// Whether AVX512_VNNI may be used: PACER_VNNI=0 (`env`) says no, and the process then runs the
// kernels of an AVX-512 CPU without VNNI (Skylake-SP, Cascade Lake's predecessor): no VNNI, no
// AVX512_BF16, no AMX. The rule detect_cpu_features() applies.
bool vnni_allowed_rule(const char* env) noexcept;
// The display family and model of CPUID leaf 1's EAX (the processor signature), as the vendors
// define them: 0x00800F12 (EPYC 7601) is family 0x17 model 0x01, 0x000806F8 (Sapphire Rapids)
// family 6 model 0x8F.
int cpuid_display_family(unsigned eax) noexcept;
int cpuid_display_model(unsigned eax) noexcept;
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
// The 16-row interleaved GEMV kernels of the AVX-512 tier (ops/interleaved.h), for the choices
// of x16_gemv_plan().
enum class X16Gemv { Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, F16, BF16 };
inline constexpr X16Gemv kX16GemvKinds[] = {X16Gemv::Q4_0, X16Gemv::Q8_0, X16Gemv::Q4_K,
                                            X16Gemv::Q5_K, X16Gemv::Q6_K, X16Gemv::F16,
                                            X16Gemv::BF16};

// How one of those kernels reads its weights from DRAM.
//  - streams: far-apart stretches of groups one worker reads at once (gemv_streams.h).
//  - prefetch: software prefetch of the lines 1-4 KiB ahead of each stream.
//  - page_touch: bytes ahead at which each stream touches the first line of every 4 KiB page
//    (0: none).
// The table, chosen once per process:
//  - Not AMD (Sapphire Rapids): 4 streams, prefetch on, no touch. The interleaved Q4_0 GEMV gained
//    from 2 to 4 streams there (1.05x -> 1.2x the row-major kernel).
//  - AMD before Zen 5 (Zen 4: the only one with these kernels): 2 streams for the quantized
//    kernels (one Zen 4 core streams a cold 32000x2048 Q6_K at ~33 GB/s with 2 and ~27 with 4),
//    but one for Q8_0, 4 for F16/BF16; prefetch per gemv_software_prefetch_rule (off); no touch.
//    (With long runs Zen 4 runs the AVX2 Q8_0 GEMV, on 2 streams: x16_gemv_avx2_kernel below.)
//    Q8_0 against 2 streams on a 2-vCPU Genoa guest (session 40, 2 alternating rounds each):
//    TinyLlama decode 1.10x at 1 thread and 1.11-1.20x at 2, Llama-3.2-1B 1.14-1.20x and
//    1.10-1.18x. One stream for the others was level (Q4_0, Q4_K_M) or slower (Q5_K_M 0.92-1.02x,
//    F16 0.91-0.96x at 1 thread), and an 8 KiB touch slowed a cold Q8_0 matrix by 5-8 %.
//  - AMD Zen 5 and later: one stream and a touch 8 KiB ahead, prefetch per the class rule (Q4_0
//    and the K-quants on, Q8_0 and F16/BF16 off), except Q4_K and Q5_K: 2 streams, no touch. One
//    Zen 5 core (the dev VM) keeps only ~0.75 of a plain read's lines in flight under a GEMV's
//    arithmetic, with any stream count, prefetch distance or hint tried; a load of each page's
//    first line two pages ahead lifts one stream to ~0.96 of the best read loop (which, touching
//    too, reads 1.05-1.08x the best one without). The line at the point of crossing a page gained a
//    third as much, and with 2 streams the same touch lost (TinyLlama Q4_0 decode 0.85x). Decode on
//    one core against the table before (2 streams, no touch): Q4_0 1.17-1.21x, Q8_0 1.25-1.30x,
//    Q5_K_M 1.09-1.12x, Q4_K_M 1.05x, F16 1.10-1.34x, BF16 1.04-1.09x. Q4_K's kernel has too little
//    independent work for one stream (a cold 5632x2048 matrix 0.8-0.9x); its touch at 2 streams was
//    level. Q5_K likewise, once its 2-stream loop kept its state in registers (ops/unroll.h):
//    TinyLlama Q5_K_M decode 1.16-1.23x at 1 thread and 1.15-1.23x at 2 against one stream with the
//    touch (4 and 3 alternating rounds), a cold Q5_K matrix 1.19x.
//  - AMD Zen 1 / Zen+ (family 0x17 below model 0x30; AVX2 only, so the AVX2 GEMVs): as Zen 4,
//    except that the Q4_0 kind (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) prefetches and Q8_0 reads short
//    runs (long_runs below). A 2-vCPU EPYC 7001 guest (session 56), TinyLlama decode, 2
//    alternating rounds, on / off: prefetch Q4_0 1.23x at 1 thread and 1.29x at 2, Q4_1 1.33x,
//    Q5_0 1.29x; the same prefetch cost the others a third (Q8_0 0.81x, F16 0.69x, Q4_K_M 0.73x,
//    Q5_K_M 0.69x, Q6_K 0.65x). Q8_0 in short runs 1.15x at 1 thread and 1.12x at 2; F16 0.95x
//    and Q4_0 level, so they keep the long ones. Stream counts 1/2/4 were level or slower.
//    The K-quants' loss was the burst: their GEMVs asked for a whole super-block's lines (36-53)
//    at once. Spread over the super-block's steps (1-3 lines a step, gemv_streams.h
//    prefetch_part), the K-quant kinds (Q4_K, Q5_K, Q6_K) prefetch too (session 59, old and new
//    builds alternating, TinyLlama decode: Q4_K_M 1.10-1.12x at 1 thread and 1.15-1.16x at 2,
//    Q6_K 1.02-1.08x and 1.11-1.12x, Q5_K_M 1.03-1.04x and 1.07-1.08x; docs/fidelity.md). Q8_0
//    and F16 lost with the prefetch spread as well (0.82x, 0.83-0.89x), and Q4_0's 9-line bursts
//    spread were level. Q2_K, Q3_K and IQ4_XS (Q6_K's kind) keep the class rule, off here: spread
//    the same way, their files decoded 0.90-1.01x (avx2_gemv_follows_plan_prefetch).
// PACER_GEMV_STREAMS=1/2/4, PACER_PREFETCH=0/1, PACER_PAGE_TOUCH=0/<bytes> and
// PACER_GEMV_RUNS=short/long override every kernel's choice. The event log header's run.x16_gemv
// (and run.gemv_streams, Q4_0's) records it.
struct X16GemvPlan {
  int streams = 4;
  bool prefetch = true;
  int64_t page_touch = 0;
  bool long_runs = false;  // x16_gemv_long_runs_rule, but per kind (Zen 1's Q8_0)
};
struct X16GemvEnv {  // the environment's overrides (null: not set)
  const char* streams = nullptr;
  const char* prefetch = nullptr;
  const char* page_touch = nullptr;
  const char* runs = nullptr;
};
inline constexpr int64_t kZen5PageTouchBytes = 8192;
X16GemvPlan x16_gemv_plan(X16Gemv k) noexcept;
X16GemvPlan x16_gemv_plan_rule(const CpuFeatures& cpu, X16Gemv k,
                               const X16GemvEnv& env) noexcept;  // the rule
// How long the 16-row GEMVs (both tiers) read one of their far-apart streams before the next
// one's turn: long runs or short ones (per kernel, ops/interleaved.h x16_gemv_run_bytes):
//  - long: 8 blocks of the 32-element block types (Q4_0, Q8_0, Q4_1, Q5_0, Q5_1, IQ4_NL; 2.3 KiB
//    of Q4_0; the AVX2 IQ4_NL keeps one block), 64 columns of F16/BF16 (2 KiB), and on AVX-512 a
//    whole super-block of Q6_K, Q2_K, IQ4_XS and Q3_K and half of one of Q5_K (the AVX2 K-quant
//    GEMVs take a super-block either way; Q4_K's AVX-512 GEMV a quarter either way);
//  - short: a block; on AVX2 128 F16/BF16 columns (4 KiB), on AVX-512 8 columns (256 bytes) and
//    a quarter super-block of the K-quants.
// The table: long on AMD, short elsewhere. One Zen 4 core read short turns from DRAM more slowly:
// 0.5-1 GB of weights, old and new kernels in one process, the same bits. AVX2 tier (session 50):
// Q4_0 1.07x (median), Q8_0 1.03-1.06x, Q4_1 1.06x, Q5_0/Q5_1 1.06-1.10x, F16 1.03-1.06x, BF16
// 1.00-1.10x. AVX-512 tier (session 51): Q4_0 1.07-1.11x, Q4_1 1.07x, Q5_0 1.07-1.11x, Q5_1
// 1.10x, IQ4_NL 1.12x, F16 1.09-1.11x, BF16 1.12-1.14x, Q6_K 1.09-1.10x, Q2_K 1.09x, IQ4_XS
// 1.14-1.15x, Q5_K (halves) 1.10-1.12x; Q3_K 1.42-1.47x once its lines were no longer touched in
// order first (session 52; in order, whole super-blocks had read 0.86x); whole super-blocks of
// Q4_K 1.02x (0.80x from L2), so it keeps its quarters, and with long runs an AVX-512 VNNI Zen 4
// runs the AVX2 Q4_K GEMV instead (a super-block a turn, 256-bit loads: 1.07-1.12x the AVX-512
// one), and Q8_0's (x16_gemv_avx2_kernel below) (docs/fidelity.md, sessions 50-52). Zen 2/3/5 not
// measured. Intel keeps the short turns: its AVX-512 K-quant GEMVs gained from finer turns on
// Sapphire Rapids (Q6_K quarter by quarter 1.34-1.42x; Q4_K/Q5_K chunk by chunk 1.14-1.20x), and
// the AVX2 tier there is not measured. PACER_GEMV_RUNS=short or long overrides. The event log
// header's run.x16_gemv records each type's run in bytes (`run_bytes`).
bool x16_gemv_long_runs() noexcept;  // the rule on this CPU, chosen once per process
// The runs of kind k's GEMV: x16_gemv_plan(k).long_runs (the rule above but for Zen 1's Q8_0).
bool x16_gemv_long_runs(X16Gemv k) noexcept;
bool x16_gemv_long_runs_rule(const CpuFeatures& cpu, const char* env) noexcept;  // the rule
// Whether an AVX-512 VNNI CPU runs the AVX2 tier's 16-row GEMV for kind `k` (the same bits):
// Q4_K and Q8_0 with long runs on AMD before Zen 5. On one Zen 4 core their AVX2 GEMVs read a
// cold matrix 1.07-1.12x the AVX-512 ones (256-bit loads, 2 streams; kernel_set.cpp has the
// figures). Zen 5 keeps its own plan (one stream and a page touch for Q8_0), unmeasured with
// these; PACER_GEMV_RUNS=short turns it off with the runs. The header's run.x16_gemv.<type>.kernel
// says "avx2" where it ran.
bool x16_gemv_avx2_kernel(X16Gemv k) noexcept;  // the rule on this CPU
bool x16_gemv_avx2_kernel_rule(const CpuFeatures& cpu, X16Gemv k, bool long_runs) noexcept;
// Whether the prefill GEMMs of repacked BF16 weights (8 tokens or more) round the activations to
// bf16 and multiply on vdpbf16ps, as llama.cpp does, rather than in exact fp32. Needs
// AVX512_BF16; then a table: on for AMD (one Zen 4 core, TinyLlama BF16 pp64 47.5 -> 99 tok/s),
// off elsewhere (one Sapphire Rapids core: 42-49 tok/s exact against 35 rounded, 2 cores 70-79
// against 59-66: vdpbf16ps does no more multiplies per cycle there than the fp32 FMAs, and the
// rounding pass costs extra). PACER_BF16_DOT=0/1 overrides (1 only where AVX512_BF16 exists). The
// event log header's run.bf16_dot records the choice.
bool bf16_dot_prefill() noexcept;
bool bf16_dot_prefill_rule(const CpuFeatures& cpu, const char* env) noexcept;  // the rule
// Whether the AVX2 attention kernel takes all the query heads of a KV head (up to 8) in one pass
// over each key tile, not at most 4 a pass. Where each 256-bit FMA and each vcvtph2ps takes both
// 128-bit halves of the FP pipes (AMD Zen 1 / Zen+: 1 FMA a cycle, a conversion 2 of those
// cycles), a pass of 4 converts each F16 key and value vector twice at 8 heads, and that costs more
// than the broadcasts a pass of 4 shares. One Zen 1 core, BM_attention f16_avx2, old and new
// alternating, 5 rounds: TinyLlama's shape (groups of 8) depth 512 1.07x, 4096 1.05x; Qwen2.5's
// groups of 7 1.05x. Elsewhere 4 a pass (Zen 4: 1.05x against one pass, docs/long-context.md
// session 45). The same bits either way. PACER_ATTENTION_PASS=all/4 overrides; the event log
// header's run.attention_one_pass records the choice.
bool attention_one_pass() noexcept;  // the rule on this CPU
bool attention_one_pass_rule(const CpuFeatures& cpu, const char* env) noexcept;
std::vector<Isa> supported_isas();  // every Isa this machine can run, Scalar first
std::string_view isa_name(Isa isa) noexcept;

}  // namespace pacer::ops
