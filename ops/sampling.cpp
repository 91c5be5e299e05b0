#include "ops/sampling.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <emmintrin.h>  // SSE2: baseline x86-64

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

// A candidate as one integer: non-negative float weights order like their bit patterns, and ~id
// puts the lower id first among equal weights. So "larger key" is exactly "more probable, then
// lower id", and selections run on contiguous integers instead of chasing token ids.
uint64_t candidate_key(float weight, int32_t id) {
  return (static_cast<uint64_t>(std::bit_cast<uint32_t>(weight)) << 32) |
         static_cast<uint32_t>(~static_cast<uint32_t>(id));
}
float key_weight(uint64_t key) {
  return std::bit_cast<float>(static_cast<uint32_t>(key >> 32));
}
int32_t key_id(uint64_t key) {
  return static_cast<int32_t>(~static_cast<uint32_t>(key));
}

constexpr int64_t kSortBelow = 64;    // select_by_mass sorts ranges this small outright
constexpr int kMaxSelectRounds = 48;  // then sorts whatever is left (guards the worst case)

// Rearranges keys[0, n) so that keys[0, keep) is the smallest set of best candidates whose
// weights reach `target` (all of them if they never do), and returns keep. A quickselect on
// mass: expected O(n), where sorting a 150k-260k vocabulary for top-p costs ~20x more.
int64_t select_by_mass(uint64_t* keys, int64_t n, double target) {
  int64_t lo = 0, hi = n;  // the answer lies in [lo, hi]; keys[0, lo) are in the set
  double need = target;    // mass still needed from keys[lo, hi)
  for (int round = 0; hi - lo > kSortBelow && round < kMaxSelectRounds; ++round) {
    uint64_t a = keys[lo], b = keys[lo + (hi - lo) / 2], c = keys[hi - 1];
    if (a > b) std::swap(a, b);
    if (b > c) std::swap(b, c);
    if (a > b) std::swap(a, b);
    const uint64_t pivot = b;  // median of three
    uint64_t* mid = std::partition(keys + lo, keys + hi, [&](uint64_t k) { return k > pivot; });
    double mass = 0.0;
    for (const uint64_t* it = keys + lo; it != mid; ++it) mass += key_weight(*it);
    if (mass >= need) {
      hi = mid - keys;  // the candidates better than the pivot already suffice
      continue;
    }
    need -= mass;
    lo = mid - keys;
    std::swap(*std::find(keys + lo, keys + hi, pivot), keys[lo]);  // the pivot is next in order
    need -= key_weight(pivot);
    ++lo;
    if (need <= 0.0) return lo;
  }
  std::sort(keys + lo, keys + hi, std::greater<>());
  for (int64_t i = lo; i < hi; ++i) {
    need -= key_weight(keys[i]);
    if (need <= 0.0) return i + 1;
  }
  return hi;
}

}  // namespace

Sampler::Sampler(SamplerParams p) : p_(p), rng_state_(p.seed) {
  splitmix64(rng_state_);  // decorrelate nearby seeds' first outputs
}

// Lowest id of the largest non-NaN logit; 0 when none is above -inf. Two passes of SSE2 (part of
// x86-64, so no dispatch and the same answer everywhere: max and == are exact): the maximum over
// 16 lanes, then the first element equal to it. A one-pass scalar loop with a data-dependent
// branch ran at ~1.3 ns per logit (203 us for Qwen's 151936) on the dev VM; this runs ~10x faster,
// and greedy decoding calls it once per token.
int32_t argmax(std::span<const float> logits) noexcept {
  const float* x = logits.data();
  const size_t n = logits.size();
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  // _mm_max_ps(v, m) returns m when v is NaN: NaN never becomes the maximum.
  __m128 m0 = _mm_set1_ps(kNegInf), m1 = m0, m2 = m0, m3 = m0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    m0 = _mm_max_ps(_mm_loadu_ps(x + i), m0);
    m1 = _mm_max_ps(_mm_loadu_ps(x + i + 4), m1);
    m2 = _mm_max_ps(_mm_loadu_ps(x + i + 8), m2);
    m3 = _mm_max_ps(_mm_loadu_ps(x + i + 12), m3);
  }
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, _mm_max_ps(_mm_max_ps(m0, m1), _mm_max_ps(m2, m3)));
  float best = std::max(std::max(lanes[0], lanes[1]), std::max(lanes[2], lanes[3]));
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  if (!(best > kNegInf)) return 0;  // empty, or every logit -inf or NaN
  const __m128 target = _mm_set1_ps(best);
  i = 0;
  for (; i + 4 <= n; i += 4) {
    const int hit = _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(x + i), target));
    if (hit != 0) return static_cast<int32_t>(i) + std::countr_zero(static_cast<unsigned>(hit));
  }
  for (; i < n; ++i) {
    if (x[i] == best) return static_cast<int32_t>(i);
  }
  return 0;  // unreachable: best is one of the logits
}

// Pipeline: repetition penalty -> (greedy) -> top-k -> softmax with temperature -> top-p -> min-p
// -> renormalise -> draw. All of it is scalar code with a fixed operation order (no ISA dispatch),
// so the same seed and logits give the same token on any x86-64 machine.
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

  // NaN would break the strict orderings below.
  for (float& l : logits) {
    if (std::isnan(l)) l = -std::numeric_limits<float>::infinity();
  }

  // Top-k: one pass keeping a heap of the k best so far (worst on top). "Better" is higher
  // logit, then lower id.
  const bool use_top_k = p_.top_k > 0 && p_.top_k < n;
  if (use_top_k) {
    const auto better = [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    };
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
    std::sort_heap(idx_.begin(), idx_.end(), better);  // best first
  }
  const int32_t best = use_top_k ? idx_[0] : argmax(logits);
  const double max_logit = logits[best];
  if (!std::isfinite(max_logit)) return best;  // all -inf, or +inf present: the maximum decides

  // Softmax with temperature over the candidates, in double: weight = exp((l - max) / T) (the
  // best has weight 1), p = weight / total.
  const double inv_temp = 1.0 / p_.temperature;
  weight_.resize(static_cast<size_t>(n));
  double total = 0.0;
  const auto set_weight = [&](int32_t id) {
    const float w =
        static_cast<float>(std::exp((static_cast<double>(logits[id]) - max_logit) * inv_temp));
    weight_[id] = w;
    total += w;
  };
  if (use_top_k) {
    for (int32_t id : idx_) set_weight(id);
  } else {
    for (int32_t id = 0; id < n; ++id) set_weight(id);
  }

  const bool use_top_p = p_.top_p<1.0f, use_min_p = p_.min_p> 0.0f;
  if (!use_top_p && !use_min_p) {  // plain temperature sampling: draw over the candidates
    double r = uniform01(rng_state_) * total;
    const int64_t n_cand = use_top_k ? static_cast<int64_t>(idx_.size()) : n;
    int32_t last_nonzero = best;
    for (int64_t i = 0; i < n_cand; ++i) {
      const int32_t id = use_top_k ? idx_[i] : static_cast<int32_t>(i);
      if (weight_[id] == 0.0f) continue;
      if ((r -= weight_[id]) < 0.0) return id;
      last_nonzero = id;
    }
    return last_nonzero;  // u * total rounded up to total
  }

  // Top-p keeps the best-first prefix reaching top_p * total; min-p keeps weights >= min_p
  // (p >= min_p * p_max). Both cut the same best-first order from the bottom, so the result is
  // the shorter prefix: filter by min-p (and drop zero weights, which can never be drawn) first,
  // then, if the survivors still hold more than the top-p target, cut them to the prefix.
  cand_.clear();
  const float min_weight = use_min_p ? p_.min_p : 0.0f;
  const auto consider = [&](int32_t id) {
    const float w = weight_[id];
    if (w > 0.0f && w >= min_weight) cand_.push_back(candidate_key(w, id));
  };
  if (use_top_k) {
    for (int32_t id : idx_) consider(id);
  } else {
    for (int32_t id = 0; id < n; ++id) consider(id);
  }
  if (cand_.empty()) cand_.push_back(candidate_key(1.0f, best));  // min_p > 1: the best stays
  int64_t n_cand = static_cast<int64_t>(cand_.size());
  if (use_top_p) {
    n_cand = select_by_mass(cand_.data(), n_cand, static_cast<double>(p_.top_p) * total);
  }

  // Renormalise over what is left and draw.
  double kept_total = 0.0;
  for (int64_t i = 0; i < n_cand; ++i) kept_total += key_weight(cand_[i]);
  double r = uniform01(rng_state_) * kept_total;
  for (int64_t i = 0; i < n_cand; ++i) {
    if ((r -= key_weight(cand_[i])) < 0.0) return key_id(cand_[i]);
  }
  return key_id(cand_[n_cand - 1]);  // u * total rounded up to total; every weight here is > 0
}

}  // namespace pacer::ops
