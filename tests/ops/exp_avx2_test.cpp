// The softmax exp of the AVX2 tier (softmax_math_avx2.h exp_nonpositive_ps) gives exp_ps's bits on
// every argument a softmax passes it (x - max <= 0, -inf, NaN) and up to 88.3: it only drops the
// upper clamp and builds 2^n in one step. Only these helpers are compiled for AVX2 (the pragmas),
// and they run only where the CPU has it.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "ops/isa.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#include "ops/softmax_math_avx2.h"
namespace {
// Both functions over 8 arguments: their results' bit patterns.
void both_exps(const float* x, uint32_t* general, uint32_t* softmax) {
  const __m256 v = _mm256_loadu_ps(x);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(general),
                      _mm256_castps_si256(pacer::ops::avx2::exp_ps(v)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(softmax),
                      _mm256_castps_si256(pacer::ops::avx2::exp_nonpositive_ps(v)));
}
// N vectors (8N arguments) through exp_nonpositive_ps_n<N> and, one at a time, exp_nonpositive_ps.
template <int N>
void interleaved_and_single(const float* x, uint32_t* interleaved, uint32_t* single) {
  __m256 v[N];
  for (int i = 0; i < N; ++i) v[i] = _mm256_loadu_ps(x + 8 * i);
  pacer::ops::avx2::exp_nonpositive_ps_n<N>(v);
  for (int i = 0; i < N; ++i) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(interleaved + 8 * i), _mm256_castps_si256(v[i]));
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(single + 8 * i),
        _mm256_castps_si256(pacer::ops::avx2::exp_nonpositive_ps(_mm256_loadu_ps(x + 8 * i))));
  }
}
}  // namespace
#pragma GCC pop_options

namespace pacer::ops {
namespace {

TEST(ExpAvx2, TheSoftmaxExpIsTheGeneralOnesBits) {
  if (!detect_cpu_features().avx2) GTEST_SKIP() << "no AVX2 here";
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(),
                           -87.3f,
                           std::nextafter(-87.3f, 0.0f),
                           std::nextafter(-87.3f, -100.0f),
                           -87.33654f,  // n = -126 after the flush: the smallest scaling
                           -1e-30f,
                           -std::numeric_limits<float>::denorm_min(),
                           1.0f,
                           88.3f};  // n = 127: the largest its one scaling holds
  // Every float from -90 to 0 in steps of one ulp at [-1, 0] scale is too many; random bit
  // patterns in [-90, 0] and an even grid cover the reduction's every n.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-90.0f, 0.0f);
  for (int i = 0; i < 1 << 20; ++i) xs.push_back(uniform(rng));
  for (float x = -90.0f; x <= 0.0f; x += 1.0f / 64) xs.push_back(x);
  while (xs.size() % 8 != 0) xs.push_back(0.0f);
  uint32_t general[8], softmax[8];
  int mismatches = 0;
  for (size_t i = 0; i < xs.size(); i += 8) {
    both_exps(xs.data() + i, general, softmax);
    for (int l = 0; l < 8; ++l) {
      if (general[l] != softmax[l] && mismatches++ < 5) {
        ADD_FAILURE() << "x = " << xs[i + l] << ": exp_ps " << std::bit_cast<float>(general[l])
                      << ", exp_nonpositive_ps " << std::bit_cast<float>(softmax[l]);
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// The softmax's interleaved exp (N vectors step by step, attention_simd.h) gives each lane the bits
// of exp_nonpositive_ps: a mixed-up index between the N chains would give one vector another's
// reduction or scaling.
TEST(ExpAvx2, TheInterleavedSoftmaxExpIsTheOneAtATimeBits) {
  if (!detect_cpu_features().avx2) GTEST_SKIP() << "no AVX2 here";
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-95.0f, 0.0f);
  std::vector<float> xs(8 * 13 * 4096);  // groups of 4 + 3 + 1 + 5 vectors
  for (float& x : xs) x = uniform(rng);
  xs[5] = -std::numeric_limits<float>::infinity();  // a masked score
  xs[40] = std::numeric_limits<float>::quiet_NaN();
  xs[77] = 0.0f;
  std::vector<uint32_t> interleaved(xs.size()), single(xs.size());
  for (size_t i = 0; i < xs.size(); i += 8 * 13) {
    interleaved_and_single<4>(xs.data() + i, interleaved.data() + i, single.data() + i);
    interleaved_and_single<3>(xs.data() + i + 32, interleaved.data() + i + 32,
                              single.data() + i + 32);
    interleaved_and_single<1>(xs.data() + i + 56, interleaved.data() + i + 56,
                              single.data() + i + 56);
    interleaved_and_single<5>(xs.data() + i + 64, interleaved.data() + i + 64,
                              single.data() + i + 64);
  }
  int mismatches = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (interleaved[i] != single[i] && mismatches++ < 5) {
      ADD_FAILURE() << "x = " << xs[i] << " (element " << i << "): interleaved "
                    << std::bit_cast<float>(interleaved[i]) << ", one at a time "
                    << std::bit_cast<float>(single[i]);
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(single[5], 0u);  // e^-inf
  EXPECT_TRUE(std::isnan(std::bit_cast<float>(interleaved[40])));
  EXPECT_EQ(std::bit_cast<float>(interleaved[77]), 1.0f);
}

}  // namespace
}  // namespace pacer::ops
