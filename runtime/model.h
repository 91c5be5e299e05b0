#pragma once
// A loaded model: the mapped GGUF file, its configuration, views of every weight and the
// tokenizer. Immutable after load; sessions share it.
//
// Weights are views into the mapping (nothing copied), except the matmul weights of the types
// ops::InterleavedMatrix::pays for (Q4_0, Q8_0 and the K-quants on AVX-512 VNNI machines, the
// same quantized types on the AVX2 tier, F16 and BF16 on AVX2 and AVX-512 ones): those are repacked
// at load into the 16-row interleaved layout with which the decode GEMVs keep up with memory, and
// the views point at the copies; the file's pages of those weights leave the resident set. The
// embedding table keeps the mapping (read one row per token).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "loader/gguf_file.h"
#include "loader/model_config.h"
#include "loader/tokenizer.h"
#include "loader/weights.h"
#include "ops/matmul.h"

namespace pacer::runtime {

struct LoadOptions {
  // Repack matmul weights where it pays (see above). Default: on, unless the
  // environment has PACER_REPACK=0.
  bool repack = default_repack();
  static bool default_repack() noexcept;
};

class Model {
 public:
  // Maps and validates `path`. Throws loader::LoadError naming the file, field and offset.
  static Model load(const std::filesystem::path& path, const LoadOptions& opts = {});

  Model(Model&&) noexcept = default;
  Model& operator=(Model&&) noexcept = default;

  const loader::GgufFile& file() const noexcept { return *file_; }
  const loader::ModelConfig& config() const noexcept { return config_; }
  const loader::Weights& weights() const noexcept { return weights_; }
  const loader::Tokenizer& tokenizer() const noexcept { return *tokenizer_; }
  double load_ms() const noexcept { return load_ms_; }
  // Matmul weights repacked at load (0: every weight is a view into the file).
  int64_t repacked_matrices() const noexcept { return static_cast<int64_t>(repacked_.size()); }
  // Whether prefill GEMMs on `isa` multiply BF16 weights on vdpbf16ps, their inputs rounded to
  // bf16 (ops/interleaved.h): repacked BF16 weights, an AVX-512 path and AVX512_BF16.
  bool bf16_dot_prefill(ops::Isa isa) const noexcept;

 private:
  Model() = default;
  // Heap-held so the mapping and the views into it keep their addresses when the Model moves.
  std::unique_ptr<loader::GgufFile> file_;
  loader::ModelConfig config_;
  loader::Weights weights_;
  std::unique_ptr<loader::Tokenizer> tokenizer_;
  std::vector<ops::InterleavedMatrix> repacked_;  // owners of the repacked views in weights_
  double load_ms_ = 0;
};

}  // namespace pacer::runtime
