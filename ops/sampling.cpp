#include "ops/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace pacer::ops {
namespace {

// splitmix64 (Steele, Lea, Flood 2014): a full-period 64-bit generator with a fixed, portable
// output sequence, unlike std:: distributions whose outputs are implementation-defined.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) with 53 random bits.
double uniform01(uint64_t& state) {
  return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
}

constexpr int64_t kTopPFirstPrefix = 256;  // top-p sorts this many first, then 8x more at a time

}  // namespace

Sampler::Sampler(SamplerParams p) : p_(p), rng_state_(p.seed) {
  splitmix64(rng_state_);  // decorrelate nearby seeds' first outputs
}

int32_t argmax(std::span<const float> logits) noexcept {
  int32_t best = 0;
  float best_logit = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > best_logit) {  // strict: the lowest id wins ties; NaN never wins
      best_logit = logits[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

// Pipeline: repetition penalty -> (greedy) -> top-k -> softmax with temperature -> top-p -> min-p
// -> renormalise -> draw. Candidates are token ids in idx_; "better" means higher logit, then
// lower id, which is also the order of higher probability (exp is monotonic), so every cut below
// is deterministic even with ties.
int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
  if (logits.empty()) throw std::invalid_argument("ops::Sampler::sample: empty logits");
  const int64_t n = static_cast<int64_t>(logits.size());

  // Repetition penalty (llama.cpp): each distinct token of the last repeat_last_n (all history if
  // negative) once; logits <= 0 are multiplied by the penalty, positive ones divided.
  if (p_.repeat_penalty != 1.0f && p_.repeat_last_n != 0 && !history.empty()) {
    const size_t window = p_.repeat_last_n < 0
                              ? history.size()
                              : std::min(history.size(), static_cast<size_t>(p_.repeat_last_n));
    idx_.assign(history.end() - static_cast<std::ptrdiff_t>(window), history.end());
    std::sort(idx_.begin(), idx_.end());
    idx_.erase(std::unique(idx_.begin(), idx_.end()), idx_.end());
    for (int32_t tok : idx_) {
      if (tok < 0 || tok >= n) continue;  // not in this vocabulary: nothing to penalise
      float& l = logits[tok];
      l = l <= 0.0f ? l * p_.repeat_penalty : l / p_.repeat_penalty;
    }
  }

  if (p_.temperature <= 0.0f) return argmax(logits);

  // NaN would break the strict ordering the selections below rely on.
  for (float& l : logits) {
    if (std::isnan(l)) l = -std::numeric_limits<float>::infinity();
  }
  const auto better = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };

  // Top-k: a heap of the k best seen so far (worst on top) in one pass, then sorted best-first.
  bool sorted = false;
  if (p_.top_k > 0 && p_.top_k < n) {
    const size_t k = static_cast<size_t>(p_.top_k);
    idx_.clear();
    for (int32_t i = 0; i < n; ++i) {
      if (idx_.size() < k) {
        idx_.push_back(i);
        if (idx_.size() == k) std::make_heap(idx_.begin(), idx_.end(), better);
      } else if (better(i, idx_.front())) {
        std::pop_heap(idx_.begin(), idx_.end(), better);
        idx_.back() = i;
        std::push_heap(idx_.begin(), idx_.end(), better);
      }
    }
    std::sort_heap(idx_.begin(), idx_.end(), better);
    sorted = true;
  } else {
    idx_.resize(static_cast<size_t>(n));
    std::iota(idx_.begin(), idx_.end(), 0);
  }
  int64_t n_cand = static_cast<int64_t>(idx_.size());

  // Softmax with temperature over the candidates, in double: weight(id) = exp((l - max) / T),
  // p(id) = weight(id) / total. The best candidate has weight 1.
  const int32_t best = sorted ? idx_[0] : argmax(logits);  // without top-k: every token
  const double max_logit = logits[best];
  if (!std::isfinite(max_logit)) return best;  // all -inf, or +inf present: the maximum decides
  const double inv_temp = 1.0 / p_.temperature;
  const auto weight = [&](int32_t id) {
    return std::exp((static_cast<double>(logits[id]) - max_logit) * inv_temp);
  };
  double total = 0.0;
  for (int64_t i = 0; i < n_cand; ++i) total += weight(idx_[i]);

  // Top-p: the smallest best-first prefix whose probability reaches top_p. Without top-k the
  // prefix is found by partial sorts of growing length instead of sorting the whole vocabulary.
  if (p_.top_p < 1.0f) {
    const double target = static_cast<double>(p_.top_p) * total;
    int64_t prefix = sorted ? n_cand : std::min(n_cand, kTopPFirstPrefix);
    int64_t keep = -1;
    while (keep < 0) {
      if (!sorted) {
        std::partial_sort(idx_.begin(), idx_.begin() + prefix, idx_.begin() + n_cand, better);
      }
      double cum = 0.0;
      for (int64_t i = 0; i < prefix; ++i) {
        cum += weight(idx_[i]);
        if (cum >= target) {
          keep = i + 1;
          break;
        }
      }
      if (keep < 0 && prefix == n_cand) keep = n_cand;  // rounding kept the mass just below
      prefix = std::min(n_cand, prefix * 8);
    }
    n_cand = keep;
    sorted = true;
  }

  // Min-p: drop candidates with p < min_p * p_max, i.e. weight < min_p (the best one stays).
  if (p_.min_p > 0.0f) {
    int64_t kept = 0;
    for (int64_t i = 0; i < n_cand; ++i) {
      if (weight(idx_[i]) >= p_.min_p) idx_[kept++] = idx_[i];
    }
    if (kept == 0) {  // min_p > 1: only the best candidate can stay
      idx_[0] = best;
      kept = 1;
    }
    n_cand = kept;
  }

  // Renormalise over what is left and draw.
  prob_.resize(static_cast<size_t>(n_cand));
  double kept_total = 0.0;
  for (int64_t i = 0; i < n_cand; ++i) {
    prob_[i] = static_cast<float>(weight(idx_[i]));
    kept_total += prob_[i];
  }
  const double r = uniform01(rng_state_) * kept_total;
  double cum = 0.0;
  for (int64_t i = 0; i < n_cand; ++i) {
    cum += prob_[i];
    if (r < cum) return idx_[i];
  }
  // u * total rounded up to total: the last candidate with any weight.
  for (int64_t i = n_cand - 1; i > 0; --i) {
    if (prob_[i] > 0.0f) return idx_[i];
  }
  return idx_[0];
}

}  // namespace pacer::ops
