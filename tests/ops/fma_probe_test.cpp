// The FMA probe: every chain computes exactly the recurrence it claims (so no multiply-add can be
// elided, and the flops it is credited with are done), the probe's rate lies within what one core
// can issue at the clock this test measures itself, and argument checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "ops/fma_probe.h"
#include "ops/isa.h"

namespace pacer::ops {
namespace {

// One lane of a chain: k's accumulator after `iterations` fused multiply-adds (std::fma rounds
// once, as vfmadd does), from the chain's start 1 + 0.001 k.
float lane_after(int k, int64_t iterations) {
  float acc = 1.0f + 0.001f * static_cast<float>(k);
  for (int64_t i = 0; i < iterations; ++i) acc = std::fma(acc, 0.999f, 0.001f);
  return acc;
}

// The accumulators added in order 0..K-1, as both chains reduce them.
float accumulators_sum(int accumulators, int64_t iterations) {
  float s = lane_after(0, iterations);
  for (int k = 1; k < accumulators; ++k) s += lane_after(k, iterations);
  return s;
}

TEST(FmaProbe, EveryChainComputesItsRecurrence) {
  const CpuFeatures cpu = detect_cpu_features();
  if (!cpu.avx2) GTEST_SKIP() << "no AVX2 + FMA: only the SSE multiply-add loop runs here";
  for (int64_t iterations : {int64_t{1}, int64_t{7}, int64_t{1000}}) {
    for (int k : {8, 12}) {
      // Eight equal lanes summed one after another, as the AVX2 chain's epilogue does.
      const float per_lane = accumulators_sum(k, iterations);
      float want = 0;
      for (int lane = 0; lane < 8; ++lane) want += per_lane;
      EXPECT_EQ(fma_chains_avx2(iterations, k), want) << k << " accumulators, " << iterations;
    }
    if (!cpu.avx512) continue;
    for (int k : {8, 12, 16, 24}) {
      // 16 equal lanes summed in a tree: exactly 16 x one lane (each step doubles exactly).
      EXPECT_EQ(fma_chains_avx512(iterations, k), 16.0f * accumulators_sum(k, iterations))
          << k << " accumulators, " << iterations;
    }
  }
}

// The core's clock measured here, independently of the probe: a chain of dependent integer adds
// retires one a cycle on every x86 core, so adds per second are cycles per second.
double measured_clock_ghz() {
  constexpr int64_t kIterations = 20'000'000;  // x 8 adds
  double best_s = 1e300;
  for (int pass = 0; pass < 5; ++pass) {
    uint64_t x = 0;
    int64_t n = kIterations;
    const auto t0 = std::chrono::steady_clock::now();
    asm volatile(
        "1:\n\t"
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        "dec %1\n\tjnz 1b"
        : "+r"(x), "+r"(n));
    best_s = std::min(best_s,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    EXPECT_EQ(x, static_cast<uint64_t>(8 * kIterations));
  }
  return 8.0 * kIterations / best_s / 1e9;
}

// No x86 core issues more than two vector multiply-adds a cycle (two FMA pipes; Zen 4 splits a
// 512-bit one in two halves), and the probe's best loop, with 8+ independent chains, issues at
// least one every two cycles on any core with FMA units (the SSE loop: a multiply and an add).
TEST(FmaProbe, RateIsWithinWhatTheCoreIssuesAtItsClock) {
  // The clock before and after the probe: on a shared host a slow spell (steal) during one of
  // them once read 2.41 GHz beside a probe that ran at ~2.8. The bounds take the clock that
  // favours the probe, 15 % more for the clock moving between the measurements.
  const double ghz_before = measured_clock_ghz();
  const Isa isa = detect_isa();
  const int lanes = isa == Isa::Avx512 ? 16 : isa == Isa::Avx2 ? 8 : 4;
  const FmaProbe p = probe_fma_rate({.threads = 1, .cpus = {}, .reps = 5});
  const double ghz_after = measured_clock_ghz();
  const double ghz_hi = std::max(ghz_before, ghz_after), ghz_lo = std::min(ghz_before, ghz_after);
  const double peak = 2.0 * 2 * lanes * ghz_hi;  // 2 flops per lane and multiply-add
  EXPECT_LE(p.gflops, 1.15 * peak) << p.method << " at " << ghz_hi << " GHz";
  EXPECT_GE(p.gflops, 0.5 * 2 * lanes * ghz_lo / 1.15) << p.method << " at " << ghz_lo << " GHz";
  // Every loop reported, the best one is the figure.
  ASSERT_FALSE(p.trials.empty());
  double best = 0;
  for (const FmaTrial& t : p.trials) best = std::max(best, t.gflops);
  EXPECT_EQ(p.gflops, best);
  EXPECT_NE(p.method.find(p.variant), std::string::npos) << p.method;
  EXPECT_NE(p.method.find("1 thread, unpinned"), std::string::npos) << p.method;
  EXPECT_EQ(p.trials.size(), isa == Isa::Avx512 ? 6u : 2u);
  // Two threads: their flops add up, so never above twice one core's issue limit.
  const FmaProbe two = probe_fma_rate({.threads = 2, .cpus = {0}, .reps = 2});
  EXPECT_GT(two.gflops, 0.0);
  EXPECT_LE(two.gflops, 2 * 1.15 * peak) << two.method;
  EXPECT_NE(two.method.find("2 threads, pinned"), std::string::npos) << two.method;
}

TEST(FmaProbe, RejectsBadArguments) {
  EXPECT_THROW(probe_fma_rate({.threads = 0}), std::invalid_argument);
  EXPECT_THROW(probe_fma_rate({.threads = 1, .cpus = {}, .reps = 0}), std::invalid_argument);
  EXPECT_THROW(probe_fma_rate({.threads = 1, .cpus = {}, .reps = 1, .instructions = 10}),
               std::invalid_argument);
}

}  // namespace
}  // namespace pacer::ops
