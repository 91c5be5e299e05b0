#pragma once
// Per-Isa attention kernels behind ops/attention.h. Internal to ops/ (and the tests).
//
// The unit of work is one query token and a run of query heads that share one KV head: the K and
// V rows are read once for all of them (GQA makes that 4-8 heads), which is what decode at long
// context is bound by. Kernels keep everything on the stack (bounded by kMaxHeadDim, kMaxGroup,
// kKeyTile): no allocation, no shared state, safe to run concurrently.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include "ops/attention.h"
#include "ops/fp16.h"
#include "ops/isa.h"
#include "ops/q8_0.h"

namespace pacer::ops {

constexpr int kMaxHeadDim = 512;  // largest head_dim the kernels' stack buffers hold
constexpr int kMaxGroup = 8;      // query heads processed per pass over the keys

// A Q8_0 K block (kKvBlock positions of one head, ops/attention.h) per 32 dimensions: the 16
// keys' fp16 scales, then dimension e's 16 int8 at kQ8KeyScaleBytes + e * kKvBlock.
constexpr int64_t kQ8KeyScaleBytes = kKvBlock * 2;
constexpr int64_t kQ8KeyChunkBytes = kKvBlock * static_cast<int64_t>(sizeof(BlockQ8_0));

// A query head as llama.cpp dots it with a Q8_0 K: ggml converts q to K's dot type (Q8_0 blocks
// of 32 dimensions, quantize_row_q8_0) and sums int8 x int8 per block, times both blocks' fp16
// scales. Per head (at qi + g * row, and per block at + g * row / 32): the int8 values, the same
// values as floats, the block scale times the attention scale, and 128 * the block's sum (the
// VNNI kernels dot K + 128 as unsigned bytes). A block's integer sum (|sum| <= 32 * 127 * 127) is
// exact in fp32 too, so a tier that multiplies the floats gets the VNNI tier's sums bit for bit.
struct QueryQ8 {
  const int8_t* qi = nullptr;
  const float* qf = nullptr;
  const float* dq_scaled = nullptr;
  const int32_t* bias = nullptr;
  int64_t row = 0;  // elements between heads (a multiple of 32)
};

// Fills a QueryQ8's arrays for n_q heads of `dim` (a multiple of 32) from q (head g at q + g *
// q_stride), `row` elements between heads in the outputs. With qf_dequantized, qf holds the
// values times their block's dq_scaled instead (a tier without the registers to keep block sums
// apart scales each product, attention_simd.h). The values are those of
// quantize_row_q8_0_ref (d = amax / 127, round half away from zero of x / d computed as x * (1 /
// d)) without its libm calls: a task quantizes its heads once per key segment, and roundf and
// fmaxf calls were a third of a Q8_0 decode's attention time.
inline void quantize_query_q8_0(const float* q, int64_t q_stride, int n_q, int dim, float scale,
                                int64_t row, int8_t* qi, float* qf, float* dq_scaled, int32_t* bias,
                                bool qf_dequantized = false) {
  // x + copysign(0.49999997, x) truncated is roundf(x): ties reach the next integer (the sum
  // rounds up to it), anything below a tie stays below it.
  constexpr float kBelowHalf = 0.49999997f;
  const int n_blocks = dim / kQ8_0BlockElems;
  for (int g = 0; g < n_q; ++g) {
    for (int c = 0; c < n_blocks; ++c) {
      const float* x = q + g * q_stride + c * kQ8_0BlockElems;
      // max |x| as the largest magnitude bit pattern: the same order for finite floats, and an
      // integer max the compiler vectorizes (a float max reduction it keeps scalar).
      uint32_t amax_bits = 0;
      for (int e = 0; e < kQ8_0BlockElems; ++e) {
        uint32_t bits;
        std::memcpy(&bits, x + e, sizeof bits);
        bits &= 0x7fffffffu;
        amax_bits = bits > amax_bits ? bits : amax_bits;
      }
      float amax;
      std::memcpy(&amax, &amax_bits, sizeof amax);
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      const float dqs = fp16_to_fp32(fp32_to_fp16(d)) * scale;
      const float qf_scale = qf_dequantized ? dqs : 1.0f;
      int32_t sum = 0;
      for (int e = 0; e < kQ8_0BlockElems; ++e) {
        const float v = x[e] * id;
        const auto r =
            static_cast<int8_t>(static_cast<int>(v + (v < 0.0f ? -kBelowHalf : kBelowHalf)));
        qi[g * row + c * kQ8_0BlockElems + e] = r;
        qf[g * row + c * kQ8_0BlockElems + e] = static_cast<float>(r) * qf_scale;
        sum += r;
      }
      dq_scaled[g * row / kQ8_0BlockElems + c] = dqs;
      bias[g * row / kQ8_0BlockElems + c] = 128 * sum;
    }
  }
}

// Calls f(std::integral_constant<int, G>{}) for G = n_q (1..kMaxGroup; larger values get
// kMaxGroup): the ISA kernels instantiate one attention loop per group size through it.
template <class F>
void with_group_size(int n_q, F&& f) {
  static_assert(kMaxGroup == 8, "with_group_size instantiates G = 1..8");
  switch (n_q) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    case 4:
      return f(std::integral_constant<int, 4>{});
    case 5:
      return f(std::integral_constant<int, 5>{});
    case 6:
      return f(std::integral_constant<int, 6>{});
    case 7:
      return f(std::integral_constant<int, 7>{});
    default:
      return f(std::integral_constant<int, kMaxGroup>{});
  }
}
// Keys scored per online-softmax step; each tile asks for the next one's K and V as it goes, so
// this is also the prefetch distance. From DRAM (BM_attention_threads, 1 worker, TinyLlama shape
// on the Zen 5 VM, 3 alternating rounds) 128 keys read 14.3 GB/s, 64 keys 12.7, 256 keys 11.0.
constexpr int kKeyTile = 128;
constexpr int kPrefillTokens = 4;  // query tokens of a prefill task (AttentionTask::n_tokens)

struct AttentionTask {
  const float* q = nullptr;  // (n_q, head_dim): consecutive query heads of one token
  float* out = nullptr;      // (n_q, head_dim)
  int n_q = 0;               // 1..kMaxGroup
  int head_dim = 0;          // 1..kMaxHeadDim
  // Position 0 of this KV head's K and V (element type per kernel; ops/attention.h's layout: an
  // F16/F32 K in transposed blocks of kKvBlock positions, V and a Q8_0 K in rows).
  const std::byte* k = nullptr;
  const std::byte* v = nullptr;
  int64_t row_bytes = 0;  // bytes of one position of this head (a block is kKvBlock of them)
  int64_t key_begin = 0;  // keys [key_begin, key_end) are visible; key_end > key_begin
  int64_t key_end = 0;
  float scale = 1.0f;
  float softcap = 0.0f;  // 0 = none
  // When set, the kernel also writes each query head's running max and sum of e^(s - max) over
  // its keys (n_q each): a segment of the keys' log-sum-exp, for merging segments
  // (ops/attention.h).
  float* m_out = nullptr;
  float* l_out = nullptr;
  // Prefill: n_tokens consecutive query tokens (1..kPrefillTokens), token i's query rows at
  // q + i * token_stride (its output likewise) and its keys [key_begin, key_end + i): causal, one
  // position apart. The tokens go through each key tile together. No m_out / l_out then.
  int n_tokens = 1;
  int64_t token_stride = 0;
  // Decode: where the task this worker runs next starts reading (its first K block and V row)
  // and how many of its keys (up to kKeyTile), asked for during this task's last tile as each
  // tile asks for the next (nullptr: nothing). A guess: work stealing may run another task there,
  // and then only the prefetched lines are wasted.
  const std::byte* next_k = nullptr;
  const std::byte* next_v = nullptr;
  int next_keys = 0;
};

using AttendFn = void (*)(const AttentionTask& task);
// Converts n floats to IEEE half, round-to-nearest-even (bit-identical to fp32_to_fp16).
using ToF16Fn = void (*)(const float* src, fp16_t* dst, int64_t n);

struct AttentionKernels {
  AttendFn attend_f16 = nullptr;  // K/V cache rows are F16
  AttendFn attend_f32 = nullptr;  // K/V cache rows are F32
  ToF16Fn to_f16 = nullptr;
  AttendFn attend_q8_0 = nullptr;  // K/V cache rows are Q8_0 blocks (head_dim % 32 == 0)
};

// The table for `isa` (with avx512_vnni: the AVX-512 table whose Q8_0 K block sums are VNNI
// dot products); callers check isa_supported(isa) and CpuFeatures first. The Scalar table runs
// the same tiled online-softmax algorithm in plain C++ (attention_ref is the
// straight-from-the-math one).
const AttentionKernels& attention_kernels(Isa isa, bool avx512_vnni = false) noexcept;
const AttentionKernels& attention_kernels_avx2() noexcept;        // attention_avx2.cpp
// The AVX2 kernels with all of a KV head's query heads in one pass (isa.h attention_one_pass):
// the same bits as attention_kernels_avx2().
const AttentionKernels& attention_kernels_avx2_one_pass() noexcept;  // attention_avx2.cpp
const AttentionKernels& attention_kernels_avx512() noexcept;      // attention_avx512.cpp
const AttentionKernels& attention_kernels_avx512vnni() noexcept;  // attention_avx512vnni.cpp

// ops::attention() with `attend` as every task's kernel, whatever the cache type: the tasks it
// makes (their heads, keys, order and next-task prefetch) as a test sees them.
void attention_with_kernel(AttendFn attend, const AttentionParams& p, std::span<const float> q,
                           int64_t pos0, int64_t n_tokens, const std::byte* k_cache,
                           const std::byte* v_cache, std::span<float> out, const Parallel& par,
                           std::span<float> scratch);

}  // namespace pacer::ops
