#pragma once
// The tensors a model of a given config holds: one table of {name, shape, condition} that both
// ModelConfig::from_gguf (every shape agrees with the config) and Weights::bind (each tensor to
// its field) read, so a tensor cannot be checked one way and bound another.
#include <cstdint>
#include <string>
#include <vector>

#include "loader/model_config.h"

namespace pacer::loader {

// Where Weights::bind puts a tensor. Fused tensors (phi3) fill several fields by rows.
enum class TensorSlot {
  TokenEmbd,
  OutputNorm,
  Output,
  RopeFreqs,
  RopeFactorsLong,
  RopeFactorsShort,  // model-wide
  AttnNorm,
  AttnQkv,
  AttnQ,
  AttnK,
  AttnV,
  AttnOutput,
  BiasQ,
  BiasK,
  BiasV,
  QNorm,
  KNorm,
  PostAttnNorm,
  PostFfnNorm,
  FfnNorm,
  FfnGateUp,
  FfnGate,
  FfnUp,
  FfnDown  // per layer
};

// How a tensor is read: an F32 vector (norms, biases), F32 RoPE divisors (finite, > 0), or a
// matrix of any weight type.
enum class TensorKind { Vector, Factors, Matrix };

struct ModelTensor {
  std::string name;         // GGUF name, e.g. "blk.3.attn_q.weight"
  std::vector<int64_t> ne;  // expected GGUF shape: ne[0] elements per row, ne[1] rows
  TensorKind kind;
  TensorSlot slot;
  int64_t layer;  // -1 for a model-wide tensor
};

// Every tensor the config's forward pass reads, in binding order: token_embd, output_norm,
// output (unless tied), the RoPE factors the config names, then each layer's. The config's
// shape fields (n_embd, n_vocab, ...) and feature flags (qkv_bias, fused_qkv, ...) must be set.
std::vector<ModelTensor> model_tensors(const ModelConfig& c);

}  // namespace pacer::loader
