#include "runtime/model.h"

#include <chrono>

#include <fmt/format.h>

namespace pacer::runtime {

Model Model::load(const std::filesystem::path& path) {
  const auto t0 = std::chrono::steady_clock::now();
  Model m;
  m.file_ = std::make_unique<loader::GgufFile>(loader::GgufFile::open(path));
  m.config_ = loader::ModelConfig::from_gguf(*m.file_);
  if (m.config_.rope_scaling == loader::RopeScaling::Yarn) {
    throw loader::LoadError(path.string(), std::string(m.file_->get_string("general.architecture")) +
                                               ".rope.scaling.type",
                            -1, "YaRN RoPE scaling is not supported by pacer's forward pass");
  }
  m.weights_ = loader::Weights::bind(*m.file_, m.config_);
  m.tokenizer_ = std::make_unique<loader::Tokenizer>(loader::Tokenizer::from_gguf(*m.file_));
  m.load_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                   .count();
  return m;
}

}  // namespace pacer::runtime
