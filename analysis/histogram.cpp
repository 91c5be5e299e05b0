#include "analysis/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace pacer::analysis {
namespace {

constexpr int kSubBits = 7;                 // 128 buckets per power of two
constexpr int kSub = 1 << kSubBits;         // 128
constexpr int64_t kLinearLimit = 2 * kSub;  // values < 256 map to themselves

}  // namespace

int LogHistogram::bucket_of(int64_t value) noexcept {
  if (value < kLinearLimit) return value < 0 ? 0 : static_cast<int>(value);
  const int e = 63 - std::countl_zero(static_cast<uint64_t>(value));  // floor(log2), >= 8
  const int64_t sub = value >> (e - kSubBits);                        // in [128, 256)
  return (e - kSubBits + 1) * kSub + static_cast<int>(sub - kSub);
}

int64_t LogHistogram::bucket_lower(int index) noexcept {
  if (index < kLinearLimit) return index;
  const int e = index / kSub + kSubBits - 1;
  const int64_t sub = index % kSub + kSub;
  return sub << (e - kSubBits);
}

int64_t LogHistogram::bucket_width(int index) noexcept {
  if (index < kLinearLimit) return 1;
  const int e = index / kSub + kSubBits - 1;
  return int64_t{1} << (e - kSubBits);
}

void LogHistogram::add(int64_t value) {
  if (value < 0) value = 0;
  const int b = bucket_of(value);
  if (counts_.empty()) {
    base_ = b;
    counts_.assign(1, 0);
  } else if (b < base_) {
    counts_.insert(counts_.begin(), static_cast<size_t>(base_ - b), 0);
    base_ = b;
  } else if (b >= base_ + static_cast<int>(counts_.size())) {
    counts_.resize(static_cast<size_t>(b - base_ + 1), 0);
  }
  ++counts_[static_cast<size_t>(b - base_)];
  if (count_ == 0) {
    min_ = max_ = value;
  } else {
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
  }
  ++count_;
}

void LogHistogram::merge(const LogHistogram& other) {
  if (other.count_ == 0) return;
  if (count_ == 0) {
    *this = other;
    return;
  }
  const int lo = std::min(base_, other.base_);
  const int hi = std::max(base_ + static_cast<int>(counts_.size()),
                          other.base_ + static_cast<int>(other.counts_.size()));
  std::vector<uint32_t> merged(static_cast<size_t>(hi - lo), 0);
  for (size_t i = 0; i < counts_.size(); ++i) merged[base_ - lo + i] += counts_[i];
  for (size_t i = 0; i < other.counts_.size(); ++i)
    merged[other.base_ - lo + i] += other.counts_[i];
  counts_ = std::move(merged);
  base_ = lo;
  count_ += other.count_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

double LogHistogram::percentile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const int64_t rank = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(q * count_)));
  int64_t seen = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      const int b = base_ + static_cast<int>(i);
      const double mid =
          static_cast<double>(bucket_lower(b)) + (static_cast<double>(bucket_width(b)) - 1.0) / 2.0;
      return std::clamp(mid, static_cast<double>(min_), static_cast<double>(max_));
    }
  }
  return static_cast<double>(max_);
}

}  // namespace pacer::analysis
