#pragma once
// Causal grouped-query attention over a KV cache, for decode (one query token) and prefill (many).
//
// Cache layout per layer (kv_cache_bytes each for K and V): head-major, each KV head's slice one
// contiguous run of kv_positions (rounded up to kKvBlock) positions, so that a KV head's keys and
// values stream from DRAM in order. Elements are `kv_type` (F16 by default, F32 or Q8_0).
//   V: rows, position p of head h at h * head_stride + p * head_bytes (head_bytes =
//     kv_row_bytes(kv_type, head_dim); a Q8_0 row is head_dim / 32 ggml block_q8_0 blocks,
//     head_dim a multiple of 32).
//   K: transposed in blocks of kKvBlock positions, block b of head h at h * head_stride +
//     b * kKvBlock * head_bytes. F16/F32: element (p, d) at (d * kKvBlock + p % kKvBlock)
//     elements into its block. Q8_0: per 32 dimensions c, 544 bytes at c * 544: the 16
//     positions' fp16 scales, then dimension c * 32 + e's 16 int8 at 32 + e * 16 + p % 16 (the
//     values and scales of ggml's quantize_row_q8_0 of each position's row).
//     One dimension of 16 consecutive keys is then one vector, and a query scores 16 keys per
//     FMA with no transpose or horizontal sum.
// Against a Q8_0 K the query is quantized to Q8_0 too (per 32 dimensions, as llama.cpp converts
// q to K's dot type) and each block's score is an int8 x int8 sum times both scales.
// head_stride = round_up(kv_positions, kKvBlock) * head_bytes. Query head h reads KV head
// h / (n_heads / n_kv_heads).
#include <cstdint>
#include <functional>
#include <span>

#include "ops/parallel.h"
#include "ops/types.h"

namespace pacer::ops {

class KernelSet;  // kernel_set.h

struct AttentionParams {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  float scale = 0.0f;          // usually 1/sqrt(head_dim); gemma3 uses query_pre_attn_scalar
  int64_t sliding_window = 0;  // 0 = full causal; else key p visible to query q iff q - p < window
  float softcap = 0.0f;        // 0 = none; else s = softcap * tanh(s / softcap)
  WeightType kv_type = WeightType::F16;  // F16, F32 or Q8_0
  int64_t kv_positions = 0;              // positions the cache holds (its capacity)
};

// Positions per transposed K block (the layout above).
constexpr int64_t kKvBlock = 16;

// Bytes of one layer's K cache (or V cache) in the layout above.
int64_t kv_cache_bytes(const AttentionParams& p);

// Bytes of one cache row of n_elems elements of kv_type (F16, F32 or Q8_0; Q8_0 needs n_elems a
// multiple of 32). Throws std::invalid_argument for other types.
int64_t kv_row_bytes(WeightType kv_type, int64_t n_elems);

// Stores n_tokens rows of k and v ((n_tokens, n_kv_heads*head_dim) fp32) at positions
// [pos0, pos0 + n_tokens) of the cache (pos0 + n_tokens <= kv_positions), converting to kv_type
// (Q8_0: ggml's quantize_row_q8_0, round to nearest, fp16 scale).
void kv_store(const AttentionParams& p, std::span<const float> k, std::span<const float> v,
              int64_t pos0, int64_t n_tokens, std::byte* k_cache, std::byte* v_cache,
              const KernelSet& kernels);

// The byte ranges kv_store(p, ..., pos0, n_tokens, k_cache, v_cache, ...) writes to: each KV
// head's V rows, and every line of the transposed K blocks the positions fall in (a position
// writes one lane of each). Throws as kv_store does for bad positions.
void for_each_kv_store_range(const AttentionParams& p, int64_t pos0, int64_t n_tokens,
                             const std::byte* k_cache, const std::byte* v_cache,
                             const std::function<void(const std::byte*, int64_t)>& visit);
// A software prefetch (for writing) of every line of those ranges, so that a store issued a few
// microseconds later finds them in cache (runtime/forward.cpp says where and what it saves).
void kv_store_prefetch(const AttentionParams& p, int64_t pos0, int64_t n_tokens,
                       const std::byte* k_cache, const std::byte* v_cache);

// Decode (one query token) over more than kAttentionKeySegment visible keys splits each KV
// head's keys into segments of that many, computed as separate work items and merged by their
// log-sum-exp (flash-decoding): a long context then spreads over more workers than there are KV
// heads. Segments depend on the key count alone, so results do not depend on the worker count.
constexpr int64_t kAttentionKeySegment = 512;

// Floats of scratch attention() needs to split the keys of n_tokens queries that see at most
// max_keys keys each (0 where it never splits).
int64_t attention_scratch_floats(const AttentionParams& p, int64_t n_tokens, int64_t max_keys);

// q: (n_tokens, n_heads*head_dim); query t is at position pos0 + t and sees keys [lo, pos0 + t]
// (lo from the sliding window). out: (n_tokens, n_heads*head_dim). Parallel over (token, head)
// (a causal prefill: blocks of kPrefillTokens tokens, attention_kernels.h),
// or for a long decode over (key segment, head) using `scratch` (empty: never split; too small
// for this call: std::invalid_argument), on `kernels`' attention table.
void attention(const AttentionParams& p, std::span<const float> q, int64_t pos0, int64_t n_tokens,
               const std::byte* k_cache, const std::byte* v_cache, std::span<float> out,
               const Parallel& par, const KernelSet& kernels, std::span<float> scratch = {});

// Scalar reference, straight from the math (fp32 softmax over converted cache rows; q as Q8_0
// values against a Q8_0 K).
void attention_ref(const AttentionParams& p, std::span<const float> q, int64_t pos0,
                   int64_t n_tokens, const std::byte* k_cache, const std::byte* v_cache,
                   std::span<float> out);

}  // namespace pacer::ops
