// The read-bandwidth probe: every read loop sums exactly what it reads (so no load can be elided
// or skipped), the search runs every variant and reports the best, and argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>

#include "ops/bandwidth.h"
#include "ops/isa.h"

namespace pacer::ops {
namespace {

// Every variant (stream count, burst, prefetch, page touch) of every read loop this CPU runs
// returns the plain sum of the buffer's 64-bit words, including a length that does not split evenly
// into the streams or their bursts.
TEST(Bandwidth, EveryReadLoopSumsEveryWord) {
  const size_t bytes = (1 << 20) + 64 * 7;  // leaves a remainder after 16 streams
  std::unique_ptr<uint64_t, decltype(&std::free)> buf(
      static_cast<uint64_t*>(std::aligned_alloc(64, bytes)), &std::free);
  std::mt19937_64 rng(3);
  uint64_t want = 0;
  for (size_t i = 0; i < bytes / 8; ++i) want += (buf.get()[i] = rng());
  const auto* p = reinterpret_cast<const std::byte*>(buf.get());
  const CpuFeatures cpu = detect_cpu_features();
  for (int streams : {1, 2, 4, 8, 16}) {
    for (size_t burst : {size_t{1}, size_t{3}, size_t{16}}) {
      for (size_t prefetch : {size_t{0}, size_t{1024}}) {
        for (size_t touch : {size_t{0}, size_t{8192}}) {
          if (cpu.avx2) {
            EXPECT_EQ(sum_words_avx2(p, bytes, streams, burst, prefetch, touch), want)
                << streams << " streams, burst " << burst << ", touch " << touch;
          }
          if (cpu.avx512) {
            EXPECT_EQ(sum_words_avx512(p, bytes, streams, burst, prefetch, touch), want)
                << streams << " streams, burst " << burst << ", touch " << touch;
          }
        }
      }
    }
  }
  if (!cpu.avx2) GTEST_SKIP() << "no AVX2: only the scalar loop runs here";
}

TEST(Bandwidth, ProbeTriesEveryVariantAndReportsTheBest) {
  for (int threads : {1, 2}) {
    const BandwidthProbe p =
        probe_read_bandwidth({.threads = threads, .bytes = 8u << 20, .reps = 2});
    ASSERT_FALSE(p.trials.empty());
    double best = 0;
    for (const BandwidthTrial& t : p.trials) {
      EXPECT_TRUE(std::isfinite(t.gbs)) << t.variant;
      EXPECT_GT(t.gbs, 0.1) << t.variant;      // even a loaded VM streams 8 MiB faster than this
      EXPECT_LT(t.gbs, 10000.0) << t.variant;  // 10 TB/s: no CPU reads this fast
      best = std::max(best, t.gbs);
    }
    EXPECT_EQ(p.gbs, best);
    EXPECT_NE(p.method.find("best of " + std::to_string(p.trials.size())), std::string::npos)
        << p.method;
    if (detect_isa() == Isa::Avx512) {
      // First stage: 5 stream counts x 2 prefetch distances of 512-bit loads, 3 stream counts in
      // bursts of 16 lines, 3 stream counts prefetching 1024 B with the 8 KiB page touch, 2 of
      // 256-bit loads, 3 of 256-bit loads in bursts (2 and 4 streams of 16 lines, 2 of 32) and 2
      // of 512-bit loads in bursts of 32 lines. Second stage: 4 more prefetch distances at the
      // stream count (and page touch) of the first stage's best prefetching loop.
      constexpr size_t kFirst = 23;
      ASSERT_EQ(p.trials.size(), kFirst + 4);
      EXPECT_EQ(p.trials[13].variant, "avx512 x1 stream, prefetch 1024 B, page touch 8192 B");
      EXPECT_EQ(p.trials[18].variant, "avx2 x2 streams in bursts of 16 lines");
      EXPECT_EQ(p.trials[20].variant, "avx2 x2 streams in bursts of 32 lines");
      EXPECT_EQ(p.trials[22].variant, "avx512 x4 streams in bursts of 32 lines");
      size_t around = kFirst;
      for (size_t i = 0; i < kFirst; ++i) {
        const bool prefetching = p.trials[i].variant.find("prefetch") != std::string::npos;
        if (prefetching && (around == kFirst || p.trials[i].gbs > p.trials[around].gbs)) around = i;
      }
      ASSERT_LT(around, kFirst);
      // "avx512 x8 streams, prefetch 1024 B[, page touch 8192 B]" with the other distances.
      const std::string& a = p.trials[around].variant;
      const size_t at = a.find("1024 B");
      ASSERT_NE(at, std::string::npos) << a;
      const char* distances[] = {"256 B", "512 B", "2048 B", "4096 B"};
      for (size_t k = 0; k < 4; ++k) {
        EXPECT_EQ(p.trials[kFirst + k].variant, std::string(a).replace(at, 6, distances[k]));
      }
    }
    if (detect_isa() == Isa::Avx2) {
      // First stage: 5 stream counts x 2 prefetch distances, 3 in bursts of 16 lines, 3 with the
      // page touch and 2 in bursts of 32 lines; then the 4 refined prefetch distances.
      ASSERT_EQ(p.trials.size(), 18u + 4u);
      EXPECT_EQ(p.trials[16].variant, "avx2 x2 streams in bursts of 32 lines");
      EXPECT_EQ(p.trials[17].variant, "avx2 x4 streams in bursts of 32 lines");
    }
    // Without the search: one variant, the same figure family.
    EXPECT_EQ(
        probe_read_bandwidth({.threads = threads, .bytes = 8u << 20, .reps = 1, .search = false})
            .trials.size(),
        1u);
  }
}

TEST(Bandwidth, ANamedVariantRunsOnlyThatLoop) {
  const BandwidthProbe found = probe_read_bandwidth({.threads = 1, .bytes = 8u << 20, .reps = 1});
  ASSERT_FALSE(found.variant.empty());
  // The best trial's name is the probe's variant.
  bool named = false;
  for (const BandwidthTrial& t : found.trials)
    named = named || (t.variant == found.variant && t.gbs == found.gbs);
  EXPECT_TRUE(named) << found.variant;
  // Every variant of the search can be measured again alone, under its own name.
  for (const BandwidthTrial& t : found.trials) {
    const BandwidthProbe again =
        probe_read_bandwidth({.threads = 1, .bytes = 8u << 20, .reps = 1, .variant = t.variant});
    ASSERT_EQ(again.trials.size(), 1u) << t.variant;
    EXPECT_EQ(again.trials[0].variant, t.variant);
    EXPECT_EQ(again.variant, t.variant);
    EXPECT_GT(again.gbs, 0.1) << t.variant;
    EXPECT_EQ(again.method.find("best of"), std::string::npos) << again.method;
    EXPECT_EQ(again.method.rfind(t.variant, 0), 0u) << again.method;
  }
  EXPECT_THROW(
      probe_read_bandwidth({.threads = 1, .bytes = 8u << 20, .variant = "avx9 x3 streams"}),
      std::invalid_argument);
}

TEST(Bandwidth, RejectsBadArguments) {
  EXPECT_THROW(measure_read_bandwidth_gbs(0, 1 << 20, 1), std::invalid_argument);
  EXPECT_THROW(measure_read_bandwidth_gbs(1, 1 << 20, 0), std::invalid_argument);
  EXPECT_THROW(measure_read_bandwidth_gbs(4, 128, 1), std::invalid_argument);
  EXPECT_THROW(probe_read_bandwidth({.bytes = 1 << 20, .reads_per_pass = 0}),
               std::invalid_argument);
  EXPECT_THROW(measure_cache_reach({.min_bytes = 8 << 20, .max_bytes = 4 << 20}),
               std::invalid_argument);
  EXPECT_THROW(measure_cache_reach({.min_bytes = 0}), std::invalid_argument);
}

// The cache-reach rule on hand values: the largest size re-read at >= factor x DRAM, a low
// reading below it (a disturbed pass) not cutting it short, none at all giving 0.
TEST(CacheReach, TheLargestSizeReadAboveTheFactorOfDram) {
  constexpr size_t M = size_t{1} << 20;
  // The dev VM's 2-thread figures (Turin-like guest): DRAM 80 GB/s, 1.25x = 100.
  EXPECT_EQ(cache_reach_of({{4 * M, 216.5},
                            {8 * M, 201.6},
                            {16 * M, 197.3},
                            {32 * M, 139.4},
                            {64 * M, 89.4},
                            {128 * M, 71.1}},
                           80.0, 1.25),
            32 * M);
  EXPECT_EQ(cache_reach_of({{4 * M, 60.0}, {8 * M, 150.0}, {16 * M, 90.0}}, 80.0, 1.25), 8 * M);
  EXPECT_EQ(cache_reach_of({{4 * M, 99.9}, {8 * M, 80.0}}, 80.0, 1.25), 0u);
  EXPECT_EQ(cache_reach_of({{4 * M, 100.0}}, 80.0, 1.25), 4 * M);  // the bound itself counts
  EXPECT_EQ(cache_reach_of({}, 80.0, 1.25), 0u);
}

// The measurement's own bookkeeping, where timing cannot decide: against a DRAM figure of 0 every
// size counts (the reach is the largest tried, flagged as such); against an unreachable one none
// does. Every size from min_bytes doubling to max_bytes is measured either way, with the loop the
// search at min_bytes found.
TEST(CacheReach, MeasuresEverySizeAndReportsTheLoop) {
  constexpr size_t M = size_t{1} << 20;
  const CacheReach all =
      measure_cache_reach({.threads = 2, .dram_gbs = 0, .min_bytes = 2 * M, .max_bytes = 8 * M});
  ASSERT_EQ(all.sizes.size(), 3u);
  EXPECT_EQ(all.sizes[0].variant, "2 MiB");
  EXPECT_EQ(all.sizes[2].variant, "8 MiB");
  for (const BandwidthTrial& t : all.sizes) EXPECT_GT(t.gbs, 0.0) << t.variant;
  EXPECT_EQ(all.bytes, 8 * M);
  EXPECT_TRUE(all.at_max);
  EXPECT_FALSE(all.variant.empty());
  const CacheReach none =
      measure_cache_reach({.dram_gbs = 1e12, .min_bytes = 4 * M, .max_bytes = 4 * M});
  ASSERT_EQ(none.sizes.size(), 1u);
  EXPECT_EQ(none.bytes, 0u);
  EXPECT_FALSE(none.at_max);
}

// Several reads of the slice per timed pass count as that many bytes: a named loop re-reading a
// cached 1 MiB buffer 8 times per pass reports a rate, not 8 times one pass's.
TEST(Bandwidth, ReadsPerPassCountEveryRead) {
  const BandwidthProbe once = probe_read_bandwidth({.bytes = 1 << 20, .reps = 5, .search = false});
  const BandwidthProbe eight =
      probe_read_bandwidth({.bytes = 1 << 20, .reps = 5, .search = false, .reads_per_pass = 8});
  ASSERT_GT(once.gbs, 0.0);
  // The same loop over the same cached buffer: within a factor of 3 either way (timer and
  // barrier overhead weigh more on the short passes), where a miscount would read 8x.
  EXPECT_GT(eight.gbs, once.gbs / 3) << once.gbs << " vs " << eight.gbs;
  EXPECT_LT(eight.gbs, once.gbs * 3) << once.gbs << " vs " << eight.gbs;
}

}  // namespace
}  // namespace pacer::ops
