// Sampling: empirical frequencies against the intended distribution with a chi-square bound
// (critical value from Boost.Math at p = 0.999), the exact candidate sets of top-k / top-p / min-p,
// the repetition penalty by hand, tie-breaking, and seed determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/math/distributions/chi_squared.hpp>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "ops/sampling.h"

namespace pacer::ops {
namespace {

SamplerParams plain(float temperature, uint64_t seed = 1) {
  return {.temperature = temperature,
          .top_k = 0,
          .top_p = 1.0f,
          .min_p = 0.0f,
          .repeat_penalty = 1.0f,
          .repeat_last_n = 0,
          .seed = seed};
}

// Draws n tokens from fresh copies of `logits` (sample() modifies them in place).
std::vector<int> draw_counts(Sampler& s, const std::vector<float>& logits, int n) {
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = logits;
    ++counts[s.sample(l, {})];
  }
  return counts;
}

// Chi-square goodness of fit of counts to probabilities `p` over the tokens with p > 0; tokens
// with p == 0 must never be drawn.
void expect_fits(const std::vector<int>& counts, const std::vector<double>& p, int n,
                 const std::string& what) {
  double stat = 0;
  int cells = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) {
      EXPECT_EQ(counts[i], 0) << what << ": token " << i << " is outside the candidate set";
      continue;
    }
    const double expected = n * p[i];
    stat += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++cells;
  }
  ASSERT_GE(cells, 2) << what;
  const double critical =
      boost::math::quantile(boost::math::chi_squared(static_cast<double>(cells - 1)), 0.999);
  EXPECT_LT(stat, critical) << what << ": chi-square " << stat << " with " << cells - 1 << " df";
}

// softmax(logits / T) in double, restricted to `keep` (others 0) and renormalised.
std::vector<double> softmax_over(const std::vector<float>& logits, double temp,
                                 const std::set<int>& keep) {
  std::vector<double> p(logits.size(), 0.0);
  double mx = -INFINITY, sum = 0;
  for (int i : keep) mx = std::max<double>(mx, logits[i]);
  for (int i : keep) sum += (p[i] = std::exp((logits[i] - mx) / temp));
  for (double& x : p) x /= sum;
  return p;
}

std::set<int> all_ids(size_t n) {
  std::set<int> s;
  for (size_t i = 0; i < n; ++i) s.insert(static_cast<int>(i));
  return s;
}

// argmax against the definition (first strictly larger non-NaN logit, 0 if none beats -inf) on
// random vocabularies with ties, NaNs, infinities, and every length around the 16-wide loop.
TEST(Sampling, ArgmaxMatchesTheDefinitionOnRandomLogits) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> small(-3, 3), kind(0, 19);
  for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{4}, size_t{15}, size_t{16}, size_t{17},
                   size_t{33}, size_t{1000}, size_t{151936}}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> v(n);
      for (float& f : v) {
        const int k = kind(rng);
        f = k == 0 ? NAN : k == 1 ? -INFINITY : static_cast<float>(small(rng));  // many ties
      }
      if (trial == 1 && n > 0) v[n / 2] = INFINITY;
      if (trial == 2) std::fill(v.begin(), v.end(), NAN);
      if (trial == 3) std::fill(v.begin(), v.end(), -INFINITY);
      int32_t want = 0;
      float best = -INFINITY;
      for (size_t i = 0; i < n; ++i) {
        if (v[i] > best) best = v[i], want = static_cast<int32_t>(i);
      }
      ASSERT_EQ(argmax(v), want) << "n " << n << " trial " << trial;
    }
  }
}

TEST(Sampling, ArgmaxLowestIdWinsTiesAndGreedyIgnoresRng) {
  EXPECT_EQ(argmax(std::vector<float>{1.0f, 3.0f, 3.0f, -2.0f}), 1);
  EXPECT_EQ(argmax(std::vector<float>{-INFINITY, -INFINITY}), 0);
  EXPECT_EQ(argmax(std::vector<float>{NAN, 0.5f, 2.0f}), 2);
  for (uint64_t seed : {1u, 2u, 3u}) {
    Sampler s(plain(0.0f, seed));
    std::vector<float> l = {0.1f, 5.0f, 5.0f, 4.9f};
    EXPECT_EQ(s.sample(l, {}), 1);
  }
}

TEST(Sampling, TemperatureFrequenciesMatchSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f, 0.0f, 2.2f, -0.5f};
  const int n = 20000;
  for (float temp : {0.5f, 1.0f, 1.7f}) {
    Sampler s(plain(temp, 99));
    const auto counts = draw_counts(s, logits, n);
    expect_fits(counts, softmax_over(logits, temp, all_ids(logits.size())), n,
                "T=" + std::to_string(temp));
  }
}

TEST(Sampling, TopKKeepsTheKBestWithLowerIdWinningTies) {
  // Logits 3 and 4 tie at the k boundary: token 3 (lower id) is in, token 4 is out.
  const std::vector<float> logits = {0.0f, 2.0f, 1.5f, 1.0f, 1.0f, 2.5f, -3.0f};
  SamplerParams p = plain(1.0f, 5);
  p.top_k = 4;
  Sampler s(p);
  const int n = 20000;
  const auto counts = draw_counts(s, logits, n);
  expect_fits(counts, softmax_over(logits, 1.0, {1, 2, 3, 5}), n, "top_k=4");
}

TEST(Sampling, TopPKeepsExactlyTheSmallestSetReachingP) {
  // p = [0.5, 0.3, 0.15, 0.05]: 0.5 + 0.3 < 0.9 <= 0.5 + 0.3 + 0.15, so {0, 1, 2}.
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f),
                                     std::log(0.05f)};
  SamplerParams p = plain(1.0f, 11);
  p.top_p = 0.9f;
  Sampler s(p);
  const int n = 20000;
  expect_fits(draw_counts(s, logits, n), softmax_over(logits, 1.0, {0, 1, 2}), n, "top_p=0.9");
  // 0.5 alone reaches 0.45: only token 0 may come out.
  p.top_p = 0.45f;
  Sampler s2(p);
  const auto counts = draw_counts(s2, logits, 200);
  EXPECT_EQ(counts[0], 200);
}

TEST(Sampling, TopPOverALargeFlatVocabularyMatchesAFullSort) {
  // A nucleus of thousands of tokens: the sampler's growing partial sorts must find the same set
  // as a full sort here.
  const int vocab = 30000;
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 0.5f);
  std::vector<float> logits(vocab);
  for (float& x : logits) x = d(rng);
  std::vector<int> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  const double mx = logits[order[0]];
  double total = 0;
  for (float l : logits) total += std::exp(l - mx);
  std::set<int> nucleus;
  double cum = 0;
  for (int id : order) {
    nucleus.insert(id);
    cum += std::exp(logits[id] - mx) / total;
    if (cum >= 0.5) break;
  }
  ASSERT_GT(nucleus.size(), 2000u);  // forces several partial-sort rounds
  SamplerParams p = plain(1.0f, 17);
  p.top_p = 0.5f;
  Sampler s(p);
  std::vector<int> rank(vocab);
  for (int r = 0; r < vocab; ++r) rank[order[r]] = r;
  int from_second_half = 0;  // a set cut too short would never reach these ranks
  for (int i = 0; i < 200; ++i) {
    std::vector<float> l = logits;
    const int tok = s.sample(l, {});
    ASSERT_TRUE(nucleus.count(tok)) << "token " << tok << " outside the nucleus";
    if (rank[tok] >= static_cast<int>(nucleus.size()) / 2) ++from_second_half;
  }
  EXPECT_GT(from_second_half, 35);  // its members hold ~40% of the nucleus mass
}

TEST(Sampling, MinPDropsTokensBelowFractionOfTheBest) {
  // p = [0.5, 0.3, 0.12, 0.08], min_p 0.2 -> threshold 0.1: token 3 goes.
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.12f),
                                     std::log(0.08f)};
  SamplerParams p = plain(1.0f, 23);
  p.min_p = 0.2f;
  Sampler s(p);
  const int n = 20000;
  expect_fits(draw_counts(s, logits, n), softmax_over(logits, 1.0, {0, 1, 2}), n, "min_p=0.2");
}

TEST(Sampling, PipelineOrderTopKThenTemperatureThenTopPThenMinP) {
  // top_k 5 keeps ids {0..4}; at T = 2 their probabilities are softmax(l / 2); top_p 0.8 then
  // cuts the sorted prefix; min_p 0.45 removes what falls under 0.45 * p_max of the survivors.
  const std::vector<float> logits = {4.0f, 3.0f, 2.6f, 2.0f, 1.0f, 0.5f, -1.0f};
  const double temp = 2.0;
  auto p = softmax_over(logits, temp, {0, 1, 2, 3, 4});
  std::set<int> keep;
  double cum = 0;
  for (int id = 0; id < 5; ++id) {  // ids already in descending logit order
    keep.insert(id);
    if ((cum += p[id]) >= 0.8) break;
  }
  std::set<int> final_set;
  for (int id : keep) {
    if (p[id] >= 0.45 * p[0]) final_set.insert(id);
  }
  ASSERT_EQ(keep, (std::set<int>{0, 1, 2, 3}));
  ASSERT_EQ(final_set, (std::set<int>{0, 1, 2}));
  SamplerParams sp{.temperature = 2.0f,
                   .top_k = 5,
                   .top_p = 0.8f,
                   .min_p = 0.45f,
                   .repeat_penalty = 1.0f,
                   .repeat_last_n = 0,
                   .seed = 31};
  Sampler s(sp);
  const int n = 20000;
  expect_fits(draw_counts(s, logits, n), softmax_over(logits, temp, final_set), n, "pipeline");
}

TEST(Sampling, RepetitionPenaltyByHand) {
  // Window = last 3 tokens {1, 4, 2} (token 0 is older). Distinct tokens are penalised once.
  SamplerParams p = plain(0.0f);
  p.repeat_penalty = 1.5f;
  p.repeat_last_n = 3;
  Sampler s(p);
  std::vector<float> logits = {2.0f, -1.0f, 0.6f, 3.0f, 0.0f};
  const std::vector<int32_t> history = {0, 2, 1, 4, 2};
  EXPECT_EQ(s.sample(logits, history), 3);
  EXPECT_EQ(logits[0], 2.0f);         // outside the window
  EXPECT_EQ(logits[1], -1.5f);        // negative: multiplied
  EXPECT_EQ(logits[2], 0.6f / 1.5f);  // positive: divided, once though it occurs twice
  EXPECT_EQ(logits[3], 3.0f);         // not in history
  EXPECT_EQ(logits[4], 0.0f);         // zero stays zero
  // The penalty comes before selection: it can change the greedy choice.
  std::vector<float> l2 = {3.0f, 2.9f};
  EXPECT_EQ(s.sample(l2, std::vector<int32_t>{0}), 1);
  // Out-of-vocabulary history ids are ignored, not a crash.
  std::vector<float> l3 = {1.0f, 2.0f};
  EXPECT_EQ(s.sample(l3, std::vector<int32_t>{7, -3}), 1);
}

TEST(Sampling, PenaltyCanPushATokenOutOfTopK) {
  SamplerParams p = plain(1.0f, 41);
  p.top_k = 2;
  p.repeat_penalty = 4.0f;
  p.repeat_last_n = 8;
  Sampler s(p);
  const std::vector<float> logits = {3.0f, 2.0f, 1.0f};  // token 0 penalised to 0.75
  for (int i = 0; i < 200; ++i) {
    std::vector<float> l = logits;
    EXPECT_NE(s.sample(l, std::vector<int32_t>{0}), 0);
  }
}

TEST(Sampling, TiesAreBrokenByLowerIdDeterministically) {
  const std::vector<float> flat(10, 1.0f);
  SamplerParams p = plain(1.0f, 7);
  p.top_k = 1;
  Sampler s(p);
  for (int i = 0; i < 50; ++i) {
    std::vector<float> l = flat;
    EXPECT_EQ(s.sample(l, {}), 0);
  }
  // top_p 0.25 over 10 equal tokens: the first three by id (0.3 >= 0.25 > 0.2).
  p = plain(1.0f, 8);
  p.top_p = 0.25f;
  Sampler s2(p);
  const int n = 9000;
  std::vector<double> want(10, 0.0);
  want[0] = want[1] = want[2] = 1.0 / 3;
  expect_fits(draw_counts(s2, flat, n), want, n, "tied top_p");
}

TEST(Sampling, SameSeedSameSequenceDifferentSeedDifferentSequence) {
  std::vector<float> logits(1000);
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (float& x : logits) x = d(rng);
  auto sequence = [&](uint64_t seed) {
    SamplerParams p{.temperature = 1.0f,
                    .top_k = 0,
                    .top_p = 0.95f,
                    .min_p = 0.0f,
                    .repeat_penalty = 1.1f,
                    .repeat_last_n = 16,
                    .seed = seed};
    Sampler s(p);
    std::vector<int32_t> hist;
    for (int i = 0; i < 64; ++i) {
      std::vector<float> l = logits;
      hist.push_back(s.sample(l, hist));
    }
    return hist;
  };
  EXPECT_EQ(sequence(42), sequence(42));
  EXPECT_NE(sequence(42), sequence(43));
  EXPECT_NE(sequence(0), sequence(1));
}

TEST(Sampling, DegenerateInputs) {
  Sampler s(plain(1.0f));
  std::vector<float> empty;
  EXPECT_THROW(s.sample(empty, {}), std::invalid_argument);
  std::vector<float> one = {0.3f};
  EXPECT_EQ(s.sample(one, {}), 0);
  std::vector<float> neg_inf = {-INFINITY, -INFINITY, -INFINITY};
  EXPECT_EQ(s.sample(neg_inf, {}), 0);
  std::vector<float> with_nan = {NAN, 1.0f, NAN};
  EXPECT_EQ(s.sample(with_nan, {}), 1);
  std::vector<float> with_inf = {1.0f, INFINITY, 2.0f};
  EXPECT_EQ(s.sample(with_inf, {}), 1);
}

}  // namespace
}  // namespace pacer::ops
