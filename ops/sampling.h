#pragma once
// Token sampling: greedy, temperature, top-k, top-p, min-p and repetition penalty, with a seeded
// RNG so the same seed and logits give the same tokens on any machine.
#include <cstdint>
#include <span>
#include <vector>

namespace pacer::ops {

struct SamplerParams {
  float temperature = 0.8f;  // <= 0: greedy (argmax, lowest id wins ties)
  int top_k = 40;            // <= 0: off
  float top_p = 0.95f;       // >= 1: off; keeps the smallest prefix (by prob) reaching top_p
  float min_p = 0.05f;       // <= 0: off; drops tokens with p < min_p * p_max
  // 1: off; llama.cpp semantics (divide positive logits, multiply negative ones)
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;  // window of history the penalty looks at; < 0: all of it
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(SamplerParams p);
  // logits are modified in place (penalties, temperature). history: tokens so far.
  int32_t sample(std::span<float> logits, std::span<const int32_t> history);
  const SamplerParams& params() const noexcept { return p_; }

 private:
  SamplerParams p_;
  uint64_t rng_state_;
  // Scratch, reused across calls so sampling allocates nothing once warm.
  std::vector<int32_t> idx_;    // distinct penalised tokens; the top-k heap
  std::vector<float> weight_;   // exp((logit - max) / T) by token id
  std::vector<uint64_t> cand_;  // candidates as (weight bits << 32) | ~id: sorts best-first
};

int32_t argmax(std::span<const float> logits) noexcept;

}  // namespace pacer::ops
