#pragma once
// A loaded model: the mapped GGUF file, its configuration, non-owning views of every weight (into
// the mapping: nothing is copied) and the tokenizer. Immutable after load; sessions share it.
#include <cstdint>
#include <filesystem>
#include <memory>

#include "loader/gguf_file.h"
#include "loader/model_config.h"
#include "loader/tokenizer.h"
#include "loader/weights.h"

namespace pacer::runtime {

class Model {
 public:
  // Maps and validates `path`. Throws loader::LoadError naming the file, field and offset.
  static Model load(const std::filesystem::path& path);

  Model(Model&&) noexcept = default;
  Model& operator=(Model&&) noexcept = default;

  const loader::GgufFile& file() const noexcept { return *file_; }
  const loader::ModelConfig& config() const noexcept { return config_; }
  const loader::Weights& weights() const noexcept { return weights_; }
  const loader::Tokenizer& tokenizer() const noexcept { return *tokenizer_; }
  double load_ms() const noexcept { return load_ms_; }

 private:
  Model() = default;
  // Heap-held so the mapping and the views into it keep their addresses when the Model moves.
  std::unique_ptr<loader::GgufFile> file_;
  loader::ModelConfig config_;
  loader::Weights weights_;
  std::unique_ptr<loader::Tokenizer> tokenizer_;
  double load_ms_ = 0;
};

}  // namespace pacer::runtime
