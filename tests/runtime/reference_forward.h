#pragma once
// A plain, unoptimised fp32 forward pass for llama, qwen2 and gemma3, written straight from the
// models' math and independent of ops/ and of pacer's runtime: it reads hyper-parameters from the
// GGUF metadata itself, dequantises every weight to an fp32 copy (ops::dequantize_row is the only
// ops/ function it uses, and only for that), processes one token at a time, keeps its KV cache in
// fp32 and accumulates dot products in double. Tests hold pacer's logits to it.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "loader/gguf_file.h"

namespace pacer::testref {

struct RefConfig {
  std::string arch;  // "llama" | "qwen2" | "qwen3" | "gemma3" | "phi3"
  int64_t n_layers = 0, n_embd = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, n_ff = 0;
  int64_t n_vocab = 0;
  float eps = 1e-5f;
  float rope_base = 10000.0f, rope_base_local = 10000.0f, rope_freq_scale = 1.0f;
  bool neox = false;                 // rotate (i, i + d/2) pairs instead of (2i, 2i + 1)
  std::vector<float> rope_divisors;  // llama3 rope_freqs: theta_i / rope_divisors[i]; or empty
  float attn_scale = 0.0f;
  int64_t window = 0, window_pattern = 0;  // gemma3 sliding window
  float logit_softcap = 0.0f;
  bool gemma = false;
  bool swa_layer(int64_t il) const {
    return gemma && window > 0 && window_pattern > 0 && (il + 1) % window_pattern != 0;
  }
};

// Default: nothing is rounded - the ideal fp32 model. f16_kv stores K and V in the cache as f16,
// as llama.cpp's and pacer's default cache does, to isolate the rest of the computation.
struct RefOptions {
  bool f16_kv = false;
};

class ReferenceModel {
 public:
  explicit ReferenceModel(const loader::GgufFile& f, RefOptions opts = {});

  const RefConfig& config() const { return c_; }
  // Runs one token at position pos (positions must be fed in order from 0) and returns logits.
  std::vector<float> step(int32_t token, int64_t pos);
  // Feeds tokens one by one from position 0 (forgetting earlier state); last token's logits.
  std::vector<float> prefill(std::span<const int32_t> tokens);

 private:
  struct Matrix {
    std::vector<float> w;  // (rows, cols) row-major, dequantised
    int64_t rows = 0, cols = 0;
    std::vector<float> operator*(const std::vector<float>& x) const;
    Matrix rows_range(int64_t r0, int64_t n) const;  // rows [r0, r0 + n) as a matrix
  };
  struct Layer {
    std::vector<float> attn_norm, bq, bk, bv, q_norm, k_norm, post_attn_norm;
    std::vector<float> ffn_norm, post_ffn_norm;
    Matrix wq, wk, wv, wo, w_gate, w_up, w_down;
  };
  Matrix matrix(const loader::GgufFile& f, const std::string& name) const;

  RefConfig c_;
  RefOptions opts_;
  std::vector<float> token_embd_, output_norm_;
  Matrix output_;
  std::vector<Layer> layers_;
  std::vector<std::vector<float>> k_cache_, v_cache_;  // per layer: (pos, n_kv_heads*head_dim)
};

}  // namespace pacer::testref
