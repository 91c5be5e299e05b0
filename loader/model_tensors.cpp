#include "loader/model_tensors.h"

#include <array>
#include <string_view>

namespace pacer::loader {
namespace {

using Shape = std::vector<int64_t>;

// One row of the table: the tensor's name (the suffix after "blk.<il>." for a layer's), its
// shape and the condition under which the config's forward pass reads it.
struct Rule {
  std::string_view name;
  bool per_layer;
  TensorKind kind;
  TensorSlot slot;
  bool (*present)(const ModelConfig&);
  Shape (*shape)(const ModelConfig&);
};

int64_t q_dim(const ModelConfig& c) {
  return c.n_heads * c.head_dim;
}
int64_t kv_dim(const ModelConfig& c) {
  return c.n_kv_heads * c.head_dim;
}
bool always(const ModelConfig&) {
  return true;
}

using K = TensorKind;
using S = TensorSlot;
namespace tn = tensor_names;
// clang-format off
constexpr std::array kRules = {
  Rule{tn::kTokenEmbd, false, K::Matrix, S::TokenEmbd, always,
       [](const ModelConfig& c) { return Shape{c.n_embd, c.n_vocab}; }},
  Rule{tn::kOutputNorm, false, K::Vector, S::OutputNorm, always,
       [](const ModelConfig& c) { return Shape{c.n_embd}; }},
  Rule{tn::kOutput, false, K::Matrix, S::Output,
       [](const ModelConfig& c) { return !c.tied_embeddings; },
       [](const ModelConfig& c) { return Shape{c.n_embd, c.n_vocab}; }},
  Rule{tn::kRopeFreqs, false, K::Factors, S::RopeFreqs,
       [](const ModelConfig& c) { return c.rope_freqs; },
       [](const ModelConfig& c) { return Shape{c.head_dim / 2}; }},
  Rule{tn::kRopeFactorsLong, false, K::Factors, S::RopeFactorsLong,
       [](const ModelConfig& c) { return c.rope_long_short; },
       [](const ModelConfig& c) { return Shape{c.head_dim / 2}; }},
  Rule{tn::kRopeFactorsShort, false, K::Factors, S::RopeFactorsShort,
       [](const ModelConfig& c) { return c.rope_long_short; },
       [](const ModelConfig& c) { return Shape{c.head_dim / 2}; }},
  Rule{"attn_norm.weight", true, K::Vector, S::AttnNorm, always,
       [](const ModelConfig& c) { return Shape{c.n_embd}; }},
  Rule{"attn_qkv.weight", true, K::Matrix, S::AttnQkv,
       [](const ModelConfig& c) { return c.fused_qkv; },
       [](const ModelConfig& c) { return Shape{c.n_embd, q_dim(c) + 2 * kv_dim(c)}; }},
  Rule{"attn_q.weight", true, K::Matrix, S::AttnQ,
       [](const ModelConfig& c) { return !c.fused_qkv; },
       [](const ModelConfig& c) { return Shape{c.n_embd, q_dim(c)}; }},
  Rule{"attn_k.weight", true, K::Matrix, S::AttnK,
       [](const ModelConfig& c) { return !c.fused_qkv; },
       [](const ModelConfig& c) { return Shape{c.n_embd, kv_dim(c)}; }},
  Rule{"attn_v.weight", true, K::Matrix, S::AttnV,
       [](const ModelConfig& c) { return !c.fused_qkv; },
       [](const ModelConfig& c) { return Shape{c.n_embd, kv_dim(c)}; }},
  Rule{"attn_output.weight", true, K::Matrix, S::AttnOutput, always,
       [](const ModelConfig& c) { return Shape{q_dim(c), c.n_embd}; }},
  Rule{"attn_q.bias", true, K::Vector, S::BiasQ,
       [](const ModelConfig& c) { return c.qkv_bias; },
       [](const ModelConfig& c) { return Shape{q_dim(c)}; }},
  Rule{"attn_k.bias", true, K::Vector, S::BiasK,
       [](const ModelConfig& c) { return c.qkv_bias; },
       [](const ModelConfig& c) { return Shape{kv_dim(c)}; }},
  Rule{"attn_v.bias", true, K::Vector, S::BiasV,
       [](const ModelConfig& c) { return c.qkv_bias; },
       [](const ModelConfig& c) { return Shape{kv_dim(c)}; }},
  Rule{"attn_q_norm.weight", true, K::Vector, S::QNorm,
       [](const ModelConfig& c) { return c.qk_norm; },
       [](const ModelConfig& c) { return Shape{c.head_dim}; }},
  Rule{"attn_k_norm.weight", true, K::Vector, S::KNorm,
       [](const ModelConfig& c) { return c.qk_norm; },
       [](const ModelConfig& c) { return Shape{c.head_dim}; }},
  Rule{"post_attention_norm.weight", true, K::Vector, S::PostAttnNorm,
       [](const ModelConfig& c) { return c.post_norms; },
       [](const ModelConfig& c) { return Shape{c.n_embd}; }},
  Rule{"post_ffw_norm.weight", true, K::Vector, S::PostFfnNorm,
       [](const ModelConfig& c) { return c.post_norms; },
       [](const ModelConfig& c) { return Shape{c.n_embd}; }},
  Rule{"ffn_norm.weight", true, K::Vector, S::FfnNorm, always,
       [](const ModelConfig& c) { return Shape{c.n_embd}; }},
  Rule{"ffn_up.weight", true, K::Matrix, S::FfnGateUp,
       [](const ModelConfig& c) { return c.fused_gate_up; },
       [](const ModelConfig& c) { return Shape{c.n_embd, 2 * c.n_ff}; }},
  Rule{"ffn_gate.weight", true, K::Matrix, S::FfnGate,
       [](const ModelConfig& c) { return !c.fused_gate_up; },
       [](const ModelConfig& c) { return Shape{c.n_embd, c.n_ff}; }},
  Rule{"ffn_up.weight", true, K::Matrix, S::FfnUp,
       [](const ModelConfig& c) { return !c.fused_gate_up; },
       [](const ModelConfig& c) { return Shape{c.n_embd, c.n_ff}; }},
  Rule{"ffn_down.weight", true, K::Matrix, S::FfnDown, always,
       [](const ModelConfig& c) { return Shape{c.n_ff, c.n_embd}; }},
};
// clang-format on

}  // namespace

std::vector<ModelTensor> model_tensors(const ModelConfig& c) {
  std::vector<ModelTensor> out;
  for (const Rule& r : kRules) {
    if (!r.per_layer && r.present(c)) {
      out.push_back({std::string(r.name), r.shape(c), r.kind, r.slot, -1});
    }
  }
  for (int64_t il = 0; il < c.n_layers; ++il) {
    for (const Rule& r : kRules) {
      if (r.per_layer && r.present(c)) {
        out.push_back({tn::blk(il, r.name), r.shape(c), r.kind, r.slot, il});
      }
    }
  }
  return out;
}

}  // namespace pacer::loader
