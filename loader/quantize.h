#pragma once
// Quantizes a GGUF model to Q8_0 or Q4_0, as llama.cpp's quantize does with --pure: every matmul
// weight and the token embedding (2-D tensors) become the target type, 1-D tensors (norms,
// biases) stay as they are, metadata is copied and general.file_type updated. Blocks are
// byte-identical to ggml's (ops::quantize_row). The output streams row by row; the input stays
// mapped, so a model far larger than RAM can be converted.
#include <cstdint>
#include <filesystem>

#include "loader/gguf_file.h"
#include "ops/types.h"

namespace pacer::loader {

struct QuantizeStats {
  int64_t tensors_quantized = 0;
  int64_t tensors_copied = 0;
  uint64_t bytes_in = 0;   // tensor data bytes read
  uint64_t bytes_out = 0;  // tensor data bytes written
};

// llama.cpp's general.file_type (enum llama_ftype) for a file whose matmuls are `t`; throws
// std::invalid_argument for a type with none.
uint32_t llama_file_type(ops::WeightType t);

// Whether `t` is one the quantizer converts: a 2-D tensor (matmul weight or embedding).
bool is_quantizable(const GgufTensor& t) noexcept;

// Writes `out` (atomically). Sources must be F32, F16 or BF16, or already `type` (copied);
// anything else, or a row length that is not a multiple of 32, is a LoadError naming the tensor.
// Throws std::invalid_argument unless type is Q8_0 or Q4_0.
QuantizeStats quantize_gguf(const GgufFile& in, const std::filesystem::path& out,
                            ops::WeightType type);

}  // namespace pacer::loader
