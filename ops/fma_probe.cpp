// The FMA probe: threads run the multiply-add chains between two barriers; a pass's time is the
// slowest thread's, as for an attention whose heads are split the same way. Every variant runs
// on the same threads; the best pass of the best variant wins.
#include "ops/fma_probe.h"

#include <emmintrin.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/isa.h"
#include "ops/probe_threads.h"

namespace pacer::ops {
namespace {

struct Variant {
  Isa isa;
  int accumulators;
  int lanes() const { return isa == Isa::Avx512 ? 16 : isa == Isa::Avx2 ? 8 : 4; }
  std::string name() const {
    const char* w = isa == Isa::Avx512 ? "avx512 fma"
                    : isa == Isa::Avx2 ? "avx2 fma"
                                       : "sse mul+add";
    return std::string(w) + " x" + std::to_string(accumulators) + " accumulators";
  }
};

// Baseline x86-64 has no FMA: a multiply then an add per lane (2 flops, as one multiply-add). Not
// instrumented in sanitizer builds (see fma_probe_avx2.cpp).
[[gnu::no_sanitize_address]] float mul_add_chains_sse(int64_t iterations, int accumulators) {
  constexpr int kMax = 12;
  const __m128 m = _mm_set1_ps(0.999f), c = _mm_set1_ps(0.001f);
  __m128 acc[kMax];
  for (int k = 0; k < kMax; ++k) acc[k] = _mm_set1_ps(1.0f + 0.001f * static_cast<float>(k));
  if (accumulators <= 8) {
    for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) acc[k] = _mm_add_ps(_mm_mul_ps(acc[k], m), c);
    }
  } else {
    for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
      for (int k = 0; k < kMax; ++k) acc[k] = _mm_add_ps(_mm_mul_ps(acc[k], m), c);
    }
  }
  for (int k = 1; k < kMax; ++k) acc[0] = _mm_add_ps(acc[0], acc[k]);
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, acc[0]);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

float run_variant(const Variant& v, int64_t iterations) {
  switch (v.isa) {
    case Isa::Avx512:
      return fma_chains_avx512(iterations, v.accumulators);
    case Isa::Avx2:
      return fma_chains_avx2(iterations, v.accumulators);
    case Isa::Scalar:
      break;
  }
  return mul_add_chains_sse(iterations, v.accumulators);
}

// Enough accumulators to cover the latency of the FMA units (4 cycles x 2 units on Zen 4 and
// Golden Cove: 8), and more in case a core keeps more in flight; AVX2 stops at 12 (16 registers
// also hold m and c), AVX-512 has 32.
std::vector<Variant> variants() {
  const Isa best = detect_isa();
  std::vector<Variant> v;
  if (best == Isa::Avx512) {
    for (int k : {8, 12, 16, 24}) v.push_back({Isa::Avx512, k});
  }
  if (best != Isa::Scalar) {
    for (int k : {8, 12}) v.push_back({Isa::Avx2, k});
  } else {
    for (int k : {8, 12}) v.push_back({Isa::Scalar, k});
  }
  return v;
}

}  // namespace

FmaProbe probe_fma_rate(const FmaProbeOptions& opts) {
  const int threads = opts.threads;
  if (threads < 1 || opts.reps < 1 || opts.instructions < 1024) {
    throw std::invalid_argument(
        "probe_fma_rate: need threads >= 1, reps >= 1 and instructions >= 1024 (got threads=" +
        std::to_string(threads) + ", reps=" + std::to_string(opts.reps) +
        ", instructions=" + std::to_string(opts.instructions) + ")");
  }
  const std::vector<Variant> vs = variants();
  const auto iterations = [&](const Variant& v) {
    return std::max<int64_t>(1, opts.instructions / v.accumulators);
  };
  std::vector<double> best_seconds(vs.size(), 1e300);
  const size_t per_variant = static_cast<size_t>(opts.reps) + 1;  // a warm-up pass first
  std::vector<float> sink(static_cast<size_t>(threads));
  run_timed_passes(
      threads, opts.cpus, [](int) {},
      [&](int t, size_t pass) {
        const Variant& v = vs[pass / per_variant];
        sink[static_cast<size_t>(t)] += run_variant(v, iterations(v));
      },
      [&](size_t pass, double seconds) noexcept {
        if (pass % per_variant != 0) {
          double& best = best_seconds[pass / per_variant];
          best = std::min(best, seconds);
        }
        return pass + 1 < vs.size() * per_variant;
      });

  FmaProbe probe;
  size_t best = 0;
  for (size_t i = 0; i < vs.size(); ++i) {
    const double flops =
        2.0 * vs[i].lanes() * static_cast<double>(iterations(vs[i])) * vs[i].accumulators * threads;
    probe.trials.push_back({vs[i].name(), flops / best_seconds[i] / 1e9});
    if (probe.trials[i].gflops > probe.trials[best].gflops) best = i;
  }
  probe.gflops = probe.trials[best].gflops;
  probe.variant = probe.trials[best].variant;
  probe.method = "best of " + std::to_string(vs.size()) + " multiply-add loops: " + probe.variant +
                 " per thread, " + std::to_string(threads) + " thread" + (threads > 1 ? "s" : "") +
                 (opts.cpus.empty() ? ", unpinned" : ", pinned") + ", best of " +
                 std::to_string(opts.reps) + " passes";
  return probe;
}

}  // namespace pacer::ops
