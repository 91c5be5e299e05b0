#pragma once
// Synthetic GGUF models with real shapes: the tensors, metadata and vocabulary a llama.cpp
// converter would write, filled with deterministic pseudo-random weights scaled so a forward pass
// stays numerically sane. No model is downloaded; benchmarks and tests run on these.
//
// Weights are a pure function of (seed, tensor name, element index): element k of tensor T is
// derived from splitmix64 applied to a key built from the seed and a hash of T's name, plus k.
// So a file's bytes are identical for a seed, and any tensor or row range can be produced
// independently (the writer streams them in chunks; rows are filled in parallel).
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "loader/gguf_file.h"
#include "loader/gguf_writer.h"
#include "loader/model_config.h"
#include "loader/quantize.h"
#include "loader/synth_vocab.h"
#include "ops/types.h"

namespace pacer::loader {

struct SynthSpec {
  std::string name = "synthetic";  // general.name
  Arch arch = Arch::Llama;
  int64_t n_embd = 64;
  int64_t n_layers = 2;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 2;
  int64_t head_dim = 0;  // 0: n_embd / n_heads (written as attention.key_length when nonzero)
  int64_t n_ff = 192;
  int64_t n_vocab = 512;
  int64_t n_ctx = 2048;
  float rope_base = 10000.0f;
  float norm_eps = 1e-5f;
  bool tied_embeddings = false;  // no output.weight
  bool qkv_bias = false;         // attn_{q,k,v}.bias (qwen2: always)
  // llama3 RoPE scaling: a rope_freqs.weight tensor with the factors llama.cpp's converter
  // computes from (factor, low/high frequency factors 1 and 4, original context).
  bool rope_freqs = false;
  float rope_scaling_factor = 32.0f;
  int64_t rope_orig_ctx = 8192;
  // gemma3 only
  float rope_base_local = 10000.0f;    // written as <arch>.rope.freq_base_swa
  int64_t sliding_window = 0;          // <arch>.attention.sliding_window
  int64_t sliding_window_pattern = 0;  // 0: not written (readers use 6, as llama.cpp does)
  VocabKind vocab = VocabKind::SentencePiece;
  // Matmul weights and token_embd: any weight type whose block divides the rows. Norms, biases F32.
  ops::WeightType type = ops::WeightType::F16;
  uint64_t seed = 0;

  int64_t head_size() const noexcept { return head_dim > 0 ? head_dim : n_embd / n_heads; }
};

// Presets: tinyllama-1.1b, llama3.2-1b, qwen2.5-0.5b, qwen3-0.6b, gemma3-1b, phi3-mini (real
// shapes), tiny, tiny-llama3, tiny-qwen2, tiny-qwen3, tiny-gemma3, tiny-phi3 (a few MB, same
// structure, for tests). Throws std::invalid_argument listing the names.
SynthSpec synth_preset(std::string_view preset);
std::vector<std::string_view> synth_preset_names();

// Adds the whole model (metadata, vocabulary, tensors as streamed fills) to `w`. When `vocab_from`
// is given its tokenizer.* keys are copied (and n_vocab taken from its token list) instead of a
// synthetic vocabulary. Throws std::invalid_argument on an inconsistent spec.
void add_synthetic_model(GgufWriter& w, const SynthSpec& spec,
                         const GgufFile* vocab_from = nullptr);
// Only the tensors (no metadata, no vocabulary): for counting and shape checks, which then skip
// building a large vocabulary.
void add_synthetic_tensors(GgufWriter& w, const SynthSpec& spec);
// add_synthetic_model + write(path).
void write_synthetic_model(const SynthSpec& spec, const std::filesystem::path& path,
                           const GgufFile* vocab_from = nullptr);

// The generator's building blocks, public so tests can recompute expected values independently.
namespace synth {
uint64_t splitmix64(uint64_t x) noexcept;
// llama3's per-pair RoPE divisors (what the converter writes as rope_freqs.weight): 1 for
// wavelengths below orig_ctx/4, `factor` above orig_ctx, a smooth blend between.
std::vector<float> llama3_rope_factors(int64_t head_dim, float base, float factor,
                                       int64_t orig_ctx);
// 64-bit FNV-1a of a tensor name.
uint64_t name_hash(std::string_view name) noexcept;
// Uniform in [-1, 1) for element k of the tensor keyed by (seed, name).
float unit_value(uint64_t seed, std::string_view tensor_name, uint64_t k) noexcept;

enum class Init {
  Matmul,  // uniform, std 1/sqrt(ne[0]) (fan-in): activations keep their scale layer to layer
  Norm,    // 1 + uniform(-0.05, 0.05)
  Bias,    // uniform(-0.02, 0.02)
};
// The fp32 value of element k before conversion to the stored type.
float init_value(Init init, int64_t fan_in, uint64_t seed, std::string_view tensor_name,
                 uint64_t k) noexcept;
}  // namespace synth

}  // namespace pacer::loader
