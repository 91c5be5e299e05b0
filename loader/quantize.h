#pragma once
// Quantizes a GGUF model as llama.cpp's llama-quantize does: either "pure" (every matmul weight
// and the token embedding, i.e. the 2-D tensors, become one type) or one of llama-quantize's
// K-quant mixes (q4_k_m, q5_k_m, q6_k) with its per-tensor rules. 1-D tensors (norms, biases,
// RoPE factors) stay as they are, metadata is copied and general.file_type updated. The output
// streams row by row; the input stays mapped, so a model far larger than RAM can be converted.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loader/gguf_file.h"
#include "loader/model_config.h"
#include "ops/types.h"

namespace pacer::loader {

struct QuantizeStats {
  int64_t tensors_quantized = 0;
  int64_t tensors_copied = 0;
  uint64_t bytes_in = 0;                               // tensor data bytes read
  uint64_t bytes_out = 0;                              // tensor data bytes written
  std::map<ops::WeightType, int64_t> tensors_by_type;  // quantized tensors per output type
  int64_t fallbacks = 0;  // tensors whose row length needed llama-quantize's fallback type
};

// llama.cpp's general.file_type (enum llama_ftype) for a file whose matmuls are `t`; throws
// std::invalid_argument for a type with none.
uint32_t llama_file_type(ops::WeightType t);

// The name llama.cpp gives a general.file_type in its model description (llama-bench's
// model_type, "llama 1B Q4_K - Medium"; llama_model_ftype_name): "Q4_K - Medium" for 15,
// "IQ4_XS - 4.25 bpw" for 30, with " (guessed)" where bit 1024 is set, and "unknown, may not
// work" for a value it does not know.
std::string llama_file_type_name(int64_t ftype);

// The general.file_type llama.cpp assumes for a file without one: the type most tensors have
// (counted in name order, the first to lead keeps ties), as llama_file_type maps it, with bit
// 1024 (LLAMA_FTYPE_GUESSED) set, so llama_file_type_name says "Q8_0 (guessed)".
uint32_t llama_guessed_file_type(const GgufFile& f);

// llama.cpp's one-line description of the model (llama_model_desc, llama-bench's model_type):
// "<arch> <size class> <file type>", e.g. "llama 1B Q4_K - Medium"; the file type guessed where
// the file has none.
std::string llama_model_desc(const GgufFile& f, const ModelConfig& c);

// Whether `t` is one the quantizer converts: a 2-D tensor (matmul weight or embedding).
bool is_quantizable(const GgufTensor& t) noexcept;

// A target: a pure type, or a llama-quantize mix.
enum class QuantMix { Pure, Q4_K_M, Q5_K_M, Q6_K };
struct QuantTarget {
  QuantMix mix = QuantMix::Pure;
  ops::WeightType type = ops::WeightType::Q8_0;  // Pure: the type; mixes: their base type
  // "q8_0", "q4_0", ... (pure) or "q4_k_m", "q5_k_m", "q6_k" (mixes); nullopt for other names.
  static std::optional<QuantTarget> parse(std::string_view name);
  std::string name() const;
  uint32_t file_type() const;  // general.file_type (llama_ftype)
};

// What llama-quantize's mix rules give a quantizable tensor (name, GGUF shape ne) of a model with
// n_layers blocks, before the row-length fallback: output (and the token embedding of a tied
// model) Q6_K; attn_v and ffn_down Q6_K in the layers use_more_bits picks (the first and last
// eighth and every third between), for q4_k_m and q5_k_m; a fused attn_qkv one step up (Q5_K for
// q4_k_m, Q6_K for q5_k_m); everything else the mix's base type.
ops::WeightType mix_tensor_type(const QuantTarget& target, std::string_view name,
                                const std::vector<int64_t>& ne, int64_t n_layers,
                                bool tied_embeddings);
// llama-quantize's fallback for a row length that is not a multiple of the type's 256-element
// block: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0 (and F16 when even 32 does not divide it).
ops::WeightType row_fallback(ops::WeightType t, int64_t row_length);

// Writes `out` (atomically). Sources must be F32, F16 or BF16, or already the tensor's target type
// (copied); anything else, or a row length no type fits, is a LoadError naming the tensor.
QuantizeStats quantize_gguf(const GgufFile& in, const std::filesystem::path& out,
                            const QuantTarget& target);
// Pure quantization to `type` (std::invalid_argument for a float or activation-only type).
QuantizeStats quantize_gguf(const GgufFile& in, const std::filesystem::path& out,
                            ops::WeightType type);

}  // namespace pacer::loader
