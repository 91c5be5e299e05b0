// LogHistogram: bucket layout and the percentile error bound against exact nearest-rank values.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/histogram.h"

namespace pacer::analysis {
namespace {

// Exact nearest-rank percentile: the value of rank ceil(q n) in sorted order.
double nearest_rank(std::vector<int64_t> v, double q) {
  std::sort(v.begin(), v.end());
  const auto rank = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(q * v.size())));
  return static_cast<double>(v[rank - 1]);
}

TEST(LogHistogram, BucketsTileTheValueRangeWithBoundedWidth) {
  // Every value falls in the bucket whose [lower, lower + width) contains it, and buckets above
  // the linear range are at most 1/128 of their lower bound wide.
  for (int64_t v : {0LL, 1LL, 255LL, 256LL, 257LL, 511LL, 512LL, 1000LL, 65535LL, 65536LL,
                    123456789LL, (1LL << 40) + 12345, (1LL << 62) + 1}) {
    const int b = LogHistogram::bucket_of(v);
    const int64_t lo = LogHistogram::bucket_lower(b), w = LogHistogram::bucket_width(b);
    EXPECT_LE(lo, v) << v;
    EXPECT_LT(v, lo + w) << v;
    if (v >= 256) {
      EXPECT_LE(static_cast<double>(w), static_cast<double>(lo) / 128.0) << v;
    }
    EXPECT_EQ(LogHistogram::bucket_of(lo), b);
    EXPECT_EQ(LogHistogram::bucket_of(lo + w), b + 1) << v;
  }
}

TEST(LogHistogram, SmallSetsGiveExactNearestRankValues) {
  // Values below 256 have one bucket each: percentiles are exact.
  LogHistogram h;
  for (int64_t v : {10, 20, 30, 40, 50, 60, 70, 80, 90, 100}) h.add(v);
  EXPECT_EQ(h.count(), 10);
  EXPECT_EQ(h.min(), 10);
  EXPECT_EQ(h.max(), 100);
  EXPECT_EQ(h.percentile(0.50), 50);   // rank 5
  EXPECT_EQ(h.percentile(0.95), 100);  // rank ceil(9.5) = 10
  EXPECT_EQ(h.percentile(0.10), 10);   // rank 1
  EXPECT_EQ(h.percentile(0.11), 20);   // rank ceil(1.1) = 2
  EXPECT_EQ(h.percentile(0.0), 10);
}

TEST(LogHistogram, PercentilesStayWithinTheStatedRelativeError) {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> dist(std::log(50'000.0), 0.8);  // op times around 50 us
  std::vector<int64_t> values;
  LogHistogram h;
  for (int i = 0; i < 20'000; ++i) {
    const auto v = static_cast<int64_t>(dist(rng));
    values.push_back(v);
    h.add(v);
  }
  for (double q : {0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0}) {
    const double exact = nearest_rank(values, q);
    EXPECT_NEAR(h.percentile(q), exact, exact * LogHistogram::kRelativeError) << "q=" << q;
  }
  EXPECT_EQ(h.max(), *std::max_element(values.begin(), values.end()));
}

TEST(LogHistogram, MergeEqualsAddingEverythingToOne) {
  LogHistogram a, b, all;
  for (int64_t v = 1000; v < 200'000; v += 777) {
    (v % 3 ? a : b).add(v);
    all.add(v);
  }
  LogHistogram empty;
  a.merge(b);
  a.merge(empty);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.min(), all.min());
  EXPECT_EQ(a.max(), all.max());
  for (double q : {0.1, 0.5, 0.95, 0.99}) EXPECT_EQ(a.percentile(q), all.percentile(q));
  empty.merge(all);
  EXPECT_EQ(empty.percentile(0.5), all.percentile(0.5));
}

TEST(LogHistogram, MemoryIsBoundedByTheRangeNotTheCount) {
  // A million values in one octave use at most 128 buckets; the percentile is still right.
  LogHistogram h;
  for (int i = 0; i < 1'000'000; ++i) h.add(100'000 + (i % 50'000));
  EXPECT_EQ(h.count(), 1'000'000);
  EXPECT_LE(h.buckets_in_use(), 128u);
  // Each value appears 20 times: rank 500000 is value index 24999.
  EXPECT_NEAR(h.percentile(0.5), 124'999, 124'999 * LogHistogram::kRelativeError);
}

}  // namespace
}  // namespace pacer::analysis
