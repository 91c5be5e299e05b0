// Uses an installed pacer from another project: synthesizes a tiny model with the loader, loads
// it with the runtime and decodes a few tokens through the kernels. Exit status 0 only when every
// layer answered as expected.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "loader/synth.h"
#include "ops/isa.h"
#include "pacer/version.h"
#include "runtime/model.h"
#include "runtime/session.h"

int main() {
  using namespace pacer;
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("pacer-consumer-" + std::to_string(getpid()) + ".gguf");
  loader::SynthSpec spec = loader::synth_preset("tiny");
  spec.type = ops::WeightType::Q8_0;
  loader::write_synthetic_model(spec, path);
  int failures = 0;
  try {
    const runtime::Model model = runtime::Model::load(path);
    if (model.config().n_layers != spec.n_layers || model.config().n_embd != spec.n_embd) {
      std::fprintf(stderr, "loaded %lld layers x %lld, wrote %lld x %lld\n",
                   static_cast<long long>(model.config().n_layers),
                   static_cast<long long>(model.config().n_embd),
                   static_cast<long long>(spec.n_layers), static_cast<long long>(spec.n_embd));
      ++failures;
    }
    runtime::SessionOptions opts;
    opts.threads = 1;
    opts.ctx = 16;
    runtime::Session session(model, opts);
    const auto tokens = model.tokenizer().encode("hello", true);
    const auto logits = session.prefill(tokens);
    if (static_cast<int64_t>(logits.size()) != model.config().n_vocab) {
      std::fprintf(stderr, "%zu logits for a vocabulary of %lld\n", logits.size(),
                   static_cast<long long>(model.config().n_vocab));
      ++failures;
    }
    for (float l : logits) {
      if (!std::isfinite(l)) {
        std::fprintf(stderr, "a logit is not finite\n");
        ++failures;
        break;
      }
    }
    std::printf("pacer %s (%s): %zu prompt tokens, %zu logits\n", pacer::kVersion,
                std::string(ops::isa_name(ops::detect_isa())).c_str(), tokens.size(),
                logits.size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    ++failures;
  }
  std::filesystem::remove(path);
  return failures == 0 ? 0 : 1;
}
