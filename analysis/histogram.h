#pragma once
// A log-linear histogram of non-negative integer values (nanoseconds) for streaming percentiles:
// memory is a few hundred counters per distinct op, however many events it sees.
//
// Buckets (HdrHistogram-style, 7 significant bits): values below 256 get one bucket each; above,
// every power-of-two range [2^e, 2^(e+1)) is split into 128 equal buckets of width 2^(e-7). A
// bucket is at most 1/128 of its lower bound wide, and a percentile is reported as the bucket's
// midpoint clamped to the exact [min, max], so it lies within kRelativeError of the exact
// nearest-rank percentile.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace pacer::analysis {

class LogHistogram {
 public:
  // Upper bound of |reported - exact| / exact for percentile(): half a bucket, 1/256.
  static constexpr double kRelativeError = 1.0 / 256.0;

  void add(int64_t value);
  void merge(const LogHistogram& other);

  int64_t count() const noexcept { return count_; }
  int64_t min() const noexcept { return count_ ? min_ : 0; }
  int64_t max() const noexcept { return count_ ? max_ : 0; }

  // Nearest-rank percentile, q in [0, 1]: the value of rank ceil(q * n) (at least 1) in sorted
  // order, within kRelativeError. 0 when empty.
  double percentile(double q) const;

  // Buckets allocated: the span from the lowest to the highest bucket seen.
  size_t buckets_in_use() const noexcept { return counts_.size(); }

  // Bucket index of a value and the [lower, upper) value range of a bucket (exposed for tests).
  static int bucket_of(int64_t value) noexcept;
  static int64_t bucket_lower(int index) noexcept;
  static int64_t bucket_width(int index) noexcept;

 private:
  int base_ = 0;                  // bucket index of counts_[0]
  std::vector<uint32_t> counts_;  // only the range of buckets seen so far
  int64_t count_ = 0;
  int64_t min_ = 0, max_ = 0;
};

}  // namespace pacer::analysis
