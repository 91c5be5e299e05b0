#pragma once
// Non-owning views of every weight the forward pass uses, bound by name from a GgufFile and
// checked against the ModelConfig (shape mismatches are LoadErrors here, not crashes later).
// Lifetime: the GgufFile (its mapping) must outlive the Weights.
#include <cstdint>
#include <span>
#include <vector>

#include "loader/gguf_file.h"
#include "loader/model_config.h"
#include "ops/weight_matrix.h"

namespace pacer::loader {

struct LayerWeights {
  std::span<const float> attn_norm;  // (n_embd)
  // phi3's fused attn_qkv is bound as three row ranges of the one tensor (no copy).
  ops::WeightMatrix wq;                   // (n_heads*head_dim, n_embd)
  ops::WeightMatrix wk;                   // (n_kv_heads*head_dim, n_embd)
  ops::WeightMatrix wv;                   // (n_kv_heads*head_dim, n_embd)
  std::span<const float> bq, bk, bv;      // qwen2 biases; empty otherwise
  std::span<const float> q_norm, k_norm;  // gemma3, qwen3 (head_dim); empty otherwise
  ops::WeightMatrix wo;                   // (n_embd, n_heads*head_dim)
  std::span<const float> post_attn_norm;  // gemma3 (n_embd); empty otherwise
  std::span<const float> ffn_norm;        // (n_embd)
  // phi3's fused ffn_up (2*n_ff rows) is bound as gate = first n_ff rows, up = the rest.
  ops::WeightMatrix w_gate;              // (n_ff, n_embd)
  ops::WeightMatrix w_up;                // (n_ff, n_embd)
  ops::WeightMatrix w_down;              // (n_embd, n_ff)
  std::span<const float> post_ffn_norm;  // gemma3 (n_embd); empty otherwise
};

struct Weights {
  ops::WeightMatrix token_embd;        // (n_vocab, n_embd)
  std::vector<LayerWeights> layers;    // n_layers
  std::span<const float> output_norm;  // (n_embd)
  ops::WeightMatrix output;            // (n_vocab, n_embd); == token_embd when tied
  std::span<const float> rope_freqs;   // llama3 (head_dim/2) frequency divisors; empty otherwise
  std::span<const float> rope_long, rope_short;      // phi3 LongRoPE (head_dim/2 each); or empty
  ops::WeightType main_type = ops::WeightType::F32;  // type of most matmul bytes (for reports)
  int64_t matmul_bytes = 0;  // bytes streamed per decode token by the matmuls

  // Norm weights and biases must be F32 (as llama.cpp writes them); throws LoadError otherwise.
  // Every tensor of the file must be used: one the architecture does not read is a LoadError
  // naming it (llama.cpp refuses such files too), never ignored.
  static Weights bind(const GgufFile& f, const ModelConfig& c);
  // The RoPE factors a context of n_ctx positions uses (llama3: always rope_freqs; phi3: long
  // past the original context); nullptr when the model has none.
  const float* rope_factors(const ModelConfig& c, int64_t n_ctx) const noexcept;
};

}  // namespace pacer::loader
