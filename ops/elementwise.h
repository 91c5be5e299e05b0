#pragma once
// Norms, RoPE, activations, softmax, residual add and the embedding lookup: the cheap ops around
// the matmuls. Each has a scalar reference (the `_ref` functions, straight from the math) that the
// tests hold the dispatched version to. The dispatched ops run the elementwise table of the
// KernelSet they are given (kernel_set.h: resolved once per session).
#include <cstdint>
#include <span>

#include "ops/isa.h"
#include "ops/matmul.h"
#include "ops/rope_layout.h"

namespace pacer::ops {

class KernelSet;  // kernel_set.h

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]; x, w, out of equal length (out may alias x).
void rmsnorm(std::span<const float> x, std::span<const float> w, float eps, std::span<float> out,
             const KernelSet& kernels);
void rmsnorm_ref(std::span<const float> x, std::span<const float> w, float eps,
                 std::span<float> out);

struct RopeParams {
  int head_dim = 0;
  int n_rot = 0;            // rotated dims per head (== head_dim for all supported models)
  float base = 10000.0f;    // theta_i = pos * base^(-2i/n_rot) * freq_scale
  float freq_scale = 1.0f;  // 1/linear scaling factor
  RopeLayout layout = RopeLayout::Normal;
  // Per-pair frequency divisors (n_rot/2 floats: llama3's rope_freqs.weight, phi3's LongRoPE
  // rope_factors_*): theta_i is divided by freq_factors[i]. nullptr: all 1.
  const float* freq_factors = nullptr;
  float mscale = 1.0f;  // cos and sin are scaled by this (LongRoPE's attention factor)
};

// Rotates n_heads heads of head_dim floats each, in place, for position pos.
void rope(std::span<float> x, int n_heads, int64_t pos, const RopeParams& p);
// rope() in two halves, for callers that rotate many heads at one position in several calls (a
// decode step's q and k in every layer): the cos and sin of each of the n_rot / 2 pairs at pos
// (times mscale), then the rotation by them. rope_angles + rope_rotate == rope, bit for bit.
void rope_angles(int64_t pos, const RopeParams& p, float* cos_t, float* sin_t);
void rope_rotate(std::span<float> x, int n_heads, const RopeParams& p, const float* cos_t,
                 const float* sin_t);
void rope_ref(std::span<float> x, int n_heads, int64_t pos, const RopeParams& p);

// out[i] = silu(gate[i]) * up[i]           (llama, qwen2)
void swiglu(std::span<const float> gate, std::span<const float> up, std::span<float> out,
            const KernelSet& kernels);
// out[i] = gelu_tanh(gate[i]) * up[i]      (gemma3)
void geglu(std::span<const float> gate, std::span<const float> up, std::span<float> out,
           const KernelSet& kernels);

// In-place numerically stable softmax (max subtracted first).
void softmax(std::span<float> x, const KernelSet& kernels);
// out[i] = a[i] + b[i] (out may alias a or b).
void add(std::span<const float> a, std::span<const float> b, std::span<float> out,
         const KernelSet& kernels);
// x[i] *= s
void scale(std::span<float> x, float s, const KernelSet& kernels);

// Dequantizes row `token` of an embedding table (rows = vocab, cols = n_embd) into out.
void embedding_row(const WeightMatrix& table, int64_t token, std::span<float> out);

}  // namespace pacer::ops
