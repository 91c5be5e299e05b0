#pragma once
// Activation buffers of the forward pass, sized once for the largest batch a session runs
// (prefill tokens per step; decode uses row 0 only). Reused every step: decode allocates nothing.
// Also holds the session's kernels, resolved once (every op of the forward pass runs them).
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "loader/model_config.h"
#include "ops/attention.h"
#include "ops/kernel_set.h"
#include "ops/matmul.h"

namespace pacer::runtime {

struct RunState {
  // max_logits: logit rows one forward pass can return (1 for generation; perplexity asks for
  // every scored position of a batch). max_keys: the KV cache's capacity (sizes the scratch a
  // long decode splits its keys in; 0: never split).
  RunState(const loader::ModelConfig& c, const ops::KernelSet& kernels, int64_t max_batch,
           int64_t max_logits = 1, int64_t max_keys = 0)
      : max_batch(max_batch),
        max_logits(std::clamp<int64_t>(max_logits, 1, max_batch)),
        x(static_cast<size_t>(max_batch * c.n_embd)),
        xb(x.size()),
        q(static_cast<size_t>(max_batch * c.n_heads * c.head_dim)),
        k(static_cast<size_t>(max_batch * c.n_kv_heads * c.head_dim)),
        v(k.size()),
        att(q.size()),
        proj(x.size()),
        gate(static_cast<size_t>(max_batch * c.n_ff)),
        up(gate.size()),
        hb(gate.size()),
        logits(static_cast<size_t>(this->max_logits * c.n_vocab)),
        attn_scratch(static_cast<size_t>(attention_scratch_floats(c, max_keys))),
        rope_angles(static_cast<size_t>(2 * max_batch * c.head_dim)),
        kernels(kernels) {}

  // Floats of ops::attention's scratch for one decode query over max_keys keys.
  static int64_t attention_scratch_floats(const loader::ModelConfig& c, int64_t max_keys) {
    const ops::AttentionParams p{.n_heads = static_cast<int>(c.n_heads),
                                 .n_kv_heads = static_cast<int>(c.n_kv_heads),
                                 .head_dim = static_cast<int>(c.head_dim),
                                 .scale = 1.0f,
                                 .kv_type = ops::WeightType::F32};
    return ops::attention_scratch_floats(p, 1, max_keys);
  }

  // Bytes these buffers take (for the session's memory check), before allocating them.
  static int64_t bytes(const loader::ModelConfig& c, int64_t max_batch, int64_t max_logits = 1,
                       int64_t max_keys = 0) {
    const int64_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
    return static_cast<int64_t>(sizeof(float)) *
           (max_batch * (3 * c.n_embd + 2 * q_dim + 2 * kv_dim + 3 * c.n_ff) +
            std::clamp<int64_t>(max_logits, 1, max_batch) * c.n_vocab +
            attention_scratch_floats(c, max_keys));
  }

  int64_t max_batch;
  int64_t max_logits;
  std::vector<float> x;             // (batch, n_embd) residual stream
  std::vector<float> xb;            // (batch, n_embd) normed residual: input of QKV and gate/up
  std::vector<float> q;             // (batch, n_heads*head_dim) queries
  std::vector<float> k;             // (batch, n_kv_heads*head_dim) keys of this batch
  std::vector<float> v;             // (batch, n_kv_heads*head_dim) values of this batch
  std::vector<float> att;           // (batch, n_heads*head_dim) attention output, input of Wo
  std::vector<float> proj;          // (batch, n_embd) Wo / W_down output, added to the residual
  std::vector<float> gate;          // (batch, n_ff)
  std::vector<float> up;            // (batch, n_ff)
  std::vector<float> hb;            // (batch, n_ff) act(gate) * up, input of W_down
  std::vector<float> logits;        // (max_logits, n_vocab): the batch's last tokens' logits
  std::vector<float> attn_scratch;  // a long decode's per-key-segment attention partials
  // (2, batch, head_dim): per token the cos then the sin of its head_dim / 2 rotated pairs, for
  // the full-attention layers' RoPE parameters (set 0) and the sliding-window layers' (set 1).
  std::vector<float> rope_angles;
  ops::PackedActivations packed;  // quantized matmul input, reused by every matmul
  ops::KernelSet kernels;         // what every op of the forward pass runs
};

}  // namespace pacer::runtime
