#pragma once
// Test helpers: a synthetic model written to a temporary file and loaded as a runtime::Model.
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include <unistd.h>

#include "loader/synth.h"
#include "runtime/model.h"

namespace pacer::runtime::test {

class SynthModel {
 public:
  SynthModel(std::string_view preset, ops::WeightType type, uint64_t seed = 0)
      : SynthModel(spec_of(preset, type, seed)) {}
  explicit SynthModel(const loader::SynthSpec& spec) : path_(unique_path(spec.name, this)) {
    loader::write_synthetic_model(spec, path_);
    model_ = std::make_unique<Model>(Model::load(path_));
  }
  ~SynthModel() {
    model_.reset();
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  SynthModel(const SynthModel&) = delete;
  SynthModel& operator=(const SynthModel&) = delete;

  const Model& model() const { return *model_; }
  const std::filesystem::path& path() const { return path_; }

  static loader::SynthSpec spec_of(std::string_view preset, ops::WeightType type, uint64_t seed) {
    loader::SynthSpec s = loader::synth_preset(preset);
    s.type = type;
    s.seed = seed;
    return s;
  }

 private:
  // Unique among live objects of this process: pid plus the object's address.
  static std::filesystem::path unique_path(const std::string& name, const void* self) {
    std::string safe;
    for (char c : name) safe += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return std::filesystem::temp_directory_path() /
           ("pacer_rt_" + std::to_string(getpid()) + "_" +
            std::to_string(reinterpret_cast<uintptr_t>(self)) + "_" + safe + ".gguf");
  }

  std::filesystem::path path_;
  std::unique_ptr<Model> model_;
};

}  // namespace pacer::runtime::test
