#pragma once
// Model hyper-parameters read from GGUF metadata (`<arch>.*` keys) for the architectures pacer
// runs, and the GGUF tensor names per layer. Immutable once built.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ops/rope_layout.h"

namespace pacer::loader {

class GgufFile;

enum class Arch { Llama, Qwen2, Qwen3, Gemma3, Phi3 };
// "llama", "qwen2", "qwen3", "gemma3", "phi3" (general.architecture)
std::string_view arch_name(Arch a) noexcept;

enum class RopeScaling { None, Linear, Yarn };

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string name;                  // general.name (may be empty)
  int64_t file_type = -1;            // general.file_type (llama_ftype), -1 where the file has none
  int64_t n_layers = 0;              // <arch>.block_count
  int64_t n_embd = 0;                // <arch>.embedding_length
  int64_t n_heads = 0;               // <arch>.attention.head_count
  int64_t n_kv_heads = 0;            // <arch>.attention.head_count_kv (defaults to n_heads)
  int64_t head_dim = 0;              // <arch>.attention.key_length, else n_embd / n_heads
  int64_t n_ff = 0;                  // <arch>.feed_forward_length
  int64_t n_vocab = 0;               // rows of token_embd.weight (cross-checked with the tokenizer)
  int64_t n_ctx_train = 0;           // <arch>.context_length
  float norm_eps = 1e-5f;            // <arch>.attention.layer_norm_rms_epsilon
  float rope_base = 10000.0f;        // <arch>.rope.freq_base
  float rope_base_local = 10000.0f;  // gemma3 sliding-window layers (rope.local.freq_base or 10000)
  ops::RopeLayout rope_layout = ops::RopeLayout::Normal;
  RopeScaling rope_scaling = RopeScaling::None;
  float rope_scale = 1.0f;             // <arch>.rope.scaling.factor (freq_scale = 1/rope_scale)
  int64_t sliding_window = 0;          // <arch>.attention.sliding_window (gemma3), 0 = none
  int64_t sliding_window_pattern = 0;  // gemma3: every Nth layer is global (6); 0 = none
  bool tied_embeddings = false;        // no output.weight: logits use token_embd.weight
  bool qkv_bias = false;               // qwen2: attn_{q,k,v}.bias present
  bool qk_norm = false;                // gemma3, qwen3: attn_{q,k}_norm.weight per head
  bool post_norms = false;             // gemma3: post_attention_norm / post_ffw_norm
  bool embed_scale = false;            // gemma3: embeddings scaled by sqrt(n_embd)
  float attn_scale = 0.0f;             // query scale (1/sqrt(head_dim) unless the model says)
  float final_logit_softcap = 0.0f;    // gemma-style logit soft-capping, 0 = none
  bool geglu = false;                  // gemma3 FFN activation; else SwiGLU
  // llama3 RoPE scaling: rope_freqs.weight (head_dim/2 F32 divisors of each pair's frequency).
  bool rope_freqs = false;
  // phi3 LongRoPE: rope_factors_long/short.weight; long ones when the context exceeds
  // rope_orig_ctx (rope.scaling.original_context_length, else n_ctx_train), as llama.cpp picks.
  bool rope_long_short = false;
  int64_t rope_orig_ctx = 0;
  float rope_attn_factor = 1.0f;  // <arch>.rope.scaling.attn_factor: cos/sin scale
  bool fused_qkv = false;         // phi3: attn_qkv.weight = [Wq; Wk; Wv] (rows)
  bool fused_gate_up = false;     // phi3: ffn_up.weight = [Wgate; Wup] (rows), no ffn_gate

  // Parses and validates against the tensors present (shapes must agree). Throws LoadError.
  static ModelConfig from_gguf(const GgufFile& f);
  // True when layer `il` uses the sliding window (and the local RoPE base).
  bool is_swa_layer(int64_t il) const noexcept;
  int64_t n_params = 0;  // total elements of all tensors
};

// The size class llama.cpp gives this shape (llm_type, chosen per architecture from the layer
// count and, where two models share it, the width, heads or vocabulary): "1B", "0.5B", "70B";
// "?B" for a shape it has no class for, as llama.cpp prints. llama-bench's model_type is
// "<arch> <this> <file type>", so pacer's llama-bench rows carry the same key to join on.
std::string llama_size_class(const ModelConfig& c);

// The model's shape as JSON: arch, name, params, n_layers, n_embd, n_heads, n_kv_heads, head_dim,
// n_ff, n_vocab, n_ctx_train, rope_base, norm_eps, tied_embeddings, sliding_window. The one
// rendering of a config: the event-log header's `model` and `pacer gguf --json` both use it
// (`nlohmann::json j = config;`) and add their own fields.
void to_json(nlohmann::json& j, const ModelConfig& c);

// GGUF tensor names (llama.cpp's convention).
namespace tensor_names {
inline constexpr std::string_view kTokenEmbd = "token_embd.weight";
inline constexpr std::string_view kOutputNorm = "output_norm.weight";
inline constexpr std::string_view kOutput = "output.weight";
inline constexpr std::string_view kRopeFreqs = "rope_freqs.weight";               // llama3
inline constexpr std::string_view kRopeFactorsLong = "rope_factors_long.weight";  // phi3
inline constexpr std::string_view kRopeFactorsShort = "rope_factors_short.weight";
// "blk.<il>.<suffix>", e.g. blk(3, "attn_q.weight")
std::string blk(int64_t il, std::string_view suffix);
}  // namespace tensor_names

}  // namespace pacer::loader
