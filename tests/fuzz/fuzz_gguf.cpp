// libFuzzer target: GgufFile::parse on arbitrary bytes, then ModelConfig::from_gguf and
// Weights::bind on whatever parses. Any input must end in success or a LoadError: never a crash,
// a sanitizer report, a hang or a huge allocation.
#include <cstddef>
#include <cstdint>
#include <span>

#include "loader/gguf_file.h"
#include "loader/model_config.h"
#include "loader/weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pacer::loader;
  try {
    const GgufFile f = GgufFile::parse(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size), "fuzz.gguf");
    // Touch every view so ASan checks it lies inside the input.
    for (const GgufTensor& t : f.tensors()) {
      if (!t.data.empty()) {
        volatile std::byte first = t.data.front();
        volatile std::byte last = t.data.back();
        (void)first;
        (void)last;
      }
    }
    for (const GgufKv& kv : f.metadata()) {
      for (uint64_t k = 0; k < kv.value.count && k < 4; ++k) {
        (void)kv.value.array_number(k);
        (void)kv.value.array_string(k);
      }
    }
    const ModelConfig c = ModelConfig::from_gguf(f);
    const Weights w = Weights::bind(f, c);
    (void)w;
  } catch (const LoadError&) {
  }
  return 0;
}
