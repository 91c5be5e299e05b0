#pragma once
// Which dimensions RoPE rotates together: a property of the architecture that the loader reads
// (loader/model_config.h) and ops/elementwise.h applies. In pacer_ops_types, apart from the
// kernels.
namespace pacer::ops {

enum class RopeLayout {
  Normal,  // pairs (x[2i], x[2i+1]) rotate together: llama
  Neox,    // halves (x[i], x[i + n_rot/2]) rotate together: qwen2, gemma3
};

}  // namespace pacer::ops
